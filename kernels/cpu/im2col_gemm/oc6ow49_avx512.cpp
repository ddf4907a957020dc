// cpu.im2col_gemm's GEMM for 49 output positions, AVX-512 build (method: oc6ow49.hpp). Compiled
// with AVX-512 flags and only called when conv::cpu_isa() reports avx512.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "cpu/im2col_gemm/oc6ow49.hpp"

namespace conv::kernels::oc6ow49 {
namespace {

// Weight rows are read in place; they come from L3 or memory (a layer's weights are read once
// per call) in streams too slow for the hardware prefetchers, so a line per row is prefetched
// this many steps ahead every 16 steps (as cpu.direct's zmm blocks do; see direct.cpp).
constexpr int64_t kPrefetchSteps = 64;

// GCC 12's avx512fintrin.h builds _mm512_reduce_add_ps on an intentionally undefined vector and
// then warns about it wherever it is inlined; the warning is about the header.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__  // clang has no such warning, and warns about the name
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
inline float sum_lanes(__m512 v) {
  return _mm512_reduce_add_ps(v);
}
#pragma GCC diagnostic pop

// Output channels [k0, k0 + OC) over reduction steps [s0, s1): onto the bias (first) or onto y.
template <int OC>
void block(const float* w, const float* rows, const float* tail, const float* bias, float* y,
           int64_t n, int64_t k0, int64_t s0, int64_t s1, bool first) {
  __m512 acc[OC][3], dot[OC];
  const float* wr[OC];
#pragma GCC unroll 8
  for (int k = 0; k < OC; ++k) {
    wr[k] = w + (k0 + k) * n;
    float* yk = y + (k0 + k) * kPositions;
    const __m512 b = first && bias ? _mm512_set1_ps(bias[k0 + k]) : _mm512_setzero_ps();
#pragma GCC unroll 3
    for (int j = 0; j < 3; ++j) acc[k][j] = first ? b : _mm512_loadu_ps(yk + 16 * j);
    dot[k] = _mm512_setzero_ps();
  }
  auto step = [&](int64_t i) __attribute__((always_inline)) {
    const float* b = rows + i * kRow;
    const __m512 x0 = _mm512_load_ps(b), x1 = _mm512_load_ps(b + 16), x2 = _mm512_load_ps(b + 32);
#pragma GCC unroll 8
    for (int k = 0; k < OC; ++k) {
      const __m512 wv = _mm512_set1_ps(wr[k][i]);
      acc[k][0] = _mm512_fmadd_ps(wv, x0, acc[k][0]);
      acc[k][1] = _mm512_fmadd_ps(wv, x1, acc[k][1]);
      acc[k][2] = _mm512_fmadd_ps(wv, x2, acc[k][2]);
    }
  };
  // Position 48 over the steps from i0 that mask `m` selects (up to 16).
  auto tail_dots = [&](int64_t i0, __mmask16 m) __attribute__((always_inline)) {
    const __m512 tv = _mm512_maskz_loadu_ps(m, tail + i0);
#pragma GCC unroll 8
    for (int k = 0; k < OC; ++k) {
      // The address as an integer: it may lie past the weights, where only the prefetch goes.
      _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(wr[k] + i0) +
                                                 kPrefetchSteps * sizeof(float)),
                   _MM_HINT_T0);
      dot[k] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, wr[k] + i0), tv, dot[k]);
    }
  };
  // Whole groups of 16 steps unrolled (with a variable count GCC spilled two of the three input
  // vectors to the stack), then the rest.
  int64_t i0 = s0;
  for (; i0 + 16 <= s1; i0 += 16) {
    tail_dots(i0, 0xFFFF);
#pragma GCC unroll 16
    for (int64_t i = 0; i < 16; ++i) step(i0 + i);
  }
  if (i0 < s1) {
    tail_dots(i0, static_cast<__mmask16>((1u << (s1 - i0)) - 1));
    for (int64_t i = i0; i < s1; ++i) step(i);
  }
#pragma GCC unroll 8
  for (int k = 0; k < OC; ++k) {
    float* yk = y + (k0 + k) * kPositions;
#pragma GCC unroll 3
    for (int j = 0; j < 3; ++j) _mm512_storeu_ps(yk + 16 * j, acc[k][j]);
    const float d = sum_lanes(dot[k]);
    yk[kRow] = first ? (bias ? bias[k0 + k] : 0.0f) + d : yk[kRow] + d;
  }
}

using BlockFn = void (*)(const float*, const float*, const float*, const float*, float*, int64_t,
                         int64_t, int64_t, int64_t, bool);
constexpr int kOc = 6;
constexpr BlockFn kBlocks[kOc + 1] = {nullptr,   &block<1>, &block<2>, &block<3>,
                                      &block<4>, &block<5>, &block<6>};

}  // namespace

void gemm_avx512(const float* w, const float* rows, const float* tail, const float* bias, float* y,
                 int64_t K, int64_t n, int64_t chunk, int threads) {
  const int64_t nkb = (K + kOc - 1) / kOc;
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), T = omp_get_num_threads();
    const int64_t b0 = nkb * t / T, b1 = nkb * (t + 1) / T;
    for (int64_t s0 = 0; s0 < n; s0 += chunk) {
      const int64_t s1 = std::min(n, s0 + chunk);
      for (int64_t kb = b0; kb < b1; ++kb) {
        const int64_t k0 = kb * kOc;
        kBlocks[std::min<int64_t>(kOc, K - k0)](w, rows, tail, bias, y, n, k0, s0, s1, s0 == 0);
      }
    }
  }
}

}  // namespace conv::kernels::oc6ow49
