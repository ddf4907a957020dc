// cpu.depthwise's row kernel, written once for any vector width: `Vec` supplies the vector
// type, its lane count (the channel block), loadu, storeu and fmadd (compiled per ISA in
// depthwise_avx2.cpp and depthwise_avx512.cpp).
#pragma once

#include <cstdint>
#include <utility>

#include "cpu/depthwise/depthwise.hpp"

namespace conv::kernels::depthwise {

#define CONVTUNE_UNROLL _Pragma("GCC unroll 16")

// NB output positions of a row with a 3-column kernel, column stride SW, dense columns: per
// kernel row, 3 weight vectors and the (NB-1)*SW + 3 input vectors the block reads, each loaded
// once (the compiler merges the unrolled loop's equal loads) for 3*NB FMAs in NB independent
// chains. (The generic loop below loads 1 + 4 vectors per 4 FMAs in 4 chains, which bounds it
// at half the FMA rate on AVX2.)
template <class Vec, int NB, int SW>
inline void block3(const Row& r, int64_t ow, typename Vec::type b) {
  using V = typename Vec::type;
  constexpr int64_t L = Vec::lanes;
  V acc[NB];
  CONVTUNE_UNROLL for (int k = 0; k < NB; ++k) acc[k] = b;
  const float* xr = r.x + ow * SW * L;
  const float* wr = r.w;
  for (int64_t i = 0; i < r.R; ++i, xr += r.dil_h_rows, wr += 3 * L) {
    V w[3];
    CONVTUNE_UNROLL for (int j = 0; j < 3; ++j) w[j] = Vec::loadu(wr + j * L);
    CONVTUNE_UNROLL for (int k = 0; k < NB; ++k) {
      CONVTUNE_UNROLL for (int j = 0; j < 3; ++j) acc[k] =
          Vec::fmadd(w[j], Vec::loadu(xr + (k * SW + j) * L), acc[k]);
    }
  }
  CONVTUNE_UNROLL for (int k = 0; k < NB; ++k) Vec::storeu(r.y + (ow + k) * L, acc[k]);
}

// Positions [ow, ow + n), n = 1..7 (none for 0), as one block3 of n chains.
template <class Vec, int SW, int... N>
inline void tail3(const Row& r, int64_t ow, typename Vec::type b, int64_t n,
                  std::integer_sequence<int, N...>) {
  ((n == N + 1 ? block3<Vec, N + 1, SW>(r, ow, b) : void()), ...);
}

template <class Vec, int SW>
void row3(const Row& r) {
  const typename Vec::type b = Vec::loadu(r.bias);
  int64_t ow = 0;
  for (; ow + 8 <= r.OW; ow += 8) block3<Vec, 8, SW>(r, ow, b);
  // The last 1-7 positions as one block of independent chains: one position at a time (after a
  // block of 4) would wait for 3R dependent FMAs each.
  tail3<Vec, SW>(r, ow, b, r.OW - ow, std::make_integer_sequence<int, 7>{});
}

#undef CONVTUNE_UNROLL

template <class Vec>
void row(const Row& r) {
  if (r.S == 3 && r.dilation_w == 1 && r.stride_w == 1) return row3<Vec, 1>(r);
  if (r.S == 3 && r.dilation_w == 1 && r.stride_w == 2) return row3<Vec, 2>(r);
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
