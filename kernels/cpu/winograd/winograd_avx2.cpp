// cpu.winograd compute, AVX2 + FMA: Winograd minimal filtering F(m x m, r x r), m = 2, 4, 6 for
// r = 3 and m = 2, 4 for r = 5
// (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", CVPR 2016; the per-point
// batched GEMM and the 8x8-tile F(6x6,3x3) follow NNPACK; transforms and interpolation points in
// winograd_transforms.hpp; the GEMM for AVX-512 CPUs in winograd_avx512.cpp).
//
// Per group g, with alpha = m + r - 1 and P = alpha^2 transform points:
//   1. weight transform  U[p][k][c] = (G w[k][c] G^T)[p]          (skipped with packed weights)
//   2. input transform   V[p][c][t] = (B^T d[c][t] B)[p]           for the tiles t of one pass
//   3. P GEMMs           M[t][p][k] = sum_c U[p][k][c] V[p][c][t]
//   4. output transform  y[k][tile t] = A^T M[t][.][k] A + bias[k]
// Tiles are m x m output blocks, numbered t = (n * TH + th) * TW + tw over the whole batch. They
// cover the output "core" whose r x r windows touch the image (all of it unless a padding is r or
// more; outside it y is the bias). A tile reads the alpha x alpha input patch at its output
// position minus (pad_top, pad_left); reads outside the image are zeros (any padding, also 0 and
// asymmetric); outputs of the bottom/right partial tiles beyond the core are computed and dropped.
//
// Layouts (floats; Kp = K/g rounded up to 8; each stride marked * is rounded up to an odd number
// of 64-byte lines, so the P rows one tile touches do not collide in one cache set):
//   U  [g][p]*[K-block][c][kw]  K-blocks of kw = 16 channels (the last one 8 when Kp % 16 == 8),
//      so one GEMM register block of channels is contiguous per c; rows of K beyond K/g are
//      zero.                                       size groups * P * (Kp * C/g)*
//   V  [p]*[c][ld]              one pass of tiles, tiles contiguous (ld = pass rounded up to 8:
//      the input transform writes 8 tiles per vector).   size P * (C/g * ld)*
//   M  [t][p][Kp*]              GEMM output; the output transform reads 8 channels of one tile
//      per vector, and one tile's P rows are adjacent.   size tiles_per_pass * P * Kp*
// Workspace = 4 * (U + V + M) bytes for a pass of g.chunk tiles (U unused with packed weights);
// g.chunk keeps V + M near 12 MiB (make_geometry, winograd.cpp). Where every group's tiles make
// one pass and all groups' V and M fit that budget, they lie side by side (g.pass_groups of
// each) and every phase of a shared pass runs over all groups at once: a third of the barriers, and
// 2 x 4 GEMM jobs for two threads instead of 4 per group.
//
// One-shot (no packed weights), step 1 costs writing U, P/r^2 times the weights (4x for F(4,3)),
// which bounds it by store bandwidth rather than arithmetic. When the tiles make one shared pass
// (small images, where this matters most), each GEMM job transforms only its own output
// channels into a per-thread slice of the U region, which stays in L2 and is overwritten by the
// thread's next job (jobs of 64 channels where V is too large to stay in L2 beside one slice, so
// that fewer jobs re-read it; steps of input channels, transformed then multiplied, where the
// slice and V together are: fused_channels); otherwise U is written once, before the first pass,
// in runs of 16 channels per point.
//
// Schedules (make_schedule): with few channels, each thread runs whole passes of a few dozen
// tiles (transform, GEMMs, inverse transform) in its own slice of V and M, which stay in its L2,
// every thread as many passes of (within 4 tiles) as many tiles;
// with many channels, where U is large and tiles few, all threads share each pass phase by phase
// (GEMMs split by point and channel block) so that U is read as few times as possible.
//
// Register blocking: the AVX2 GEMM microkernel holds a 16 (channels, two vectors of U) x 6 (tiles,
// broadcast from V) block of M in 12 ymm accumulators (the AVX-512 one 32 x 12 in 24 zmm). The
// transforms work on 8 lanes at once: 8 tiles (input, via an 8x8 transpose of the tiles' rows)
// or 8 output channels (output, transposed back to rows before storing).
//
// Cost per group: GEMM 2 * P * Kp * C/g * tiles flops (direct convolution needs
// 2 * r^2 * m^2 * K/g * C/g * tiles: 2.25x, 4x, 5.06x more for F(2,3), F(4,3), F(6,3), 2.78x
// and 6.25x for F(2,5), F(4,5)); input transform
// O(P * alpha * C/g * tiles), output transform O(P * m * K/g * tiles), weight transform
// O(P * K/g * C/g).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "conv/device.hpp"
#include "cpu/common/transpose_avx2.hpp"
#include "cpu/winograd/winograd.hpp"
#include "cpu/winograd/winograd_transforms.hpp"
#include "cpu/winograd/winograd_weight_block.hpp"

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

// Loads the first A floats at `src` (no read past them); the other lanes are zero.
template <int A>
inline __m256 load_row(const float* src) {
  if constexpr (A == 8) {
    return _mm256_loadu_ps(src);
  } else if constexpr (A == 6) {
    double pair;  // two floats; memcpy because src + 4 need not be 8-byte aligned
    std::memcpy(&pair, src + 4, sizeof pair);
    const __m128 hi = _mm_castpd_ps(_mm_set_sd(pair));
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

// Walks tiles in order without a division per tile.
struct TileCursor {
  int64_t n = 0, th = 0, tw = 0;
  TileCursor(const Geometry& g, int64_t t) {
    const int64_t per_image = g.TH * g.TW, r = t % per_image;
    n = t / per_image, th = r / g.TW, tw = r % g.TW;
  }
  void next(const Geometry& g) {
    if (++tw < g.TW) return;
    tw = 0;
    if (++th < g.TH) return;
    th = 0;
    ++n;
  }
  int64_t row(const Geometry& g) const { return g.row_lo + th * g.m; }  // output coordinates
  int64_t col(const Geometry& g) const { return g.col_lo + tw * g.m; }
};

// --- weight transform -------------------------------------------------------------------------

// U for input channel c and one block of kw (16 or 8) output channels from kb0, zero beyond Kg:
// for every point, kw contiguous floats (one cache line for kw = 16).
// Writes point pt's kw floats to dst + pt * pstride. With AVX-512, 16 filters per zmm.
template <int M, int R>
void weight_block(const Geometry& g, const float* wg, int64_t kb0, int64_t c, float* dst,
                  int64_t pstride, bool zmm) {
  const int64_t kw = std::min<int64_t>(kBlockK, g.Kp - kb0);
  if (kw == kBlockK && zmm) return weight_block_avx512(g, wg, kb0, c, dst, pstride);
  for (int64_t half = 0; half < kw; half += kVec) {
    __m256 taps[R * R];
    load_filter_taps<R>(g, wg, kb0 + half, c, taps);
    transform_filter_taps<M, R>(
        taps, [&](int pt, __m256 u) { _mm256_storeu_ps(dst + pt * pstride + half, u); });
  }
}

// Channels per weight_run: its U (P x 16 x 16 floats, 36 KiB for m = 4) stays in L1.
constexpr int64_t kWeightRun = 16;

// U of output-channel block kb (kBlockK channels from kb * kBlockK) for input channels
// [c0, c0 + kWeightRun): transformed into an L1 buffer, then copied out as one contiguous run per
// point (writing the P points' rows directly would interleave P streams of 64-byte stores).
// `ukb` is where U's point 0 holds block kb (U + kb * kBlockK * C/g), `pstride` U's point stride.
template <int M, int R>
void weight_run(const Geometry& g, const float* wg, int64_t kb, int64_t c0, float* ukb,
                int64_t pstride, bool zmm) {
  constexpr int P = (M + R - 1) * (M + R - 1);
  const int64_t kb0 = kb * kBlockK, kw = std::min<int64_t>(kBlockK, g.Kp - kb0);
  const int64_t cn = std::min(kWeightRun, g.Cg - c0);
  alignas(64) float buf[P * kWeightRun * kBlockK];
  for (int64_t c = 0; c < cn; ++c)
    weight_block<M, R>(g, wg, kb0, c0 + c, buf + c * kw, cn * kw, zmm);
  for (int pt = 0; pt < P; ++pt)
    std::memcpy(ukb + pt * pstride + c0 * kw, buf + pt * cn * kw,
                static_cast<size_t>(cn * kw) * sizeof(float));
}

template <int M, int R>
void transform_weights_impl(const ConvProblem& p, const Geometry& g, const float* w, float* u,
                            int threads, bool zmm) {
  const int64_t kblocks = (g.Kp + kBlockK - 1) / kBlockK;
  const int64_t runs = (g.Cg + kWeightRun - 1) / kWeightRun;
#pragma omp parallel for collapse(3) schedule(static) num_threads(threads)
  for (int64_t grp = 0; grp < p.groups; ++grp)
    for (int64_t kb = 0; kb < kblocks; ++kb)
      for (int64_t r = 0; r < runs; ++r)
        weight_run<M, R>(g, w + grp * g.Kg * g.Cg * R * R, kb, r * kWeightRun,
                         u + grp * g.points * g.u_pstride + kb * kBlockK * g.Cg, g.u_pstride, zmm);
}

// --- input transform --------------------------------------------------------------------------

// Up to 8 consecutive tiles whose input patches one vector lane each holds.
struct TileGroup {
  int count = 0;
  int64_t image[8];  // offset of the tile's image in x
  int64_t row0[8];   // top input row of the patch (may be negative: padding)
  int64_t col0[8];   // left input column of the patch
  bool inside[8];    // all alpha columns inside the image: one plain load per row
};

TileGroup tile_group(const ConvProblem& p, const Geometry& g, TileCursor& cur, int count) {
  TileGroup tg;
  tg.count = count;
  const int A = g.alpha;
  for (int q = 0; q < count; ++q, cur.next(g)) {
    tg.image[q] = cur.n * p.C * p.H * p.W;
    tg.row0[q] = cur.row(g) - p.pad_top;
    tg.col0[q] = cur.col(g) - p.pad_left;
    tg.inside[q] = tg.col0[q] >= 0 && tg.col0[q] + A <= p.W;
  }
  return tg;
}

// V[.][c][8 tiles] = B^T d B for channel c of the group's tiles. `xc` is channel c of image 0 of
// this group, `dst` V's column of the first tile in row c of point 0, `pstride` V's point stride.
// `prefetch` is a later channel's offset from xc (0 = none).
template <int M, int R>
void input_channel(const ConvProblem& p, const TileGroup& tg, const float* xc, int64_t prefetch,
                   float* dst, int64_t pstride) {
  constexpr int A = M + R - 1;
  const int64_t H = p.H, W = p.W;
  // h[i][j]: row i of every tile after the horizontal transform, one vector = 8 tiles.
  alignas(32) float h[A][A][8];
  for (int i = 0; i < A; ++i) {
    __m256 r[8];
    for (int q = 0; q < 8; ++q) {
      const int64_t row = q < tg.count ? tg.row0[q] + i : -1;
      if (row < 0 || row >= H) {
        r[q] = _mm256_setzero_ps();
        continue;
      }
      const float* src = xc + tg.image[q] + row * W;
      if (prefetch)
        _mm_prefetch(reinterpret_cast<const char*>(src + prefetch + tg.col0[q] + 4), _MM_HINT_T0);
      if (tg.inside[q]) {
        r[q] = load_row<A>(src + tg.col0[q]);
      } else {
        // Edge tile: lanes assembled in registers. Both obvious alternatives are slow here: a
        // scalar copy through a stack buffer stalls on store-to-load forwarding, and
        // vmaskmovps with lanes outside the row takes a microcode assist on AMD CPUs.
        float e[8];
        for (int j = 0; j < 8; ++j) {
          const int64_t col = tg.col0[q] + j;
          e[j] = j < A && col >= 0 && col < W ? src[col] : 0.0f;
        }
        r[q] = _mm256_setr_ps(e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]);
      }
    }
    transpose8x8_avx(r);
    __m256 out[A];
    input_mr<M, R>(r, out);
    for (int j = 0; j < A; ++j) _mm256_store_ps(h[i][j], out[j]);
  }
  for (int j = 0; j < A; ++j) {
    __m256 col[A], out[A];
    for (int i = 0; i < A; ++i) col[i] = _mm256_load_ps(h[i][j]);
    input_mr<M, R>(col, out);
    for (int i = 0; i < A; ++i) _mm256_storeu_ps(dst + (i * A + j) * pstride, out[i]);
  }
}

// V for the tile groups [tg0, tg1) (8 tiles each) of a pass starting at tile `first`, and the
// channels [c0, c1). V is [point][c][ld] with point stride `pstride`. Channels are the outer loop
// over batches of groups, so that x is read row by row along a band of the image and V row by
// row, both in streams the hardware prefetchers follow.
template <int M, int R>
void input_tiles(const ConvProblem& p, const Geometry& g, const float* xg, int64_t first,
                 int64_t nt, int64_t tg0, int64_t tg1, int64_t c0, int64_t c1, float* v, int64_t ld,
                 int64_t pstride) {
  constexpr int64_t kBatch = 16;
  const int64_t HW = p.H * p.W;
  TileGroup groups[kBatch];
  TileCursor cur(g, first + tg0 * kVec);
  for (int64_t b0 = tg0; b0 < tg1; b0 += kBatch) {
    const int64_t b1 = std::min(tg1, b0 + kBatch);
    for (int64_t tg = b0; tg < b1; ++tg)
      groups[tg - b0] = tile_group(p, g, cur, static_cast<int>(std::min(kVec, nt - tg * kVec)));
    for (int64_t c = c0; c < c1; ++c)
      for (int64_t tg = b0; tg < b1; ++tg)
        input_channel<M, R>(p, groups[tg - b0], xg + c * HW, c + 1 < c1 ? HW : 0,
                            v + c * ld + tg * kVec, pstride);
  }
}

// --- GEMM -------------------------------------------------------------------------------------

// out[j][0 .. 8*MV) = sum_c u[c][0 .. 8*MV) * v[c][j] for the NR tiles j: an (8*MV) x NR block of M
// held in registers for the whole reduction over c. FETCH: the first block of a panel, which
// streams U from the last-level cache, prefetches it 128 rows (8 KiB) ahead, past the panel's end
// into the next job's, which follows it in U, and V's rows 24 ahead.
template <int NR, int MV, bool FETCH = false>
inline void gemm_block(int64_t C, const float* __restrict u, const float* __restrict v, int64_t ldv,
                       float* __restrict out, int64_t ldo, bool accumulate) {
  __m256 acc[NR][MV];
#pragma GCC unroll 8
  for (int j = 0; j < NR; ++j)
#pragma GCC unroll 2
    for (int i = 0; i < MV; ++i)
      acc[j][i] = accumulate ? _mm256_loadu_ps(out + j * ldo + i * kVec) : _mm256_setzero_ps();
  for (int64_t c = 0; c < C; ++c) {
    if constexpr (FETCH) {
      _mm_prefetch(reinterpret_cast<const char*>(u + (c + 128) * MV * kVec), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(v + (c + 24) * ldv), _MM_HINT_T0);
    }
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
                int64_t nt, bool acc) {
  constexpr int NR = 6;
  int64_t t = 0;
  if (nt >= NR && nt != NR + 1) {
    gemm_block<NR, MV, true>(C, u, v, ldv, out, ldo, acc);
    t = NR;
  }
  for (; t + NR <= nt && nt - t != NR + 1; t += NR)
    gemm_block<NR, MV>(C, u, v + t, ldv, out + t * ldo, ldo, acc);
  // 7 left as 4 + 3 rather than 6 + 1, whose 2 FMA chains (MV = 2) wait on the FMA latency.
  if (nt - t == NR + 1) {
    gemm_block<4, MV>(C, u, v + t, ldv, out + t * ldo, ldo, acc);
    t += 4;
  }
  switch (nt - t) {
    case 5:
      gemm_block<5, MV>(C, u, v + t, ldv, out + t * ldo, ldo, acc);
      break;
    case 4:
      gemm_block<4, MV>(C, u, v + t, ldv, out + t * ldo, ldo, acc);
      break;
    case 3:
      gemm_block<3, MV>(C, u, v + t, ldv, out + t * ldo, ldo, acc);
      break;
    case 2:
      gemm_block<2, MV>(C, u, v + t, ldv, out + t * ldo, ldo, acc);
      break;
    case 1:
      gemm_block<1, MV>(C, u, v + t, ldv, out + t * ldo, ldo, acc);
      break;
    default:
      break;
  }
}

// M[t][pt][kj * job_channels ..] for the nt tiles of a pass: one point, one job's channels,
// summed over the C input channels whose U and V rows `uj` and `v` start at. `uj` is where U's
// point 0 holds the job's channels, `pstride` U's point stride; `accumulate`: add to M (which
// holds the sum over earlier channels) instead of overwriting it.
void gemm_job(const Geometry& g, const Schedule& s, int64_t C, const float* uj, int64_t pstride,
              const float* v, int64_t ld, int64_t v_pstride, float* mbuf, int64_t nt, int64_t pt,
              int64_t kj, bool accumulate = false) {
  const int64_t kb0 = kj * job_channels(s);
  const float* up = uj + pt * pstride;
  float* mp = mbuf + pt * g.m_kstride + kb0;
  const int64_t ldo = g.points * g.m_kstride;
  const float* vp = v + pt * v_pstride;
  if (s.avx512)
    gemm_avx512(C, up, std::min(2 * kBlockK, g.Kp - kb0), vp, ld, mp, ldo, nt, accumulate);
  else if (g.Kp - kb0 >= kBlockK)
    gemm_panel<2>(C, up, vp, ld, mp, ldo, nt, accumulate);
  else
    gemm_panel<1>(C, up, vp, ld, mp, ldo, nt, accumulate);
}

// --- output transform -------------------------------------------------------------------------

// y for one tile and output channels k0 .. k0+7 (those below Kg) of one group. `mt` is the tile's
// M at channel k0 (point stride g.m_kstride); `y0` is the tile's top-left output of channel k0.
template <int M, int R>
void output_tile(const Geometry& g, const float* mt, int rows, int cols, int64_t k0,
                 const float* bias_g, float* y0) {
  constexpr int A = M + R - 1;
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
    for (int j = 0; j < A; ++j) s[j] = _mm256_loadu_ps(mt + (i * A + j) * g.m_kstride);
    output_mr<M, R>(s, out);
    for (int j = 0; j < M; ++j) _mm256_store_ps(h[i][j], out[j]);
  }
  __m256 o[M][8];  // o[row][col], one vector = 8 channels; columns M..7 are zero
  for (int j = 0; j < M; ++j) {
    __m256 col[A], out[M];
    for (int i = 0; i < A; ++i) col[i] = _mm256_load_ps(h[i][j]);
    output_mr<M, R>(col, out);
    for (int i = 0; i < M; ++i) o[i][j] = _mm256_add_ps(out[i], bias);
  }
  const int64_t OHW = g.OH * g.OW;
  for (int i = 0; i < rows; ++i) {
    for (int j = M; j < 8; ++j) o[i][j] = _mm256_setzero_ps();
    transpose8x8_avx(o[i]);  // now o[i][q] = row i of channel k0 + q
    for (int q = 0; q < kcount; ++q) {
      float* dst = y0 + q * OHW + i * g.OW;
      if (cols == M) {
        // The next line of this row, which the tiles to the right write next: requesting it
        // now keeps the stores from waiting for their read-for-ownership.
        _mm_prefetch(reinterpret_cast<const char*>(dst + 16), _MM_HINT_T0);
        store_row<M>(dst, o[i][q]);
      } else {
        alignas(32) float tmp[8];
        _mm256_store_ps(tmp, o[i][q]);
        for (int j = 0; j < cols; ++j) dst[j] = tmp[j];
      }
    }
  }
}

// y for the tiles [first + tl0, first + tl1) of a pass whose M starts at `mbuf`.
template <int M, int R>
void output_tiles(const ConvProblem& p, const Geometry& g, const float* mbuf, int64_t first,
                  int64_t tl0, int64_t tl1, const float* bias_g, float* yg, int64_t k_lo = 0,
                  int64_t k_hi = INT64_MAX) {
  const int64_t OHW = g.OH * g.OW, tstride = g.points * g.m_kstride;
  k_hi = std::min(k_hi, g.Kg);
  TileCursor cur(g, first + tl0);
  for (int64_t tl = tl0; tl < tl1; ++tl, cur.next(g)) {
    const int64_t row = cur.row(g), col = cur.col(g);
    const int rows = static_cast<int>(std::min<int64_t>(M, g.row_end - row));
    const int cols = static_cast<int>(std::min<int64_t>(M, g.col_end - col));
    float* y0 = yg + cur.n * p.K * OHW + row * g.OW + col;
    for (int64_t k0 = k_lo; k0 < k_hi; k0 += kVec)
      output_tile<M, R>(g, mbuf + tl * tstride + k0, rows, cols, k0, bias_g, y0 + k0 * OHW);
  }
}

// --- driver -----------------------------------------------------------------------------------

// Outputs outside the tiled core (padding of 3 or more) see only zeros: they are the bias.
void fill_outside_core(const ConvProblem& p, const Geometry& g, int64_t plane, const float* bias,
                       float* y) {
  const float b = bias ? bias[plane % p.K] : 0.0f;
  float* out = y + plane * g.OH * g.OW;
  for (int64_t r = 0; r < g.OH; ++r) {
    float* row = out + r * g.OW;
    if (r < g.row_lo || r >= g.row_end) {
      std::fill(row, row + g.OW, b);
    } else {
      std::fill(row, row + g.col_lo, b);
      std::fill(row + g.col_end, row + g.OW, b);
    }
  }
}

template <int M, int R>
void forward_impl(const ConvProblem& p, const Geometry& g, const Schedule& s, const float* x,
                  const float* w, float* u_fill, const float* u, const float* bias, float* y,
                  float* v, float* mbuf, int threads) {
  const int64_t P = g.points, HW = p.H * p.W, OHW = g.OH * g.OW;
  const int64_t jc = job_channels(s), kjobs = (g.Kp + jc - 1) / jc;
  const int64_t kblocks = (g.Kp + kBlockK - 1) / kBlockK, per_job = jc / kBlockK;
  const int64_t runs = (g.Cg + kWeightRun - 1) / kWeightRun;
  // A thread's U slice for one GEMM job: job_channels x C/g floats per point.
  const int64_t job_u = job_u_floats(g, s);
  const bool whole = g.row_lo == 0 && g.row_end == g.OH && g.col_lo == 0 && g.col_end == g.OW;
  // One-shot with the tiles in one shared pass, and room for the threads' slices in the U
  // region: the transform is fused into the GEMM jobs below. Otherwise every pass reads all of
  // U, so it is transformed first.
  const bool fused = w && !s.per_thread && g.chunk >= g.tiles && threads * job_u <= P * g.u_pstride;
  const int64_t merge = fused ? fused_jobs_merged(g, s, threads) : 1;
  const int64_t merged = (kjobs + merge - 1) / merge;
  const int64_t fused_c = fused ? fused_channels(g, s, merge) : g.Cg;
  // Groups side by side (g.pass_groups): each phase below runs over all of them at once.
  const int64_t batch = s.per_thread ? 1 : g.pass_groups;
  // Per group: its input, U, transform output, bias, output and weights.
  auto xg = [&](int64_t grp) { return x + grp * g.Cg * HW; };
  auto ug = [&](int64_t grp) { return u + grp * P * g.u_pstride; };
  auto bias_g = [&](int64_t grp) { return bias ? bias + grp * g.Kg : nullptr; };
  auto yg = [&](int64_t grp) { return y + grp * g.Kg * OHW; };
  auto wg = [&](int64_t grp) { return w + grp * g.Kg * g.Cg * R * R; };
  // Shared passes split the input transform into blocks of channels and the output transform
  // into blocks of tiles, so that small passes still give every thread work.
  constexpr int64_t kChannelBlock = 16, kGroupBlock = 16, kTileBlock = 4;
#pragma omp parallel num_threads(threads)
  {
    if (!whole) {
#pragma omp for schedule(static) nowait
      for (int64_t plane = 0; plane < p.N * p.K; ++plane) fill_outside_core(p, g, plane, bias, y);
    }
    for (int64_t grp0 = 0; grp0 < p.groups; grp0 += batch) {
      const int64_t gn = std::min(batch, p.groups - grp0);
      if (w && !fused) {
#pragma omp for collapse(3) schedule(static)
        for (int64_t gi = 0; gi < gn; ++gi)
          for (int64_t kb = 0; kb < kblocks; ++kb)
            for (int64_t r = 0; r < runs; ++r)
              weight_run<M, R>(g, wg(grp0 + gi), kb, r * kWeightRun,
                               u_fill + (grp0 + gi) * P * g.u_pstride + kb * kBlockK * g.Cg,
                               g.u_pstride, s.avx512);
      }
      if (s.per_thread) {
        // Thread i owns V slice i and tiles [i*sub, (i+1)*sub) of M.
        const int me = omp_get_thread_num();
        float* my_v = v + me * P * s.sub_v_pstride;
        float* my_m = mbuf + me * s.sub * P * g.m_kstride;
        // Each thread the same contiguous run of passes in every call (make_schedule gives each
        // thread as many), so that every output line is written by the same core call after call.
        // With dynamic passes a line written by one core in one call is written by the other in the
        // next, and on hosts where the two vCPUs do not share a cache every pass pays for it.
#pragma omp for schedule(static)
        for (int64_t pass = 0; pass < s.passes; ++pass) {
          int64_t first = 0, nt = 0;
          pass_tiles(g, s, pass, first, nt);
          // V rows as long as this pass needs: passes shorter than the slice's longest would
          // leave its L2 lines partly unused.
          const int64_t ld = (nt + kVec - 1) / kVec * kVec, v_pstride = odd_lines(g.Cg * ld);
          input_tiles<M, R>(p, g, xg(grp0), first, nt, 0, ld / kVec, 0, g.Cg, my_v, ld, v_pstride);
          for (int64_t pt = 0; pt < P; ++pt)
            for (int64_t kj = 0; kj < kjobs; ++kj)
              gemm_job(g, s, g.Cg, ug(grp0) + kj * jc * g.Cg, g.u_pstride, my_v, ld, v_pstride,
                       my_m, nt, pt, kj);
          output_tiles<M, R>(p, g, my_m, first, 0, nt, bias_g(grp0), yg(grp0));
        }
        continue;
      }
      for (int64_t first = 0; first < g.tiles; first += g.chunk) {
        const int64_t nt = std::min(g.chunk, g.tiles - first);
        const int64_t tgroups = (nt + kVec - 1) / kVec;
        const int64_t cblocks = (g.Cg + kChannelBlock - 1) / kChannelBlock;
        const int64_t gblocks = (tgroups + kGroupBlock - 1) / kGroupBlock;
#pragma omp for collapse(3) schedule(static)
        for (int64_t gi = 0; gi < gn; ++gi)
          for (int64_t gb = 0; gb < gblocks; ++gb)
            for (int64_t cb = 0; cb < cblocks; ++cb)
              input_tiles<M, R>(p, g, xg(grp0 + gi), first, nt, gb * kGroupBlock,
                                std::min(tgroups, (gb + 1) * kGroupBlock), cb * kChannelBlock,
                                std::min(g.Cg, (cb + 1) * kChannelBlock), v + gi * g.v_group,
                                g.chunk_pad, g.v_pstride);
        if (fused) {
          // Each job transforms its output channels' weights for every point into its thread's
          // small slice of the U region, which its GEMMs then read from L2 and the next job
          // overwrites there. All of U (P/r^2 times the weights) never goes to memory.
          float* my_u = u_fill + grp0 * P * g.u_pstride + omp_get_thread_num() * merge * job_u;
#pragma omp for collapse(2) schedule(dynamic)
          for (int64_t gi = 0; gi < gn; ++gi)
            for (int64_t mj = 0; mj < merged; ++mj) {
              const int64_t kj0 = mj * merge, kj1 = std::min(kjobs, kj0 + merge);
              // Straight into the slice: it stays in L2, so the P interleaved rows cost less than
              // weight_run's copy out of L1.
              for (int64_t c0 = 0; c0 < g.Cg; c0 += fused_c) {
                const int64_t cn = std::min(fused_c, g.Cg - c0), cu = P * odd_lines(jc * cn);
                for (int64_t kb = kj0 * per_job; kb < std::min(kblocks, kj1 * per_job); ++kb) {
                  const int64_t kw = std::min<int64_t>(kBlockK, g.Kp - kb * kBlockK);
                  const int64_t kj = kb / per_job;
                  float* ukb = my_u + (kj - kj0) * cu + (kb - kj * per_job) * kBlockK * cn;
                  for (int64_t c = 0; c < cn; ++c)
                    weight_block<M, R>(g, wg(grp0 + gi), kb * kBlockK, c0 + c, ukb + c * kw, cu / P,
                                       s.avx512);
                }
                // Point-major, so that V's rows of a point serve every job of the merge from
                // L1/L2.
                for (int64_t pt = 0; pt < P; ++pt)
                  for (int64_t kj = kj0; kj < kj1; ++kj)
                    gemm_job(g, s, cn, my_u + (kj - kj0) * cu, cu / P,
                             v + gi * g.v_group + c0 * g.chunk_pad, g.chunk_pad, g.v_pstride,
                             mbuf + gi * g.m_group, nt, pt, kj, c0 > 0);
              }
              // The job has every point of its channels: their inverse transform follows while its
              // M is in L2, with no barrier for the other jobs.
              output_tiles<M, R>(p, g, mbuf + gi * g.m_group, first, 0, nt, bias_g(grp0 + gi),
                                 yg(grp0 + gi), kj0 * jc, kj1 * jc);
            }
          continue;
        } else {
#pragma omp for collapse(3) schedule(dynamic)
          for (int64_t gi = 0; gi < gn; ++gi)
            for (int64_t pt = 0; pt < P; ++pt)
              for (int64_t kj = 0; kj < kjobs; ++kj)
                gemm_job(g, s, g.Cg, ug(grp0 + gi) + kj * jc * g.Cg, g.u_pstride,
                         v + gi * g.v_group, g.chunk_pad, g.v_pstride, mbuf + gi * g.m_group, nt,
                         pt, kj);
        }
        const int64_t tblocks = (nt + kTileBlock - 1) / kTileBlock;
#pragma omp for collapse(2) schedule(static)
        for (int64_t gi = 0; gi < gn; ++gi)
          for (int64_t tb = 0; tb < tblocks; ++tb)
            output_tiles<M, R>(p, g, mbuf + gi * g.m_group, first, tb * kTileBlock,
                               std::min(nt, (tb + 1) * kTileBlock), bias_g(grp0 + gi),
                               yg(grp0 + gi));
      }
    }
  }
}

}  // namespace

void transform_weights_avx2(const ConvProblem& p, const Geometry& g, const float* w, float* u,
                            int threads, bool avx512) {
  dispatch_mr(g.m, g.r, [&](auto m, auto r) {
    transform_weights_impl<m(), r()>(p, g, w, u, threads, avx512);
  });
}

void forward_avx2(const ConvProblem& p, const Geometry& g, const Schedule& s, const float* x,
                  const float* w, float* u_fill, const float* u, const float* bias, float* y,
                  float* v, float* mbuf, int threads) {
  dispatch_mr(g.m, g.r, [&](auto m, auto r) {
    forward_impl<m(), r()>(p, g, s, x, w, u_fill, u, bias, y, v, mbuf, threads);
  });
}

}  // namespace conv::kernels::winograd
