// convtune._convtune: the native half of the convtune Python package (python/convtune/ is the
// other). conv::Error is raised as convtune.Error, a ValueError subclass with the same message.
#include "bindings.hpp"
#include "conv/device.hpp"
#include "conv/error.hpp"

NB_MODULE(_convtune, m) {
  namespace nb = nanobind;
  m.doc() = "convtune's C++ bindings; use the convtune package.";
  nb::exception<conv::Error>(m, "Error", PyExc_ValueError);
  m.attr("__version__") = conv::version();
  convtune_py::bind_problem(m);
  convtune_py::bind_conv2d(m);
  convtune_py::bind_plan(m);
  convtune_py::bind_tune(m);
  convtune_py::bind_perfdb(m);
  convtune_py::bind_model(m);
}
