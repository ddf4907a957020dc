// Register traits for AVX2+FMA (ymm, 8 float lanes) that the register-block templates of
// cpu.direct and cpu.direct_kvec are instantiated with. Include only from *_avx2.cpp files.
#pragma once

#include <immintrin.h>

#include "cpu/common/store_avx2.hpp"

namespace conv::kernels::avx2 {

struct Ymm {
  using reg = __m256;
  using mask = __m256i;
  static constexpr int lanes = 8;
  static reg zero() { return _mm256_setzero_ps(); }
  static reg set1(float v) { return _mm256_set1_ps(v); }
  static reg loadu(const float* p) { return _mm256_loadu_ps(p); }
  static reg broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static reg fmadd(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
  static reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
  static void storeu(float* p, reg v) { _mm256_storeu_ps(p, v); }
  static void stream(float* p, reg v) { _mm256_stream_ps(p, v); }
  // Lanes [lo, hi); masked lanes are neither read nor written (no faults).
  static mask lane_mask(int lo, int hi) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_and_si256(_mm256_cmpgt_epi32(idx, _mm256_set1_epi32(lo - 1)),
                            _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), idx));
  }
  static reg load_mask(const float* p, mask m) { return _mm256_maskload_ps(p, m); }
  // Lanes [lo, hi) to p + lo..; plain stores (store_avx2.hpp says why not vmaskmovps).
  static void store_lanes(float* p, int lo, int hi, reg v) { store_lanes_avx(p, lo, hi, v); }
};

}  // namespace conv::kernels::avx2
