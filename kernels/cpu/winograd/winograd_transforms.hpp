// The 1D Winograd transforms of cpu.winograd, F(m, 3) for m = 2, 4, 6 and F(m, 5) for m = 2, 4,
// written once as templates so that the AVX2 kernel (T = __m256) and the float64 tests
// (T = double) run the same formulas.
//
// Construction (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", CVPR 2016,
// section 4; Toom-Cook with the point at infinity): for F(m, 3) with alpha = m + 2 points
// a_0 .. a_{m}, inf, the 1D correlation y_i = sum_k d_{i+k} g_k (i < m, k < 3) is
//   y = A^T [ (G g) .* (B^T d) ],
// A^T[i][j] = a_j^i (column inf = e_{m-1}), G[j][k] = a_j^k / prod_{l != j} (a_j - a_l)
// (row inf = e_2), and B^T follows from the identity above. The 2D transform of an alpha x alpha
// tile applies the 1D transform to rows, then to columns.
// Points: F(2,3): 0, 1, -1, inf.  F(4,3): 0, 1, -1, 2, -2, inf.
// F(6,3): 0, 1, -1, 1/2, -1/2, 2, -2, inf, the set Barabasz et al. ("Error Analysis and Improving
// the Accuracy of Winograd Convolution for Deep Neural Networks", 2018) and NNPACK use: pairs
// +-a and +-1/a keep the largest entries of A^T and B^T (32 and 21/4) as small as 8 points allow.
// Matrices (rows of B^T; A^T; G), as derived by exact rational arithmetic:
//   F(2,3): B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 -1 0 1]  A^T = [1 1 1 0; 0 1 -1 1]
//           G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
//   F(4,3): B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0;
//                  0 4 0 -5 0 1]
//           A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
//           G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
//   F(6,3): B^T = [1 0 -21/4 0 21/4 0 -1 0; 0 1 1 -17/4 -17/4 1 1 0; 0 -1 1 17/4 -17/4 -1 1 0;
//                  0 2 4 -5/2 -5 1/2 1 0; 0 -2 4 5/2 -5 -1/2 1 0; 0 1/2 1/4 -5/2 -5/4 2 1 0;
//                  0 -1/2 1/4 5/2 -5/4 -2 1 0; 0 -1 0 21/4 0 -21/4 0 1]
//           A^T[i] = [0^i, 1, (-1)^i, 2^-i, (-2)^-i, 2^i, (-2)^i, [i == 5]]
//           G = [1 0 0; -2/9 -2/9 -2/9; -2/9 2/9 -2/9; 32/45 16/45 8/45; 32/45 -16/45 8/45;
//                1/90 1/45 2/45; 1/90 -1/45 2/45; 0 0 1]
// F(m, 5) uses the points of F(m + 2, 3) (alpha = m + 4), and with them the same per-point
// scaling of G: G[j][k] = s_j a_j^k (k < 5; row inf = e_4) with F(m + 2, 3)'s s_j, so B^T is
// F(m + 2, 3)'s (input_1d<M + 2>), and A^T is the first m rows of the Vandermonde matrix
// (column inf = e_{m-1}):
//   F(2,5): A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 1]
//           G = [1/4 0 0 0 0; -1/6 (1 1 1 1 1); -1/6 (1 -1 1 -1 1); 1/24 (1 2 4 8 16);
//                1/24 (1 -2 4 -8 16); 0 0 0 0 1]
//   F(4,5): A^T[i] = [0^i, 1, (-1)^i, 2^-i, (-2)^-i, 2^i, (-2)^i, [i == 3]], i < 4
//           G[j] = s_j (a_j^0 .. a_j^4), s = 1, -2/9, -2/9, 32/45, 32/45, 1/90, 1/90; row inf e_4
// The functions below evaluate these products with the usual even/odd sharing (NNPACK's
// winograd-f6k3 does the same), which is why they are not plain matrix loops.
// The functions are also __host__ __device__ when compiled by nvcc: cuda.winograd
// (kernels/cuda/winograd_tile.hpp) runs them per thread with T = float.
#pragma once

#ifdef __CUDACC__
#define CONVTUNE_WINO_HD __host__ __device__
#else
#define CONVTUNE_WINO_HD
#endif

namespace conv::kernels::winograd {

/// Arithmetic on one "lane type" T; specialised for double here and for __m256 in the AVX2 file.
/// add(a, b) = a + b, sub(a, b) = a - b, mul(a, c) = a * c, madd(a, c, b) = a * c + b.
template <class T>
struct Arith;

template <>
struct Arith<double> {
  CONVTUNE_WINO_HD static double add(double a, double b) { return a + b; }
  CONVTUNE_WINO_HD static double sub(double a, double b) { return a - b; }
  CONVTUNE_WINO_HD static double mul(double a, double c) { return a * c; }
  CONVTUNE_WINO_HD static double madd(double a, double c, double b) { return a * c + b; }
};

/// fp32 scalars (cuda.winograd, one tile per GPU thread); constants rounded to float.
template <>
struct Arith<float> {
  CONVTUNE_WINO_HD static float add(float a, float b) { return a + b; }
  CONVTUNE_WINO_HD static float sub(float a, float b) { return a - b; }
  CONVTUNE_WINO_HD static float mul(float a, double c) { return a * static_cast<float>(c); }
  CONVTUNE_WINO_HD static float madd(float a, double c, float b) {
    return a * static_cast<float>(c) + b;
  }
};

/// B^T d: alpha = m + 2 inputs `d`, alpha outputs `o`.
template <int M, class T>
CONVTUNE_WINO_HD inline void input_1d(const T* d, T* o) {
  using X = Arith<T>;
  static_assert(M == 2 || M == 4 || M == 6, "F(m,3) for m = 2, 4, 6");
  if constexpr (M == 2) {
    o[0] = X::sub(d[0], d[2]);
    o[1] = X::add(d[1], d[2]);
    o[2] = X::sub(d[2], d[1]);
    o[3] = X::sub(d[3], d[1]);
  } else if constexpr (M == 4) {
    const T e1 = X::madd(d[2], -4.0, d[4]);  // d4 - 4 d2
    const T o1 = X::madd(d[1], -4.0, d[3]);  // d3 - 4 d1
    const T e2 = X::sub(d[4], d[2]);
    const T o2 = X::mul(X::sub(d[3], d[1]), 2.0);
    o[0] = X::madd(d[0], 4.0, X::madd(d[2], -5.0, d[4]));
    o[1] = X::add(e1, o1);
    o[2] = X::sub(e1, o1);
    o[3] = X::add(e2, o2);
    o[4] = X::sub(e2, o2);
    o[5] = X::madd(d[1], 4.0, X::madd(d[3], -5.0, d[5]));
  } else {
    o[0] = X::add(X::sub(d[0], d[6]), X::mul(X::sub(d[4], d[2]), 5.25));
    o[7] = X::add(X::sub(d[7], d[1]), X::mul(X::sub(d[3], d[5]), 5.25));
    const T e1 = X::madd(d[4], -4.25, X::add(d[2], d[6]));  // d2 - 17/4 d4 + d6
    const T o1 = X::madd(d[3], -4.25, X::add(d[1], d[5]));  // d1 - 17/4 d3 + d5
    o[1] = X::add(e1, o1);
    o[2] = X::sub(e1, o1);
    const T e2 = X::madd(d[2], 4.0, X::madd(d[4], -5.0, d[6]));  // 4 d2 - 5 d4 + d6
    const T o2 =
        X::madd(d[1], 2.0, X::madd(d[3], -2.5, X::mul(d[5], 0.5)));  // 2 d1 - 5/2 d3 + d5/2
    o[3] = X::add(e2, o2);
    o[4] = X::sub(e2, o2);
    const T e3 = X::madd(d[2], 0.25, X::madd(d[4], -1.25, d[6]));  // d2/4 - 5/4 d4 + d6
    const T o3 =
        X::madd(d[1], 0.5, X::madd(d[3], -2.5, X::mul(d[5], 2.0)));  // d1/2 - 5/2 d3 + 2 d5
    o[5] = X::add(e3, o3);
    o[6] = X::sub(e3, o3);
  }
}

/// A^T s for alpha = A points and m = M outputs: rows i < m of the points' Vandermonde matrix,
/// the point at infinity in row m - 1. F(m, 3) (A = m + 2) and F(m, 5) (A = m + 4) share these
/// rows, as their points are the same (see above); only the row that takes s_inf differs.
template <int A, int M, class T>
CONVTUNE_WINO_HD inline void output_rows(const T* s, T* y) {
  using X = Arith<T>;
  static_assert(
      (A == 4 && M == 2) || (A == 6 && (M == 2 || M == 4)) || (A == 8 && (M == 4 || M == 6)),
      "F(2,3), F(4,3), F(6,3), F(2,5), F(4,5)");
  if constexpr (A == 4) {
    y[0] = X::add(X::add(s[0], s[1]), s[2]);
    y[1] = X::add(X::sub(s[1], s[2]), s[3]);
  } else {
    T r[6];
    const T a = X::add(s[1], s[2]), b = X::sub(s[1], s[2]);  // points +-1
    if constexpr (A == 6) {
      const T c = X::add(s[3], s[4]), d = X::sub(s[3], s[4]);  // points +-2
      r[0] = X::add(X::add(s[0], a), c);
      r[1] = X::madd(d, 2.0, b);
      r[2] = X::madd(c, 4.0, a);
      r[3] = X::madd(d, 8.0, b);
    } else {
      const T c = X::add(s[3], s[4]), d = X::sub(s[3], s[4]);  // points +-1/2
      const T e = X::add(s[5], s[6]), f = X::sub(s[5], s[6]);  // points +-2
      r[0] = X::add(X::add(s[0], a), X::add(c, e));
      r[1] = X::madd(f, 2.0, X::madd(d, 0.5, b));
      r[2] = X::madd(e, 4.0, X::madd(c, 0.25, a));
      r[3] = X::madd(f, 8.0, X::madd(d, 0.125, b));
      r[4] = X::madd(e, 16.0, X::madd(c, 0.0625, a));
      r[5] = X::madd(f, 32.0, X::madd(d, 0.03125, b));
    }
    for (int i = 0; i < M - 1; ++i) y[i] = r[i];
    y[M - 1] = X::add(r[M - 1], s[A - 1]);
  }
}

/// A^T s for F(m, 3): alpha = m + 2 inputs `s`, m outputs `y`.
template <int M, class T>
CONVTUNE_WINO_HD inline void output_1d(const T* s, T* y) {
  output_rows<M + 2, M>(s, y);
}

/// G g: 3 filter taps `g`, alpha outputs `u`.
template <int M, class T>
CONVTUNE_WINO_HD inline void weight_1d(const T* g, T* u) {
  using X = Arith<T>;
  static_assert(M == 2 || M == 4 || M == 6, "F(m,3) for m = 2, 4, 6");
  if constexpr (M == 2) {
    const T e = X::add(g[0], g[2]);
    u[0] = g[0];
    u[1] = X::mul(X::add(e, g[1]), 0.5);
    u[2] = X::mul(X::sub(e, g[1]), 0.5);
    u[3] = g[2];
  } else if constexpr (M == 4) {
    const T e = X::add(g[0], g[2]);
    const T f = X::madd(g[0], 1.0 / 24, X::mul(g[2], 1.0 / 6));
    u[0] = X::mul(g[0], 0.25);
    u[1] = X::mul(X::add(e, g[1]), -1.0 / 6);
    u[2] = X::mul(X::sub(e, g[1]), -1.0 / 6);
    u[3] = X::madd(g[1], 1.0 / 12, f);
    u[4] = X::madd(g[1], -1.0 / 12, f);
    u[5] = g[2];
  } else {
    const T e = X::add(g[0], g[2]);
    const T f = X::madd(g[0], 32.0 / 45, X::mul(g[2], 8.0 / 45));
    const T h = X::madd(g[0], 1.0 / 90, X::mul(g[2], 2.0 / 45));
    u[0] = g[0];
    u[1] = X::mul(X::add(e, g[1]), -2.0 / 9);
    u[2] = X::mul(X::sub(e, g[1]), -2.0 / 9);
    u[3] = X::madd(g[1], 16.0 / 45, f);
    u[4] = X::madd(g[1], -16.0 / 45, f);
    u[5] = X::madd(g[1], 1.0 / 45, h);
    u[6] = X::madd(g[1], -1.0 / 45, h);
    u[7] = g[2];
  }
}

/// G g for F(m, 5): 5 filter taps `g`, alpha = m + 4 outputs `u` (m = 2, 4).
template <int M, class T>
CONVTUNE_WINO_HD inline void weight_1d_r5(const T* g, T* u) {
  using X = Arith<T>;
  static_assert(M == 2 || M == 4, "F(m,5) for m = 2, 4");
  // Even and odd parts of sum_k a^k g_k at a = 1 and a = 2 (and 1/2), shared by +-a.
  const T e1 = X::add(X::add(g[0], g[2]), g[4]), o1 = X::add(g[1], g[3]);
  const T e2 = X::madd(g[4], 16.0, X::madd(g[2], 4.0, g[0]));
  const T o2 = X::madd(g[3], 8.0, X::mul(g[1], 2.0));
  if constexpr (M == 2) {
    u[0] = X::mul(g[0], 0.25);
    u[1] = X::mul(X::add(e1, o1), -1.0 / 6);
    u[2] = X::mul(X::sub(e1, o1), -1.0 / 6);
    u[3] = X::mul(X::add(e2, o2), 1.0 / 24);
    u[4] = X::mul(X::sub(e2, o2), 1.0 / 24);
    u[5] = g[4];
  } else {
    const T eh = X::madd(g[4], 1.0 / 16, X::madd(g[2], 0.25, g[0]));
    const T oh = X::madd(g[3], 0.125, X::mul(g[1], 0.5));
    u[0] = g[0];
    u[1] = X::mul(X::add(e1, o1), -2.0 / 9);
    u[2] = X::mul(X::sub(e1, o1), -2.0 / 9);
    u[3] = X::mul(X::add(eh, oh), 32.0 / 45);
    u[4] = X::mul(X::sub(eh, oh), 32.0 / 45);
    u[5] = X::mul(X::add(e2, o2), 1.0 / 90);
    u[6] = X::mul(X::sub(e2, o2), 1.0 / 90);
    u[7] = g[4];
  }
}

/// F(m, r) for r = 3 or 5 by the functions above: B^T d (alpha = m + r - 1 in and out), A^T s
/// (alpha in, m out) and G g (r in, alpha out).
template <int M, int R, class T>
CONVTUNE_WINO_HD inline void input_mr(const T* d, T* o) {
  static_assert(R == 3 || R == 5, "F(m,3) or F(m,5)");
  input_1d<M + R - 3>(d, o);
}
template <int M, int R, class T>
CONVTUNE_WINO_HD inline void output_mr(const T* s, T* y) {
  output_rows<M + R - 1, M>(s, y);
}
template <int M, int R, class T>
CONVTUNE_WINO_HD inline void weight_mr(const T* g, T* u) {
  if constexpr (R == 3)
    weight_1d<M>(g, u);
  else
    weight_1d_r5<M>(g, u);
}

}  // namespace conv::kernels::winograd
