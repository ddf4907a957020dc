// cpu.direct AVX2/FMA register-block kernels (compiled with -mavx2 -mfma; direct.cpp calls them
// only after a run-time ISA check). Method: oneDNN's jit_avx2_conv / Georganas et al., SC 2018
// (see direct_block.hpp): OC output channels x NV ymm vectors of 8 output positions accumulate
// in registers; per (channel, tap) step NV loads and OC broadcasts feed OC*NV FMAs.
// Cost per block: channels*taps*OC*NV ymm FMAs.
#include <immintrin.h>

#include <algorithm>
#include <type_traits>
#include <utility>

#include "direct_block.hpp"
#include "direct_kvec_block.hpp"
#include "direct_view.hpp"
#include "store_avx2.hpp"
#include "transpose_avx2.hpp"

namespace conv::kernels::direct {
namespace {

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

}  // namespace

BlockFn avx2_block(int oc, int vecs, bool one_tap) {
  // Accumulators (oc*vecs <= 12), min(oc, vecs) operands and one broadcast fit 16 ymm.
  switch (oc) {
    case 1:
      return direct_pick<Ymm, 1>(vecs, one_tap, std::make_integer_sequence<int, 12>{});
    case 2:
      return direct_pick<Ymm, 2>(vecs, one_tap, std::make_integer_sequence<int, 6>{});
    case 3:
      return direct_pick<Ymm, 3>(vecs, one_tap, std::make_integer_sequence<int, 4>{});
    case 4:
      return direct_pick<Ymm, 4>(vecs, one_tap, std::make_integer_sequence<int, 3>{});
    case 6:
      return direct_pick<Ymm, 6>(vecs, one_tap, std::make_integer_sequence<int, 2>{});
    case 8:
      return direct_pick<Ymm, 8>(vecs, one_tap, std::make_integer_sequence<int, 1>{});
    default:
      return nullptr;
  }
}

KvecFn avx2_kvec(int kb, int nw, KvecWalk walk) {
  // kb*nw <= 14 accumulators, min(kb, nw) held operands and one more fit 16 ymm.
  switch (kb) {
    case 1:
      return kvec_pick<Ymm, 1>(nw, walk, std::make_integer_sequence<int, 14>{});
    case 2:
      return kvec_pick<Ymm, 2>(nw, walk, std::make_integer_sequence<int, 6>{});
    case 3:
      return kvec_pick<Ymm, 3>(nw, walk, std::make_integer_sequence<int, 4>{});
    case 4:
      return kvec_pick<Ymm, 4>(nw, walk, std::make_integer_sequence<int, 3>{});
    default:
      return nullptr;
  }
}

void kvec_pack_avx2(const float* src, int64_t src_stride, int rows, int64_t cols, int kbl,
                    float* dst, int64_t dst_stride) {
  // Sixteen columns (a source line) at a time, all kbl rows: the sixteen destination rows are
  // written whole while they are in L1, and each source line is consumed at once (rows a
  // multiple of 4 KiB apart share their L1 sets, so a line left for the next eight columns was
  // often evicted by then). Full blocks skip the per-row zero fill (with the chunked packing of
  // direct_kvec.cpp, 2 threads, Zen 3: resnet50 res5_1x1a `oc32` 2-4% faster). Rows r0 + i and
  // r0 + i + 4 are loaded into the two 128-bit lanes, so the 4x4 transposes within the lanes
  // take 16 shuffles where transpose8x8_avx takes 24. Together with the kernels' prefetching of
  // the block packed next (2 threads, one-shot, oc32_avx512: resnet50 res5_1x1b 0.49-0.51 ->
  // 0.45-0.46 ms, res4_1x1a 0.38 -> 0.37, alexnet conv5 0.53-0.54 -> 0.52; AVX2 cap, oc32:
  // 0.63-0.65 -> 0.59-0.60, 0.58-0.61 -> 0.55-0.56, 0.88-0.90 -> 0.87).
  // The last cols % 8 columns (of a reduction chunk's C*R*S, e.g. 10 channels of a 3x3 kernel)
  // take masked loads and partial stores instead of scalar copies (2 threads, Zen 3, when
  // nChw8c weights were packed per channel of 9 columns: resnet50 res4_3x3_s2 `oc32_nchw8c`
  // one-shot, packing 6% -> 3% of the time).
  const int64_t full = cols / 8 * 8;
  const int tail = static_cast<int>(cols - full);
  const __m128 z = _mm_setzero_ps();
  alignas(32) static constexpr int kOnes[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                0,  0,  0,  0,  0,  0,  0,  0};
  const __m128i m0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kOnes + 8 - tail));
  const __m128i m1 =
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(kOnes + 8 - std::max(0, tail - 4)));
  // Columns c0 .. c0 + ncols - 1 (ncols 8, or `tail` with masked loads) of rows r0 .. r0 + 7.
  auto block8 = [&](auto full_rows, auto full_cols, int64_t c0, int r0)
      __attribute__((always_inline)) {
    constexpr bool FULL = decltype(full_rows)::value, WHOLE = decltype(full_cols)::value;
    auto lo = [&](const float* q) { return WHOLE ? _mm_loadu_ps(q) : _mm_maskload_ps(q, m0); };
    auto hi = [&](const float* q) {
      return WHOLE ? _mm_loadu_ps(q + 4) : _mm_maskload_ps(q + 4, m1);
    };
    __m256 t[8];
    for (int i = 0; i < 4; ++i) {
      const float* a = src + (r0 + i) * src_stride + c0;
      const float* b = src + (r0 + i + 4) * src_stride + c0;
      const bool ha = FULL || r0 + i < rows, hb = FULL || r0 + i + 4 < rows;
      t[i] = _mm256_insertf128_ps(_mm256_castps128_ps256(ha ? lo(a) : z), hb ? lo(b) : z, 1);
      t[i + 4] = _mm256_insertf128_ps(_mm256_castps128_ps256(ha ? hi(a) : z), hb ? hi(b) : z, 1);
    }
    const int ncols = WHOLE ? 8 : tail;
    for (int h = 0; h < 8 && h < ncols; h += 4) {
      const __m256 u0 = _mm256_unpacklo_ps(t[h], t[h + 1]);
      const __m256 u1 = _mm256_unpackhi_ps(t[h], t[h + 1]);
      const __m256 u2 = _mm256_unpacklo_ps(t[h + 2], t[h + 3]);
      const __m256 u3 = _mm256_unpackhi_ps(t[h + 2], t[h + 3]);
      const __m256 col[4] = {_mm256_shuffle_ps(u0, u2, 0x44), _mm256_shuffle_ps(u0, u2, 0xEE),
                             _mm256_shuffle_ps(u1, u3, 0x44), _mm256_shuffle_ps(u1, u3, 0xEE)};
      float* d = dst + (c0 + h) * dst_stride + r0;
      for (int j = 0; j < 4 && h + j < ncols; ++j) _mm256_storeu_ps(d + j * dst_stride, col[j]);
    }
  };
  auto run = [&](auto full_rows) __attribute__((always_inline)) {
    int64_t c0 = 0;
    for (; c0 + 16 <= full; c0 += 16)
      for (int r0 = 0; r0 < kbl; r0 += 8) {
        block8(full_rows, std::true_type{}, c0, r0);
        block8(full_rows, std::true_type{}, c0 + 8, r0);
      }
    for (; c0 < full; c0 += 8)
      for (int r0 = 0; r0 < kbl; r0 += 8) block8(full_rows, std::true_type{}, c0, r0);
    if (tail)
      for (int r0 = 0; r0 < kbl; r0 += 8) block8(full_rows, std::false_type{}, full, r0);
  };
  if (rows == kbl)
    run(std::true_type{});
  else
    run(std::false_type{});
}

void kvec_store_avx2(const float* tile, int64_t n, int lanes, int64_t slab, int kvalid, float* y,
                     int64_t y_stride) {
  for (int k8 = 0; k8 < kvalid; k8 += 8) {
    const float* t = tile + (k8 / lanes) * slab + k8 % lanes;
    const int kn = std::min(8, kvalid - k8);
    for (int64_t j8 = 0; j8 < n; j8 += 8) {
      const int jn = static_cast<int>(std::min<int64_t>(8, n - j8));
      __m256 r[8];
      for (int i = 0; i < 8; ++i)
        r[i] = i < jn ? _mm256_loadu_ps(t + (j8 + i) * lanes) : _mm256_setzero_ps();
      transpose8x8_avx(r);
      float* yj = y + k8 * y_stride + j8;
      for (int c = 0; c < kn; ++c) store_first_avx(yj + c * y_stride, r[c], jn);
    }
  }
}

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
  // The rest as one chunk ending at the row's end, overlapping the one before it (writing the
  // same values again): no scalar tail on rows of 8*STEP floats or more (with the zero
  // vectors above, alternating runs of the row function, AVX2, Zen 4: stride 2, 28 floats, as
  // in resnet50 res4_3x3_s2, 18.9 -> 13.8 ns; 56 floats 21 -> 15; 224 floats 52 -> 34).
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
