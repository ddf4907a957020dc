// Register traits for AVX-512 F/BW/VL (zmm with 16 float lanes, and ymm with AVX-512VL's mask
// registers) that the register-block templates of cpu.direct and cpu.direct_kvec are
// instantiated with. Include only from *_avx512.cpp files.
#pragma once

#include <immintrin.h>

namespace conv::kernels::avx512 {

struct Zmm {
  using reg = __m512;
  using mask = __mmask16;
  static constexpr int lanes = 16;
  static reg zero() { return _mm512_setzero_ps(); }
  static reg set1(float v) { return _mm512_set1_ps(v); }
  static reg loadu(const float* p) { return _mm512_loadu_ps(p); }
  static reg broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static reg fmadd(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
  static reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
  static void storeu(float* p, reg v) { _mm512_storeu_ps(p, v); }
  static void stream(float* p, reg v) { _mm512_stream_ps(p, v); }
  // Lanes [lo, hi); masked lanes are neither read nor written (no faults).
  static mask lane_mask(int lo, int hi) {
    return static_cast<mask>(((1u << hi) - 1u) & ~((1u << lo) - 1u));
  }
  static reg load_mask(const float* p, mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static void store_lanes(float* p, int lo, int hi, reg v) {
    _mm512_mask_storeu_ps(p, lane_mask(lo, hi), v);
  }
};

// ymm vectors of 8 positions in the 32 registers AVX-512VL encodes: for planes on which whole
// zmm vectors would compute many unused lanes (7x7 outputs: 56 lanes of 8 against 64 of 16).
struct YmmVl {
  using reg = __m256;
  using mask = __mmask8;
  static constexpr int lanes = 8;
  static reg zero() { return _mm256_setzero_ps(); }
  static reg set1(float v) { return _mm256_set1_ps(v); }
  static reg loadu(const float* p) { return _mm256_loadu_ps(p); }
  static reg broadcast(const float* p) { return _mm256_set1_ps(*p); }
  static reg fmadd(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
  static reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
  static void storeu(float* p, reg v) { _mm256_storeu_ps(p, v); }
  static void stream(float* p, reg v) { _mm256_stream_ps(p, v); }
  static mask lane_mask(int lo, int hi) {
    return static_cast<mask>(((1u << hi) - 1u) & ~((1u << lo) - 1u));
  }
  static reg load_mask(const float* p, mask m) { return _mm256_maskz_loadu_ps(m, p); }
  static void store_lanes(float* p, int lo, int hi, reg v) {
    _mm256_mask_storeu_ps(p, lane_mask(lo, hi), v);
  }
};

}  // namespace conv::kernels::avx512
