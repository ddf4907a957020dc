#include <immintrin.h>

#include "peak_loop.hpp"

namespace conv {

struct Avx512Vec {
  using type = __m512;
  static constexpr int lanes = 16;
  static type set1(float v) { return _mm512_set1_ps(v); }
  static type fmadd(type a, type b, type c) { return _mm512_fmadd_ps(a, b, c); }
  static float first(type v) { return _mm512_cvtss_f32(v); }
};

double fma_peak_avx512(int threads, double ms) {
  return fma_peak<Avx512Vec>(threads, ms);
}

}  // namespace conv
