// The block program of cuda.direct (kernels/cuda/direct.cu), written as __host__ __device__
// phases so that tests/test_cuda_index.cpp can run exactly this code on the CPU (every thread of
// a block in turn, phase by phase) and compare it with the float64 reference.
//
// One thread block computes a TH x TW tile of output pixels for KPT consecutive output channels
// of one group and one image; each thread owns one pixel and keeps its KPT sums in registers.
// The reduction over (input channel, kernel row, kernel column) is walked in stages (StagePlan):
// each stage copies the input span of its channels and taps (tile + halo, zero where padding) and
// the matching KPT filter slices into shared memory, then every thread accumulates from there.
#pragma once

#include <cstdint>

#include "cuda/index.hpp"

namespace conv::gpu {

/// Everything a cuda.direct launch needs, computed on the host by make_direct_params().
struct DirectParams {
  ConvShape s;
  Dim h, w;
  int64_t tiles_h, tiles_w;  ///< output tiles per image
  int64_t kblocks;           ///< blocks of KPT output channels per group
  StagePlan plan;
};

template <int TH, int TW, int KPT>
struct DirectBlock {
  static constexpr int kThreads = TH * TW;
  /// Shared memory per block, in floats.
  static constexpr int kBudget = 8192;
  static constexpr int kMaxChannels = 8;
  /// Floats the weights may start after the input (rounded up to a multiple of 4).
  static constexpr int kAlign = 4;
  static_assert(TH * TW + KPT <= kBudget, "one kernel tap of one channel must fit");

  /// Which outputs a block computes.
  struct Pos {
    int64_t n, g, k0;  ///< image, group, first output channel within the group
    int64_t oh0, ow0;  ///< top-left output pixel of the tile
  };

  /// One stage of the reduction: channels [c0, c0 + cb) of the group, kernel rows [r0, r0 + rt),
  /// kernel columns [s0, s0 + st). Shared memory holds the input first (cb x h.count x w.count),
  /// then, from the next multiple of 4 floats (weights_offset), the weights as cb x rt x st x KPT:
  /// the KPT weights one input value meets are adjacent, read as float4 on the GPU.
  struct Stage {
    Span h, w;
    int64_t c0, r0, s0;
    int cb, rt, st;
  };

  static DirectParams make_params(const ConvShape& s) {
    DirectParams p;
    p.s = s;
    p.h = dim_h(s);
    p.w = dim_w(s);
    p.tiles_h = ceil_div(s.OH, TH);
    p.tiles_w = ceil_div(s.OW, TW);
    p.kblocks = ceil_div(s.Kg, KPT);
    p.plan = plan_stage(p.h, p.w, TH, TW, KPT, s.Cg, kBudget - kAlign, kMaxChannels);
    p.plan.floats += kAlign;
    return p;
  }

  /// Block (tile, gk = group * kblocks + k block, n).
  CT_HD static Pos position(const DirectParams& p, int64_t tile, int64_t gk, int64_t n) {
    Pos b;
    b.n = n;
    b.g = gk / p.kblocks;
    b.k0 = (gk - b.g * p.kblocks) * KPT;
    tile_origin(tile, p.tiles_w, TH, TW, &b.oh0, &b.ow0);
    return b;
  }

  CT_HD static Stage stage(const DirectParams& p, const Pos& b, int64_t c0, int64_t r0,
                           int64_t s0) {
    Stage st;
    st.c0 = c0;
    st.r0 = r0;
    st.s0 = s0;
    st.cb = static_cast<int>(min64(p.plan.channels, p.s.Cg - c0));
    st.rt = static_cast<int>(min64(p.plan.taps_h, p.s.R - r0));
    st.st = static_cast<int>(min64(p.plan.taps_w, p.s.S - s0));
    st.h = make_span(p.h, b.oh0, r0, TH, st.rt);
    st.w = make_span(p.w, b.ow0, s0, TW, st.st);
    return st;
  }

  /// Where the weights start after `nx` staged inputs: 16-byte aligned for float4 reads.
  CT_HD static int weights_offset(int nx) { return (nx + kAlign - 1) / kAlign * kAlign; }

  /// Thread `tid`'s share of copying one stage into shared memory `smem` (the threads of a block
  /// together write every staged float: zero for padding and for output channels >= K/g).
  CT_HD static void load(const DirectParams& p, const Pos& b, const Stage& st, const float* x,
                         const float* w, float* smem, int tid) {
    const ConvShape& s = p.s;
    const int wc = st.w.count, plane = st.h.count * wc, nx = st.cb * plane;
    const float* xb = x + (b.n * s.C + b.g * s.Cg + st.c0) * s.H * s.W;
    for (int i = tid; i < nx; i += kThreads) {
      const int cc = i / plane, rem = i - cc * plane, hs = rem / wc, ws = rem - hs * wc;
      const int64_t ih = st.h.base + hs * st.h.in_step, iw = st.w.base + ws * st.w.in_step;
      smem[i] =
          (ih >= 0 && ih < s.H && iw >= 0 && iw < s.W) ? xb[(cc * s.H + ih) * s.W + iw] : 0.0f;
    }
    // Walked in global order (kernel column fastest) so that neighbouring threads read
    // neighbouring weights; stored with the output channel fastest.
    const int taps = st.rt * st.st, wk = st.cb * taps, nw = KPT * wk;
    float* sw = smem + weights_offset(nx);
    for (int i = tid; i < nw; i += kThreads) {
      const int k = i / wk, j = i - k * wk, cc = j / taps, rs = j - cc * taps;
      const int rr = rs / st.st, ss = rs - rr * st.st;
      const int64_t kk = b.k0 + k;
      sw[j * KPT + k] =
          kk < s.Kg
              ? w[(((b.g * s.Kg + kk) * s.Cg + st.c0 + cc) * s.R + st.r0 + rr) * s.S + st.s0 + ss]
              : 0.0f;
    }
  }

  /// Bias (or zero) into the sums of output channels k0 .. k0 + KPT - 1.
  CT_HD static void init(const DirectParams& p, const Pos& b, const float* bias,
                         float (&acc)[KPT]) {
#ifdef __CUDACC__
#pragma unroll
#endif
    for (int k = 0; k < KPT; ++k)
      acc[k] = (bias && b.k0 + k < p.s.Kg) ? bias[b.g * p.s.Kg + b.k0 + k] : 0.0f;
  }

  /// Thread (ty, tx) adds one stage's products to its sums. Threads whose pixel lies outside the
  /// output still read staged slots inside the span (count covers the whole tile) and never store.
  CT_HD static void accumulate(const Stage& st, const float* smem, int ty, int tx,
                               float (&acc)[KPT]) {
    const int wc = st.w.count, plane = st.h.count * wc, taps = st.rt * st.st;
    const float* sw = smem + weights_offset(st.cb * plane);
    const int row0 = ty * st.h.out_step, col0 = tx * st.w.out_step;
    for (int cc = 0; cc < st.cb; ++cc) {
      for (int rr = 0; rr < st.rt; ++rr) {
        const float* xr = smem + cc * plane + (row0 + rr * st.h.tap_step) * wc + col0;
        const float* wr = sw + (cc * taps + rr * st.st) * KPT;
        for (int ss = 0; ss < st.st; ++ss) {
          const float v = xr[ss * st.w.tap_step];
          const float* wt = wr + ss * KPT;
#ifdef __CUDA_ARCH__
          if constexpr (KPT % 4 == 0) {
            // One 16-byte shared load (a broadcast: every thread reads the same address) per four
            // weights instead of four.
#pragma unroll
            for (int q = 0; q < KPT / 4; ++q) {
              const float4 f = reinterpret_cast<const float4*>(wt)[q];
              acc[4 * q] += v * f.x;
              acc[4 * q + 1] += v * f.y;
              acc[4 * q + 2] += v * f.z;
              acc[4 * q + 3] += v * f.w;
            }
          } else
#endif
          {
#ifdef __CUDACC__
#pragma unroll
#endif
            for (int k = 0; k < KPT; ++k) acc[k] += v * wt[k];
          }
        }
      }
    }
  }

  CT_HD static void store(const DirectParams& p, const Pos& b, int ty, int tx,
                          const float (&acc)[KPT], float* y) {
    const ConvShape& s = p.s;
    const int64_t oh = b.oh0 + ty, ow = b.ow0 + tx;
    if (oh >= s.OH || ow >= s.OW) return;
#ifdef __CUDACC__
#pragma unroll
#endif
    for (int k = 0; k < KPT; ++k) {
      const int64_t kk = b.k0 + k;
      if (kk < s.Kg) y[((b.n * s.K + b.g * s.Kg + kk) * s.OH + oh) * s.OW + ow] = acc[k];
    }
  }
};

}  // namespace conv::gpu
