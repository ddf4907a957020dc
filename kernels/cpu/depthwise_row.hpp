// cpu.depthwise's row kernel, written once for any vector width: `Vec` supplies the vector
// type, its lane count (the channel block), loadu, storeu and fmadd (compiled per ISA in
// depthwise_avx2.cpp and depthwise_avx512.cpp).
#pragma once

#include <cstdint>

#include "depthwise.hpp"

namespace conv::kernels::depthwise {

template <class Vec>
void row(const Row& r) {
  using V = typename Vec::type;
  constexpr int64_t L = Vec::lanes;
  const V b = Vec::loadu(r.bias);
  const int64_t sw = r.stride_w * L, dw = r.dilation_w * L;
  int64_t ow = 0;
  // Four output positions at a time share each weight vector.
  for (; ow + 4 <= r.OW; ow += 4) {
    V a0 = b, a1 = b, a2 = b, a3 = b;
    for (int64_t i = 0; i < r.R; ++i) {
      const float* xr = r.x + i * r.dil_h_rows + ow * sw;
      const float* wr = r.w + i * r.S * L;
      for (int64_t j = 0; j < r.S; ++j) {
        const V w = Vec::loadu(wr + j * L);
        const float* xp = xr + j * dw;
        a0 = Vec::fmadd(w, Vec::loadu(xp), a0);
        a1 = Vec::fmadd(w, Vec::loadu(xp + sw), a1);
        a2 = Vec::fmadd(w, Vec::loadu(xp + 2 * sw), a2);
        a3 = Vec::fmadd(w, Vec::loadu(xp + 3 * sw), a3);
      }
    }
    Vec::storeu(r.y + ow * L, a0);
    Vec::storeu(r.y + (ow + 1) * L, a1);
    Vec::storeu(r.y + (ow + 2) * L, a2);
    Vec::storeu(r.y + (ow + 3) * L, a3);
  }
  for (; ow < r.OW; ++ow) {
    V a = b;
    for (int64_t i = 0; i < r.R; ++i)
      for (int64_t j = 0; j < r.S; ++j)
        a = Vec::fmadd(Vec::loadu(r.w + (i * r.S + j) * L),
                       Vec::loadu(r.x + i * r.dil_h_rows + ow * sw + j * dw), a);
    Vec::storeu(r.y + ow * L, a);
  }
}

}  // namespace conv::kernels::depthwise
