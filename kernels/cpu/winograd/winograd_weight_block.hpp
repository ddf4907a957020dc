// One block of cpu.winograd's weight transform, U = G w G^T for the filters of kVec (AVX2) or
// 2 * kVec (AVX-512) consecutive output channels and one input channel, written once over the
// lane type T (__m256 or __m512, with its Arith<T>) and included only by files compiled with
// AVX2 (winograd_avx2.cpp, winograd_avx512.cpp). Internal linkage (anonymous namespace), as in
// fft_impl.hpp: the two ISA builds must never share a symbol, or the linker could hand the AVX2
// path a copy compiled with AVX-512 instructions.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "cpu/common/transpose_avx2.hpp"
#include "cpu/winograd/winograd.hpp"
#include "cpu/winograd/winograd_transforms.hpp"

namespace conv::kernels::winograd {
namespace {

/// taps[rs] = tap rs (of R x R) of the 8 filters k0 .. k0+7 of input channel c (zero for
/// k >= Kg): taps 8v .. 8v+7 by one load per filter and an 8x8 transpose (scalar stores read back
/// as vectors would stall on store forwarding), the last tap gathered (R*R = 8v + 1 for 3 and 5).
template <int R>
inline void load_filter_taps(const Geometry& g, const float* wg, int64_t k0, int64_t c,
                             __m256* taps) {
  constexpr int RR = R * R, NV = RR / 8;
  static_assert(RR == 8 * NV + 1, "3x3 or 5x5");
  for (int v = 0; v < NV; ++v) {
    for (int q = 0; q < 8; ++q) {
      const int64_t k = k0 + q;
      taps[8 * v + q] =
          k < g.Kg ? _mm256_loadu_ps(wg + (k * g.Cg + c) * RR + 8 * v) : _mm256_setzero_ps();
    }
    transpose8x8_avx(taps + 8 * v);
  }
  // The last tap's lanes are assembled in registers: a vector load of 8 scalar stores waits for
  // store forwarding, which would dominate the weight transform's time.
  float last[8];
  for (int q = 0; q < 8; ++q) {
    const int64_t k = k0 + q;
    last[q] = k < g.Kg ? wg[(k * g.Cg + c) * RR + RR - 1] : 0.0f;
  }
  taps[RR - 1] =
      _mm256_setr_ps(last[0], last[1], last[2], last[3], last[4], last[5], last[6], last[7]);
}

/// The 2D transform of taps[R * R] (one lane per filter): store(point, value) for every one of
/// the alpha^2 points. Columns first, t[i][s] = sum_r G[i][r] w[r][s]; then rows,
/// U[i][j] = sum_s t[i][s] G[j][s].
template <int M, int R, class T, class Store>
inline void transform_filter_taps(const T* taps, Store&& store) {
  constexpr int A = M + R - 1;
  T t[A][R];
  for (int s = 0; s < R; ++s) {
    T col[R], out[A];
    for (int r = 0; r < R; ++r) col[r] = taps[r * R + s];
    weight_mr<M, R>(col, out);
    for (int i = 0; i < A; ++i) t[i][s] = out[i];
  }
  for (int i = 0; i < A; ++i) {
    T out[A];
    weight_mr<M, R>(t[i], out);
    for (int j = 0; j < A; ++j) store(i * A + j, out[j]);
  }
}

}  // namespace
}  // namespace conv::kernels::winograd
