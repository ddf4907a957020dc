// cpu.direct AVX2/FMA register-block kernels (compiled with -mavx2 -mfma; called by
// direct.cpp only after a run-time ISA check). Method: oneDNN's jit_avx2_conv / Georganas et
// al., SC 2018: `OC` output channels x `NV` ymm vectors of 8 output positions are accumulated
// in registers over all input channels and taps; per (channel, tap) step NV unaligned input
// loads and OC weight broadcasts feed OC*NV FMAs.
// Cost per block: channels*taps*OC*NV FMAs (8 lanes each), no memory traffic but the operands.
#include <immintrin.h>

#include "direct.hpp"

namespace conv::kernels::direct {
namespace {

// The accumulator arrays must live in registers: fully unrolling every loop over them lets the
// compiler scalarise the arrays (otherwise GCC keeps a memory copy and stores it every step).
#define UNROLL _Pragma("GCC unroll 16")

// Mask of lanes [lo, hi) for _mm256_maskstore_ps.
inline __m256i lane_mask(int lo, int hi) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i ge_lo = _mm256_cmpgt_epi32(idx, _mm256_set1_epi32(lo - 1));
  const __m256i lt_hi = _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), idx);
  return _mm256_and_si256(ge_lo, lt_hi);
}

template <int OC, int NV>
void block(const BlockCommon& c, const Block& b) {
  __m256 acc[OC][NV];
  UNROLL for (int k = 0; k < OC; ++k) {
    const __m256 init = (b.bias && k < b.kvalid) ? _mm256_set1_ps(b.bias[k]) : _mm256_setzero_ps();
    UNROLL for (int j = 0; j < NV; ++j) acc[k][j] = init;
  }
  const float* xp[NV];
  UNROLL for (int j = 0; j < NV; ++j) xp[j] = b.x[j];
  const float* wp[OC];
  UNROLL for (int k = 0; k < OC; ++k) wp[k] = b.w[k];
  const int64_t taps = c.taps, xcs = c.x_channel_stride, wcs = c.w_channel_stride,
                wts = c.w_tap_stride;
  const int64_t* tap = c.tap;
  for (int64_t ch = 0; ch < c.channels; ++ch) {
    int64_t wo = 0;
    for (int64_t t = 0; t < taps; ++t, wo += wts) {
      const int64_t xo = tap[t];
      __m256 xv[NV];
      UNROLL for (int j = 0; j < NV; ++j) xv[j] = _mm256_loadu_ps(xp[j] + xo);
      UNROLL for (int k = 0; k < OC; ++k) {
        const __m256 wv = _mm256_broadcast_ss(wp[k] + wo);
        UNROLL for (int j = 0; j < NV; ++j) acc[k][j] = _mm256_fmadd_ps(wv, xv[j], acc[k][j]);
      }
    }
    UNROLL for (int j = 0; j < NV; ++j) xp[j] += xcs;
    UNROLL for (int k = 0; k < OC; ++k) wp[k] += wcs;
  }
  UNROLL for (int j = 0; j < NV; ++j) {
    float* y = b.y[j];
    if (b.lo[j] == 0 && b.hi[j] == kLanes) {
      UNROLL for (int k = 0; k < OC; ++k)
        if (k < b.kvalid) _mm256_storeu_ps(y + k * c.y_k_stride, acc[k][j]);
    } else {
      const __m256i m = lane_mask(b.lo[j], b.hi[j]);
      UNROLL for (int k = 0; k < OC; ++k)
        if (k < b.kvalid) _mm256_maskstore_ps(y + k * c.y_k_stride, m, acc[k][j]);
    }
  }
}

template <int OC, int... NV>
BlockFn pick(int nv, std::integer_sequence<int, NV...>) {
  BlockFn fn = nullptr;
  ((fn = (nv == NV + 1) ? &block<OC, NV + 1> : fn), ...);
  return fn;
}

}  // namespace

BlockFn avx2_block(int oc, int vecs) {
  switch (oc) {
    case 1:
      return pick<1>(vecs, std::make_integer_sequence<int, 12>{});
    case 2:
      return pick<2>(vecs, std::make_integer_sequence<int, 6>{});
    case 3:
      return pick<3>(vecs, std::make_integer_sequence<int, 4>{});
    case 4:
      return pick<4>(vecs, std::make_integer_sequence<int, 3>{});
    case 6:
      return pick<6>(vecs, std::make_integer_sequence<int, 2>{});
    case 8:
      return pick<8>(vecs, std::make_integer_sequence<int, 1>{});
    default:
      return nullptr;
  }
}

}  // namespace conv::kernels::direct
