// convtune.import_model: the convolutions of an ONNX or Caffe prototxt network as Problems.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <vector>

#include "args.hpp"
#include "bindings.hpp"
#include "conv/error.hpp"
#include "conv/model.hpp"

namespace convtune_py {

namespace {

const char* kImportDoc = R"(The 2-D convolutions of a network file, in graph order.

import_model(path, inputs=None) -> list[Problem]

path: a str, bytes or os.PathLike (e.g. pathlib.Path) naming an ONNX model (.onnx) or a Caffe deploy prototxt (.prototxt, .pbtxt). inputs: shapes of
the model's inputs by name, NCHW, e.g. {"data": (1, 3, 224, 224)}; needed where the file leaves a
dimension symbolic or gives no shape, and replaces the file's shape where given. Each Problem is
named "<file stem>:<layer or node name>". Raises convtune.Error
'model "<path>": <node or layer>: <field>: <what>' for an unreadable or unsupported file, a
missing input shape or an invalid convolution.)";

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

std::vector<conv::ConvProblem> import_model(nb::handle path, nb::handle inputs) {
  const std::string file = path_arg(path, "path");
  const conv::InputShapes shapes = input_shapes(inputs);
  nb::gil_scoped_release unlocked;
  return conv::import_model(file, shapes);
}

}  // namespace

void bind_model(nb::module_& m) {
  m.def("import_model", &import_model, nb::arg("path").none(),
        nb::arg("inputs").none() = nb::none(), kImportDoc);
}

}  // namespace convtune_py
