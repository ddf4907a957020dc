// cpu.depthwise row kernel, 16 channels per vector (AVX-512F; called only when cpu_isa() allows).
#include <immintrin.h>

#include "cpu/depthwise/depthwise_row.hpp"

namespace conv::kernels::depthwise {

struct Avx512Vec {
  using type = __m512;
  static constexpr int64_t lanes = 16;
  static type loadu(const float* p) { return _mm512_loadu_ps(p); }
  static void storeu(float* p, type v) { _mm512_storeu_ps(p, v); }
  static type fmadd(type a, type b, type c) { return _mm512_fmadd_ps(a, b, c); }
};

void row_avx512(const Row& r) {
  row<Avx512Vec>(r);
}

}  // namespace conv::kernels::depthwise
