// Every field that defines a convolution (not its name) as plain integers: an allocation-free,
// totally ordered cache key for std::map, so a cache hit never builds the key() text.
#pragma once

#include <array>
#include <cstdint>

#include "conv/problem.hpp"

namespace conv {

using ProblemFields = std::array<int64_t, 18>;

inline ProblemFields problem_fields(const ConvProblem& p) {
  return {p.N,
          p.C,
          p.H,
          p.W,
          p.K,
          p.R,
          p.S,
          p.stride_h,
          p.stride_w,
          p.pad_top,
          p.pad_left,
          p.pad_bottom,
          p.pad_right,
          p.dilation_h,
          p.dilation_w,
          p.groups,
          static_cast<int64_t>(p.dtype),
          static_cast<int64_t>(p.layout)};
}

/// problem_fields() as key() and operator== see the problem: the output size in place of the
/// bottom and right padding, which may differ without changing the convolution.
inline ProblemFields key_fields(const ConvProblem& p) {
  ProblemFields f = problem_fields(p);
  f[11] = p.OH();  // pad_bottom above
  f[12] = p.OW();  // pad_right above
  return f;
}

}  // namespace conv
