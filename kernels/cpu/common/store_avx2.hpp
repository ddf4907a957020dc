// Partial-vector stores for the AVX2 kernels (include only from files compiled with -mavx2).
// Why not vmaskmovps: on AMD Zen 3 and Zen 4 its store form is microcoded and takes tens of cycles,
// where one to three plain stores take a few.
// Internal linkage, as transpose_avx2.hpp.
#pragma once

#include <immintrin.h>

namespace conv::kernels {
namespace {

/// Stores the first n (0..8) floats of v at p; nothing past p + n is written.
inline void store_first_avx(float* p, __m256 v, int n) {
  if (n >= 8) {
    _mm256_storeu_ps(p, v);
    return;
  }
  __m128 h = _mm256_castps256_ps128(v);
  if (n & 4) {
    _mm_storeu_ps(p, h);
    p += 4;
    h = _mm256_extractf128_ps(v, 1);
  }
  if (n & 2) {
    _mm_storel_pi(reinterpret_cast<__m64*>(p), h);
    p += 2;
    h = _mm_movehl_ps(h, h);
  }
  if (n & 1) _mm_store_ss(p, h);
}

/// Stores lanes [lo, hi) of v (0 <= lo <= hi <= 8) to p + lo .. p + hi - 1.
inline void store_lanes_avx(float* p, int lo, int hi, __m256 v) {
  if (lo > 0)
    v = _mm256_permutevar8x32_ps(
        v, _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(lo)));
  store_first_avx(p + lo, v, hi - lo);
}

}  // namespace
}  // namespace conv::kernels
