// The per-thread index maps of cuda.fft (kernels/cuda/fft.cu), __host__ __device__ so that
// tests/test_cuda_index.cpp runs exactly this code on the CPU (with a naive DFT standing in for
// cuFFT). The polyphase split and the overlap-save tiling are cpu.fft's (fft::make_geometry):
// a stride-s convolution is the sum over the phases (pa, pb) of stride-1 correlations of the
// phase images X_pa[i] = x_pad[i * s + (pa * d) % s] with the sub-kernels of the taps r with
// r % (s / gcd(s, d)) == pa, tap r at sub-kernel row r * d / s; dilation is zero insertion.
// The phases become reduction channels c' = c * P + pa * Pb + pb (C' = C/g * P).
//
// Layouts, with a square T x T transform, Tc = T/2 + 1 complex columns, F = T * Tc frequencies
// f = u * Tc + v, J = N * TH * TW tiles per group (column j = (n * TH + th) * TW + tw):
//   Xr  real input tiles   [g][c'][j][T][T]   batch bx = (g * C' + c') * J + j
//   Wr  real kernels       [g][k][c'][T][T]   batch bw = (g * K/g + k) * C' + c', flipped:
//                                             element z holds tap (T - z) % T (correlation as
//                                             a circular convolution: no conjugate needed)
//   Xf, Wf, Yf spectra, frequency-major: element f of batch b at f * batches + b, so that per
//       (f, g) the complex GEMM Yf = Wf Xf has constant strides (fft_gemm_args)
//   Yf  [f][g][k][j]      Yr real output tiles [k_global * J + j][T][T]
// cuFFT's inverse is unnormalised: the epilogue scales by 1 / T^2, crops the mh x mw outputs of
// each tile that do not wrap around, adds the bias, and writes the bias alone where the receptive
// field holds no input pixel (as cpu.fft, so that rounding never lands there).
#pragma once

#include <algorithm>
#include <cstdint>

#include "conv/problem.hpp"
#include "cpu/fft/fft.hpp"
#include "cuda/index.hpp"

namespace conv::gpu {

/// A complex float, layout-compatible with cufftComplex (float2).
struct Cf {
  float x, y;
};

struct FftParams {
  ConvShape s;
  int64_t T, Tc, F;
  int64_t ph, pw, Pa, Pb, P;  ///< phase periods and kept phases (cpu.fft's Geometry)
  int64_t Rp, Sp;             ///< sub-kernel size
  int64_t mh, mw;             ///< outputs per tile: T - Rp + 1, T - Sp + 1
  int64_t TH, TW, J;          ///< tiles per image, tiles per group (N * TH * TW)
  int64_t Cp;                 ///< C/g * P
};

/// Value of element `i` of Xr (real input tiles).
CT_HD float fft_input_value(const FftParams& p, const float* x, int64_t i) {
  const ConvShape& s = p.s;
  const int64_t TT = p.T * p.T, b = i / TT, e = i - b * TT, ti = e / p.T, tj = e - ti * p.T;
  const int64_t j = b % p.J, gc = b / p.J, cp = gc % p.Cp, g = gc / p.Cp;
  const int64_t c = cp / p.P, ph_idx = cp - c * p.P, pa = ph_idx / p.Pb, pb = ph_idx - pa * p.Pb;
  const int64_t tw = j % p.TW, th = j / p.TW % p.TH, n = j / (p.TW * p.TH);
  const int64_t I = th * p.mh + ti, Jc = tw * p.mw + tj;  // phase-image row and column
  const int64_t ih = I * s.stride_h + (pa * s.dilation_h) % s.stride_h - s.pad_top;
  const int64_t iw = Jc * s.stride_w + (pb * s.dilation_w) % s.stride_w - s.pad_left;
  if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) return 0.0f;
  return x[((n * s.C + g * s.Cg + c) * s.H + ih) * s.W + iw];
}

/// The kernel tap of one dimension at sub-kernel position q of phase `pa`, or -1 when none:
/// r = pa + ph * m with r * d / s == q.
CT_HD int64_t fft_tap(int64_t q, int64_t pa, int64_t ph, int64_t kernel, int64_t stride,
                      int64_t dilation) {
  const int64_t q0 = pa * dilation / stride, step = ph * dilation / stride;  // step = d/gcd(s,d)
  if (q < q0 || (q - q0) % step != 0) return -1;
  const int64_t r = pa + ph * ((q - q0) / step);
  return r < kernel ? r : -1;
}

/// Value of element `i` of Wr (real, flipped sub-kernels) from KCRS weights `w`.
CT_HD float fft_weight_value(const FftParams& p, const float* w, int64_t i) {
  const ConvShape& s = p.s;
  const int64_t TT = p.T * p.T, b = i / TT, e = i - b * TT, zi = e / p.T, zj = e - zi * p.T;
  const int64_t cp = b % p.Cp, k = b / p.Cp;  // k global (g * Kg + k within the group)
  const int64_t c = cp / p.P, ph_idx = cp - c * p.P, pa = ph_idx / p.Pb, pb = ph_idx - pa * p.Pb;
  const int64_t q = (p.T - zi) % p.T, q2 = (p.T - zj) % p.T;
  if (q >= p.Rp || q2 >= p.Sp) return 0.0f;
  const int64_t r = fft_tap(q, pa, p.ph, s.R, s.stride_h, s.dilation_h);
  const int64_t t = fft_tap(q2, pb, p.pw, s.S, s.stride_w, s.dilation_w);
  if (r < 0 || t < 0) return 0.0f;
  return w[((k * s.Cg + c) * s.R + r) * s.S + t];
}

/// Depthwise (C/g == K/g == 1): Yf[f][g][j] = sum over phases of Xf[f][g][p][j] * Wf[f][g][p];
/// element `i` = (f * groups + g) * J + j.
CT_HD void fft_depthwise_product(const FftParams& p, const Cf* xf, const Cf* wf, Cf* yf,
                                 int64_t i) {
  const int64_t j = i % p.J, fg = i / p.J;
  float re = 0.0f, im = 0.0f;
  for (int64_t c = 0; c < p.P; ++c) {
    const Cf a = xf[(fg * p.P + c) * p.J + j], b = wf[fg * p.P + c];
    re += a.x * b.x - a.y * b.y;
    im += a.x * b.y + a.y * b.x;
  }
  yf[i] = Cf{re, im};
}

/// Whether output `o` of a dimension reads at least one input pixel through some tap.
CT_HD bool fft_alive(const Dim& d, int64_t o) {
  const int64_t lo = o * d.stride - d.pad;
  const int64_t r0 = lo >= 0 ? 0 : ceil_div(-lo, d.dilation);
  return r0 < d.kernel && lo + r0 * d.dilation < d.in;
}

/// Output `o` (NCHW index) from the real output tiles `yr` (unnormalised inverse transforms).
CT_HD float fft_output_value(const FftParams& p, const float* yr, const float* bias, int64_t o) {
  const ConvShape& s = p.s;
  const int64_t ow = o % s.OW, oh = o / s.OW % s.OH, nk = o / (s.OW * s.OH), k = nk % s.K,
                n = nk / s.K;
  const float b = bias ? bias[k] : 0.0f;
  if (!fft_alive(dim_h(s), oh) || !fft_alive(dim_w(s), ow)) return b;
  const int64_t th = oh / p.mh, tw = ow / p.mw;
  const int64_t j = (n * p.TH + th) * p.TW + tw;
  const float v = yr[(k * p.J + j) * p.T * p.T + (oh - th * p.mh) * p.T + (ow - tw * p.mw)];
  return v * (1.0f / static_cast<float>(p.T * p.T)) + b;
}

/// The cublasCgemmStridedBatched arguments over the F * groups (frequency, group) pairs,
/// column-major: Yf^T (J x K/g) = Xf^T (J x C') * Wf^T (C' x K/g).
CT_HD GemmArgs fft_gemm_args(const FftParams& p) {
  GemmArgs a;
  a.m = static_cast<int>(p.J);
  a.n = static_cast<int>(p.s.Kg);
  a.k = static_cast<int>(p.Cp);
  a.lda = a.m;
  a.ldb = a.k;
  a.ldc = a.m;
  a.stride_a = p.Cp * p.J;
  a.stride_b = p.s.Kg * p.Cp;
  a.stride_c = p.s.Kg * p.J;
  a.batch = static_cast<int>(p.F * p.s.groups);
  return a;
}

/// Smallest n' >= n of the form 2^a 3^b 5^c 7^d (sizes cuFFT transforms fastest).
inline int64_t fft_nice_size(int64_t n) {
  for (int64_t m = n < 2 ? 2 : n;; ++m) {
    int64_t r = m;
    for (int64_t f : {2, 3, 5, 7})
      while (r % f == 0) r /= f;
    if (r == 1) return m;
  }
}

/// Transform size of cuda.fft's "full" config: the whole phase image plus the sub-kernel, at
/// least Rp + 1 (host).
inline int64_t fft_full_size(const ConvProblem& p) {
  const int64_t Rp = (p.R - 1) * p.dilation_h / p.stride_h + 1;
  const int64_t Sp = (p.S - 1) * p.dilation_w / p.stride_w + 1;
  return fft_nice_size(std::max({p.OH() + Rp - 1, p.OW() + Sp - 1, Rp + 1, Sp + 1}));
}

/// cpu.fft's geometry (polyphase split, overlap-save tiling) for a T x T transform; throws
/// conv::Error ("config: ...") when the sub-kernel does not fit (host).
inline kernels::fft::Geometry fft_cpu_geometry(const ConvProblem& p, int64_t T) {
  kernels::fft::Config c;
  c.t = static_cast<int>(T);
  c.lanes = 8;
  return kernels::fft::make_geometry(p, c);
}

inline FftParams make_fft_params(const ConvProblem& p, int64_t T) {
  const kernels::fft::Geometry g = fft_cpu_geometry(p, T);
  FftParams q;
  q.s = shape_of(p);
  q.T = T;
  q.Tc = T / 2 + 1;
  q.F = T * q.Tc;
  q.ph = g.ph, q.pw = g.pw, q.Pa = g.Pa, q.Pb = g.Pb, q.P = g.P;
  q.Rp = g.Rp, q.Sp = g.Sp, q.mh = g.mh, q.mw = g.mw, q.TH = g.TH, q.TW = g.TW;
  q.J = p.N * q.TH * q.TW;
  q.Cp = p.Cg() * q.P;
  return q;
}

}  // namespace conv::gpu
