// The per-thread programs of cuda.winograd (kernels/cuda/winograd.cu), __host__ __device__ so
// that tests/test_cuda_index.cpp runs exactly this code on the CPU, thread by thread, for whole
// problems. The 1D transforms are cpu.winograd's (kernels/cpu/winograd/winograd_transforms.hpp, T =
// float here), and so is the tiling (winograd::make_geometry's core and tile grid), so that
// cuda.winograd shares cpu.winograd's accuracy contract.
//
// Layouts (floats): with T = N * TH * TW tiles per group and P = alpha^2 transform points,
//   V (transformed input)   [g][xi][c][t]   c < C/g
//   U (transformed weights) [g][xi][k][c]   k < K/g
//   M (products)            [g][xi][k][t]
// so that one cublasSgemmStridedBatched over the groups * P (group, point) pairs computes
// M = U V with constant strides (wino_gemm_args).
#pragma once

#include <cstdint>

#include <algorithm>

#include "conv/problem.hpp"
#include "cpu/winograd/winograd.hpp"
#include "cpu/winograd/winograd_transforms.hpp"
#include "cuda/index.hpp"

namespace conv::gpu {

/// cuda.winograd's launch parameters, from cpu.winograd's Geometry (host).
struct WinoParams {
  ConvShape s;
  int m, alpha, points;
  int64_t row_lo, row_end, col_lo, col_end;  ///< the core (outputs outside it are the bias)
  int64_t TH, TW;                            ///< tiles per image
  int64_t T;                                 ///< N * TH * TW
};

/// The parameters of problem `p` (3x3, stride 1, dilation 1) for F(m x m, 3 x 3): cpu.winograd's
/// core and tile grid (host).
inline WinoParams make_wino_params(const ConvProblem& prob, int m) {
  const kernels::winograd::Geometry g = kernels::winograd::make_geometry(prob, m);
  WinoParams p;
  p.s = shape_of(prob);
  p.m = m;
  p.alpha = m + 2;
  p.points = p.alpha * p.alpha;
  p.row_lo = g.row_lo;
  p.row_end = g.row_end;
  p.col_lo = g.col_lo;
  p.col_end = g.col_end;
  p.TH = std::max<int64_t>(0, g.TH);
  p.TW = std::max<int64_t>(0, g.TW);
  p.T = prob.N * p.TH * p.TW;
  return p;
}

/// Thread `t` of the input transform of channel `c` (global) : tile t = (n * TH + th) * TW + tw
/// of image n; writes V[g][xi][c % Cg][t] for every point xi. Outside the image reads zero.
template <int M>
CT_HD void wino_input_tile(const WinoParams& p, const float* x, int64_t c, int64_t t, float* v) {
  constexpr int A = M + 2;
  const ConvShape& s = p.s;
  const int64_t tw = t % p.TW, th = t / p.TW % p.TH, n = t / (p.TW * p.TH);
  const int64_t ih0 = p.row_lo + th * M - s.pad_top, iw0 = p.col_lo + tw * M - s.pad_left;
  const float* xc = x + (n * s.C + c) * s.H * s.W;
  float d[A][A];
  CT_UNROLL
  for (int i = 0; i < A; ++i) {
    CT_UNROLL
    for (int j = 0; j < A; ++j) {
      const int64_t ih = ih0 + i, iw = iw0 + j;
      d[i][j] = (ih >= 0 && ih < s.H && iw >= 0 && iw < s.W) ? xc[ih * s.W + iw] : 0.0f;
    }
  }
  // B^T d B: the 1D transform along each row, then along each column.
  float r[A][A], col[A], out[A];
  CT_UNROLL
  for (int i = 0; i < A; ++i) kernels::winograd::input_1d<M, float>(d[i], r[i]);
  const int64_t g = c / s.Cg, cg = c - g * s.Cg, pstride = s.Cg * p.T;
  float* vb = v + g * p.points * pstride + cg * p.T + t;
  CT_UNROLL
  for (int j = 0; j < A; ++j) {
    CT_UNROLL
    for (int i = 0; i < A; ++i) col[i] = r[i][j];
    kernels::winograd::input_1d<M, float>(col, out);
    CT_UNROLL
    for (int i = 0; i < A; ++i) vb[(i * A + j) * pstride] = out[i];
  }
}

/// Thread (k, c) of the weight transform (k global, c < C/g): U[g][xi][k % Kg][c] = G w G^T.
template <int M>
CT_HD void wino_weight(const ConvShape& s, const float* w, int64_t k, int64_t c, float* u) {
  constexpr int A = M + 2;
  const float* wk = w + (k * s.Cg + c) * 9;
  float r[3][A], col[3], out[A];
  CT_UNROLL
  for (int i = 0; i < 3; ++i) kernels::winograd::weight_1d<M, float>(wk + 3 * i, r[i]);
  const int64_t g = k / s.Kg, kg = k - g * s.Kg, pstride = s.Kg * s.Cg;
  float* ub = u + g * A * A * pstride + kg * s.Cg + c;
  CT_UNROLL
  for (int j = 0; j < A; ++j) {
    CT_UNROLL
    for (int i = 0; i < 3; ++i) col[i] = r[i][j];
    kernels::winograd::weight_1d<M, float>(col, out);
    CT_UNROLL
    for (int i = 0; i < A; ++i) ub[(i * A + j) * pstride] = out[i];
  }
}

/// Thread (k, t) of the output transform (k global): A^T M A + bias into the m x m outputs of
/// tile t that lie inside the core.
template <int M>
CT_HD void wino_output_tile(const WinoParams& p, const float* mb, const float* bias, int64_t k,
                            int64_t t, float* y) {
  constexpr int A = M + 2;
  const ConvShape& s = p.s;
  const int64_t g = k / s.Kg, kg = k - g * s.Kg, pstride = s.Kg * p.T;
  const float* mk = mb + g * p.points * pstride + kg * p.T + t;
  float r[A][M], col[A], out[M];
  CT_UNROLL
  for (int i = 0; i < A; ++i) {
    float row[A];
    CT_UNROLL
    for (int j = 0; j < A; ++j) row[j] = mk[(i * A + j) * pstride];
    kernels::winograd::output_1d<M, float>(row, r[i]);
  }
  const int64_t tw = t % p.TW, th = t / p.TW % p.TH, n = t / (p.TW * p.TH);
  const int64_t oh0 = p.row_lo + th * M, ow0 = p.col_lo + tw * M;
  const float b = bias ? bias[k] : 0.0f;
  float* yk = y + (n * s.K + k) * s.OH * s.OW;
  CT_UNROLL
  for (int j = 0; j < M; ++j) {
    CT_UNROLL
    for (int i = 0; i < A; ++i) col[i] = r[i][j];
    kernels::winograd::output_1d<M, float>(col, out);
    const int64_t ow = ow0 + j;
    if (ow >= p.col_end) continue;
    CT_UNROLL
    for (int i = 0; i < M; ++i) {
      const int64_t oh = oh0 + i;
      if (oh < p.row_end) yk[oh * s.OW + ow] = out[i] + b;
    }
  }
}

/// Output `o` (NCHW index): outside the core it sees only padding and is the bias; returns
/// whether it did write (inside the core the output transform writes it).
CT_HD bool wino_border(const WinoParams& p, const float* bias, int64_t o, float* y) {
  const ConvShape& s = p.s;
  const int64_t ow = o % s.OW, oh = o / s.OW % s.OH, k = o / (s.OW * s.OH) % s.K;
  if (oh >= p.row_lo && oh < p.row_end && ow >= p.col_lo && ow < p.col_end) return false;
  y[o] = bias ? bias[k] : 0.0f;
  return true;
}

/// The batched GEMM M = U V over (group, point) pairs, column-major as cuBLAS reads it:
/// M^T (T x Kg) = V^T (T x Cg) * U^T (Cg x Kg).
CT_HD GemmArgs wino_gemm_args(const WinoParams& p) {
  GemmArgs a;
  a.m = static_cast<int>(p.T);
  a.n = static_cast<int>(p.s.Kg);
  a.k = static_cast<int>(p.s.Cg);
  a.lda = a.m;
  a.ldb = a.k;
  a.ldc = a.m;
  a.stride_a = p.s.Cg * p.T;
  a.stride_b = p.s.Kg * p.s.Cg;
  a.stride_c = p.s.Kg * p.T;
  a.batch = static_cast<int>(p.s.groups * p.points);
  return a;
}

}  // namespace conv::gpu
