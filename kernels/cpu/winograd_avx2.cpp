// cpu.winograd compute, AVX2 + FMA: Winograd minimal filtering F(m x m, 3 x 3), m = 2, 4, 6
// (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", CVPR 2016; the batched
// per-point GEMM formulation and 8x8-tile F(6x6,3x3) follow NNPACK; transforms and points in
// winograd_transforms.hpp).
//
// Per group g, with alpha = m + 2 and P = alpha^2 transform points:
//   1. weight transform  U[p][k][c] = (G w[k][c] G^T)[p]          (skipped with packed weights)
//   2. input transform   V[p][c][t] = (B^T d[c][t] B)[p]           for the tiles t of one chunk
//   3. P GEMMs           M[p][t][k] = sum_c U[p][k][c] V[p][c][t]
//   4. output transform  y[k][tile t] = A^T M[.][t][k] A + bias[k]
// Tiles are m x m output blocks, numbered t = (n * TH + th) * TW + tw over the whole batch with
// TH = ceil(OH/m), TW = ceil(OW/m); a tile reads the alpha x alpha input patch whose top-left is
// (th*m - pad_top, tw*m - pad_left). Reads outside the image are zeros (any padding, also 0 and
// asymmetric); outputs outside OH x OW of the bottom/right partial tiles are computed and dropped.
//
// Layouts (floats; Kp = K/g rounded up to 8, padded rows of U are zero):
//   U  [g][p][K-block][c][kw]  K-blocks of kw = 16 output channels (the last one 8 when Kp % 16
//      == 8): the GEMM's A operand, stored so one register block of 16 channels is contiguous
//      per c.                                    size groups * P * Kp * C/g
//   V  [p][c][chunk_pad]       one chunk of tiles, tiles contiguous (chunk_pad = chunk rounded
//      up to 8; the input transform writes 8 tiles per vector).   size P * C/g * chunk_pad
//   M  [p][t][Kp]              GEMM output, 16 channels per vector pair, so the output transform
//      reads 8 channels of one tile per vector.                    size P * chunk * Kp
// Workspace = 4 * (U + V + M) bytes (U unused when packed weights are given); the chunk (tiles per
// pass) is chosen so that V + M stay near 3 MiB (make_geometry in winograd.cpp).
//
// Register blocking: the GEMM microkernel holds a 16 (channels, two vectors of U) x 6 (tiles,
// broadcast from V) block of M in 12 ymm accumulators; tail blocks use 8 channels / fewer tiles.
// The transforms work on 8 lanes at once: 8 tiles (input, via an 8x8 transpose of the tiles'
// rows) or 8 output channels (output, transposed back to rows before storing).
//
// Cost per group: GEMM 2 * P * Kp * C/g * tiles flops (direct convolution needs
// 2 * 9 * m^2 * K/g * C/g * tiles: 2.25x, 4x, 5.06x more for m = 2, 4, 6); input transform
// O(P * alpha * C/g * tiles), output transform O(P * m * K/g * tiles), weight transform
// O(P * K/g * C/g).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu/winograd.hpp"
#include "cpu/winograd_transforms.hpp"

namespace conv::kernels::winograd {

// __m256's may_alias attribute does not take part in template matching (GCC notes that it is
// ignored); the specialisation is still exactly the AVX2 vector type.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"
template <>
struct Arith<__m256> {
  static __m256 add(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
  static __m256 sub(__m256 a, __m256 b) { return _mm256_sub_ps(a, b); }
  static __m256 mul(__m256 a, double c) {
    return _mm256_mul_ps(a, _mm256_set1_ps(static_cast<float>(c)));
  }
  static __m256 madd(__m256 a, double c, __m256 b) {
    return _mm256_fmadd_ps(a, _mm256_set1_ps(static_cast<float>(c)), b);
  }
};
#pragma GCC diagnostic pop

namespace {

inline void transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// Loads the first A floats at `src` (no read past them); the other lanes are zero.
template <int A>
inline __m256 load_row(const float* src) {
  if constexpr (A == 8) {
    return _mm256_loadu_ps(src);
  } else if constexpr (A == 6) {
    const __m128 hi = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(src + 4)));
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(src)), hi, 1);
  } else {
    return _mm256_insertf128_ps(_mm256_setzero_ps(), _mm_loadu_ps(src), 0);
  }
}

// Stores the first M lanes of `v` at `dst`.
template <int M>
inline void store_row(float* dst, __m256 v) {
  if constexpr (M == 6) {
    _mm_storeu_ps(dst, _mm256_castps256_ps128(v));
    _mm_storel_pi(reinterpret_cast<__m64*>(dst + 4), _mm256_extractf128_ps(v, 1));
  } else if constexpr (M == 4) {
    _mm_storeu_ps(dst, _mm256_castps256_ps128(v));
  } else {
    _mm_storel_pi(reinterpret_cast<__m64*>(dst), _mm256_castps256_ps128(v));
  }
}

struct TileOrigin {
  int64_t n, row, col;  // image, and top-left of the tile in output coordinates
};

inline TileOrigin tile_origin(const Geometry& g, int64_t t, int m) {
  const int64_t per_image = g.TH * g.TW;
  const int64_t n = t / per_image, r = t % per_image;
  return {n, g.row_lo + r / g.TW * m, g.col_lo + r % g.TW * m};
}

// --- weight transform -------------------------------------------------------------------------

// U for channel c and output channels k0 .. k0+7 (zero beyond Kg) of one group.
template <int M>
void weight_group(const Geometry& g, const float* wg, int64_t k0, int64_t c, float* ug) {
  constexpr int A = M + 2;
  alignas(32) float taps[9][8];
  for (int q = 0; q < 8; ++q) {
    const int64_t k = k0 + q;
    for (int rs = 0; rs < 9; ++rs) taps[rs][q] = k < g.Kg ? wg[(k * g.Cg + c) * 9 + rs] : 0.0f;
  }
  // Columns first: t[i][s] = sum_r G[i][r] w[r][s]; then rows: U[i][j] = sum_s t[i][s] G[j][s].
  __m256 t[A][3];
  for (int s = 0; s < 3; ++s) {
    const __m256 col[3] = {_mm256_load_ps(taps[s]), _mm256_load_ps(taps[3 + s]),
                           _mm256_load_ps(taps[6 + s])};
    __m256 out[A];
    weight_1d<M>(col, out);
    for (int i = 0; i < A; ++i) t[i][s] = out[i];
  }
  const int64_t kb0 = k0 / kBlockK * kBlockK;
  const int64_t kw = std::min<int64_t>(kBlockK, g.Kp - kb0);
  float* dst = ug + kb0 * g.Cg + c * kw + (k0 - kb0);
  const int64_t pstride = g.Kp * g.Cg;
  for (int i = 0; i < A; ++i) {
    __m256 out[A];
    weight_1d<M>(t[i], out);
    for (int j = 0; j < A; ++j) _mm256_storeu_ps(dst + (i * A + j) * pstride, out[j]);
  }
}

template <int M>
void transform_weights_impl(const ConvProblem& p, const Geometry& g, const float* w, float* u,
                            int threads) {
  const int64_t P = g.points, kgroups = g.Kp / kVec;
#pragma omp parallel for collapse(3) schedule(static) num_threads(threads)
  for (int64_t grp = 0; grp < p.groups; ++grp)
    for (int64_t kg = 0; kg < kgroups; ++kg)
      for (int64_t c = 0; c < g.Cg; ++c)
        weight_group<M>(g, w + grp * g.Kg * g.Cg * 9, kg * kVec, c, u + grp * P * g.Kp * g.Cg);
}

// --- input transform --------------------------------------------------------------------------

// V for channel c of `count` (<= 8) consecutive tiles starting at tile t_begin. `xc` is channel c
// of image 0 of this group; `dst` is V[0][c][first tile's column], `pstride` = V's point stride.
template <int M>
void input_group(const ConvProblem& p, const Geometry& g, const float* xc, int64_t t_begin,
                 int count, float* dst, int64_t pstride) {
  constexpr int A = M + 2;
  const int64_t H = p.H, W = p.W, image = p.C * H * W;
  const float* base[8];
  int64_t row0[8], col0[8];
  bool inside[8];  // all A columns inside the image
  for (int q = 0; q < count; ++q) {
    const TileOrigin o = tile_origin(g, t_begin + q, M);
    base[q] = xc + o.n * image;
    row0[q] = o.row - p.pad_top;
    col0[q] = o.col - p.pad_left;
    inside[q] = col0[q] >= 0 && col0[q] + A <= W;
  }
  // h[i][j]: row i of every tile after the horizontal transform, one vector = 8 tiles.
  alignas(32) float h[A][A][8];
  for (int i = 0; i < A; ++i) {
    __m256 r[8];
    for (int q = 0; q < 8; ++q) {
      const int64_t row = q < count ? row0[q] + i : -1;
      if (row < 0 || row >= H) {
        r[q] = _mm256_setzero_ps();
      } else if (inside[q]) {
        r[q] = load_row<A>(base[q] + row * W + col0[q]);
      } else {
        alignas(32) float tmp[8] = {};
        const float* src = base[q] + row * W;
        for (int j = 0; j < A; ++j) {
          const int64_t col = col0[q] + j;
          if (col >= 0 && col < W) tmp[j] = src[col];
        }
        r[q] = _mm256_load_ps(tmp);
      }
    }
    transpose8(r);
    __m256 out[A];
    input_1d<M>(r, out);
    for (int j = 0; j < A; ++j) _mm256_store_ps(h[i][j], out[j]);
  }
  for (int j = 0; j < A; ++j) {
    __m256 col[A], out[A];
    for (int i = 0; i < A; ++i) col[i] = _mm256_load_ps(h[i][j]);
    input_1d<M>(col, out);
    for (int i = 0; i < A; ++i) _mm256_storeu_ps(dst + (i * A + j) * pstride, out[i]);
  }
}

// --- GEMM -------------------------------------------------------------------------------------

// out[j][0 .. 8*MV) = sum_c u[c][0 .. 8*MV) * v[c][j] for the NR tiles j: an (8*MV) x NR block of
// M held in registers for the whole reduction over c.
template <int NR, int MV>
inline void gemm_block(int64_t C, const float* __restrict u, const float* __restrict v,
                       int64_t ldv, float* __restrict out, int64_t ldo) {
  __m256 acc[NR][MV];
#pragma GCC unroll 8
  for (int j = 0; j < NR; ++j)
#pragma GCC unroll 2
    for (int i = 0; i < MV; ++i) acc[j][i] = _mm256_setzero_ps();
  for (int64_t c = 0; c < C; ++c) {
    __m256 a[MV];
#pragma GCC unroll 2
    for (int i = 0; i < MV; ++i) a[i] = _mm256_loadu_ps(u + (c * MV + i) * kVec);
    const float* vc = v + c * ldv;
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) {
      const __m256 b = _mm256_broadcast_ss(vc + j);
#pragma GCC unroll 2
      for (int i = 0; i < MV; ++i) acc[j][i] = _mm256_fmadd_ps(a[i], b, acc[j][i]);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < NR; ++j)
#pragma GCC unroll 2
    for (int i = 0; i < MV; ++i) _mm256_storeu_ps(out + j * ldo + i * kVec, acc[j][i]);
}

template <int MV>
void gemm_panel(int64_t C, const float* u, const float* v, int64_t ldv, float* out, int64_t ldo,
                int64_t nt) {
  constexpr int NR = 6;
  int64_t t = 0;
  for (; t + NR <= nt; t += NR) gemm_block<NR, MV>(C, u, v + t, ldv, out + t * ldo, ldo);
  switch (nt - t) {
    case 5:
      gemm_block<5, MV>(C, u, v + t, ldv, out + t * ldo, ldo);
      break;
    case 4:
      gemm_block<4, MV>(C, u, v + t, ldv, out + t * ldo, ldo);
      break;
    case 3:
      gemm_block<3, MV>(C, u, v + t, ldv, out + t * ldo, ldo);
      break;
    case 2:
      gemm_block<2, MV>(C, u, v + t, ldv, out + t * ldo, ldo);
      break;
    case 1:
      gemm_block<1, MV>(C, u, v + t, ldv, out + t * ldo, ldo);
      break;
    default:
      break;
  }
}

// --- output transform -------------------------------------------------------------------------

// y for tile t and output channels k0 .. k0+7 (those below Kg) of one group. `mt` is M[0][t][k0],
// `pstride` M's point stride, `yg` channel 0 of image 0 of this group.
template <int M>
void output_tile(const ConvProblem& p, const Geometry& g, const float* mt, int64_t pstride,
                 int64_t t, int64_t k0, const float* bias_g, float* yg) {
  constexpr int A = M + 2;
  const int kcount = static_cast<int>(std::min<int64_t>(kVec, g.Kg - k0));
  __m256 bias = _mm256_setzero_ps();
  if (bias_g) {
    alignas(32) float b[8] = {};
    for (int q = 0; q < kcount; ++q) b[q] = bias_g[k0 + q];
    bias = _mm256_load_ps(b);
  }
  alignas(32) float h[A][M][8];  // rows of the tile after the horizontal transform
  for (int i = 0; i < A; ++i) {
    __m256 s[A], out[M];
    for (int j = 0; j < A; ++j) s[j] = _mm256_loadu_ps(mt + (i * A + j) * pstride);
    output_1d<M>(s, out);
    for (int j = 0; j < M; ++j) _mm256_store_ps(h[i][j], out[j]);
  }
  __m256 o[M][8];  // o[row][col], one vector = 8 channels; columns M..7 stay zero
  for (int j = 0; j < M; ++j) {
    __m256 col[A], out[M];
    for (int i = 0; i < A; ++i) col[i] = _mm256_load_ps(h[i][j]);
    output_1d<M>(col, out);
    for (int i = 0; i < M; ++i) o[i][j] = _mm256_add_ps(out[i], bias);
  }
  const TileOrigin org = tile_origin(g, t, M);
  const int64_t OHW = g.OH * g.OW;
  const int rows = static_cast<int>(std::min<int64_t>(M, g.row_end - org.row));
  const int cols = static_cast<int>(std::min<int64_t>(M, g.col_end - org.col));
  float* y0 = yg + (org.n * p.K + k0) * OHW + org.row * g.OW + org.col;
  for (int i = 0; i < rows; ++i) {
    for (int j = M; j < 8; ++j) o[i][j] = _mm256_setzero_ps();
    transpose8(o[i]);  // now o[i][q] = row i of channel k0 + q
    for (int q = 0; q < kcount; ++q) {
      float* dst = y0 + q * OHW + i * g.OW;
      if (cols == M) {
        store_row<M>(dst, o[i][q]);
      } else {
        alignas(32) float tmp[8];
        _mm256_store_ps(tmp, o[i][q]);
        for (int j = 0; j < cols; ++j) dst[j] = tmp[j];
      }
    }
  }
}

// --- driver -----------------------------------------------------------------------------------

template <int M>
void forward_impl(const ConvProblem& p, const Geometry& g, const float* x, const float* u,
                  const float* bias, float* y, float* v, float* mbuf, int threads) {
  const int64_t P = g.points, HW = p.H * p.W, OHW = g.OH * g.OW;
  const int64_t kblocks = (g.Kp + kBlockK - 1) / kBlockK, kgroups = (g.Kg + kVec - 1) / kVec;
  const int64_t v_pstride = g.Cg * g.chunk_pad, m_pstride = g.chunk * g.Kp;
#pragma omp parallel num_threads(threads)
  for (int64_t grp = 0; grp < p.groups; ++grp) {
    const float* xg = x + grp * g.Cg * HW;
    const float* ug = u + grp * P * g.Kp * g.Cg;
    const float* bias_g = bias ? bias + grp * g.Kg : nullptr;
    float* yg = y + grp * g.Kg * OHW;
    for (int64_t t0 = 0; t0 < g.tiles; t0 += g.chunk) {
      const int64_t nt = std::min(g.chunk, g.tiles - t0), tgroups = (nt + kVec - 1) / kVec;
#pragma omp for collapse(2) schedule(static)
      for (int64_t c = 0; c < g.Cg; ++c)
        for (int64_t tg = 0; tg < tgroups; ++tg)
          input_group<M>(p, g, xg + c * HW, t0 + tg * kVec,
                         static_cast<int>(std::min(kVec, nt - tg * kVec)),
                         v + c * g.chunk_pad + tg * kVec, v_pstride);
#pragma omp for collapse(2) schedule(dynamic)
      for (int64_t pt = 0; pt < P; ++pt)
        for (int64_t kb = 0; kb < kblocks; ++kb) {
          const int64_t kb0 = kb * kBlockK;
          const float* up = ug + pt * g.Kp * g.Cg + kb0 * g.Cg;
          float* mp = mbuf + pt * m_pstride + kb0;
          if (g.Kp - kb0 >= kBlockK)
            gemm_panel<2>(g.Cg, up, v + pt * v_pstride, g.chunk_pad, mp, g.Kp, nt);
          else
            gemm_panel<1>(g.Cg, up, v + pt * v_pstride, g.chunk_pad, mp, g.Kp, nt);
        }
#pragma omp for collapse(2) schedule(static)
      for (int64_t tl = 0; tl < nt; ++tl)
        for (int64_t kg = 0; kg < kgroups; ++kg)
          output_tile<M>(p, g, mbuf + tl * g.Kp + kg * kVec, m_pstride, t0 + tl, kg * kVec,
                         bias_g, yg);
    }
  }
}

}  // namespace

void transform_weights_avx2(const ConvProblem& p, const Geometry& g, const float* w, float* u,
                            int threads) {
  switch (g.m) {
    case 2:
      return transform_weights_impl<2>(p, g, w, u, threads);
    case 4:
      return transform_weights_impl<4>(p, g, w, u, threads);
    default:
      return transform_weights_impl<6>(p, g, w, u, threads);
  }
}

void forward_avx2(const ConvProblem& p, const Geometry& g, const float* x, const float* u,
                  const float* bias, float* y, float* v, float* mbuf, int threads) {
  switch (g.m) {
    case 2:
      return forward_impl<2>(p, g, x, u, bias, y, v, mbuf, threads);
    case 4:
      return forward_impl<4>(p, g, x, u, bias, y, v, mbuf, threads);
    default:
      return forward_impl<6>(p, g, x, u, bias, y, v, mbuf, threads);
  }
}

}  // namespace conv::kernels::winograd
