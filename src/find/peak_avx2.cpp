#include <immintrin.h>

#include "peak_loop.hpp"

namespace conv {

struct Avx2Vec {
  using type = __m256;
  static constexpr int lanes = 8;
  static type set1(float v) { return _mm256_set1_ps(v); }
  static type fmadd(type a, type b, type c) { return _mm256_fmadd_ps(a, b, c); }
  static float first(type v) { return _mm256_cvtss_f32(v); }
};

double fma_peak_avx2(int threads, double ms) {
  return fma_peak<Avx2Vec>(threads, ms);
}

}  // namespace conv
