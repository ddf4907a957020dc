// The block program of cuda.implicit_gemm (kernels/cuda/implicit_gemm.cu), written as
// __host__ __device__ phases so that tests/test_cuda_index.cpp runs exactly this code on the CPU,
// every thread of a block in turn, phase by phase.
//
// Per group the convolution is the GEMM Y (K/g x N*OH*OW) = W (K/g x C/g*R*S) * B, where B is
// the im2col matrix of the input: B[c*R*S + r*S + s][(n*OH + oh)*OW + ow] =
// x[n][c][oh*sh - pt + r*dh][ow*sw - pl + s*dw] (zero in the padding). B is never materialised:
// each k-step, every thread loads its share of a BK x BN tile of B straight from x through that
// index map (and of a BM x BK tile of W) into registers, then stores them into one of two
// shared-memory buffers while the block computes from the other (double buffering: one
// __syncthreads per k-step). Each thread accumulates a TM x TN register tile of Y; the epilogue
// adds the bias and writes the outputs inside the problem.
#pragma once

#include <cstdint>

#include "cuda/index.hpp"

namespace conv::gpu {

struct IgemmParams {
  ConvShape s;
  int64_t kr;                ///< reduction length C/g * R * S
  int64_t np;                ///< GEMM columns N * OH * OW
  int64_t mblocks, nblocks;  ///< blocks per group along K/g and along N*OH*OW
  int64_t ksteps;            ///< ceil(kr / BK)
};

template <int BM, int BN, int BK, int TM, int TN>
struct IgemmBlock {
  static constexpr int kThreads = (BM / TM) * (BN / TN);
  static constexpr int kA = BM * BK / kThreads;  ///< W elements each thread loads per k-step
  static constexpr int kB = BK * BN / kThreads;  ///< B elements each thread loads per k-step
  static constexpr int kBufFloats = BK * (BM + BN);
  static constexpr int kSmemFloats = 2 * kBufFloats;  ///< two buffers: As[BK][BM], Bs[BK][BN]
  static_assert(BM % TM == 0 && BN % TN == 0, "register tiles divide the block tile");
  static_assert(BM * BK % kThreads == 0 && BK * BN % kThreads == 0, "loads divide evenly");

  struct Pos {
    int64_t g, m0, n0;  ///< group, first output channel within it, first GEMM column
  };
  struct Regs {
    float a[kA];
    float b[kB];
  };

  static IgemmParams make_params(const ConvShape& s) {
    IgemmParams p;
    p.s = s;
    p.kr = s.Cg * s.R * s.S;
    p.np = s.N * s.OH * s.OW;
    p.mblocks = ceil_div(s.Kg, BM);
    p.nblocks = ceil_div(p.np, BN);
    p.ksteps = ceil_div(p.kr, BK);
    return p;
  }

  CT_HD static Pos position(const IgemmParams& p, int64_t bn, int64_t bm, int64_t g) {
    Pos b;
    b.g = g;
    b.m0 = bm * BM;
    b.n0 = bn * BN;
    return b;
  }

  /// B[kk][col] through the im2col map, or 0 outside the problem or in the padding.
  CT_HD static float load_b(const IgemmParams& p, const Pos& b, const float* x, int64_t kk,
                            int64_t col) {
    const ConvShape& s = p.s;
    if (kk >= p.kr || col >= p.np) return 0.0f;
    const int64_t RS = s.R * s.S, c = kk / RS, rs = kk - c * RS, r = rs / s.S, t = rs - r * s.S;
    const int64_t ohw = s.OH * s.OW, n = col / ohw, pix = col - n * ohw, oh = pix / s.OW,
                  ow = pix - oh * s.OW;
    const int64_t ih = oh * s.stride_h - s.pad_top + r * s.dilation_h;
    const int64_t iw = ow * s.stride_w - s.pad_left + t * s.dilation_w;
    if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) return 0.0f;
    return x[((n * s.C + b.g * s.Cg + c) * s.H + ih) * s.W + iw];
  }

  /// Thread `tid` loads its share of the k-step starting at k0 into registers. W elements are
  /// walked with the reduction index fastest (consecutive threads read consecutive weights),
  /// B elements with the GEMM column fastest (consecutive output pixels).
  CT_HD static void load_global(const IgemmParams& p, const Pos& b, int64_t k0, const float* x,
                                const float* w, int tid, Regs& r) {
    const ConvShape& s = p.s;
    CT_UNROLL
    for (int i = 0; i < kA; ++i) {
      const int e = tid + i * kThreads, mm = e / BK, kk = e - mm * BK;
      const int64_t m = b.m0 + mm, k = k0 + kk;
      r.a[i] = (m < s.Kg && k < p.kr) ? w[(b.g * s.Kg + m) * p.kr + k] : 0.0f;
    }
    CT_UNROLL
    for (int i = 0; i < kB; ++i) {
      const int e = tid + i * kThreads, kk = e / BN, nn = e - kk * BN;
      r.b[i] = load_b(p, b, x, k0 + kk, b.n0 + nn);
    }
  }

  /// Thread `tid` stores its registers into buffer `buf` (0 or 1) of `smem`.
  CT_HD static void store_shared(const Regs& r, float* smem, int buf, int tid) {
    float* as = smem + buf * kBufFloats;
    float* bs = as + BK * BM;
    CT_UNROLL
    for (int i = 0; i < kA; ++i) {
      const int e = tid + i * kThreads, mm = e / BK, kk = e - mm * BK;
      as[kk * BM + mm] = r.a[i];
    }
    CT_UNROLL
    for (int i = 0; i < kB; ++i) bs[tid + i * kThreads] = r.b[i];  // [kk][nn], nn fastest
  }

  CT_HD static void zero(float (&acc)[TM][TN]) {
    CT_UNROLL
    for (int i = 0; i < TM; ++i)
      for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
  }

  /// Thread `tid` multiplies buffer `buf` into its TM x TN sums: rows (tid / (BN/TN)) * TM ..,
  /// columns (tid % (BN/TN)) * TN ...
  CT_HD static void compute(const float* smem, int buf, int tid, float (&acc)[TM][TN]) {
    const float* as = smem + buf * kBufFloats;
    const float* bs = as + BK * BM;
    const int tm = tid / (BN / TN), tn = tid - tm * (BN / TN);
    CT_UNROLL
    for (int kk = 0; kk < BK; ++kk) {
      float a[TM], bv[TN];
      CT_UNROLL
      for (int i = 0; i < TM; ++i) a[i] = as[kk * BM + tm * TM + i];
      CT_UNROLL
      for (int j = 0; j < TN; ++j) bv[j] = bs[kk * BN + tn * TN + j];
      CT_UNROLL
      for (int i = 0; i < TM; ++i) {
        CT_UNROLL
        for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * bv[j];
      }
    }
  }

  /// The epilogue: bias + sums into y for the outputs inside the problem.
  CT_HD static void store(const IgemmParams& p, const Pos& b, int tid, const float (&acc)[TM][TN],
                          const float* bias, float* y) {
    const ConvShape& s = p.s;
    const int tm = tid / (BN / TN), tn = tid - tm * (BN / TN);
    const int64_t ohw = s.OH * s.OW;
    CT_UNROLL
    for (int j = 0; j < TN; ++j) {
      const int64_t col = b.n0 + tn * TN + j;
      if (col >= p.np) break;
      const int64_t n = col / ohw, pix = col - n * ohw;
      CT_UNROLL
      for (int i = 0; i < TM; ++i) {
        const int64_t m = b.m0 + tm * TM + i;
        if (m >= s.Kg) break;
        const int64_t k = b.g * s.Kg + m;
        y[(n * s.K + k) * ohw + pix] = acc[i][j] + (bias ? bias[k] : 0.0f);
      }
    }
  }
};

}  // namespace conv::gpu
