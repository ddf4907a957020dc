// cpu.winograd's error model: the per-output term of the error scale and the bound that goes with
// it (Algorithm::error_bound / add_error_scale). Derivation (Higham, "Accuracy and Stability of
// Numerical Algorithms", 2nd ed., sec. 3.5: |fl(M v) - M v| <= gamma_n |M| |v| componentwise for
// a sum of n terms; applied to Winograd by Barabasz, Anderson, Soodhalter & Gregg, "Error
// Analysis and Improving the Accuracy of Winograd Convolution for Deep Neural Networks", ACM TOMS
// 2020, sec. 4):
//
// An output (i, j) of a tile is A^T [ sum_c (G g_kc G^T) .* (B^T d_c B) ] A, so its computed value
// differs from the exact one by at most gamma * E with the componentwise magnitude
//   E_o = sum_c sum_{a,b} |A^T|_ia |A^T|_jb (|G| |g_kc| |G|^T)_ab (|B^T| |d_c| |B|)_ab,
// d_c the alpha x alpha input tile of channel c (zero outside the image), g_kc the r x r kernel.
// Rounding steps on the way: the input transform, two 1D passes of at most alpha terms each; the
// weight transform, two passes of r terms plus the rounding of G's constants (1/6, 2/9, ...: one
// u each); the product (u); the output transform, two passes of at most alpha terms; the bias (u).
// That is a chain of n = 4 alpha + 2 r + 4 roundings plus the fp32 channel sum over C/g terms;
// with the probabilistic gamma of Higham & Mary (SIAM J. Sci. Comput. 2019), lambda sqrt(n) u, as
// exact_order_error_bound() uses for the direct sum:
//   bound = 2 u sqrt(4 alpha + 2 r + 4 + C/g)   on   |y - y_ref| / (|bias| + sum|x*w| + E_o).
// (The deterministic gamma_n = n u would allow F(6,3) errors of 0.1% of |y| on random data, more
// than a wrong tap.) E_o grows with the transforms' entries (F(6,3): |A^T| up to 32, |B^T| up to
// 21/4): the accuracy price of the larger tiles.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "cpu/winograd/winograd.hpp"
#include "cpu/winograd/winograd_transforms.hpp"

namespace conv::kernels::winograd {
namespace {

constexpr int kMaxAlpha = 8;
using Mat = std::array<std::array<double, kMaxAlpha>, kMaxAlpha>;  // [row][col]

// |B^T| (alpha x alpha), |G| (alpha x r) and |A^T| (m x alpha), read off the transforms
// themselves by applying them to unit vectors, so they cannot drift from the kernels.
struct AbsMatrices {
  Mat bt{}, g{}, at{};
};

template <int M, int R>
AbsMatrices abs_matrices() {
  constexpr int A = M + R - 1;
  AbsMatrices r;
  for (int j = 0; j < A; ++j) {
    double e[kMaxAlpha] = {}, o[kMaxAlpha] = {};
    e[j] = 1;
    input_mr<M, R, double>(e, o);
    for (int i = 0; i < A; ++i) r.bt[i][j] = std::fabs(o[i]);
    output_mr<M, R, double>(e, o);
    for (int i = 0; i < M; ++i) r.at[i][j] = std::fabs(o[i]);
  }
  for (int k = 0; k < R; ++k) {
    double e[R] = {}, o[kMaxAlpha] = {};
    e[k] = 1;
    weight_mr<M, R, double>(e, o);
    for (int i = 0; i < A; ++i) r.g[i][k] = std::fabs(o[i]);
  }
  return r;
}

// out = L |in| R^T for an rows x cols tile `in`: (L: a x rows, R: a x cols), out a x a.
void sandwich(const Mat& L, const Mat& R, int a, const double* in, int rows, int cols,
              double* out) {
  double tmp[kMaxAlpha][kMaxAlpha] = {};  // L |in|: a x cols
  for (int i = 0; i < a; ++i)
    for (int c = 0; c < cols; ++c) {
      double s = 0;
      for (int r = 0; r < rows; ++r) s += L[i][r] * std::fabs(in[r * cols + c]);
      tmp[i][c] = s;
    }
  for (int i = 0; i < a; ++i)
    for (int j = 0; j < a; ++j) {
      double s = 0;
      for (int c = 0; c < cols; ++c) s += tmp[i][c] * R[j][c];
      out[i * a + j] = s;
    }
}

}  // namespace

double error_bound(const ConvProblem& p, const Geometry& g) {
  const double u = std::ldexp(1.0, -24);
  return 2.0 * u * std::sqrt(4.0 * g.alpha + 2.0 * g.r + 4.0 + static_cast<double>(p.Cg()));
}

void add_error_scale(const ConvProblem& p, const Geometry& g, const float* x, const float* w,
                     double* scale, int threads) {
  const int m = g.m, a = g.alpha, pts = a * a, R = g.r, RR = R * R;
  const int64_t Cg = p.Cg(), Kg = p.Kg(), H = p.H, W = p.W, OH = g.OH, OW = g.OW;
  const AbsMatrices mat =
      dispatch_mr(m, R, [](auto mm, auto rr) { return abs_matrices<mm(), rr()>(); });
  // |G| |g_kc| |G|^T for every (k, c): [k][c][point].
  std::vector<double> U(static_cast<size_t>(p.K * Cg * pts));
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t kc = 0; kc < p.K * Cg; ++kc) {
    double gk[25];
    for (int r = 0; r < RR; ++r) gk[r] = w[kc * RR + r];
    sandwich(mat.g, mat.g, a, gk, R, R, U.data() + kc * pts);
  }
#pragma omp parallel num_threads(threads)
  {
    std::vector<double> V(static_cast<size_t>(Cg * pts));
    double d[kMaxAlpha * kMaxAlpha];
#pragma omp for collapse(3) schedule(dynamic)
    for (int64_t n = 0; n < p.N; ++n)
      for (int64_t grp = 0; grp < p.groups; ++grp)
        for (int64_t th = 0; th < g.TH; ++th)
          for (int64_t tw = 0; tw < g.TW; ++tw) {
            const int64_t oh0 = g.row_lo + th * m, ow0 = g.col_lo + tw * m;
            // |B^T| |d_c| |B| per channel of the group.
            for (int64_t c = 0; c < Cg; ++c) {
              const float* xc = x + (n * p.C + grp * Cg + c) * H * W;
              for (int i = 0; i < a; ++i)
                for (int j = 0; j < a; ++j) {
                  const int64_t ih = oh0 - p.pad_top + i, iw = ow0 - p.pad_left + j;
                  d[i * a + j] = ih >= 0 && ih < H && iw >= 0 && iw < W ? xc[ih * W + iw] : 0.0;
                }
              sandwich(mat.bt, mat.bt, a, d, a, a, V.data() + c * pts);
            }
            for (int64_t k = grp * Kg; k < (grp + 1) * Kg; ++k) {
              double s[kMaxAlpha * kMaxAlpha] = {};
              for (int64_t c = 0; c < Cg; ++c) {
                const double* u = U.data() + (k * Cg + c) * pts;
                const double* v = V.data() + c * pts;
                for (int q = 0; q < pts; ++q) s[q] += u[q] * v[q];
              }
              // |A^T| s |A|, written to the tile's outputs inside the core.
              for (int i = 0; i < m && oh0 + i < g.row_end; ++i)
                for (int j = 0; j < m && ow0 + j < g.col_end; ++j) {
                  double e = 0;
                  for (int q = 0; q < pts; ++q) e += mat.at[i][q / a] * mat.at[j][q % a] * s[q];
                  scale[((n * p.K + k) * OH + oh0 + i) * OW + ow0 + j] += e;
                }
            }
          }
  }
}

}  // namespace conv::kernels::winograd
