// cpu.depthwise row kernel, 8 channels per vector (AVX2 + FMA; called only when cpu_isa() allows).
#include <immintrin.h>

#include "depthwise.hpp"
#include "transpose_avx2.hpp"

namespace conv::kernels::depthwise {

void row_avx2(const Row& r) {
  constexpr int64_t L = 8;
  const __m256 b = _mm256_loadu_ps(r.bias);
  const int64_t sw = r.stride_w * L, dw = r.dilation_w * L;
  int64_t ow = 0;
  // Four output positions at a time share each weight vector.
  for (; ow + 4 <= r.OW; ow += 4) {
    __m256 a0 = b, a1 = b, a2 = b, a3 = b;
    for (int64_t i = 0; i < r.R; ++i) {
      const float* xr = r.x + i * r.dil_h_rows + ow * sw;
      const float* wr = r.w + i * r.S * L;
      for (int64_t j = 0; j < r.S; ++j) {
        const __m256 w = _mm256_loadu_ps(wr + j * L);
        const float* xp = xr + j * dw;
        a0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(xp), a0);
        a1 = _mm256_fmadd_ps(w, _mm256_loadu_ps(xp + sw), a1);
        a2 = _mm256_fmadd_ps(w, _mm256_loadu_ps(xp + 2 * sw), a2);
        a3 = _mm256_fmadd_ps(w, _mm256_loadu_ps(xp + 3 * sw), a3);
      }
    }
    _mm256_storeu_ps(r.y + ow * L, a0);
    _mm256_storeu_ps(r.y + (ow + 1) * L, a1);
    _mm256_storeu_ps(r.y + (ow + 2) * L, a2);
    _mm256_storeu_ps(r.y + (ow + 3) * L, a3);
  }
  for (; ow < r.OW; ++ow) {
    __m256 a = b;
    for (int64_t i = 0; i < r.R; ++i)
      for (int64_t j = 0; j < r.S; ++j)
        a = _mm256_fmadd_ps(_mm256_loadu_ps(r.w + (i * r.S + j) * L),
                            _mm256_loadu_ps(r.x + i * r.dil_h_rows + ow * sw + j * dw), a);
    _mm256_storeu_ps(r.y + ow * L, a);
  }
}

void pack8_avx2(const float* const in[8], float* out, int64_t W, int64_t stride) {
  int64_t iw = 0;
  for (; iw + 8 <= W; iw += 8) {
    __m256 v[8];
    for (int l = 0; l < 8; ++l) v[l] = _mm256_loadu_ps(in[l] + iw);
    transpose8x8_avx(v);
    for (int k = 0; k < 8; ++k) _mm256_storeu_ps(out + (iw + k) * stride, v[k]);
  }
  for (; iw < W; ++iw)
    for (int l = 0; l < 8; ++l) out[iw * stride + l] = in[l][iw];
}

void unpack8_avx2(const float* in, int64_t stride, float* const out[8], int64_t OW) {
  int64_t ow = 0;
  for (; ow + 8 <= OW; ow += 8) {
    __m256 v[8];
    for (int k = 0; k < 8; ++k) v[k] = _mm256_loadu_ps(in + (ow + k) * stride);
    transpose8x8_avx(v);
    for (int l = 0; l < 8; ++l) _mm256_storeu_ps(out[l] + ow, v[l]);
  }
  for (; ow < OW; ++ow)
    for (int l = 0; l < 8; ++l) out[l][ow] = in[ow * stride + l];
}

}  // namespace conv::kernels::depthwise
