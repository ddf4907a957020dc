// The cpu.direct_kvec register-block kernel, written once over an ISA traits type `V` (as
// direct_block.hpp) and included only by the ISA translation units.
//
// Method: oneDNN's jit_avx2_conv / jit_avx512_common_conv with output channels in the vector
// lanes (weights pre-blocked as in its OIhw8o/OIhw16o layouts; Georganas et al., SC 2018):
// KB vectors of output channels x NW output positions accumulate in registers over the
// (channel, tap) steps of a block's channels (or of one chunk of them, resumed from the tile); each
// step loads KB weight vectors (consecutive in the packed weights) and broadcasts one input value
// per position, for KB*NW FMAs. Positions are consecutive in the input view, so strides, dilation
// and small images cost no wasted lanes.
#pragma once

#include <xmmintrin.h>

#include <utility>

#include "cpu/direct_kvec/direct_kvec.hpp"

namespace conv::kernels::direct {

#define CONVTUNE_UNROLL _Pragma("GCC unroll 32")

// The smaller operand set is held for the step (KB weight vectors or NW broadcasts, as
// oneDNN's jit_avx2_conv holds ur_w broadcasts for 4 ymm of channels), so KB*NW + min(KB, NW)
// + 1 registers suffice.
// Position j's input is x[j * PS]: PS = 1 in planar views, 8 in nChw8c views.
template <class V, int KB, int NW, int PS = 1>
inline void kvec_step(typename V::reg (&acc)[KB][NW], const float* x, const float* w) {
  using R = typename V::reg;
  if constexpr (KB > NW) {
    R xb[NW];
    CONVTUNE_UNROLL for (int j = 0; j < NW; ++j) xb[j] = V::broadcast(x + j * PS);
    CONVTUNE_UNROLL for (int k = 0; k < KB; ++k) {
      const R wv = V::loadu(w + k * V::lanes);
      CONVTUNE_UNROLL for (int j = 0; j < NW; ++j) acc[k][j] = V::fmadd(wv, xb[j], acc[k][j]);
    }
  } else {
    R wv[KB];
    CONVTUNE_UNROLL for (int k = 0; k < KB; ++k) wv[k] = V::loadu(w + k * V::lanes);
    CONVTUNE_UNROLL for (int j = 0; j < NW; ++j) {
      const R xb = V::broadcast(x + j * PS);
      CONVTUNE_UNROLL for (int k = 0; k < KB; ++k) acc[k][j] = V::fmadd(wv[k], xb, acc[k][j]);
    }
  }
}

template <class V, int KB, int NW, KvecWalk WALK>
void kvec_block(const KvecCommon& c, const KvecBlock& b) {
  constexpr bool ONE_TAP = WALK == KvecWalk::one_tap;
  using R = typename V::reg;
  constexpr int L = V::lanes;
  R acc[KB][NW];
  if (b.partial) {
    CONVTUNE_UNROLL for (int k = 0; k < KB; ++k) CONVTUNE_UNROLL for (int j = 0; j < NW; ++j)
        acc[k][j] = V::loadu(b.tile + k * b.slab + j * L);
  } else {
    CONVTUNE_UNROLL for (int k = 0; k < KB; ++k) {
      const R init = b.bias ? V::loadu(b.bias + k * L) : V::zero();
      CONVTUNE_UNROLL for (int j = 0; j < NW; ++j) acc[k][j] = init;
    }
  }
  const float* x = b.x;
  const float* w = b.w;
  const int64_t channels = c.channels, xcs = c.x_channel_stride, ahead = c.prefetch_ahead;
  const float* pf = b.pf;
  const int64_t pf_lines = b.pf_lines;
  auto fetch = [&](int64_t i) __attribute__((always_inline)) {
    if (i < pf_lines) _mm_prefetch(reinterpret_cast<const char*>(pf + 16 * i), _MM_HINT_T1);
  };
  if constexpr (ONE_TAP) {
    for (int64_t ch = 0; ch < channels; ++ch, x += xcs, w += KB * L) {
      fetch(ch);
      kvec_step<V, KB, NW>(acc, x, w);
    }
  } else if constexpr (WALK == KvecWalk::nchw8c) {
    // `channels` blocks of 8: per tap, the 8 channels of a position are consecutive floats, so
    // a block's NW positions x 8 channels are NW*32 contiguous bytes (stride phases apart)
    // where the planar view reads 8 planes. Weights in the planar order [channel][tap][KB*L],
    // so that one-shot calls pack them with one pass of whole KCRS rows (see pack_block).
    const int64_t taps = c.taps, ics = taps * KB * L;
    const int64_t* tap = c.tap;
    for (int64_t cb = 0, i = 0; cb < channels; ++cb, x += xcs, w += 8 * ics) {
      const float* wt = w;
      for (int64_t t = 0; t < taps; ++t, ++i, wt += KB * L) {
        fetch(i);
        const float* xt = x + tap[t];
        if (ahead) {
          _mm_prefetch(reinterpret_cast<const char*>(xt + ahead), _MM_HINT_T0);
          if constexpr (NW > 2)
            _mm_prefetch(reinterpret_cast<const char*>(xt + ahead + 8 * NW - 1), _MM_HINT_T0);
        }
        CONVTUNE_UNROLL for (int ic = 0; ic < 8; ++ic)
            kvec_step<V, KB, NW, 8>(acc, xt + ic, wt + ic * ics);
      }
    }
  } else if (const int64_t* step_x = c.step_x) {
    // One loop over all (channel, tap) steps, as cpu.direct's (direct_block.hpp), two steps per
    // iteration.
    const int64_t steps = channels * c.taps;
#pragma GCC unroll 2
    for (int64_t i = 0; i < steps; ++i, w += KB * L) {
      fetch(i);
      const float* xt = x + step_x[i];
      if (ahead) {
        _mm_prefetch(reinterpret_cast<const char*>(xt + ahead), _MM_HINT_T0);
        if constexpr (NW > 8)
          _mm_prefetch(reinterpret_cast<const char*>(xt + ahead + NW - 1), _MM_HINT_T0);
      }
      kvec_step<V, KB, NW>(acc, xt, w);
    }
  } else {
    const int64_t taps = c.taps;
    const int64_t* tap = c.tap;
    for (int64_t ch = 0; ch < channels; ++ch, x += xcs) {
      fetch(ch);
      if (!ahead) {
        for (int64_t t = 0; t < taps; ++t, w += KB * L) kvec_step<V, KB, NW>(acc, x + tap[t], w);
        continue;
      }
      for (int64_t t = 0; t < taps; ++t, w += KB * L) {
        // A later channel's input for this tap: the view's phase planes and channel planes
        // are too far apart for the hardware prefetchers.
        const float* xt = x + tap[t];
        _mm_prefetch(reinterpret_cast<const char*>(xt + ahead), _MM_HINT_T0);
        if constexpr (NW > 8)
          _mm_prefetch(reinterpret_cast<const char*>(xt + ahead + NW - 1), _MM_HINT_T0);
        kvec_step<V, KB, NW>(acc, xt, w);
      }
    }
  }
  CONVTUNE_UNROLL for (int k = 0; k < KB; ++k) CONVTUNE_UNROLL for (int j = 0; j < NW; ++j)
      V::storeu(b.tile + k * b.slab + j * L, acc[k][j]);
}

// The kernel for `nw` positions (1..MaxNW) of a KB block, for each walk.
template <class V, int KB, int... I>
KvecFn kvec_pick(int nw, KvecWalk walk, std::integer_sequence<int, I...>) {
  KvecFn fn = nullptr;
  ((fn = (nw == I + 1) ? (walk == KvecWalk::one_tap  ? &kvec_block<V, KB, I + 1, KvecWalk::one_tap>
                          : walk == KvecWalk::nchw8c ? &kvec_block<V, KB, I + 1, KvecWalk::nchw8c>
                                                     : &kvec_block<V, KB, I + 1, KvecWalk::taps>)
                       : fn),
   ...);
  return fn;
}

#undef CONVTUNE_UNROLL

}  // namespace conv::kernels::direct
