// convtune.verify: conv::verify (conv/conv.hpp) with Python arguments and plain dict results.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "args.hpp"
#include "bindings.hpp"
#include "conv/conv.hpp"
#include "options.hpp"

namespace nb = nanobind;

namespace convtune_py {

namespace {

const char* kVerifyDoc =
    R"(Runs stored winners as a caller does and compares with their stored times.

verify(problems, *, threads=0, perfdb=None, timing="cold") -> list of dict

problems: a convtune.Problem, a descriptor string, or a list of them. For each, the winners stored
in `perfdb` (default path) for this CPU, threads and timing ("cold", "warm" or "hot"), one-shot and Plan
path, are run through conv2d's path and a Plan with packed weights, timed as tune() times
candidates. Each dict: name, key, path ("oneshot" or "packed"), algo, config, stored_ms,
observed_ms (ms), noisy (measured only under load: nothing concluded), marked (observed over
1.25x stored on clean rounds: flagged in the perf database, so the next tune() measures it
again), error (why it could not run, or None). Problems without a stored winner are left out.
Raises convtune.Error naming the argument for a bad problem, option or perf database.)";

nb::list verify(nb::handle problems, nb::handle threads, nb::handle perfdb, nb::handle timing) {
  std::vector<conv::ConvProblem> ps;
  if (nb::isinstance<nb::list>(problems) || nb::isinstance<nb::tuple>(problems)) {
    for (nb::handle p : problems) ps.push_back(to_problem(p, "problems"));
  } else {
    ps.push_back(to_problem(problems, "problems"));
  }
  const conv::ForwardOptions o =
      forward_options(thread_arg(threads), optional_path_arg(perfdb, "perfdb"), std::nullopt,
                      str_arg(timing, "timing"));
  std::vector<conv::Verification> checks;
  {
    nb::gil_scoped_release unlocked;
    checks = conv::verify(ps, o);
  }
  nb::list out;
  for (const auto& v : checks) {
    nb::dict d;
    d["name"] = v.problem.name;
    d["key"] = v.problem.key();
    d["path"] = conv::to_string(v.path);
    d["algo"] = v.algo_id;
    d["config"] = v.config;
    d["stored_ms"] = v.stored_ms;
    d["observed_ms"] = v.observed_ms >= 0 ? nb::object(nb::float_(v.observed_ms)) : nb::none();
    d["noisy"] = v.noisy;
    d["marked"] = v.marked;
    d["error"] = v.error.empty() ? nb::none() : nb::object(nb::str(v.error.c_str()));
    out.append(d);
  }
  return out;
}

}  // namespace

void bind_verify(nb::module_& m) {
  m.def("verify", &verify, nb::arg("problems").none(), nb::kw_only(), nb::arg("threads").none() = 0,
        nb::arg("perfdb").none() = nb::none(), nb::arg("timing").none() = "cold", kVerifyDoc);
}

}  // namespace convtune_py
