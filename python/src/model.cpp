// convtune.import_model: the convolutions of an ONNX or Caffe prototxt network as Problems.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "args.hpp"
#include "bindings.hpp"
#include "conv/error.hpp"
#include "conv/model.hpp"
#include "quoted.hpp"

namespace convtune_py {

namespace {

const char* kImportDoc = R"(The 2-D convolutions of a network file, in graph order.

import_model(path, inputs=None) -> list[Problem]

path: a str, bytes or os.PathLike (e.g. pathlib.Path) naming an ONNX model (.onnx) or a Caffe deploy prototxt (.prototxt, .pbtxt). inputs: shapes of
the model's inputs by name, NCHW, e.g. {"data": (1, 3, 224, 224)}; needed where the file leaves a
dimension symbolic or gives no shape, and replaces the file's shape where given. Each Problem is
named "<file stem>:<layer or node name>". Raises convtune.Error
'model "<path>": <node or layer>: <field>: <what>' for an unreadable or unsupported file, a
missing input shape ("...; pass the input shape as inputs={'data': (N, C, H, W)}"), a shape in
inputs that does not fit ('model "<path>": inputs['data']: ...') or an invalid convolution.)";

// inputs: {name: (N, C, H, W)}; each size an int (range checked by the importer, except ints
// beyond 64 bits, which are named here).
conv::InputShapes input_shapes(nb::handle inputs) {
  conv::InputShapes shapes;
  if (inputs.is_none()) return shapes;
  if (!nb::isinstance<nb::dict>(inputs))
    throw conv::Error("inputs: expected a dict {name: (N, C, H, W)} or None, got " +
                      type_text(inputs));
  for (auto [key, value] : nb::borrow<nb::dict>(inputs)) {
    if (!nb::isinstance<nb::str>(key))
      throw conv::Error("inputs: expected str keys (input names), got " + type_text(key) + " " +
                        repr_text(key));
    const std::string where = "inputs[" + repr_text(key) + "]";
    // A lone surrogate is named here (try_cast had called it "expected str keys, got str").
    const std::string name = str_arg(key, where.c_str());
    if (!nb::isinstance<nb::tuple>(value) && !nb::isinstance<nb::list>(value))
      throw conv::Error(where + ": expected a tuple of ints (N, C, H, W), got " + type_text(value) +
                        " " + repr_text(value));
    std::vector<int64_t> dims;
    for (nb::handle d : value)
      dims.push_back(int_arg(d, where + "[" + std::to_string(dims.size()) + "]", kSizeRange));
    shapes[name] = std::move(dims);
  }
  return shapes;
}

// Replaces every `from` in `text` by `to`.
void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (size_t i = 0; (i = text.find(from, i)) != std::string::npos; i += to.size())
    text.replace(i, from.size(), to);
}

// The importer's message names the CLI's --input option; here the argument is inputs=.
std::string inputs_message(std::string what, const conv::InputShapes& shapes) {
  // `--input "data": ...` about a shape given in inputs.
  for (const auto& [name, dims] : shapes)
    replace_all(what, "--input " + conv::quoted(name) + ": ",
                "inputs[" + repr_text(nb::str(name.c_str(), name.size())) + "]: ");
  // "pass the input shape with --input data=NxCxHxW", "pass --input data=NxCxHxW
  // (conv::InputShapes)": the dict entry that would give it.
  for (const std::string lead : {"pass the input shape with --input ", "pass --input "}) {
    const size_t i = what.find(lead);
    if (i == std::string::npos) continue;
    const size_t start = i + lead.size();
    const size_t end = what.find("=NxCxHxW", start);
    if (end == std::string::npos) continue;
    const std::string name = what.substr(start, end - start);
    std::string tail = what.substr(end + std::strlen("=NxCxHxW"));
    if (tail.rfind(" (conv::InputShapes)", 0) == 0)
      tail.erase(0, std::strlen(" (conv::InputShapes)"));
    const std::string key = conv::quoted(name);  // from the file: maybe not UTF-8
    what = what.substr(0, i) + "pass the input shape as inputs={" + key + ": (N, C, H, W)}" + tail;
  }
  return what;
}

std::vector<conv::ConvProblem> import_model(nb::handle path, nb::handle inputs) {
  const std::string file = path_arg(path, "path");
  const conv::InputShapes shapes = input_shapes(inputs);
  std::string message;
  try {
    nb::gil_scoped_release unlocked;
    return conv::import_model(file, shapes);
  } catch (const conv::Error& e) {
    message = e.what();  // rewritten with the GIL held: repr_text calls Python
  }
  throw conv::Error(inputs_message(message, shapes));
}

}  // namespace

void bind_model(nb::module_& m) {
  m.def("import_model", &import_model, nb::arg("path").none(),
        nb::arg("inputs").none() = nb::none(), kImportDoc);
}

}  // namespace convtune_py
