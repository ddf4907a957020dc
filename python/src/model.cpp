// convtune.import_model: the convolutions of an ONNX or Caffe prototxt network as Problems.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "conv/model.hpp"

namespace convtune_py {

namespace {

const char* kImportDoc = R"(The 2-D convolutions of a network file, in graph order.

import_model(path, inputs=None) -> list[Problem]

path: an ONNX model (.onnx) or a Caffe deploy prototxt (.prototxt, .pbtxt). inputs: shapes of
the model's inputs by name, NCHW, e.g. {"data": (1, 3, 224, 224)}; needed where the file leaves a
dimension symbolic or gives no shape, and replaces the file's shape where given. Each Problem is
named "<file stem>:<layer or node name>". Raises convtune.Error
'model "<path>": <node or layer>: <field>: <what>' for an unreadable or unsupported file, a
missing input shape or an invalid convolution.)";

std::vector<conv::ConvProblem> import_model(const std::string& path,
                                            const std::optional<conv::InputShapes>& inputs) {
  nb::gil_scoped_release unlocked;
  return conv::import_model(path, inputs ? *inputs : conv::InputShapes{});
}

}  // namespace

void bind_model(nb::module_& m) {
  m.def("import_model", &import_model, nb::arg("path"), nb::arg("inputs") = nb::none(), kImportDoc);
}

}  // namespace convtune_py
