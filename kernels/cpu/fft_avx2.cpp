// cpu.fft AVX2/FMA kernels (compiled with -mavx2 -mfma; fft.cpp calls them only after a
// run-time ISA check). Sources: Mathieu, Henaff & LeCun, "Fast Training of Convolutional
// Networks through FFTs" (ICLR 2014) for the tiled frequency-domain convolution, Vasilache et
// al., "Fast Convolutional Nets With fbfft" (ICLR 2015) for real-to-complex transforms that keep
// t x (t/2+1) values, and NNPACK's fixed-size FFT tile convolutions for vectorising across
// tiles: each ymm lane holds a different tile (or channel), so the radix-4 codelets below are
// plain scalar-looking code on 8-lane vectors and need no shuffles.
//
// 2D real FFT of a t x t tile (8 lanes): row pass = t/2 complex FFTs of length t, each packing
// two real rows as real and imaginary part and separating them by Hermitian symmetry; column
// pass = t/2+1 complex FFTs of length t over the kept columns v = 0..t/2. Frequency (u, v) is
// stored at slot f = v*t + u. The inverse runs the column pass first and then t/2 pair-packed
// row FFTs, pruned to the rows of the output tile.
//
// Cost per 8 tiles: about (t + 1) complex FFTs of length t forward, (t/2 + 1 + mh/2) inverse,
// each (t/4) log4(t) radix-4 butterflies of 3 complex multiplies and 8 complex adds.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "fft.hpp"

namespace conv::kernels::fft {
namespace {

constexpr int kSlot = 16;  // floats per frequency element: 8 real lanes, 8 imaginary lanes

struct cv {
  __m256 r, i;
};

inline cv cadd(cv a, cv b) {
  return {_mm256_add_ps(a.r, b.r), _mm256_add_ps(a.i, b.i)};
}
inline cv csub(cv a, cv b) {
  return {_mm256_sub_ps(a.r, b.r), _mm256_sub_ps(a.i, b.i)};
}
inline cv cload(const float* p) {
  return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)};
}
inline void cstore(float* p, cv a) {
  _mm256_storeu_ps(p, a.r);
  _mm256_storeu_ps(p + 8, a.i);
}
inline cv czero() {
  return {_mm256_setzero_ps(), _mm256_setzero_ps()};
}

// cos(2 pi k / N) and -/+ sin(2 pi k / N) for N = 2..64 at index N + k (powers of two do not
// overlap), rounded once from double.
struct Twiddles {
  alignas(64) float c[128], sf[128], si[128];
  Twiddles() {
    for (int n = 2; n <= 64; n *= 2)
      for (int k = 0; k < n; ++k) {
        const double a = 2.0 * M_PI * k / n;
        c[n + k] = static_cast<float>(std::cos(a));
        sf[n + k] = static_cast<float>(-std::sin(a));
        si[n + k] = static_cast<float>(std::sin(a));
      }
  }
};
const Twiddles kTw;

template <int N, bool INV>
inline cv twiddle(cv x, int k) {
  const __m256 c = _mm256_broadcast_ss(&kTw.c[N + k]);
  const __m256 s = _mm256_broadcast_ss(INV ? &kTw.si[N + k] : &kTw.sf[N + k]);
  return {_mm256_fmsub_ps(x.r, c, _mm256_mul_ps(x.i, s)),
          _mm256_fmadd_ps(x.r, s, _mm256_mul_ps(x.i, c))};
}

// Out-of-place decimation-in-time FFT of length N (radix 4, radix 2 at the bottom when N is
// not a power of 4): reads in[k*S] for k < N, writes out[0..N) in natural order. Forward
// uses e^{-2 pi i jk/N}, inverse e^{+2 pi i jk/N}, both unnormalised.
template <int N, bool INV, int S>
__attribute__((always_inline)) inline void fft(const cv* in, cv* out) {
  if constexpr (N == 1) {
    out[0] = in[0];
  } else if constexpr (N == 2) {
    const cv a = in[0], b = in[S];
    out[0] = cadd(a, b);
    out[1] = csub(a, b);
  } else {
    constexpr int Q = N / 4;
    fft<Q, INV, 4 * S>(in, out);
    fft<Q, INV, 4 * S>(in + S, out + Q);
    fft<Q, INV, 4 * S>(in + 2 * S, out + 2 * Q);
    fft<Q, INV, 4 * S>(in + 3 * S, out + 3 * Q);
    for (int k = 0; k < Q; ++k) {
      cv a = out[k], b = out[k + Q], c = out[k + 2 * Q], d = out[k + 3 * Q];
      if (k > 0) {
        b = twiddle<N, INV>(b, k);
        c = twiddle<N, INV>(c, 2 * k);
        d = twiddle<N, INV>(d, 3 * k);
      }
      const cv t0 = cadd(a, c), t1 = csub(a, c), t2 = cadd(b, d), t3 = csub(b, d);
      out[k] = cadd(t0, t2);
      out[k + 2 * Q] = csub(t0, t2);
      // Forward: X[k+Q] = t1 - i t3, X[k+3Q] = t1 + i t3; the inverse swaps the signs of i.
      const cv mi = {_mm256_add_ps(t1.r, t3.i), _mm256_sub_ps(t1.i, t3.r)};  // t1 - i t3
      const cv pi = {_mm256_sub_ps(t1.r, t3.i), _mm256_add_ps(t1.i, t3.r)};  // t1 + i t3
      out[k + Q] = INV ? pi : mi;
      out[k + 3 * Q] = INV ? mi : pi;
    }
  }
}

template <int N, bool INV>
__attribute__((noinline)) void fft_top(const cv* in, cv* out) {
  fft<N, INV, 1>(in, out);
}

inline void transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// stage[l][0..T) (one row per lane) -> dst[j * stride] = (stage[0][j], ..., stage[7][j]).
template <int T>
inline void lanes_to_vectors(const float (*stage)[T], __m256* dst, int stride) {
  for (int jb = 0; jb < T; jb += 8) {
    __m256 r[8];
    for (int l = 0; l < 8; ++l) r[l] = _mm256_load_ps(&stage[l][jb]);
    transpose8(r);
    for (int q = 0; q < 8; ++q) dst[(jb + q) * stride] = r[q];
  }
}

template <int T>
inline void vectors_to_lanes(const __m256* src, int stride, float (*stage)[T]) {
  for (int jb = 0; jb < T; jb += 8) {
    __m256 r[8];
    for (int q = 0; q < 8; ++q) r[q] = src[(jb + q) * stride];
    transpose8(r);
    for (int l = 0; l < 8; ++l) _mm256_store_ps(&stage[l][jb], r[l]);
  }
}

// ---- 2D transforms ----

// Forward 2D real FFT of 8 lanes. `rows.load(i, dst, stride)` writes row i (T vectors, one per
// column) to dst[j * stride]; rows >= nrows are zero and are not loaded. Writes 2 * DFT2 into
// slots dst + (v*T + u) * es; `weights` conjugates and scales by 1/(4 T^2) (fft.cpp explains).
template <int T, class Rows>
void forward2d(Rows& rows, int nrows, float* dst, ptrdiff_t es, bool weights) {
  constexpr int H = T / 2;
  cv z[T], Z[T];
  for (int i0 = 0; i0 < T; i0 += 2) {
    if (i0 >= nrows) {
      for (int v = 0; v <= H; ++v) {
        cstore(dst + (v * T + i0) * es, czero());
        cstore(dst + (v * T + i0 + 1) * es, czero());
      }
      continue;
    }
    rows.load(i0, &z[0].r, 2);
    if (i0 + 1 < nrows) {
      rows.load(i0 + 1, &z[0].i, 2);
    } else {
      for (int j = 0; j < T; ++j) z[j].i = _mm256_setzero_ps();
    }
    fft_top<T, false>(z, Z);
    for (int v = 0; v <= H; ++v) {
      const cv p = Z[v], q = Z[(T - v) & (T - 1)];
      // 2A = p + conj(q), 2B = -i (p - conj(q)) for the two real rows A (re) and B (im).
      const cv a = {_mm256_add_ps(p.r, q.r), _mm256_sub_ps(p.i, q.i)};
      const cv b = {_mm256_add_ps(p.i, q.i), _mm256_sub_ps(q.r, p.r)};
      cstore(dst + (v * T + i0) * es, a);
      cstore(dst + (v * T + i0 + 1) * es, b);
    }
  }
  const __m256 scale = _mm256_set1_ps(weights ? 0.25f / (T * T) : 1.0f);
  const __m256 nscale = _mm256_set1_ps(weights ? -0.25f / (T * T) : 1.0f);
  for (int v = 0; v <= H; ++v) {
    float* col = dst + v * T * es;
    for (int i = 0; i < T; ++i) z[i] = cload(col + i * es);
    fft_top<T, false>(z, Z);
    for (int u = 0; u < T; ++u) {
      cv o = Z[u];
      if (weights) o = {_mm256_mul_ps(o.r, scale), _mm256_mul_ps(o.i, nscale)};
      cstore(col + u * es, o);
    }
  }
}

// Inverse 2D transform: `cols.load(v, c)` supplies spectrum column v (c[u], u < T); the column
// pass writes rows < mrows into tmp + (v*T + i) * es (may be the columns' own storage), then
// row pairs are inverted and handed to `out.store(i, src, stride)` (T vectors at src[j*stride]).
// Result: T^2 * IDFT2 (unnormalised) of the Hermitian-extended spectrum.
template <int T, class Cols, class Out>
void inverse2d(Cols& cols, float* tmp, ptrdiff_t es, int mrows, Out& out) {
  constexpr int H = T / 2;
  const int rows = std::min(T, (mrows + 1) & ~1);
  cv c[T], o[T];
  for (int v = 0; v <= H; ++v) {
    cols.load(v, c);
    fft_top<T, true>(c, o);
    for (int i = 0; i < rows; ++i) cstore(tmp + (v * T + i) * es, o[i]);
  }
  for (int i0 = 0; i0 < rows; i0 += 2) {
    // DC and Nyquist columns are real for a real tile; taking the real parts drops rounding.
    {
      const cv a = cload(tmp + i0 * es), b = cload(tmp + (i0 + 1) * es);
      c[0] = {a.r, b.r};
      const cv ah = cload(tmp + (H * T + i0) * es), bh = cload(tmp + (H * T + i0 + 1) * es);
      c[H] = {ah.r, bh.r};
    }
    for (int v = 1; v < H; ++v) {
      const cv a = cload(tmp + (v * T + i0) * es), b = cload(tmp + (v * T + i0 + 1) * es);
      c[v] = {_mm256_sub_ps(a.r, b.i), _mm256_add_ps(a.i, b.r)};      // a + i b
      c[T - v] = {_mm256_add_ps(a.r, b.i), _mm256_sub_ps(b.r, a.i)};  // conj(a) + i conj(b)
    }
    fft_top<T, true>(c, o);
    out.store(i0, &o[0].r, 2);
    if (i0 + 1 < mrows) out.store(i0 + 1, &o[0].i, 2);
  }
}

// ---- tile loaders and writers ----

int64_t floor_div(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
int64_t ceil_div(int64_t a, int64_t b) {
  return -floor_div(-a, b);
}

// Whether output position o reads at least one input pixel (1D).
inline bool alive_1d(int64_t o, int64_t stride, int64_t pad, int64_t dil, int64_t R, int64_t H) {
  const int64_t p0 = o * stride - pad;
  if (p0 > H - 1) return false;
  const int64_t r_lo = p0 >= 0 ? 0 : (-p0 + dil - 1) / dil;
  const int64_t r_hi = std::min(R - 1, (H - 1 - p0) / dil);
  return r_lo <= r_hi;
}

// Rows of 8 input tiles: lane l reads phase image rows r0[l] + i*sh, columns c0[l] + j*sw of
// plane[l] (null: a padding lane of zeros).
template <int T>
struct InputRows {
  const float* plane[kLanes];
  int64_t r0[kLanes], c0[kLanes];
  int64_t sh, sw, H, W;

  void load(int i, __m256* dst, int stride) const {
    alignas(32) float st[kLanes][T];
    for (int l = 0; l < kLanes; ++l) {
      float* s = st[l];
      const int64_t r = r0[l] + i * sh;
      if (!plane[l] || r < 0 || r >= H) {
        std::memset(s, 0, sizeof(float) * T);
        continue;
      }
      const float* src = plane[l] + r * W;
      const int64_t c = c0[l];
      if (sw == 1 && c >= 0 && c + T <= W) {
        std::memcpy(s, src + c, sizeof(float) * T);
        continue;
      }
      // Lanes j with 0 <= c + j*sw < W read the input; the rest are padding.
      const int64_t jlo = std::min<int64_t>(T, c >= 0 ? 0 : ceil_div(-c, sw));
      const int64_t jhi = std::max(jlo, std::min<int64_t>(T, c >= W ? 0 : ceil_div(W - c, sw)));
      for (int64_t j = 0; j < jlo; ++j) s[j] = 0.0f;
      for (int64_t j = jlo; j < jhi; ++j) s[j] = src[c + j * sw];
      for (int64_t j = jhi; j < T; ++j) s[j] = 0.0f;
    }
    lanes_to_vectors<T>(st, dst, stride);
  }
};

// Rows of 8 zero-padded phase sub-kernels: lane l reads the R x S kernel at base[l] (null:
// zero lane); sub-kernel row q is kernel row rmap[q] (-1: zero), column s' is smap[s'].
template <int T>
struct WeightRows {
  const float* base[kLanes];
  int rmap[T], smap[T];
  int64_t S = 1, Sp = 1;

  void load(int q, __m256* dst, int stride) const {
    alignas(32) float st[kLanes][T];
    std::memset(st, 0, sizeof(st));
    const int r = rmap[q];
    if (r >= 0)
      for (int l = 0; l < kLanes; ++l) {
        if (!base[l]) continue;
        const float* row = base[l] + r * S;
        for (int64_t s = 0; s < Sp; ++s)
          if (smap[s] >= 0) st[l][s] = row[smap[s]];
      }
    lanes_to_vectors<T>(st, dst, stride);
  }
};

// Sub-kernel row q of phase ia holds tap r = ia + l*ph with q = r*dil/stride (fft.cpp).
template <int T>
void phase_map(int64_t ia, int64_t R, int64_t dil, int64_t stride, int64_t ph, int64_t Rp,
               int* map) {
  for (int q = 0; q < T; ++q) map[q] = -1;
  for (int64_t r = ia; r < R; r += ph) {
    const int64_t q = r * dil / stride;
    if (q < Rp) map[q] = static_cast<int>(r);
  }
}

// Writes output rows of 8 tiles: lane l covers rows oh0[l].., columns ow0[l].. of plane[l]
// (null: a padding lane), adding bias[l]; outputs that read no input get the bias alone.
template <int T>
struct OutTiles {
  float* plane[kLanes];
  float bias[kLanes];
  int64_t oh0[kLanes], ow0[kLanes];
  const ConvProblem* p;
  const Geometry* g;

  void store(int i, const __m256* src, int stride) const {
    alignas(32) float st[kLanes][T];
    vectors_to_lanes<T>(src, stride, st);
    const int64_t OH = g->OH, OW = g->OW;
    for (int l = 0; l < kLanes; ++l) {
      const int64_t oh = oh0[l] + i;
      if (!plane[l] || oh >= OH) continue;
      float* yr = plane[l] + oh * OW + ow0[l];
      const int64_t n = std::min<int64_t>(g->mw, OW - ow0[l]);
      const float b = bias[l];
      if (!alive_1d(oh, p->stride_h, p->pad_top, p->dilation_h, p->R, p->H)) {
        for (int64_t c = 0; c < n; ++c) yr[c] = b;
        continue;
      }
      if (g->col_gaps) {
        for (int64_t c = 0; c < n; ++c)
          yr[c] = alive_1d(ow0[l] + c, p->stride_w, p->pad_left, p->dilation_w, p->S, p->W)
                      ? st[l][c] + b
                      : b;
        continue;
      }
      const int64_t lo = std::clamp<int64_t>(g->ow_lo - ow0[l], 0, n);
      const int64_t hi = std::clamp<int64_t>(g->ow_hi - ow0[l], lo, n);
      for (int64_t c = 0; c < lo; ++c) yr[c] = b;
      for (int64_t c = lo; c < hi; ++c) yr[c] = st[l][c] + b;
      for (int64_t c = hi; c < n; ++c) yr[c] = b;
    }
  }
};

// Spectrum columns read from slots (in-place inverse of a GEMM result).
template <int T>
struct SlotCols {
  const float* base;
  ptrdiff_t es;
  void load(int v, cv* c) const {
    const float* col = base + v * T * es;
    for (int u = 0; u < T; ++u) c[u] = cload(col + u * es);
  }
};

// Spectrum columns computed on the fly: Y[f] = sum_c' W[f][c'][k] X[f][c'][jv] (small C').
template <int T>
struct FusedCols {
  const float* x;  // X block at column vector jv
  const float* w;  // group weights at output channel k's lane
  int64_t Cp;
  ptrdiff_t xs_c, xs_f, ws_c, ws_f;
  void load(int v, cv* c) const {
    for (int u = 0; u < T; ++u) {
      const int64_t f = v * T + u;
      const float* xf = x + f * xs_f;
      const float* wf = w + f * ws_f;
      __m256 ar = _mm256_setzero_ps(), ai = _mm256_setzero_ps();
      for (int64_t cc = 0; cc < Cp; ++cc) {
        const __m256 xr = _mm256_loadu_ps(xf + cc * xs_c), xi = _mm256_loadu_ps(xf + cc * xs_c + 8);
        const __m256 wr = _mm256_broadcast_ss(wf + cc * ws_c);
        const __m256 wi = _mm256_broadcast_ss(wf + cc * ws_c + 8);
        ar = _mm256_fmadd_ps(wr, xr, ar);
        ar = _mm256_fnmadd_ps(wi, xi, ar);
        ai = _mm256_fmadd_ps(wr, xi, ai);
        ai = _mm256_fmadd_ps(wi, xr, ai);
      }
      c[u] = {ar, ai};
    }
  }
};

// Depthwise spectrum columns: Y[f] = sum_p X_p[f] * W_p[f], lanes = channels.
template <int T>
struct DwCols {
  const float* x;  // slot: P areas of F elements
  const float* w;  // [P][F][16] of this channel block
  int64_t P, F;
  void load(int v, cv* c) const {
    for (int u = 0; u < T; ++u) {
      const int64_t f = v * T + u;
      __m256 ar = _mm256_setzero_ps(), ai = _mm256_setzero_ps();
      for (int64_t q = 0; q < P; ++q) {
        const cv a = cload(x + (q * F + f) * kSlot), b = cload(w + (q * F + f) * kSlot);
        ar = _mm256_fmadd_ps(a.r, b.r, ar);
        ar = _mm256_fnmadd_ps(a.i, b.i, ar);
        ai = _mm256_fmadd_ps(a.r, b.i, ai);
        ai = _mm256_fmadd_ps(a.i, b.r, ai);
      }
      c[u] = {ar, ai};
    }
  }
};

// ---- frequency-domain complex GEMM: Y_f[k][jv] = sum_c' W_f[c'][k] X_f[c'][jv] ----

template <int KR, int JR>
inline void cgemm_micro(const float* wf, ptrdiff_t ws_c, const int64_t* koff, const float* xf,
                        ptrdiff_t xs_c, int64_t Cp, float* yf, ptrdiff_t ys_k) {
  __m256 ar[KR][JR], ai[KR][JR];
  for (int k = 0; k < KR; ++k)
    for (int j = 0; j < JR; ++j) ar[k][j] = ai[k][j] = _mm256_setzero_ps();
  for (int64_t cc = 0; cc < Cp; ++cc) {
    const float* xc = xf + cc * xs_c;
    const float* wc = wf + cc * ws_c;
    __m256 xr[JR], xi[JR];
    for (int j = 0; j < JR; ++j) {
      xr[j] = _mm256_loadu_ps(xc + j * kSlot);
      xi[j] = _mm256_loadu_ps(xc + j * kSlot + 8);
    }
    for (int k = 0; k < KR; ++k) {
      const __m256 wr = _mm256_broadcast_ss(wc + koff[k]);
      const __m256 wi = _mm256_broadcast_ss(wc + koff[k] + 8);
      for (int j = 0; j < JR; ++j) {
        ar[k][j] = _mm256_fmadd_ps(wr, xr[j], ar[k][j]);
        ai[k][j] = _mm256_fmadd_ps(wr, xi[j], ai[k][j]);
      }
      for (int j = 0; j < JR; ++j) {
        ar[k][j] = _mm256_fnmadd_ps(wi, xi[j], ar[k][j]);
        ai[k][j] = _mm256_fmadd_ps(wi, xr[j], ai[k][j]);
      }
    }
  }
  for (int k = 0; k < KR; ++k)
    for (int j = 0; j < JR; ++j) {
      float* o = yf + k * ys_k + j * kSlot;
      _mm256_storeu_ps(o, ar[k][j]);
      _mm256_storeu_ps(o + 8, ai[k][j]);
    }
}

void cgemm_freq(const float* wf, const float* xf, float* yf, int64_t Cp, int64_t Kg, int64_t Kb,
                int64_t Jv_ld, int64_t Jv) {
  const ptrdiff_t ws_c = Kb * kSlot, xs_c = Jv_ld * kSlot, ys_k = Jv_ld * kSlot;
  auto lane = [](int64_t k) { return (k / kLanes) * kSlot + k % kLanes; };
  int64_t k = 0;
  for (; k + 2 <= Kg; k += 2) {
    const int64_t koff[2] = {lane(k), lane(k + 1)};
    int64_t j = 0;
    for (; j + 2 <= Jv; j += 2)
      cgemm_micro<2, 2>(wf, ws_c, koff, xf + j * kSlot, xs_c, Cp, yf + k * ys_k + j * kSlot, ys_k);
    if (j < Jv)
      cgemm_micro<2, 1>(wf, ws_c, koff, xf + j * kSlot, xs_c, Cp, yf + k * ys_k + j * kSlot, ys_k);
  }
  if (k < Kg) {
    const int64_t koff[1] = {lane(k)};
    int64_t j = 0;
    for (; j + 2 <= Jv; j += 2)
      cgemm_micro<1, 2>(wf, ws_c, koff, xf + j * kSlot, xs_c, Cp, yf + k * ys_k + j * kSlot, ys_k);
    if (j < Jv)
      cgemm_micro<1, 1>(wf, ws_c, koff, xf + j * kSlot, xs_c, Cp, yf + k * ys_k + j * kSlot, ys_k);
  }
}

// ---- drivers ----

// Phase (ia, ib) of reduction channel c' = c * P + p.
struct Phase {
  int64_t a, b;  // offsets into the padded input: (ia * dilation) % stride
};
inline Phase phase_offsets(const ConvProblem& p, const Geometry& g, int64_t pidx) {
  const int64_t ia = pidx / g.Pb, ib = pidx % g.Pb;
  return {ia * p.dilation_h % p.stride_h, ib * p.dilation_w % p.stride_w};
}

template <int T>
void weight_item(const ConvProblem& p, const Geometry& g, const float* w, float* packed,
                 int64_t item) {
  WeightRows<T> rows;
  rows.S = p.S;
  rows.Sp = g.Sp;
  const int64_t RS = p.R * p.S, Cg = p.Cg(), Kg = p.Kg();
  int64_t pidx;
  float* dst;
  ptrdiff_t es;
  if (g.depthwise) {
    const int64_t cb = item / g.P;
    pidx = item % g.P;
    for (int l = 0; l < kLanes; ++l) {
      const int64_t c = cb * kLanes + l;
      rows.base[l] = c < p.C ? w + c * RS : nullptr;
    }
    dst = packed + item * g.F * kSlot;
    es = kSlot;
  } else {
    // item = (group, c', kb)
    const int64_t kb = item % g.Kb, cp = item / g.Kb % g.Cp, grp = item / (g.Kb * g.Cp);
    const int64_t c = cp / g.P;
    pidx = cp % g.P;
    for (int l = 0; l < kLanes; ++l) {
      const int64_t k = kb * kLanes + l;
      rows.base[l] = k < Kg ? w + ((grp * Kg + k) * Cg + c) * RS : nullptr;
    }
    dst = packed + grp * g.F * g.Cp * g.Kb * kSlot + (cp * g.Kb + kb) * kSlot;
    es = g.Cp * g.Kb * kSlot;
  }
  phase_map<T>(pidx / g.Pb, p.R, p.dilation_h, p.stride_h, g.ph, g.Rp, rows.rmap);
  phase_map<T>(pidx % g.Pb, p.S, p.dilation_w, p.stride_w, g.pw, g.Sp, rows.smap);
  forward2d<T>(rows, static_cast<int>(g.Rp), dst, es, true);
}

int64_t weight_items(const Geometry& g, const ConvProblem& p) {
  return g.depthwise ? g.Cb * g.P : p.groups * g.Cp * g.Kb;
}

template <int T>
void pack_all(const ConvProblem& p, const Geometry& g, const float* w, float* packed) {
  const int64_t n = weight_items(g, p);
#pragma omp for schedule(dynamic)
  for (int64_t it = 0; it < n; ++it) weight_item<T>(p, g, w, packed, it);
}

template <int T>
void depthwise(const ConvProblem& p, const Geometry& g, const float* x, const float* wt,
               const float* bias, float* y, float* slots) {
  const int64_t tiles = g.TH * g.TW, HW = p.H * p.W, OHW = g.OH * g.OW;
  float* slot = slots + omp_get_thread_num() * g.slot_floats;
#pragma omp for schedule(dynamic)
  for (int64_t it = 0; it < g.items; ++it) {
    const int64_t tile = it % tiles, cb = it / tiles % g.Cb, n = it / (tiles * g.Cb);
    const int64_t th = tile / g.TW, tw = tile % g.TW;
    for (int64_t q = 0; q < g.P; ++q) {
      const Phase ph = phase_offsets(p, g, q);
      InputRows<T> rows;
      rows.sh = p.stride_h, rows.sw = p.stride_w, rows.H = p.H, rows.W = p.W;
      for (int l = 0; l < kLanes; ++l) {
        const int64_t c = cb * kLanes + l;
        rows.plane[l] = c < p.C ? x + (n * p.C + c) * HW : nullptr;
        rows.r0[l] = th * g.mh * p.stride_h + ph.a - p.pad_top;
        rows.c0[l] = tw * g.mw * p.stride_w + ph.b - p.pad_left;
      }
      forward2d<T>(rows, T, slot + q * g.F * kSlot, kSlot, false);
    }
    DwCols<T> cols{slot, wt + cb * g.P * g.F * kSlot, g.P, g.F};
    OutTiles<T> out;
    out.p = &p, out.g = &g;
    for (int l = 0; l < kLanes; ++l) {
      const int64_t c = cb * kLanes + l;
      out.plane[l] = c < p.C ? y + (n * p.K + c) * OHW : nullptr;
      out.bias[l] = (bias && c < p.C) ? bias[c] : 0.0f;
      out.oh0[l] = th * g.mh;
      out.ow0[l] = tw * g.mw;
    }
    inverse2d<T>(cols, slot, kSlot, static_cast<int>(g.mh), out);
  }
}

template <int T>
void general(const ConvProblem& p, const Geometry& g, const float* x, const float* wt,
             const float* bias, float* y, float* X, float* Y, float* slots) {
  const int64_t tiles = g.TH * g.TW, J = p.N * tiles, HW = p.H * p.W, OHW = g.OH * g.OW;
  const int64_t Cg = p.Cg(), Kg = p.Kg(), Cp = g.Cp, F = g.F;
  const ptrdiff_t xs_c = g.Jv * kSlot, xs_f = Cp * g.Jv * kSlot;
  float* slot = slots ? slots + omp_get_thread_num() * g.slot_floats : nullptr;
  for (int64_t grp = 0; grp < p.groups; ++grp) {
    const float* wg = wt + grp * F * Cp * g.Kb * kSlot;
    for (int64_t blk = 0; blk < g.blocks; ++blk) {
      const int64_t jv0 = blk * g.Jv, Jv = std::min(g.Jv, g.Jv_total - jv0);
      // Lane l of column vector jv is column j = (jv0 + jv) * 8 + l = (n, th, tw).
      auto column = [&](int64_t jv, int l, int64_t* n, int64_t* th, int64_t* tw) {
        const int64_t j = (jv0 + jv) * kLanes + l;
        if (j >= J) return false;
        *n = j / tiles;
        *th = j % tiles / g.TW;
        *tw = j % g.TW;
        return true;
      };
#pragma omp for schedule(dynamic)
      for (int64_t it = 0; it < Cp * Jv; ++it) {
        const int64_t cp = it / Jv, jv = it % Jv;
        const int64_t c = grp * Cg + cp / g.P;
        const Phase ph = phase_offsets(p, g, cp % g.P);
        InputRows<T> rows;
        rows.sh = p.stride_h, rows.sw = p.stride_w, rows.H = p.H, rows.W = p.W;
        for (int l = 0; l < kLanes; ++l) {
          int64_t n, th, tw;
          if (!column(jv, l, &n, &th, &tw)) {
            rows.plane[l] = nullptr;
            rows.r0[l] = rows.c0[l] = 0;
            continue;
          }
          rows.plane[l] = x + (n * p.C + c) * HW;
          rows.r0[l] = th * g.mh * p.stride_h + ph.a - p.pad_top;
          rows.c0[l] = tw * g.mw * p.stride_w + ph.b - p.pad_left;
        }
        forward2d<T>(rows, T, X + (cp * g.Jv + jv) * kSlot, xs_f, false);
      }
      if (!g.fused) {
#pragma omp for schedule(static)
        for (int64_t f = 0; f < F; ++f)
          cgemm_freq(wg + f * Cp * g.Kb * kSlot, X + f * xs_f, Y + f * Kg * g.Jv * kSlot, Cp, Kg,
                     g.Kb, g.Jv, Jv);
      }
#pragma omp for schedule(dynamic)
      for (int64_t it = 0; it < Kg * Jv; ++it) {
        const int64_t k = it / Jv, jv = it % Jv;
        OutTiles<T> out;
        out.p = &p, out.g = &g;
        for (int l = 0; l < kLanes; ++l) {
          int64_t n, th, tw;
          if (!column(jv, l, &n, &th, &tw)) {
            out.plane[l] = nullptr;
            out.bias[l] = 0;
            out.oh0[l] = out.ow0[l] = 0;
            continue;
          }
          out.plane[l] = y + (n * p.K + grp * Kg + k) * OHW;
          out.bias[l] = bias ? bias[grp * Kg + k] : 0.0f;
          out.oh0[l] = th * g.mh;
          out.ow0[l] = tw * g.mw;
        }
        if (g.fused) {
          FusedCols<T> cols{X + jv * kSlot,
                            wg + (k / kLanes) * kSlot + k % kLanes,
                            Cp,
                            xs_c,
                            xs_f,
                            g.Kb * kSlot,
                            Cp * g.Kb * kSlot};
          inverse2d<T>(cols, slot, kSlot, static_cast<int>(g.mh), out);
        } else {
          float* base = Y + (k * g.Jv + jv) * kSlot;
          const ptrdiff_t es = Kg * g.Jv * kSlot;
          SlotCols<T> cols{base, es};
          inverse2d<T>(cols, base, es, static_cast<int>(g.mh), out);
        }
      }
    }
  }
}

template <int T>
void run(const ConvProblem& p, const Geometry& g, const float* x, const float* w,
         const float* packed, const float* bias, float* y, char* ws, int threads) {
  float* wt = packed ? nullptr : reinterpret_cast<float*>(ws + g.w_off);
  const float* wsrc = packed ? packed : wt;
  float* X = reinterpret_cast<float*>(ws + g.x_off);
  float* Y = reinterpret_cast<float*>(ws + g.y_off);
  float* slots = g.slots ? reinterpret_cast<float*>(ws + g.slot_off) : nullptr;
  const int nt = static_cast<int>(
      std::max<int64_t>(1, g.slots ? std::min<int64_t>(threads, g.slots) : threads));
#pragma omp parallel num_threads(nt)
  {
    if (!packed) pack_all<T>(p, g, w, wt);
    if (g.depthwise)
      depthwise<T>(p, g, x, wsrc, bias, y, slots);
    else
      general<T>(p, g, x, wsrc, bias, y, X, Y, slots);
  }
}

// Tile-test adapters: 8 tiles of T x T floats, [lane][row][col].
template <int T>
struct ArrayRows {
  const float* tiles;
  void load(int i, __m256* dst, int stride) const {
    alignas(32) float st[kLanes][T];
    for (int l = 0; l < kLanes; ++l) std::memcpy(st[l], tiles + (l * T + i) * T, sizeof(st[l]));
    lanes_to_vectors<T>(st, dst, stride);
  }
};
template <int T>
struct ArrayOut {
  float* tiles;
  void store(int i, const __m256* src, int stride) const {
    alignas(32) float st[kLanes][T];
    vectors_to_lanes<T>(src, stride, st);
    for (int l = 0; l < kLanes; ++l) std::memcpy(tiles + (l * T + i) * T, st[l], sizeof(st[l]));
  }
};

template <int T>
void test_forward(const float* tiles, float* spec) {
  std::vector<float> buf(T * (T / 2 + 1) * kSlot);  // test hook: allocation is fine here
  float* slots = buf.data();
  ArrayRows<T> rows{tiles};
  forward2d<T>(rows, T, slots, kSlot, false);
  for (int l = 0; l < kLanes; ++l)
    for (int u = 0; u < T; ++u)
      for (int v = 0; v <= T / 2; ++v) {
        const float* s = slots + (v * T + u) * kSlot;
        float* o = spec + ((l * T + u) * (T / 2 + 1) + v) * 2;
        o[0] = s[l];
        o[1] = s[8 + l];
      }
}

template <int T>
void test_inverse(const float* spec, float* tiles) {
  std::vector<float> buf(T * (T / 2 + 1) * kSlot);
  float* slots = buf.data();
  for (int l = 0; l < kLanes; ++l)
    for (int u = 0; u < T; ++u)
      for (int v = 0; v <= T / 2; ++v) {
        float* s = slots + (v * T + u) * kSlot;
        const float* i = spec + ((l * T + u) * (T / 2 + 1) + v) * 2;
        s[l] = i[0];
        s[8 + l] = i[1];
      }
  SlotCols<T> cols{slots, kSlot};
  ArrayOut<T> out{tiles};
  inverse2d<T>(cols, slots, kSlot, T, out);
}

}  // namespace

void pack_weights_avx2(const ConvProblem& p, const Geometry& g, const float* w, float* packed,
                       int threads) {
#pragma omp parallel num_threads(std::max(1, threads))
  {
    switch (g.t) {
      case 8:
        pack_all<8>(p, g, w, packed);
        break;
      case 16:
        pack_all<16>(p, g, w, packed);
        break;
      case 32:
        pack_all<32>(p, g, w, packed);
        break;
      default:
        pack_all<64>(p, g, w, packed);
        break;
    }
  }
}

void forward_avx2(const ConvProblem& p, const Geometry& g, const float* x, const float* w,
                  const float* packed, const float* bias, float* y, char* ws, int threads) {
  switch (g.t) {
    case 8:
      run<8>(p, g, x, w, packed, bias, y, ws, threads);
      break;
    case 16:
      run<16>(p, g, x, w, packed, bias, y, ws, threads);
      break;
    case 32:
      run<32>(p, g, x, w, packed, bias, y, ws, threads);
      break;
    default:
      run<64>(p, g, x, w, packed, bias, y, ws, threads);
      break;
  }
}

void test_forward_tile(int t, const float* tiles, float* spec) {
  switch (t) {
    case 8:
      test_forward<8>(tiles, spec);
      break;
    case 16:
      test_forward<16>(tiles, spec);
      break;
    case 32:
      test_forward<32>(tiles, spec);
      break;
    default:
      test_forward<64>(tiles, spec);
      break;
  }
}

void test_inverse_tile(int t, const float* spec, float* tiles) {
  switch (t) {
    case 8:
      test_inverse<8>(spec, tiles);
      break;
    case 16:
      test_inverse<16>(spec, tiles);
      break;
    case 32:
      test_inverse<32>(spec, tiles);
      break;
    default:
      test_inverse<64>(spec, tiles);
      break;
  }
}

}  // namespace conv::kernels::fft
