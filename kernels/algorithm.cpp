// Defaults of the Algorithm interface shared by every kernel.
#include <cmath>

#include "conv/algorithm.hpp"
#include "conv/device.hpp"
#include "conv/error.hpp"

namespace conv {

double exact_order_error_bound(const ConvProblem& p) {
  const double u = std::ldexp(1.0, -24);
  const double n = static_cast<double>(p.Cg() * p.R * p.S);
  return 16 * u * std::sqrt(n) + 8 * u;
}

double Algorithm::error_bound(const ConvProblem& p, const std::string& /*config*/) const {
  return exact_order_error_bound(p);
}

std::vector<double> error_scale(const Algorithm& algo, const ConvProblem& p,
                                const std::string& config, const float* x, const float* w,
                                const double* abs_sum, int threads) {
  std::vector<double> s(abs_sum, abs_sum + p.y_elems());
  algo.add_error_scale(p, config, x, w, s.data(), threads);
  return s;
}

namespace {

// Every kernel indexes x, w and y by the problem's sizes; applicable() is where each one says
// which problems those sizes are right for.
void check_problem(const Algorithm& a, const ConvProblem& p) {
  p.validate();
  if (const Applicability ap = a.applicable(p); !ap.ok) throw Error(ap.reason);
}

}  // namespace

void Algorithm::forward(const ConvProblem& p, const std::string& config,
                        const ForwardArgs& args) const {
  check_problem(*this, p);
  const std::string who = ": " + std::string(id()) + ": ";
  if (!args.x) throw Error("x" + who + "null input");
  if (!args.y) throw Error("y" + who + "null output");
  // Packed weights stand in for w only where this algorithm packs: otherwise it reads w.
  if (!args.w && (!args.packed_weights || packed_weights_bytes(p, config) == 0))
    throw Error("w" + who + "null weights" +
                (args.packed_weights ? " (this algorithm does not pack weights)" : ""));
  ForwardArgs a = args;
  a.threads = resolve_threads(args.threads);
  do_forward(p, config, a);
}

void Algorithm::pack_weights(const ConvProblem& p, const std::string& config, const float* w,
                             void* packed, int threads) const {
  check_problem(*this, p);
  const std::string who = ": " + std::string(id()) + ": ";
  if (!w) throw Error("w" + who + "null weights");
  if (!packed) throw Error("packed" + who + "null buffer");
  do_pack_weights(p, config, w, packed, resolve_threads(threads));
}

void Algorithm::do_pack_weights(const ConvProblem& /*p*/, const std::string& /*config*/,
                                const float* /*w*/, void* /*packed*/, int /*threads*/) const {
  throw Error(std::string(id()) + ": pack_weights: this algorithm does not pack weights");
}

}  // namespace conv
