// Defaults of the Algorithm interface shared by every kernel.
#include <cmath>

#include "conv/algorithm.hpp"

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

void Algorithm::pack_weights(const ConvProblem& /*p*/, const std::string& /*config*/,
                             const float* /*w*/, void* /*packed*/, int /*threads*/) const {
  throw Error(std::string(id()) + ": pack_weights: this algorithm does not pack weights");
}

}  // namespace conv
