// cpu.direct_kvec AVX2/FMA kernels (compiled with -mavx2 -mfma; direct_kvec.cpp calls them only
// after a run-time ISA check): the register blocks of direct_kvec_block.hpp on ymm, the weight
// packing into K-vector blocks, and the store of a tile back to NCHW.
#include <immintrin.h>

#include <algorithm>
#include <type_traits>
#include <utility>

#include "cpu/common/simd_avx2.hpp"
#include "cpu/common/store_avx2.hpp"
#include "cpu/common/transpose_avx2.hpp"
#include "cpu/direct_kvec/direct_kvec_block.hpp"

namespace conv::kernels::direct {

using avx2::Ymm;

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
  // written whole while they are in L1, and each source line is consumed at once (rows a multiple
  // of 4 KiB apart share their L1 sets, so a line left for the next eight columns is often evicted
  // by then). Full blocks skip the per-row zero fill. Rows r0 + i and r0 + i + 4 are loaded into
  // the two 128-bit lanes, so the 4x4 transposes within the lanes take 16 shuffles where
  // transpose8x8_avx takes 24.
  // The last cols % 8 columns (of a reduction chunk's C*R*S, e.g. 10 channels of a 3x3 kernel) take
  // masked loads and partial stores instead of scalar copies.
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

}  // namespace conv::kernels::direct
