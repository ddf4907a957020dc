// cpu.fft's error model: the per-output tile term of the error scale and the bound that goes with
// it (Algorithm::error_bound / add_error_scale). Derivation:
//
// An output of an overlap-save tile is one entry of (1/N) F* (sum_c' F x_c' .* F h_c'), N = t^2,
// c' = (input channel, polyphase phase), x_c' the t x t phase tile, h_c' the sub-kernel. By
// Higham ("Accuracy and Stability of Numerical Algorithms", 2nd ed., Thm 24.2) a computed
// radix-2/4 FFT satisfies ||fl(F v) - F v||_2 <= log2(N) eta ||F v||_2 / (1 - log2(N) eta) with
// eta = mu + gamma_4 (sqrt(2) + mu) ~ 6.7 u for accurately computed twiddles (mu ~ u). The
// errors of the three transforms on each path (input, kernel, inverse) reach the output through
// Parseval: a 2-norm error e of a spectrum becomes e / sqrt(N) in the tile's outputs, spread over
// its N entries. With ||F x||_2 = sqrt(N) ||x||_2, |F h| <= ||h||_1 and, for the inverse, the
// tile's outputs bounded by Young's inequality ||x * h||_2 <= ||x||_2 ||h||_1, every output of the
// tile carries an error of about
//     3 log2(N) eta * sum_c' rms(x_c') ||h_c'||_1,   rms(x_c') = ||x_c'||_2 / t,
// plus the rounding of the per-frequency channel sum (sqrt(C') u, probabilistic as in Higham &
// Mary 2019) and of the bias (u). So:
//   tile term  T_o = sum_c (||x over o's tiles, channel c||_2 / t) * ||w_kc||_1, where "o's tiles"
//                is the union of every t x t tile that can produce o (phase rows oh-mh+1 .. oh+t-1,
//                i.e. padded input rows [(oh-mh+1) s_h, (oh+t) s_h), likewise columns): a
//                superset of o's own tile over all its phases, so the norm only grows;
//   bound      u * (48 log2(t) + 2 sqrt(C/g * P) + 8): 3 transforms * eta/u (6.7) * log2(N)
//                (= 2 log2 t) is 40.2 log2(t), rounded up to 48.
// The per-output step (an error's 2-norm over the tile shared evenly by its entries) is the
// probabilistic part, as in exact_order_error_bound(); the tests check it on adversarial data
// (mixed magnitudes, all-positive, sparse, constant) and the random sweep.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/fft/fft.hpp"

namespace conv::kernels::fft {

double error_bound(const ConvProblem& p, const Geometry& g) {
  const double u = std::ldexp(1.0, -24);
  return u * (48.0 * std::log2(static_cast<double>(g.t)) +
              2.0 * std::sqrt(static_cast<double>(p.Cg() * g.P)) + 8.0);
}

void add_error_scale(const ConvProblem& p, const Geometry& g, const float* x, const float* w,
                     double* scale, int threads) {
  const int64_t H = p.H, W = p.W, OH = p.OH(), OW = p.OW(), Cg = p.Cg(), Kg = p.Kg();
  const int64_t RS = p.R * p.S;
  // Summed-area tables of x^2 per (n, c) plane: the squared norm of any rectangle in O(1).
  std::vector<double> sat(static_cast<size_t>(p.N * p.C * (H + 1) * (W + 1)), 0.0);
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t nc = 0; nc < p.N * p.C; ++nc) {
    const float* xp = x + nc * H * W;
    double* s = sat.data() + nc * (H + 1) * (W + 1);
    for (int64_t i = 0; i < H; ++i)
      for (int64_t j = 0; j < W; ++j) {
        const double v = xp[i * W + j];
        s[(i + 1) * (W + 1) + j + 1] =
            v * v + s[i * (W + 1) + j + 1] + s[(i + 1) * (W + 1) + j] - s[i * (W + 1) + j];
      }
  }
  // ||w_kc||_1 per output channel and input channel of its group.
  std::vector<double> l1(static_cast<size_t>(p.K * Cg), 0.0);
  for (int64_t kc = 0; kc < p.K * Cg; ++kc)
    for (int64_t r = 0; r < RS; ++r) l1[kc] += std::fabs(w[kc * RS + r]);
  // Input rows (columns) of the union of o's tiles, clipped to the image.
  auto span = [](int64_t o, int64_t m, int64_t t, int64_t stride, int64_t pad, int64_t extent) {
    const int64_t lo = std::clamp((o - m + 1) * stride - pad, int64_t{0}, extent);
    const int64_t hi = std::clamp((o + t) * stride - pad, lo, extent);
    return std::pair<int64_t, int64_t>(lo, hi);
  };
  const double inv_t = 1.0 / g.t;
#pragma omp parallel num_threads(threads)
  {
    std::vector<double> rms(static_cast<size_t>(Cg));
#pragma omp for collapse(2) schedule(static)
    for (int64_t n = 0; n < p.N; ++n)
      for (int64_t oh = 0; oh < OH; ++oh) {
        const auto [r0, r1] = span(oh, g.mh, g.t, p.stride_h, p.pad_top, H);
        for (int64_t ow = 0; ow < OW; ++ow) {
          const auto [c0, c1] = span(ow, g.mw, g.t, p.stride_w, p.pad_left, W);
          for (int64_t grp = 0; grp < p.groups; ++grp) {
            for (int64_t c = 0; c < Cg; ++c) {
              const double* s = sat.data() + (n * p.C + grp * Cg + c) * (H + 1) * (W + 1);
              const double sq = s[r1 * (W + 1) + c1] - s[r0 * (W + 1) + c1] - s[r1 * (W + 1) + c0] +
                                s[r0 * (W + 1) + c0];
              rms[c] = std::sqrt(std::max(sq, 0.0)) * inv_t;
            }
            for (int64_t k = grp * Kg; k < (grp + 1) * Kg; ++k) {
              double tterm = 0;
              for (int64_t c = 0; c < Cg; ++c) tterm += rms[c] * l1[k * Cg + c];
              scale[((n * p.K + k) * OH + oh) * OW + ow] += tterm;
            }
          }
        }
      }
  }
}

}  // namespace conv::kernels::fft
