// convtune.Plan: conv::Plan (choose once; pre-packed weights; execute many times).
#include <nanobind/stl/string.h>

#include <memory>
#include <new>
#include <optional>
#include <string>

#include "args.hpp"
#include "arrays.hpp"
#include "bindings.hpp"
#include "conv/algorithm.hpp"
#include "options.hpp"
#include "quoted.hpp"

namespace convtune_py {

namespace {

const char* kPlanDoc = R"(A convolution chosen once and run many times (conv::Plan).

Plan(problem=None, *, algo=None, config="", threads=0, perfdb=None, find_mode=None, timing="cold",
     **fields)

problem: a convtune.Problem or a benchdnn descriptor string; or pass the Problem keyword fields
(N=, C=, H=, W=, K=, R=, S=, stride=, padding=, dilation=, groups=, pads=, name=) instead. One of the
two is required (convtune.Error naming "problem" otherwise).
Without algo, the algorithm is chosen like conv2d does, but for the Plan path (its own winner
in the perf database, timed with packed weights; may tune on a miss, with the GIL released).
algo/config: run this algorithm id (e.g. "cpu.im2col_gemm") and config (e.g. "m4"; "" = the
algorithm's default config) instead; a config without algo raises convtune.Error.
threads, perfdb, find_mode, timing: as for conv2d.

Then pack_weights(w) once and execute(x) -> numpy.ndarray (N, K, OH, OW) (a torch.Tensor when
x is one) as often as needed.
A Plan may be shared by threads: their execute() and pack_weights() calls take turns (they share
the Plan's workspace); a Plan per thread runs them in parallel.
Raises convtune.Error (a ValueError) naming the field or argument, for a wrong type too
("algo: expected a str, got int 5").)";

class PyPlan {
 public:
  PyPlan(const conv::ConvProblem& p, const std::optional<std::string>& algo,
         const std::string& config, const conv::ForwardOptions& o) {
    // A config names a variant of one algorithm: without algo= it would be silently dropped.
    if (!algo && !config.empty())
      throw conv::Error("config: " + conv::quoted(config) +
                        " needs algo= (the algorithm whose config it is); without algo= the Plan "
                        "picks both");
    nb::gil_scoped_release unlocked;
    std::string cfg = config;
    if (algo && cfg.empty()) {  // the algorithm's default config (Plan::create names a bad algo)
      p.validate();
      const conv::Algorithm* a = conv::find_algorithm(*algo);
      if (a && a->applicable(p).ok) cfg = a->configs(p).front();
    }
    if (!algo) {
      plan_ = std::make_unique<conv::Plan>(conv::Plan::create(p, o));
      return;
    }
    try {
      plan_ = std::make_unique<conv::Plan>(conv::Plan::create(p, *algo, cfg, o));
    } catch (const conv::Error& e) {
      // Plan::create's parameter is algo_id; here the argument is algo=.
      const std::string what = e.what(), prefix = "algo_id: ";
      if (what.compare(0, prefix.size(), prefix) != 0) throw;
      throw conv::Error("algo: " + what.substr(prefix.size()));
    }
  }

  void pack_weights(nb::handle w_obj) {
    const conv::ConvProblem& p = plan_->problem();
    Tensor w = as_tensor(w_obj, "w", 4);
    check_shape(w, "w", {p.K, p.Cg(), p.R, p.S}, "(K, C/groups, R, S)");
    nb::gil_scoped_release unlocked;
    plan_->pack_weights(w.data);
  }

  nb::object execute(nb::handle x_obj, nb::handle w_obj, nb::handle bias_obj, nb::handle out_obj) {
    const conv::ConvProblem& p = plan_->problem();
    const Tensor x = as_tensor(x_obj, "x", 4);
    check_shape(x, "x", {p.N, p.C, p.H, p.W}, "(N, C, H, W)");
    std::optional<Tensor> w, bias;
    if (!w_obj.is_none()) {
      w = as_tensor(w_obj, "w", 4);
      check_shape(*w, "w", {p.K, p.Cg(), p.R, p.S}, "(K, C/groups, R, S)");
    } else if (!plan_->has_packed_weights()) {
      throw conv::Error("w: required: call pack_weights(w) first or pass w to execute()");
    }
    if (!bias_obj.is_none()) {
      bias = as_tensor(bias_obj, "bias", 1);
      check_shape(*bias, "bias", {p.K}, "(K,)");
    }
    float* y = nullptr;
    nb::object out;
    if (out_obj.is_none()) {
      out = nb::cast(new_array({p.N, p.K, p.OH(), p.OW()}, &y));
      if (is_torch_tensor(x_obj)) out = torch_output(out);  // torch in, torch out
    } else {
      y = output_arg(out_obj, {p.N, p.K, p.OH(), p.OW()},
                     {&x, w ? &*w : nullptr, bias ? &*bias : nullptr});
      out = nb::borrow(out_obj);
    }
    try {
      nb::gil_scoped_release unlocked;
      plan_->execute(x.data, w ? w->data : nullptr, bias ? bias->data : nullptr, y);
    } catch (const std::bad_alloc&) {
      raise_memory_error("Plan.execute: out of memory (y alone is " + std::to_string(p.y_bytes()) +
                         " bytes)");
    }
    return out;
  }

  const conv::Plan& plan() const { return *plan_; }

 private:
  std::unique_ptr<conv::Plan> plan_;
};

nb::dict choice(const PyPlan& self) {
  const conv::ForwardResult& c = self.plan().choice();
  nb::dict d;
  d["algo"] = c.algo_id;
  d["config"] = c.config;
  d["source"] = conv::to_string(c.source);
  d["perfdb"] = c.perfdb_path.empty() ? nb::object(nb::none()) : path_object(c.perfdb_path);
  d["workspace_bytes"] = self.plan().workspace_bytes();
  d["packed_weights"] = self.plan().has_packed_weights();
  return d;
}

}  // namespace

void bind_plan(nb::module_& m) {
  nb::class_<PyPlan>(m, "Plan", kPlanDoc)
      .def(
          "__init__",
          [](PyPlan* self, nb::handle problem, nb::handle algo, nb::handle config,
             nb::handle threads, nb::handle perfdb, nb::handle find_mode, nb::handle timing,
             nb::kwargs fields) {
            conv::ConvProblem p;
            if (!problem.is_none()) {
              if (nb::len(fields) > 0)
                throw conv::Error("Plan: pass a problem or keyword fields (N, C, ...), not both");
              p = to_problem(problem);
            } else if (nb::len(fields) - (fields.contains("name") ? 1 : 0) == 0) {
              // Problem()'s defaults describe no real layer: tuning them would only hide the
              // missing argument.
              throw conv::Error(
                  "problem: Plan needs a convtune.Problem, a descriptor string or the Problem "
                  "keyword fields (N=, C=, H=, W=, K=, R=, S=, ...)");
            } else {
              p = nb::cast<conv::ConvProblem>(nb::type<conv::ConvProblem>()(**fields));
            }
            new (self)
                PyPlan(p, optional_str_arg(algo, "algo"), str_arg(config, "config"),
                       forward_options(thread_arg(threads), optional_path_arg(perfdb, "perfdb"),
                                       optional_str_arg(find_mode, "find_mode"),
                                       str_arg(timing, "timing")));
          },
          nb::arg("problem").none() = nb::none(), nb::kw_only(),
          nb::arg("algo").none() = nb::none(), nb::arg("config").none() = "",
          nb::arg("threads").none() = 0, nb::arg("perfdb").none() = nb::none(),
          nb::arg("find_mode").none() = nb::none(), nb::arg("timing").none() = "cold",
          nb::arg("fields"))
      .def("pack_weights", &PyPlan::pack_weights, nb::arg("w").none(),
           "Transforms and keeps the weights w (K, C/groups, R, S) float32; execute() may then "
           "omit w. The Plan keeps its own copy (for an algorithm that does not pack, of w as "
           "given), so modifying w afterwards does not change execute()'s results. Raises "
           "convtune.Error for a wrong shape or dtype, and for a torch.Tensor as conv2d does.")
      .def("execute", &PyPlan::execute, nb::arg("x").none(), nb::arg("w").none() = nb::none(),
           nb::arg("bias").none() = nb::none(), nb::kw_only(), nb::arg("out").none() = nb::none(),
           "Runs the chosen algorithm (GIL released): x (N, C, H, W), w (K, C/groups, R, S) or "
           "None after pack_weights() (a w given is always the one used, unpacked), bias (K,) or "
           "None; float32 (C-contiguous arrays read in place, other layouts copied once into C "
           "order; torch.Tensors as conv2d takes them). Returns a new float32 numpy.ndarray (N, K, "
           "OH, OW) (a torch.Tensor sharing its memory when x is one), or "
           "writes into out= (a writable float32 C-contiguous array of that shape, sharing no "
           "memory with the inputs) and returns it: no allocation and no page faults per call "
           "in a loop. Raises convtune.Error naming the argument.")
      .def_prop_ro("problem", [](const PyPlan& s) { return s.plan().problem(); })
      .def_prop_ro(
          "algo", [](const PyPlan& s) { return s.plan().choice().algo_id; },
          "the chosen algorithm id, e.g. 'cpu.winograd'")
      .def_prop_ro(
          "config", [](const PyPlan& s) { return s.plan().choice().config; },
          "the chosen config, e.g. 'm4'")
      .def_prop_ro(
          "source", [](const PyPlan& s) { return conv::to_string(s.plan().choice().source); },
          "where the choice came from: 'perfdb', 'tuned', 'heuristic' or 'named' (algo=)")
      .def_prop_ro(
          "workspace_bytes", [](const PyPlan& s) { return s.plan().workspace_bytes(); },
          "scratch memory the chosen algorithm uses, bytes")
      .def_prop_ro(
          "has_packed_weights", [](const PyPlan& s) { return s.plan().has_packed_weights(); },
          "whether execute() may omit w")
      .def_prop_ro(
          "choice", &choice,
          "dict: algo, config, source ('perfdb'/'tuned'/'heuristic'/'named'), perfdb (path or "
          "None), workspace_bytes, packed_weights")
      .def("__repr__", [](const PyPlan& s) {
        const auto& c = s.plan().choice();
        return "convtune.Plan(" + conv::to_descriptor(s.plan().problem()) + ": " + c.algo_id + " " +
               c.config + ", " + conv::to_string(c.source) + ")";
      });
}

}  // namespace convtune_py
