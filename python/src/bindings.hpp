// The parts of the convtune._convtune extension module, one binder per file (module.cpp calls
// them in order).
#pragma once

#include <nanobind/nanobind.h>

namespace convtune_py {

namespace nb = nanobind;

void bind_problem(nb::module_& m);  // problem.cpp: Problem, read_batch_file
void bind_conv2d(nb::module_& m);   // conv2d.cpp: conv2d
void bind_plan(nb::module_& m);     // plan.cpp: Plan
void bind_tune(nb::module_& m);     // tune.cpp: tune, explain
void bind_perfdb(nb::module_& m);   // perfdb.cpp: read_perfdb, default_perfdb_path, fingerprint
void bind_model(nb::module_& m);    // model.cpp: import_model
void bind_verify(nb::module_& m);   // verify.cpp: verify

}  // namespace convtune_py
