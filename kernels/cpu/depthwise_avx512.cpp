// cpu.depthwise row kernel, 16 channels per vector (AVX-512F; called only when cpu_isa() allows).
#include <immintrin.h>

#include "depthwise.hpp"

namespace conv::kernels::depthwise {

void row_avx512(const Row& r) {
  constexpr int64_t L = 16;
  const __m512 b = _mm512_loadu_ps(r.bias);
  const int64_t sw = r.stride_w * L, dw = r.dilation_w * L;
  int64_t ow = 0;
  // Four output positions at a time share each weight vector.
  for (; ow + 4 <= r.OW; ow += 4) {
    __m512 a0 = b, a1 = b, a2 = b, a3 = b;
    for (int64_t i = 0; i < r.R; ++i) {
      const float* xr = r.x + i * r.dil_h_rows + ow * sw;
      const float* wr = r.w + i * r.S * L;
      for (int64_t j = 0; j < r.S; ++j) {
        const __m512 w = _mm512_loadu_ps(wr + j * L);
        const float* xp = xr + j * dw;
        a0 = _mm512_fmadd_ps(w, _mm512_loadu_ps(xp), a0);
        a1 = _mm512_fmadd_ps(w, _mm512_loadu_ps(xp + sw), a1);
        a2 = _mm512_fmadd_ps(w, _mm512_loadu_ps(xp + 2 * sw), a2);
        a3 = _mm512_fmadd_ps(w, _mm512_loadu_ps(xp + 3 * sw), a3);
      }
    }
    _mm512_storeu_ps(r.y + ow * L, a0);
    _mm512_storeu_ps(r.y + (ow + 1) * L, a1);
    _mm512_storeu_ps(r.y + (ow + 2) * L, a2);
    _mm512_storeu_ps(r.y + (ow + 3) * L, a3);
  }
  for (; ow < r.OW; ++ow) {
    __m512 a = b;
    for (int64_t i = 0; i < r.R; ++i)
      for (int64_t j = 0; j < r.S; ++j)
        a = _mm512_fmadd_ps(_mm512_loadu_ps(r.w + (i * r.S + j) * L),
                            _mm512_loadu_ps(r.x + i * r.dil_h_rows + ow * sw + j * dw), a);
    _mm512_storeu_ps(r.y + ow * L, a);
  }
}

}  // namespace conv::kernels::depthwise
