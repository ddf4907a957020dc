// The cpu.direct register-block kernel, written once over an ISA traits type `V` (vector type,
// lane count, load/store/FMA/broadcast and lane masks). Included only by the ISA translation
// units (direct_avx2.cpp, direct_avx512.cpp), each compiled for its ISA with its own traits
// type, so every instantiation is distinct and only called after a run-time ISA check.
//
// Method: oneDNN jit_avx2_conv / Georganas et al., SC 2018. OC output channels x NV vectors of
// V::lanes output positions are accumulated in registers over all (channel, tap) steps of the
// block's reduction; each step does NV unaligned input loads and OC weight broadcasts for
// OC*NV FMAs. Cost: channels*taps*OC*NV vector FMAs per block. One call computes a run of
// consecutive output-channel blocks for the same vectors.
#pragma once

#include <xmmintrin.h>

#include <cstdint>
#include <type_traits>

#include "cpu/direct/direct.hpp"

namespace conv::kernels::direct {

// Fully unrolling every loop over the accumulator arrays lets the compiler keep them in
// registers (otherwise GCC keeps a memory copy and stores it on every step).
#define CONVTUNE_UNROLL _Pragma("GCC unroll 32")

// One (channel, tap) step: OC*NV FMAs. The smaller operand set is held in registers for the
// step (OC broadcasts or NV loads), so OC*NV + min(OC, NV) + 1 registers suffice.
template <class V, int OC, int NV>
inline void step(typename V::reg (&acc)[OC][NV], const float* const (&xp)[NV], int64_t xo,
                 const float* const (&wp)[OC], int64_t wo) {
  using R = typename V::reg;
  if constexpr (OC < NV) {
    R wv[OC];
    CONVTUNE_UNROLL for (int k = 0; k < OC; ++k) wv[k] = V::broadcast(wp[k] + wo);
    CONVTUNE_UNROLL for (int j = 0; j < NV; ++j) {
      const R xv = V::loadu(xp[j] + xo);
      CONVTUNE_UNROLL for (int k = 0; k < OC; ++k) acc[k][j] = V::fmadd(wv[k], xv, acc[k][j]);
    }
  } else {
    R xv[NV];
    CONVTUNE_UNROLL for (int j = 0; j < NV; ++j) xv[j] = V::loadu(xp[j] + xo);
    CONVTUNE_UNROLL for (int k = 0; k < OC; ++k) {
      const R wv = V::broadcast(wp[k] + wo);
      CONVTUNE_UNROLL for (int j = 0; j < NV; ++j) acc[k][j] = V::fmadd(wv, xv[j], acc[k][j]);
    }
  }
}

// Output-channel block r of the block's run (Block::runs).
template <class V, int OC, int NV, bool ONE_TAP>
inline void block_in_run(const BlockCommon& c, const Block& b, int r, int64_t po) {
  using R = typename V::reg;
  const int64_t yo = r * OC * c.y_k_stride + po;
  R acc[OC][NV];
  if (b.accumulate) {
    CONVTUNE_UNROLL for (int j = 0; j < NV; ++j) {
      CONVTUNE_UNROLL for (int k = 0; k < OC; ++k) acc[k][j] = V::zero();
      // Segments cover disjoint lanes and masked loads read zeros elsewhere: sum them.
      for (int sg = 0; sg < b.nseg[j]; ++sg) {
        const Segment& g = b.seg[j][sg];
        const typename V::mask m = V::lane_mask(g.lo, g.hi);
        CONVTUNE_UNROLL for (int k = 0; k < OC; ++k) acc[k][j] =
            V::add(acc[k][j], V::load_mask(g.out + yo + (k < b.kvalid ? k : 0) * c.y_k_stride, m));
      }
    }
  } else {
    CONVTUNE_UNROLL for (int k = 0; k < OC; ++k) {
      const R init =
          (b.bias && k < b.kvalid) ? V::set1(b.bias[k * c.bias_stride + r * OC]) : V::zero();
      CONVTUNE_UNROLL for (int j = 0; j < NV; ++j) acc[k][j] = init;
    }
  }
  const float* xp[NV];
  CONVTUNE_UNROLL for (int j = 0; j < NV; ++j) xp[j] = b.x[j] + po;
  const float* wp[OC];
  CONVTUNE_UNROLL for (int k = 0; k < OC; ++k) wp[k] = b.w[k] + r * c.w_kb_stride;
  const int64_t channels = c.channels, xcs = c.x_channel_stride, wcs = c.w_channel_stride;
  if constexpr (ONE_TAP) {
    // 1x1: the step is one channel; index registers instead of NV+OC pointer bumps per step.
    int64_t xo = 0, wo = 0;
    // Ymm reductions of 128 channels and more run four steps per iteration; with fewer channels
    // that measured slower. zmm blocks keep one step per iteration: unrolling was not measured on
    // an AVX-512 CPU (and two steps per iteration were slower there).
    const int64_t ahead = c.prefetch_ahead;
    auto fetch_step = [&](int64_t xo, int64_t wo) __attribute__((always_inline)) {
      CONVTUNE_UNROLL for (int j = 0; j < NV; ++j)
          _mm_prefetch(reinterpret_cast<const char*>(xp[j] + xo + ahead), _MM_HINT_T0);
      step<V, OC, NV>(acc, xp, xo, wp, wo);
    };
    const bool fetch = ahead && (r == 0 || !c.prefetch_first_only);
    const bool unroll = V::lanes == 8 && channels >= 128;
    if (unroll && fetch) {
#pragma GCC unroll 4
      for (int64_t ch = 0; ch < channels; ++ch, xo += xcs, wo += wcs) fetch_step(xo, wo);
    } else if (unroll) {
#pragma GCC unroll 4
      for (int64_t ch = 0; ch < channels; ++ch, xo += xcs, wo += wcs)
        step<V, OC, NV>(acc, xp, xo, wp, wo);
    } else if (fetch) {
      for (int64_t ch = 0; ch < channels; ++ch, xo += xcs, wo += wcs) fetch_step(xo, wo);
    } else {
      for (int64_t ch = 0; ch < channels; ++ch, xo += xcs, wo += wcs)
        step<V, OC, NV>(acc, xp, xo, wp, wo);
    }
  } else if (const int64_t* step_x = c.step_x) {
    // One loop over all (channel, tap) steps: with few taps per channel, the nested loops'
    // per-channel pointer bumps (spilled to the stack) slow the blocks down.
    const int64_t steps = channels * c.taps, wts = c.w_tap_stride, ahead = c.prefetch_ahead;
    const int64_t wd = c.w_prefetch_steps;
    // With weight prefetches (std::true_type): the weights of the step wd steps on, a line per
    // KCRS row or the packed block's oc lines, every 16 steps; the input ahead as configured.
    auto fetching = [&](auto with_w) __attribute__((always_inline)) {
      constexpr bool W = decltype(with_w)::value;
      for (int64_t i = 0; i < steps; ++i) {
        if constexpr (W) {
          if ((i & 15) == 0) {
            // As integers: the addresses may lie past the weights, where only prefetches go.
            const uintptr_t w0 = reinterpret_cast<uintptr_t>(wp[0]) + 4 * (i + wd) * wts;
            CONVTUNE_UNROLL for (int k = 0; k < OC; ++k) _mm_prefetch(
                reinterpret_cast<const char*>(
                    wts == 1 ? reinterpret_cast<uintptr_t>(wp[k]) + 4 * (i + wd) : w0 + 64 * k),
                _MM_HINT_T0);
          }
        }
        const int64_t xo = step_x[i];
        if (!W || ahead) {
          _mm_prefetch(reinterpret_cast<const char*>(xp[0] + xo + ahead), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(xp[NV - 1] + xo + ahead + V::lanes - 1),
                       _MM_HINT_T0);
        }
        step<V, OC, NV>(acc, xp, xo, wp, i * wts);
      }
    };
    if (wd) {
      fetching(std::true_type{});
    } else if (ahead) {
      fetching(std::false_type{});
    } else if constexpr (V::lanes == 8) {
      // Two steps per iteration for the ymm blocks; the zmm blocks measured slower so.
#pragma GCC unroll 2
      for (int64_t i = 0; i < steps; ++i) step<V, OC, NV>(acc, xp, step_x[i], wp, i * wts);
    } else {
      for (int64_t i = 0; i < steps; ++i) step<V, OC, NV>(acc, xp, step_x[i], wp, i * wts);
    }
  } else {
    const int64_t taps = c.taps, wts = c.w_tap_stride, ahead = c.prefetch_ahead;
    const int64_t* tap = c.tap;
    for (int64_t ch = 0; ch < channels; ++ch) {
      int64_t wo = 0;
      if (ahead) {
        for (int64_t t = 0; t < taps; ++t, wo += wts) {
          const int64_t xo = tap[t];
          // A later channel's rows for this tap (see direct_kvec_block.hpp).
          _mm_prefetch(reinterpret_cast<const char*>(xp[0] + xo + ahead), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(xp[NV - 1] + xo + ahead + V::lanes - 1),
                       _MM_HINT_T0);
          step<V, OC, NV>(acc, xp, xo, wp, wo);
        }
      } else {
        for (int64_t t = 0; t < taps; ++t, wo += wts) step<V, OC, NV>(acc, xp, tap[t], wp, wo);
      }
      CONVTUNE_UNROLL for (int j = 0; j < NV; ++j) xp[j] += xcs;
      CONVTUNE_UNROLL for (int k = 0; k < OC; ++k) wp[k] += wcs;
    }
  }
  // Vector j is stored whole, to one row.
  auto whole = [&](int j) {
    const Segment& g = b.seg[j][0];
    return b.nseg[j] == 1 && g.lo == 0 && g.hi == V::lanes;
  };
  // Non-temporal only where this block writes the whole 64-byte line: a line left partly written
  // (the third ymm of a 3-vector block shares its line with the next block's first) is flushed from
  // its write-combining buffer as a partial write, and a line written partly streamed and partly
  // through the cache is flushed too; either costs more than streaming saves.
  auto whole_line = [&](int j, const float* out) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(out);
    if constexpr (V::lanes * sizeof(float) == 64) {
      return a % 64 == 0;
    } else {
      if (a % (4 * V::lanes) != 0) return false;
      const bool first = a % 64 == 0;
      const int q = first ? j + 1 : j - 1;
      return q >= 0 && q < NV && whole(q) &&
             reinterpret_cast<uintptr_t>(b.seg[q][0].out + yo) ==
                 (first ? a + 4 * V::lanes : a - 4 * V::lanes);
    }
  };
  CONVTUNE_UNROLL for (int j = 0; j < NV; ++j) {
    if (whole(j)) {
      float* out = b.seg[j][0].out + yo;
      if (c.stream && whole_line(j, out)) {
        if constexpr (V::lanes * sizeof(float) == 64) {
          CONVTUNE_UNROLL for (int k = 0; k < OC; ++k) if (k < b.kvalid)
              V::stream(out + k * c.y_k_stride, acc[k][j]);
        } else if (reinterpret_cast<uintptr_t>(out) % 64 == 0) {
          // Both halves of each row's line back to back, so that one write-combining buffer is open
          // at a time, not one per row. whole_line: j + 1 < NV here.
          const int next = j + 1 < NV ? j + 1 : j;
          CONVTUNE_UNROLL for (int k = 0; k < OC; ++k) if (k < b.kvalid) {
            V::stream(out + k * c.y_k_stride, acc[k][j]);
            V::stream(out + k * c.y_k_stride + V::lanes, acc[k][next]);
          }
        }
        continue;  // the second half of a line: stored with the first
      }
      CONVTUNE_UNROLL for (int k = 0; k < OC; ++k) if (k < b.kvalid)
          V::storeu(out + k * c.y_k_stride, acc[k][j]);
      continue;
    }
    for (int sg = 0; sg < b.nseg[j]; ++sg) {
      const Segment& g = b.seg[j][sg];
      CONVTUNE_UNROLL for (int k = 0; k < OC; ++k) if (k < b.kvalid)
          V::store_lanes(g.out + yo + k * c.y_k_stride, g.lo, g.hi, acc[k][j]);
    }
  }
}

template <class V, int OC, int NV, bool ONE_TAP>
void direct_block(const BlockCommon& c, const Block& b) {
  for (int q = 0; q < b.pos_runs; ++q)
    for (int r = 0; r < b.runs; ++r) block_in_run<V, OC, NV, ONE_TAP>(c, b, r, q * b.pos_step);
}

// The kernel for `nv` vectors (1..MaxNV) of an OC block, for each tap specialisation.
template <class V, int OC, int... I>
BlockFn direct_pick(int nv, bool one_tap, std::integer_sequence<int, I...>) {
  BlockFn fn = nullptr;
  ((fn = (nv == I + 1)
             ? (one_tap ? &direct_block<V, OC, I + 1, true> : &direct_block<V, OC, I + 1, false>)
             : fn),
   ...);
  return fn;
}

#undef CONVTUNE_UNROLL

}  // namespace conv::kernels::direct
