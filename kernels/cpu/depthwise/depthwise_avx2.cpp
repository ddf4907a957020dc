// cpu.depthwise row kernel, 8 channels per vector (AVX2 + FMA; called only when cpu_isa() allows).
#include <immintrin.h>

#include "cpu/common/transpose_avx2.hpp"
#include "cpu/depthwise/depthwise.hpp"
#include "cpu/depthwise/depthwise_row.hpp"

namespace conv::kernels::depthwise {

struct Avx2Vec {
  using type = __m256;
  static constexpr int64_t lanes = 8;
  static type loadu(const float* p) { return _mm256_loadu_ps(p); }
  static void storeu(float* p, type v) { _mm256_storeu_ps(p, v); }
  static type fmadd(type a, type b, type c) { return _mm256_fmadd_ps(a, b, c); }
};

void row_avx2(const Row& r) {
  row<Avx2Vec>(r);
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

void pack8_plane_avx2(const float* const in[8], float* out, int64_t H, int64_t W, int64_t Wp,
                      int64_t pad_top, int64_t pad_left, int64_t stride) {
  const int64_t n = H * W;
  int64_t i = 0, ih = 0, iw = 0;  // (ih, iw) = pixel i
  float* row = out + (pad_top * Wp + pad_left) * stride;
  for (; i + 8 <= n; i += 8) {
    __m256 v[8];
    for (int l = 0; l < 8; ++l) v[l] = _mm256_loadu_ps(in[l] + i);
    transpose8x8_avx(v);
    for (int k = 0; k < 8; ++k) {
      _mm256_storeu_ps(row + iw * stride, v[k]);
      if (++iw == W) iw = 0, ++ih, row += Wp * stride;
    }
  }
  for (; i < n; ++i) {
    for (int l = 0; l < 8; ++l) row[iw * stride + l] = in[l][i];
    if (++iw == W) iw = 0, ++ih, row += Wp * stride;
  }
}

}  // namespace conv::kernels::depthwise
