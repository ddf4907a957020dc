// AVX2 helpers of the input views (direct_view.hpp) that cpu.direct and cpu.direct_kvec read:
// polyphase rows for strided convolutions, panel packing, and nChw8c row copies.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "cpu/common/store_avx2.hpp"
#include "cpu/common/transpose_avx2.hpp"
#include "cpu/direct/direct_view.hpp"

namespace conv::kernels::direct {

namespace {

// phase_rows_avx2 for one step (STEP a constant, so its divisions are shifts).
template <int STEP>
void phase_rows(const float* src, int64_t W, int64_t first, float* d0, int64_t d_stride,
                int64_t n) {
  // Phase q's valid t: 0 <= STEP*t + q + first < W; zeros outside.
  for (int q = 0; q < STEP; ++q) {
    float* d = d0 + q * d_stride;
    const int64_t f = q + first;
    const int64_t lo = std::min(n, f >= 0 ? 0 : (STEP - 1 - f) / STEP);
    const int64_t hi = std::max(lo, std::min(n, W - f <= 0 ? 0 : (W - f + STEP - 1) / STEP));
    // Padding is a few floats: zero vectors over the row's ends, which the stores below
    // overwrite where they are not padding, rather than two memset calls per phase.
    if (n >= 8 && lo <= 8 && n - hi <= 8) {
      if (lo > 0) _mm256_storeu_ps(d, _mm256_setzero_ps());
      if (hi < n) _mm256_storeu_ps(d + n - 8, _mm256_setzero_ps());
    } else {
      std::fill(d, d + lo, 0.0f);
      std::fill(d + hi, d + n, 0.0f);
    }
  }
  // Source element i (>= first) goes to phase (i - first) % STEP at t = (i - first) / STEP.
  // 8*STEP source floats from i0 deinterleave into 8 floats of each phase: the vector v[r] of
  // the floats i0 + r, i0 + r + STEP, ... goes to phase (i0 + r - first) % STEP.
  auto chunk = [&](int64_t i0, __m256 * v) __attribute__((always_inline)) {
    const float* s = src + i0;
    if constexpr (STEP == 2) {
      const __m256 a = _mm256_loadu_ps(s), b = _mm256_loadu_ps(s + 8);
      const __m256 even = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
      const __m256 odd = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
      v[0] = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), 0xd8));
      v[1] = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(odd), 0xd8));
    } else {
      // The 8 groups of 4 as an 8x4 -> 4x8 transpose, groups r and r + 4 in the two 128-bit
      // lanes.
      auto group = [&](int r) __attribute__((always_inline)) {
        return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(s + 4 * r)),
                                    _mm_loadu_ps(s + 4 * r + 16), 1);
      };
      const __m256 g0 = group(0), g1 = group(1), g2 = group(2), g3 = group(3);
      const __m256 lo01 = _mm256_unpacklo_ps(g0, g1), lo23 = _mm256_unpacklo_ps(g2, g3);
      const __m256 hi01 = _mm256_unpackhi_ps(g0, g1), hi23 = _mm256_unpackhi_ps(g2, g3);
      v[0] = _mm256_shuffle_ps(lo01, lo23, _MM_SHUFFLE(1, 0, 1, 0));
      v[1] = _mm256_shuffle_ps(lo01, lo23, _MM_SHUFFLE(3, 2, 3, 2));
      v[2] = _mm256_shuffle_ps(hi01, hi23, _MM_SHUFFLE(1, 0, 1, 0));
      v[3] = _mm256_shuffle_ps(hi01, hi23, _MM_SHUFFLE(3, 2, 3, 2));
    }
  };
  int64_t i = std::max<int64_t>(0, first);
  int64_t t = (i - first) / STEP;
  int q = static_cast<int>((i - first) % STEP);
  for (; i < W && q != 0; ++i) {
    if (t < n) d0[q * d_stride + t] = src[i];
    if (++q == STEP) q = 0, ++t;
  }
  const int64_t head_end = i;
  constexpr int64_t kChunk = 8 * STEP;
  for (; i + kChunk <= W && t + 8 <= n; i += kChunk, t += 8) {
    __m256 v[STEP];
    chunk(i, v);
    for (int r = 0; r < STEP; ++r) _mm256_storeu_ps(d0 + r * d_stride + t, v[r]);
  }
  // The rest as one chunk ending at the row's end, overlapping the one before it (writing the same
  // values again): no scalar tail on rows of 8*STEP floats or more.
  const int64_t last = W - kChunk;
  if (i < W && last >= head_end && (W - 1 - first) / STEP < n) {
    __m256 v[STEP];
    chunk(last, v);
    for (int r = 0; r < STEP; ++r) {
      const int64_t k = last + r - first;
      _mm256_storeu_ps(d0 + (k % STEP) * d_stride + k / STEP, v[r]);
    }
    return;
  }
  for (; i < W && t < n; ++i) {
    d0[q * d_stride + t] = src[i];
    if (++q == STEP) q = 0, ++t;
  }
}

}  // namespace

void pack_panel_avx2(const float* src, int64_t stride, int64_t rows, int64_t n, int64_t used,
                     int64_t width, float* dst) {
  const int64_t whole = n / 8 * 8;
  const __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - whole)),
                                          _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = src + r * stride;
    float* d = dst + r * width;
    int64_t i = 0;
    for (; i < whole; i += 8) _mm256_storeu_ps(d + i, _mm256_loadu_ps(s + i));
    if (whole < n) {
      _mm256_storeu_ps(d + i, _mm256_maskload_ps(s + i, tail));
      i += 8;
    }
    for (; i < used; i += 8) _mm256_storeu_ps(d + i, _mm256_setzero_ps());
  }
}

void copy_view_rows_nchw8c(const ConvProblem& p, const Geometry& g, const float* x, float* v,
                           int64_t cb, int64_t lo, int64_t hi) {
  const int64_t HW = p.H * p.W, sw = p.stride_w, cols = g.Pw * g.Wq;
  const int64_t phase_floats = g.Hq * g.Wq * 8;
  const float* xc = x + cb * 8 * HW;
  float* vc = v + cb * g.plane;
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t hq = lo; hq < hi; ++hq)
    for (int64_t qh = 0; qh < g.Ph; ++qh) {
      // Padded column wp is column wp / sw of column phase wp % sw: `at` walks them in order.
      float* const d0 = vc + qh * g.Pw * phase_floats + hq * g.Wq * 8;
      int64_t qw = 0;
      float* col = d0;  // column 0 of phase 0
      auto next = [&] {
        if (++qw < sw) {
          col += phase_floats;
        } else {
          qw = 0;
          col += 8 - (sw - 1) * phase_floats;
        }
      };
      const int64_t ih = hq * p.stride_h + qh - p.pad_top;
      if (ih < 0 || ih >= p.H) {
        for (int64_t wp = 0; wp < cols; ++wp, next()) _mm256_storeu_ps(col, zero);
        continue;
      }
      const float* row = xc + ih * p.W;
      for (int64_t wp = 0; wp < cols;) {
        const int64_t iw = wp - p.pad_left;
        if (iw >= 0 && iw + 8 <= p.W) {
          // Eight positions of the 8 channels at once.
          __m256 r[8];
          for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(row + i * HW + iw);
          transpose8x8_avx(r);
          for (int i = 0; i < 8; ++i, next()) _mm256_storeu_ps(col, r[i]);
          wp += 8;
          continue;
        }
        if (iw >= 0 && iw < p.W) {
          alignas(32) float t[8];
          for (int i = 0; i < 8; ++i) t[i] = row[i * HW + iw];
          _mm256_storeu_ps(col, _mm256_load_ps(t));
        } else {
          _mm256_storeu_ps(col, zero);
        }
        ++wp;
        next();
      }
    }
}

void phase_rows_avx2(const float* src, int64_t W, int64_t first, int step, float* d0,
                     int64_t d_stride, int64_t n) {
  if (step == 2)
    phase_rows<2>(src, W, first, d0, d_stride, n);
  else
    phase_rows<4>(src, W, first, d0, d_stride, n);
}

}  // namespace conv::kernels::direct
