// Naive float64 reference convolution: the ground truth for tests and the tuner's check.
#pragma once

#include <cstdint>

#include "conv/problem.hpp"

namespace conv::ref {

/// Computes, for every output of `p` (NCHW, N*K*OH*OW values), the exact-as-double result
/// y_ref = bias + sum x*w and the magnitude abs_sum = |bias| + sum |x*w| over the receptive
/// field (zero padding contributes nothing). Handles every valid problem. O(flops(p)/2) double
/// multiply-adds, threaded over (n, k).
void forward(const ConvProblem& p, const float* x, const float* w, const float* bias, double* y_ref,
             double* abs_sum, int threads);

struct Comparison {
  double max_error = 0;      ///< max |y - y_ref| / abs_sum (0/0 counts as 0)
  int64_t worst_index = -1;  ///< flat NCHW index of that output
  int64_t nonfinite = 0;     ///< outputs that are NaN or Inf (e.g. never written)
};

/// Compares an fp32 output against the reference, per output relative to abs_sum.
Comparison compare(int64_t n, const float* y, const double* y_ref, const double* abs_sum);

}  // namespace conv::ref
