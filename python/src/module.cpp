// convtune._convtune: the native half of the convtune Python package (python/convtune/ is the
// other). conv::Error is raised as convtune.Error, a ValueError subclass with the same message
// less its C++ names (python_message; bytes that are not UTF-8 as \xHH).
#include "args.hpp"
#include "bindings.hpp"
#include "conv/device.hpp"
#include "conv/error.hpp"

NB_MODULE(_convtune, m) {
  namespace nb = nanobind;
  m.doc() = "convtune's C++ bindings; use the convtune package.";
  const nb::exception<conv::Error> error(m, "Error", PyExc_ValueError);
  // Registered after nb::exception's own, so tried first: that one's PyErr_SetString raises
  // UnicodeDecodeError for a message holding a path that is not UTF-8.
  nb::register_exception_translator(
      [](const std::exception_ptr& p, void* type) {
        try {
          std::rethrow_exception(p);
        } catch (const conv::Error& e) {
          convtune_py::set_error(static_cast<PyObject*>(type),
                                 convtune_py::python_message(e.what()));
        }
      },
      error.ptr());
  m.attr("__version__") = conv::version();
  convtune_py::bind_problem(m);
  convtune_py::bind_conv2d(m);
  convtune_py::bind_plan(m);
  convtune_py::bind_tune(m);
  convtune_py::bind_perfdb(m);
  convtune_py::bind_model(m);
  convtune_py::bind_verify(m);
}
