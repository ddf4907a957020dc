// Index arithmetic of the CUDA kernels (kernels/cuda/direct.cu, kernels/cuda/im2col_gemm.cu):
// output tiles, the input span (tile + halo) a tile reads through a chunk of kernel taps, how
// much of it fits in shared memory, and the im2col source of a column element. Everything is a
// __host__ __device__ function of plain integers, so tests/test_cuda_index.cpp checks it on the
// CPU against brute force in every build, GPU or not.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define CT_HD __host__ __device__ __forceinline__
#define CT_UNROLL _Pragma("unroll")
#else
#define CT_HD inline
#define CT_UNROLL
#endif

namespace conv::gpu {

/// A convolution's sizes as plain integers (a ConvProblem without its strings), passed to kernels
/// by value. Only top/left padding is needed: bottom/right padding only sets OH/OW.
struct ConvShape {
  int64_t N, C, H, W, K, R, S, OH, OW;
  int64_t stride_h, stride_w, pad_top, pad_left, dilation_h, dilation_w;
  int64_t groups, Cg, Kg;
};

/// From anything with ConvProblem's fields and OH()/OW() (host only).
template <class Problem>
ConvShape shape_of(const Problem& p) {
  return ConvShape{p.N,
                   p.C,
                   p.H,
                   p.W,
                   p.K,
                   p.R,
                   p.S,
                   p.OH(),
                   p.OW(),
                   p.stride_h,
                   p.stride_w,
                   p.pad_top,
                   p.pad_left,
                   p.dilation_h,
                   p.dilation_w,
                   p.groups,
                   p.C / p.groups,
                   p.K / p.groups};
}

CT_HD int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
CT_HD int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

/// One spatial dimension (height or width) of a convolution.
struct Dim {
  int64_t in;        ///< H or W
  int64_t out;       ///< OH or OW
  int64_t kernel;    ///< R or S
  int64_t stride;    ///< >= 1
  int64_t pad;       ///< top or left padding
  int64_t dilation;  ///< >= 1
};

CT_HD Dim dim_h(const ConvShape& s) {
  return Dim{s.H, s.OH, s.R, s.stride_h, s.pad_top, s.dilation_h};
}
CT_HD Dim dim_w(const ConvShape& s) {
  return Dim{s.W, s.OW, s.S, s.stride_w, s.pad_left, s.dilation_w};
}

/// Input coordinate output `o` reads through kernel tap `t`; outside [0, in) it reads padding.
CT_HD int64_t input_coord(const Dim& d, int64_t o, int64_t t) {
  return o * d.stride - d.pad + t * d.dilation;
}

/// What one thread block stages along one dimension for a chunk of `taps` consecutive kernel taps
/// starting at tap t0, for `tile` consecutive outputs starting at o0: output o0 + i through tap
/// t0 + j reads staged slot i * out_step + j * tap_step (< count), which holds the input at
/// coordinate base + slot * in_step.
///
/// With several taps the slots are the contiguous input range the chunk reads (tile + halo; taps
/// of neighbouring outputs overlap). With one tap only the `tile` inputs actually read are
/// staged, `stride` apart, so a huge stride or dilation never needs a huge span.
struct Span {
  int64_t base;
  int64_t in_step;
  int out_step;
  int tap_step;
  int count;
};

/// Slots a chunk of `taps` taps needs for `tile` outputs (see Span); may be huge (the planner
/// compares it with its budget before narrowing).
CT_HD int64_t span_count(const Dim& d, int64_t tile, int64_t taps) {
  return taps <= 1 ? tile : (tile - 1) * d.stride + (taps - 1) * d.dilation + 1;
}

/// The span of outputs [o0, o0 + tile) through taps [t0, t0 + taps); taps >= 1 and the count must
/// fit an int (the stage planner guarantees it).
CT_HD Span make_span(const Dim& d, int64_t o0, int64_t t0, int tile, int taps) {
  Span s;
  s.base = input_coord(d, o0, t0);
  s.count = static_cast<int>(span_count(d, tile, taps));
  if (taps <= 1) {
    s.in_step = d.stride;
    s.out_step = 1;
    s.tap_step = 0;
  } else {
    s.in_step = 1;
    s.out_step = static_cast<int>(d.stride);
    s.tap_step = static_cast<int>(d.dilation);
  }
  return s;
}

/// How the direct kernel walks the reduction: `taps_h` kernel rows x `taps_w` kernel columns of
/// `channels` input channels per shared-memory stage. `floats` bounds what one stage stages:
/// channels x (input span rows x span columns + kpt x taps_h x taps_w weights).
struct StagePlan {
  int taps_h, taps_w, channels;
  int floats;
};

/// Shared floats per input channel of a stage of th x tw taps, or budget + 1 when it exceeds the
/// budget (computed without overflow for any problem size).
CT_HD int64_t stage_floats_per_channel(const Dim& h, const Dim& w, int tile_h, int tile_w, int kpt,
                                       int64_t th, int64_t tw, int64_t budget) {
  const int64_t ch = span_count(h, tile_h, th), cw = span_count(w, tile_w, tw);
  if (ch > budget || cw > budget || th > budget || tw > budget) return budget + 1;
  const int64_t f = ch * cw + kpt * th * tw;
  return f > budget ? budget + 1 : f;
}

/// The largest stages that fit `budget` floats: as many kernel rows as fit with all kernel
/// columns, else one row and as many columns as fit; then as many channels (<= max_channels, <=
/// Cg) as fit. Requires tile_h * tile_w + kpt <= budget (one tap always fits).
CT_HD StagePlan plan_stage(const Dim& h, const Dim& w, int tile_h, int tile_w, int kpt, int64_t Cg,
                           int64_t budget, int max_channels) {
  int64_t th = 1, tw = 1;
  auto fits = [&](int64_t a, int64_t b) {
    return stage_floats_per_channel(h, w, tile_h, tile_w, kpt, a, b, budget) <= budget;
  };
  if (fits(1, w.kernel)) {
    tw = w.kernel;
    int64_t lo = 1, hi = h.kernel;  // fits(lo, tw) holds; find the largest such row count
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      if (fits(mid, tw))
        lo = mid;
      else
        hi = mid - 1;
    }
    th = lo;
  } else {
    int64_t lo = 1, hi = w.kernel;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      if (fits(1, mid))
        lo = mid;
      else
        hi = mid - 1;
    }
    tw = lo;
  }
  const int64_t per = stage_floats_per_channel(h, w, tile_h, tile_w, kpt, th, tw, budget);
  int64_t c = budget / per;
  c = min64(c, min64(Cg, max_channels));
  if (c < 1) c = 1;
  StagePlan p;
  p.taps_h = static_cast<int>(th);
  p.taps_w = static_cast<int>(tw);
  p.channels = static_cast<int>(c);
  p.floats = static_cast<int>(c * per);
  return p;
}

/// Top-left output of tile number `tile` in a grid of tiles_w tiles per row.
CT_HD void tile_origin(int64_t tile, int64_t tiles_w, int tile_h, int tile_w, int64_t* oh0,
                       int64_t* ow0) {
  *oh0 = tile / tiles_w * tile_h;
  *ow0 = tile % tiles_w * tile_w;
}

/// im2col of one image (all groups): element `idx` of the (C*R*S) x (OH*OW) column matrix (row
/// c*R*S + r*S + s, column oh*OW + ow) copies x[c][ih][iw] of that image; returns its offset
/// c*H*W + ih*W + iw, or -1 where the tap reads padding. `I` is int64_t, or int32_t where
/// im2col_fits_int32(s) (32-bit division is several times cheaper on a GPU).
template <class I>
CT_HD I im2col_source(const ConvShape& s, I idx) {
  const I OW = static_cast<I>(s.OW), ohw = static_cast<I>(s.OH * s.OW);
  const I S = static_cast<I>(s.S), RS = static_cast<I>(s.R * s.S);
  const I row = idx / ohw, col = idx - row * ohw;
  const I c = row / RS, rs = row - c * RS;
  const I r = rs / S, t = rs - r * S;
  const I oh = col / OW, ow = col - oh * OW;
  const I ih = oh * static_cast<I>(s.stride_h) - static_cast<I>(s.pad_top) +
               r * static_cast<I>(s.dilation_h);
  const I iw = ow * static_cast<I>(s.stride_w) - static_cast<I>(s.pad_left) +
               t * static_cast<I>(s.dilation_w);
  if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) return -1;
  return (c * static_cast<I>(s.H) + ih) * static_cast<I>(s.W) + iw;
}

/// Whether every intermediate of im2col_source<int32_t> fits: the column matrix, the image and
/// one image's output have at most 2^30 elements (so a grid-stride index plus the grid never
/// overflows), and so do the padded rows/columns plus the dilated kernel.
inline bool im2col_fits_int32(const ConvShape& s) {
  const int64_t lim = int64_t{1} << 30;
  const int64_t span_h = s.H + 2 * s.pad_top + (s.OH - 1) * s.stride_h + s.R * s.dilation_h;
  const int64_t span_w = s.W + 2 * s.pad_left + (s.OW - 1) * s.stride_w + s.S * s.dilation_w;
  return s.C * s.R * s.S * s.OH * s.OW <= lim && s.C * s.H * s.W <= lim && span_h <= lim &&
         span_w <= lim && s.K * s.OH * s.OW <= lim;
}

/// The cublasSgemmStridedBatched arguments of cuda.im2col_gemm for one image: batch = groups,
/// column-major C (m x n) = A (m x k) * B (k x n) with A = the group's rows of the column matrix
/// (or of x for a 1x1 problem), B = its weights, C = its outputs. Row-major Y_g (K/g x OH*OW) =
/// W_g (K/g x C/g*R*S) * col_g (C/g*R*S x OH*OW) is, read column-major, Y_g^T = col_g^T * W_g^T:
/// no transposes. Sizes must fit an int (the algorithm's applicable() checks).
struct GemmArgs {
  int m, n, k;                           ///< OH*OW, K/g, C/g*R*S
  int lda, ldb, ldc;                     ///< OH*OW, C/g*R*S, OH*OW
  int64_t stride_a, stride_b, stride_c;  ///< per group
  int batch;                             ///< groups
};

CT_HD GemmArgs im2col_gemm_args(const ConvShape& s) {
  const int64_t ohw = s.OH * s.OW, crs = s.Cg * s.R * s.S;
  GemmArgs g;
  g.m = static_cast<int>(ohw);
  g.n = static_cast<int>(s.Kg);
  g.k = static_cast<int>(crs);
  g.lda = g.m;
  g.ldb = g.k;
  g.ldc = g.m;
  g.stride_a = crs * ohw;
  g.stride_b = s.Kg * crs;
  g.stride_c = s.Kg * ohw;
  g.batch = static_cast<int>(s.groups);
  return g;
}

}  // namespace conv::gpu
