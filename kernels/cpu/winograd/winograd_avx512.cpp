// cpu.winograd's per-point GEMM and weight-transform block for AVX-512 CPUs (the input and output
// transforms stay in winograd_avx2.cpp): the same U, V and M layouts as the AVX2 kernel, with a
// 32 (output channels: two zmm vectors, taken from two consecutive 16-channel blocks of U) x 12
// (tiles, broadcast from V) register block in 24 zmm accumulators, the BLIS/oneDNN-style
// microkernel shape that measured fastest. Cost: 2 * Kp * C/g * tiles flops per point.
#include <immintrin.h>

#include <algorithm>

#include "cpu/winograd/winograd.hpp"
#include "cpu/winograd/winograd_weight_block.hpp"

// GCC 12's avx512fintrin.h builds _mm512_shuffle_f32x4 on an intentionally undefined vector and,
// inlined as in the sanitizer build (scripts/test-sanitize.sh), warns about it in
// weight_block16; the warning is about the header.
#ifndef __clang__
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace conv::kernels::winograd {

// The transforms' arithmetic on 16 lanes (winograd_transforms.hpp); see Arith<__m256>.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"
template <>
struct Arith<__m512> {
  static __m512 add(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
  static __m512 sub(__m512 a, __m512 b) { return _mm512_sub_ps(a, b); }
  static __m512 mul(__m512 a, double c) {
    return _mm512_mul_ps(a, _mm512_set1_ps(static_cast<float>(c)));
  }
  static __m512 madd(__m512 a, double c, __m512 b) {
    return _mm512_fmadd_ps(a, _mm512_set1_ps(static_cast<float>(c)), b);
  }
};
#pragma GCC diagnostic pop

namespace {

// out[j][0 .. 16*(NV-1) + LAST) = sum_c U[c][..] * v[c][j] for NR tiles j. Vector 0 reads the
// 16-wide block at u0, vector 1 (NV = 2) the block at u1, which is 16 wide, or 8 wide when LAST = 8
// (an odd K/g tail), masked. FETCH: the first block of a panel, which streams U from memory,
// prefetches it 24 rows ahead (the hardware prefetcher starts too late for two streams this short,
// and 8 rows ahead are too few for two threads streaming U at once), and V's rows 24 ahead, which
// the other thread may have transformed.
template <int NR, int NV, int LAST, bool FETCH = false>
inline void block(int64_t C, const float* __restrict u0, const float* __restrict u1,
                  const float* __restrict v, int64_t ldv, float* __restrict out, int64_t ldo,
                  bool accumulate) {
  constexpr __mmask16 last_mask = LAST == 16 ? 0xFFFF : 0x00FF;
  constexpr int64_t last_stride = LAST;  // an 8-wide block of U is [c][8]
  __m512 acc[NR][NV];
#pragma GCC unroll 16
  for (int j = 0; j < NR; ++j) {
    if (accumulate) {
      acc[j][0] = NV == 1 ? _mm512_maskz_loadu_ps(last_mask, out + j * ldo)
                          : _mm512_loadu_ps(out + j * ldo);
      if constexpr (NV == 2) acc[j][1] = _mm512_maskz_loadu_ps(last_mask, out + j * ldo + kBlockK);
    } else {
#pragma GCC unroll 2
      for (int i = 0; i < NV; ++i) acc[j][i] = _mm512_setzero_ps();
    }
  }
  for (int64_t c = 0; c < C; ++c) {
    if constexpr (FETCH) {
      _mm_prefetch(reinterpret_cast<const char*>(u0 + (c + 24) * kBlockK), _MM_HINT_T0);
      if constexpr (NV == 2)
        _mm_prefetch(reinterpret_cast<const char*>(u1 + (c + 24) * last_stride), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(v + (c + 24) * ldv), _MM_HINT_T0);
    }
    __m512 a[NV];
    if constexpr (NV == 1) {
      a[0] = _mm512_maskz_loadu_ps(last_mask, u0 + c * last_stride);
    } else {
      a[0] = _mm512_loadu_ps(u0 + c * kBlockK);
      a[1] = _mm512_maskz_loadu_ps(last_mask, u1 + c * last_stride);
    }
    const float* vc = v + c * ldv;
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      const __m512 b = _mm512_set1_ps(vc[j]);
#pragma GCC unroll 2
      for (int i = 0; i < NV; ++i) acc[j][i] = _mm512_fmadd_ps(a[i], b, acc[j][i]);
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < NR; ++j) {
    if constexpr (NV == 1) {
      _mm512_mask_storeu_ps(out + j * ldo, last_mask, acc[j][0]);
    } else {
      _mm512_storeu_ps(out + j * ldo, acc[j][0]);
      _mm512_mask_storeu_ps(out + j * ldo + kBlockK, last_mask, acc[j][1]);
    }
  }
}

template <int NV, int LAST>
void panel(int64_t C, const float* u0, const float* u1, const float* v, int64_t ldv, float* out,
           int64_t ldo, int64_t nt, bool acc) {
  // Blocks of 12 tiles, the last of 13 rather than one of 12 and one of 1, whose 2 FMA chains wait
  // on the FMA latency (26 accumulators still fit the 32 registers).
  int64_t t = 0;
  for (; t + 12 <= nt; t += nt - t == 13 ? 13 : 12) {
    float* o = out + t * ldo;
    if (nt - t == 13)
      t == 0 ? block<13, NV, LAST, true>(C, u0, u1, v, ldv, o, ldo, acc)
             : block<13, NV, LAST>(C, u0, u1, v + t, ldv, o, ldo, acc);
    else
      t == 0 ? block<12, NV, LAST, true>(C, u0, u1, v, ldv, o, ldo, acc)
             : block<12, NV, LAST>(C, u0, u1, v + t, ldv, o, ldo, acc);
  }
  if (t + 8 <= nt) {
    block<8, NV, LAST>(C, u0, u1, v + t, ldv, out + t * ldo, ldo, acc);
    t += 8;
  }
  if (t + 4 <= nt) {
    block<4, NV, LAST>(C, u0, u1, v + t, ldv, out + t * ldo, ldo, acc);
    t += 4;
  }
  if (t + 2 <= nt) {
    block<2, NV, LAST>(C, u0, u1, v + t, ldv, out + t * ldo, ldo, acc);
    t += 2;
  }
  if (t < nt) block<1, NV, LAST>(C, u0, u1, v + t, ldv, out + t * ldo, ldo, acc);
}

// 16 filters from kb0: the AVX2 8-filter taps of each half, joined into zmm lanes. (GCC 12 warns
// about the undefined pass-through operand inside _mm512_shuffle_f32x4 itself.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
template <int M, int R>
void weight_block16(const Geometry& g, const float* wg, int64_t kb0, int64_t c, float* dst,
                    int64_t pstride) {
  __m256 lo[R * R], hi[R * R];
  load_filter_taps<R>(g, wg, kb0, c, lo);
  load_filter_taps<R>(g, wg, kb0 + kVec, c, hi);
  __m512 taps[R * R];
  for (int i = 0; i < R * R; ++i)
    taps[i] = _mm512_shuffle_f32x4(_mm512_castps256_ps512(lo[i]), _mm512_castps256_ps512(hi[i]),
                                   0x44);  // lo's two 128-bit lanes, then hi's
  transform_filter_taps<M, R>(taps,
                              [&](int pt, __m512 u) { _mm512_storeu_ps(dst + pt * pstride, u); });
}
#pragma GCC diagnostic pop

}  // namespace

void weight_block_avx512(const Geometry& g, const float* wg, int64_t kb0, int64_t c, float* dst,
                         int64_t pstride) {
  dispatch_mr(g.m, g.r,
              [&](auto m, auto r) { weight_block16<m(), r()>(g, wg, kb0, c, dst, pstride); });
}

void gemm_avx512(int64_t C, const float* u, int64_t kw, const float* v, int64_t ldv, float* out,
                 int64_t ldo, int64_t nt, bool accumulate) {
  const float* u1 = u + kBlockK * C;
  switch (kw) {
    case 32:
      return panel<2, 16>(C, u, u1, v, ldv, out, ldo, nt, accumulate);
    case 24:
      return panel<2, 8>(C, u, u1, v, ldv, out, ldo, nt, accumulate);
    case 16:
      return panel<1, 16>(C, u, u, v, ldv, out, ldo, nt, accumulate);
    default:
      return panel<1, 8>(C, u, u, v, ldv, out, ldo, nt, accumulate);
  }
}

}  // namespace conv::kernels::winograd
