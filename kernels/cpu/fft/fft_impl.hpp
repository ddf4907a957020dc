// cpu.fft kernels, generic over the vector width: included by fft_avx2.cpp (8 lanes, ymm) and
// fft_avx512.cpp (16 lanes, zmm), each of which supplies a traits type `V` and compiles this
// file for its ISA. Everything here has internal linkage (anonymous namespace), so the two
// ISA builds never share a symbol.
//
// Sources: Mathieu, Henaff & LeCun, "Fast Training of Convolutional Networks through FFTs"
// (ICLR 2014) for the tiled frequency-domain convolution; Vasilache et al., "Fast
// Convolutional Nets With fbfft" (ICLR 2015) for real-to-complex transforms that keep
// t x (t/2+1) values; NNPACK's fixed-size FFT tile convolutions for vectorising across tiles:
// each lane holds a different tile (or channel), so the radix-4 codelets are plain
// scalar-looking code on vectors and need no shuffles.
//
// 2D real FFT of a t x t tile (all lanes at once): row pass = t/2 complex FFTs of length t,
// each packing two real rows as real and imaginary part and separating them by Hermitian
// symmetry; column pass = t/2+1 complex FFTs of length t over the kept columns v = 0..t/2.
// Frequency (u, v) is stored at f = v*t + u. The inverse runs the column pass first, then
// pair-packed row FFTs, pruned to the rows of the output tile.
// Cost per lane group: about (t + 1) complex FFTs of length t forward, t/2 + 1 + mh/2 inverse,
// each (t/4) log4(t) radix-4 butterflies (3 complex multiplies, 8 complex adds).
//
// Required of V: reg (vector of L floats), L, zero, set1, bcast, loadu, storeu, add, sub, mul,
// fmadd (a*b+c), fmsub (a*b-c), fnmadd (c-a*b), transpose (L x L in registers),
// load_range / gather_range / gather_idx (lanes outside the range are 0 and not read),
// store_n (first n lanes), blend_range (lanes [lo, hi) from b, others from a), and the
// GEMM register block KR x JR.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "cpu/fft/fft.hpp"

namespace conv::kernels::fft {
namespace {

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

// p + off for an address only dereferenced in lanes that are in range (masked loads).
inline const float* offset_ptr(const float* p, int64_t off) {
  return reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(p) +
                                        static_cast<uintptr_t>(off * 4));
}

template <class V>
struct Impl {
  using reg = typename V::reg;
  static constexpr int L = V::L;
  static constexpr int kSlot = 2 * L;  // floats per frequency element: L real, L imaginary
  static_assert(V::KR == gemm_kr(V::L), "fft.cpp sizes the product slots with gemm_kr()");

  struct cv {
    reg r, i;
  };

  static cv cadd(cv a, cv b) { return {V::add(a.r, b.r), V::add(a.i, b.i)}; }
  static cv csub(cv a, cv b) { return {V::sub(a.r, b.r), V::sub(a.i, b.i)}; }
  static cv cload(const float* p) { return {V::loadu(p), V::loadu(p + L)}; }
  static void cstore(float* p, cv a) {
    V::storeu(p, a.r);
    V::storeu(p + L, a.i);
  }
  static cv czero() { return {V::zero(), V::zero()}; }
  // Element access through the fields, so copies are whole-vector loads and stores (an
  // aggregate copy compiles to 16-byte moves that defeat store-to-load forwarding).
  static cv ld(const cv* p) { return {p->r, p->i}; }
  static void st(cv* p, cv v) {
    p->r = v.r;
    p->i = v.i;
  }

  template <int N, bool INV>
  static cv twiddle(cv x, int k) {
    const reg c = V::bcast(&kTw.c[N + k]);
    const reg s = V::bcast(INV ? &kTw.si[N + k] : &kTw.sf[N + k]);
    return {V::fmsub(x.r, c, V::mul(x.i, s)), V::fmadd(x.r, s, V::mul(x.i, c))};
  }

  // Radix-4 butterfly on a, b, c, d (already twiddled), results to o[0], o[Q], o[2Q], o[3Q].
  template <bool INV, int Q>
  static void radix4(cv a, cv b, cv c, cv d, cv* o) {
    const cv t0 = cadd(a, c), t1 = csub(a, c), t2 = cadd(b, d), t3 = csub(b, d);
    st(o, cadd(t0, t2));
    st(o + 2 * Q, csub(t0, t2));
    // Forward: X[k+Q] = t1 - i t3, X[k+3Q] = t1 + i t3; the inverse swaps the signs of i.
    const cv mi = {V::add(t1.r, t3.i), V::sub(t1.i, t3.r)};  // t1 - i t3
    const cv pi = {V::sub(t1.r, t3.i), V::add(t1.i, t3.r)};  // t1 + i t3
    st(o + Q, INV ? pi : mi);
    st(o + 3 * Q, INV ? mi : pi);
  }

  // Out-of-place decimation-in-time FFT of length N (radix 4, radix 2 at the bottom when N is
  // not a power of 4): reads in[k*S] for k < N, writes out[0..N) in natural order. Forward
  // uses e^{-2 pi i jk/N}, inverse e^{+2 pi i jk/N}, both unnormalised.
  template <int N, bool INV, int S>
  __attribute__((always_inline)) static inline void fft(const cv* in, cv* out) {
    if constexpr (N == 2) {
      const cv a = ld(in), b = ld(in + S);
      st(out, cadd(a, b));
      st(out + 1, csub(a, b));
    } else if constexpr (N == 4) {
      radix4<INV, 1>(ld(in), ld(in + S), ld(in + 2 * S), ld(in + 3 * S), out);
    } else {
      constexpr int Q = N / 4;
      fft<Q, INV, 4 * S>(in, out);
      fft<Q, INV, 4 * S>(in + S, out + Q);
      fft<Q, INV, 4 * S>(in + 2 * S, out + 2 * Q);
      fft<Q, INV, 4 * S>(in + 3 * S, out + 3 * Q);
      radix4<INV, Q>(ld(out), ld(out + Q), ld(out + 2 * Q), ld(out + 3 * Q), out);
      for (int k = 1; k < Q; ++k)
        radix4<INV, Q>(ld(out + k), twiddle<N, INV>(ld(out + k + Q), k),
                       twiddle<N, INV>(ld(out + k + 2 * Q), 2 * k),
                       twiddle<N, INV>(ld(out + k + 3 * Q), 3 * k), out + k);
    }
  }

  template <int N, bool INV>
  __attribute__((noinline)) static void fft_top(const cv* in, cv* out) {
    fft<N, INV, 1>(in, out);
  }

  // ---- 2D transforms ----

  // Forward 2D real FFT of L lanes. `rows.load(i, dst, stride)` writes row i (T vectors, one
  // per column) to dst[j * stride]; rows >= nrows are zero and not loaded. Writes 2 * DFT2 to
  // elements dst + (v*T + u) * es; `weights` conjugates and scales by 1/(4 T^2) (fft.cpp).
  // The row pass goes to `scratch` (F contiguous elements) when given, so the strided
  // destination is written once; without it the transform runs in place in dst.
  template <int T, class Rows>
  static void forward2d(const Rows& rows, int nrows, float* dst, ptrdiff_t es, bool weights,
                        float* scratch = nullptr) {
    constexpr int H = T / 2;
    float* mid = scratch ? scratch : dst;  // row-pass results
    const ptrdiff_t ms = scratch ? kSlot : es;
    cv z[T], Z[T];
    for (int i0 = 0; i0 < T; i0 += 2) {
      if (i0 >= nrows) {
        for (int v = 0; v <= H; ++v) {
          cstore(mid + (v * T + i0) * ms, czero());
          cstore(mid + (v * T + i0 + 1) * ms, czero());
        }
        continue;
      }
      rows.load(i0, &z[0].r, 2);
      if (i0 + 1 < nrows) {
        rows.load(i0 + 1, &z[0].i, 2);
      } else {
        for (int j = 0; j < T; ++j) z[j].i = V::zero();
      }
      fft_top<T, false>(z, Z);
      for (int v = 0; v <= H; ++v) {
        const cv p = ld(&Z[v]), q = ld(&Z[(T - v) & (T - 1)]);
        // 2A = p + conj(q), 2B = -i (p - conj(q)) for the two real rows A (re) and B (im).
        cstore(mid + (v * T + i0) * ms, {V::add(p.r, q.r), V::sub(p.i, q.i)});
        cstore(mid + (v * T + i0 + 1) * ms, {V::add(p.i, q.i), V::sub(q.r, p.r)});
      }
    }
    const reg scale = V::set1(weights ? 0.25f / (T * T) : 1.0f);
    const reg nscale = V::set1(weights ? -0.25f / (T * T) : 1.0f);
    for (int v = 0; v <= H; ++v) {
      const float* col = mid + v * T * ms;
      for (int i = 0; i < T; ++i) st(&z[i], cload(col + i * ms));
      fft_top<T, false>(z, Z);
      float* out = dst + v * T * es;
      for (int u = 0; u < T; ++u) {
        cv o = ld(&Z[u]);
        if (weights) o = {V::mul(o.r, scale), V::mul(o.i, nscale)};
        cstore(out + u * es, o);
      }
    }
  }

  // Inverse 2D transform: `cols.load(v, c)` supplies spectrum column v (c[u], u < T); the
  // column pass writes rows < mrows into tmp + (v*T + i) * es (may be the columns' own
  // storage), then row pairs are inverted and handed to `out.store(i, src, stride)` (T vectors
  // at src[j*stride]). Result: T^2 * IDFT2 of the Hermitian-extended spectrum.
  template <int T, class Cols, class Out>
  static void inverse2d(const Cols& cols, float* tmp, ptrdiff_t es, int mrows, const Out& out) {
    cv c[T];
    for (int v = 0; v <= T / 2; ++v) {
      cols.load(v, c);
      inv_column<T>(c, v, tmp, es, mrows);
    }
    inv_rows<T>(tmp, es, mrows, out);
  }

  // Column pass for spectrum column v: rows < mrows (rounded up to even) of its inverse FFT.
  template <int T>
  static void inv_column(const cv* c, int v, float* tmp, ptrdiff_t es, int mrows) {
    const int rows = std::min(T, (mrows + 1) & ~1);
    cv o[T];
    fft_top<T, true>(c, o);
    for (int i = 0; i < rows; ++i) cstore(tmp + (v * T + i) * es, ld(&o[i]));
  }

  // Row pass: pairs of rows packed as real and imaginary part of one inverse FFT.
  template <int T, class Out>
  static void inv_rows(const float* tmp, ptrdiff_t es, int mrows, const Out& out) {
    constexpr int H = T / 2;
    cv c[T], o[T];
    for (int i0 = 0; i0 < mrows; i0 += 2) {
      // DC and Nyquist columns are real for a real tile; taking the real parts drops rounding.
      st(&c[0], {cload(tmp + i0 * es).r, cload(tmp + (i0 + 1) * es).r});
      st(&c[H], {cload(tmp + (H * T + i0) * es).r, cload(tmp + (H * T + i0 + 1) * es).r});
      for (int v = 1; v < H; ++v) {
        const cv a = cload(tmp + (v * T + i0) * es), b = cload(tmp + (v * T + i0 + 1) * es);
        st(&c[v], {V::sub(a.r, b.i), V::add(a.i, b.r)});      // a + i b
        st(&c[T - v], {V::add(a.r, b.i), V::sub(b.r, a.i)});  // conj(a) + i conj(b)
      }
      fft_top<T, true>(c, o);
      out.store(i0, &o[0].r, 2);
      if (i0 + 1 < mrows) out.store(i0 + 1, &o[0].i, 2);
    }
  }

  // ---- tile loaders and writers ----

  // Rows of L input tiles: lane l reads phase-image row r0[l] + i*sh, columns c0[l] + j*sw of
  // plane[l] (null: a padding lane of zeros); only tile columns [jlo[l], jhi[l]) are inside.
  template <int T>
  struct InputRows {
    const float* plane[L];
    int64_t r0[L], c0[L];
    int jlo[L], jhi[L];
    int64_t sh = 1, sw = 1, H = 1, W = 1;

    // Sets lane l (plane may be null) and its valid column range.
    void set(int l, const float* pl, int64_t row0, int64_t col0) {
      plane[l] = pl;
      r0[l] = row0;
      c0[l] = col0;
      const int64_t lo = col0 >= 0 ? 0 : ceil_div(-col0, sw);
      const int64_t hi = col0 >= W ? 0 : ceil_div(W - col0, sw);
      jlo[l] = static_cast<int>(std::min<int64_t>(T, lo));
      jhi[l] = static_cast<int>(std::clamp<int64_t>(hi, jlo[l], T));
    }

    void load(int i, reg* dst, int stride) const {
      for (int jb = 0; jb < T; jb += L) {
        reg r[L];
        for (int l = 0; l < L; ++l) {
          const int64_t row = r0[l] + i * sh;
          const int lo = std::max(jlo[l] - jb, 0), hi = std::min(jhi[l] - jb, L);
          if (!plane[l] || row < 0 || row >= H || lo >= hi) {
            r[l] = V::zero();
            continue;
          }
          const float* src = offset_ptr(plane[l], row * W + c0[l] + jb * sw);
          if (sw != 1)
            r[l] = V::gather_range(src, static_cast<int>(sw), lo, hi);
          else if (lo == 0 && hi == L)
            r[l] = V::loadu(src);
          else
            r[l] = V::load_range(src, lo, hi);
        }
        V::transpose(r);
        for (int q = 0; q < L && jb + q < T; ++q) dst[(jb + q) * stride] = r[q];
      }
    }
  };

  // Rows of L zero-padded phase sub-kernels: lane l reads the R x S kernel at base[l] (null:
  // zero lane); sub-kernel row q is kernel row rmap[q] (-1: zero), column s' is cmap[s'].
  template <int T>
  struct WeightRows {
    const float* base[L];
    int rmap[T];
    alignas(64) int cmap[T + L];  // padded with -1 so every chunk of L is readable
    int64_t S = 1, Sp = 1;
    bool contiguous = false;  // cmap[s'] = s' for s' < Sp

    void load(int q, reg* dst, int stride) const {
      const int r = rmap[q];
      for (int jb = 0; jb < T; jb += L) {
        reg v[L];
        for (int l = 0; l < L; ++l) {
          if (r < 0 || !base[l] || jb >= Sp) {
            v[l] = V::zero();
            continue;
          }
          const float* row = base[l] + r * S;
          v[l] = contiguous ? V::load_range(offset_ptr(row, jb), 0,
                                            static_cast<int>(std::min<int64_t>(L, Sp - jb)))
                            : V::gather_idx(row, cmap + jb);
        }
        V::transpose(v);
        for (int k = 0; k < L && jb + k < T; ++k) dst[(jb + k) * stride] = v[k];
      }
    }
  };

  // Sub-kernel row q of phase ia holds tap r = ia + l*ph with q = r*dil/stride (fft.cpp).
  static void phase_map(int64_t ia, int64_t R, int64_t dil, int64_t stride, int64_t ph, int64_t Rp,
                        int n, int* map) {
    for (int q = 0; q < n; ++q) map[q] = -1;
    for (int64_t r = ia; r < R; r += ph) {
      const int64_t q = r * dil / stride;
      if (q < Rp) map[q] = static_cast<int>(r);
    }
  }

  // Writes output rows of L tiles: lane l covers rows oh0[l].., columns ow0[l].. of plane[l]
  // (null: a padding lane), adding bias[l]; outputs that read no input get the bias alone.
  // Fill the public fields, then call prepare() once before the rows are stored.
  template <int T>
  struct OutTiles {
    float* plane[L];
    float bias[L];
    int64_t oh0[L], ow0[L];
    const ConvProblem* p;
    const Geometry* g;
    // From prepare(): columns of each tile inside the output and whether all of them read
    // input; rows [fast_lo, fast_hi) where every lane stores a whole row of such outputs.
    int ncols[L];
    bool full[L];
    float* base[L];  // row 0, column 0 of each lane's tile (null: padding lane)
    int fast_lo = 0, fast_hi = 0, nmin = 0;

    void prepare() {
      const int64_t OH = g->OH, OW = g->OW;
      int64_t lo = 0, hi = T, nm = g->mw;
      bool all = !g->row_gaps;
      for (int l = 0; l < L; ++l) {
        ncols[l] = static_cast<int>(std::min<int64_t>(g->mw, OW - ow0[l]));
        full[l] = !g->col_gaps && ow0[l] >= g->ow_lo && ow0[l] + ncols[l] <= g->ow_hi;
        base[l] = plane[l] ? plane[l] + oh0[l] * OW + ow0[l] : nullptr;
        all = all && plane[l] && full[l];
        lo = std::max(lo, g->oh_lo - oh0[l]);
        hi = std::min({hi, OH - oh0[l], g->oh_hi - oh0[l]});
        nm = std::min<int64_t>(nm, ncols[l]);
      }
      fast_lo = all ? static_cast<int>(std::max<int64_t>(lo, 0)) : 0;
      fast_hi = all ? static_cast<int>(std::max<int64_t>(hi, fast_lo)) : 0;
      nmin = static_cast<int>(nm);
    }

    void store(int i, const reg* src, int stride) const {
      const int64_t OW = g->OW;
      const bool fast = i >= fast_lo && i < fast_hi;
      for (int jb = 0; jb < g->mw; jb += L) {
        reg r[L];
        if constexpr (T % L == 0) {
          for (int q = 0; q < L; ++q) r[q] = src[(jb + q) * stride];
        } else {
          for (int q = 0; q < L; ++q) r[q] = jb + q < T ? src[(jb + q) * stride] : V::zero();
        }
        V::transpose(r);
        if (fast) {  // every lane: a whole row of outputs that all read input
          if (jb + L <= nmin) {
            for (int l = 0; l < L; ++l)
              V::storeu(base[l] + i * OW + jb, V::add(r[l], V::bcast(&bias[l])));
          } else {
            for (int l = 0; l < L; ++l)
              if (jb < ncols[l])
                V::store_n(base[l] + i * OW + jb, V::add(r[l], V::bcast(&bias[l])), ncols[l] - jb);
          }
        } else {
          store_slow(i, jb, r);
        }
      }
    }

    // Rows with padding lanes, rows past the output, or outputs that read no input.
    void store_slow(int i, int jb, const reg* r) const {
      for (int l = 0; l < L; ++l) {
        const int64_t oh = oh0[l] + i;
        const int n = std::min(ncols[l] - jb, L);
        if (!base[l] || oh >= g->OH || n <= 0) continue;
        float* y = base[l] + i * g->OW + jb;
        const reg b = V::set1(bias[l]);
        const bool alive = g->row_gaps
                               ? alive_1d(oh, p->stride_h, p->pad_top, p->dilation_h, p->R, p->H)
                               : oh >= g->oh_lo && oh < g->oh_hi;
        if (alive && full[l]) {
          V::store_n(y, V::add(r[l], b), n);
        } else if (!alive) {
          V::store_n(y, b, n);
        } else if (!g->col_gaps) {
          const int64_t lo = g->ow_lo - ow0[l] - jb, hi = g->ow_hi - ow0[l] - jb;
          V::store_n(
              y,
              V::blend_range(b, V::add(r[l], b), static_cast<int>(std::clamp<int64_t>(lo, 0, L)),
                             static_cast<int>(std::clamp<int64_t>(hi, 0, L))),
              n);
        } else {
          V::store_n(y, V::add(r[l], b), n);
          for (int c = 0; c < n; ++c)
            if (!alive_1d(ow0[l] + jb + c, p->stride_w, p->pad_left, p->dilation_w, p->S, p->W))
              y[c] = bias[l];
        }
      }
    }
  };

  // Spectrum columns read from elements (in-place inverse of a GEMM result).
  template <int T>
  struct SlotCols {
    const float* base;
    ptrdiff_t es;
    void load(int v, cv* c) const {
      const float* col = base + v * T * es;
      for (int u = 0; u < T; ++u) st(&c[u], cload(col + u * es));
    }
  };

  // Spectrum columns of NK output channels at once, formed on the fly (small C'):
  // Y_q[f] = sum_c' W[f][c'][k_q] X[f][c'], X and W laid out [f][c'][2L]. Each X element is
  // loaded once for all NK channels; the real and imaginary sums use two accumulators each.
  template <int T, int NK>
  struct ProductCols {
    const float* x;    // X[jv] at f = 0
    const float* w;    // group weights at f = 0
    int64_t koff[NK];  // per channel: its weight block (kb * F * C' * 2L) plus its lane
    int64_t Cp;
    void load(int v, cv (*c)[T]) const {
      const ptrdiff_t fs = Cp * kSlot;
      for (int u = 0; u < T; ++u) {
        const float* xf = x + (v * T + u) * fs;
        const float* wf = w + (v * T + u) * fs;
        if (Cp == 1) {  // one product, no sums (the seed layer: one input channel)
          const reg xr = V::loadu(xf), xi = V::loadu(xf + L);
          for (int q = 0; q < NK; ++q) {
            const reg wr = V::bcast(wf + koff[q]), wi = V::bcast(wf + koff[q] + L);
            st(&c[q][u], {V::fnmadd(wi, xi, V::mul(wr, xr)), V::fmadd(wi, xr, V::mul(wr, xi))});
          }
          continue;
        }
        reg ar[NK], ai[NK], br[NK], bi[NK];
        for (int q = 0; q < NK; ++q) ar[q] = ai[q] = br[q] = bi[q] = V::zero();
        for (int64_t cc = 0; cc < Cp; ++cc) {
          const reg xr = V::loadu(xf + cc * kSlot), xi = V::loadu(xf + cc * kSlot + L);
          for (int q = 0; q < NK; ++q) {
            const float* we = wf + cc * kSlot + koff[q];
            const reg wr = V::bcast(we), wi = V::bcast(we + L);
            ar[q] = V::fmadd(wr, xr, ar[q]);
            br[q] = V::fmadd(wi, xi, br[q]);
            ai[q] = V::fmadd(wr, xi, ai[q]);
            bi[q] = V::fmadd(wi, xr, bi[q]);
          }
        }
        for (int q = 0; q < NK; ++q) st(&c[q][u], {V::sub(ar[q], br[q]), V::add(ai[q], bi[q])});
      }
    }
  };

  // Depthwise spectrum columns: Y[f] = sum_p X_p[f] * W_p[f], lanes = channels.
  template <int T>
  struct DwCols {
    const float* x;  // slot: P areas of F elements
    const float* w;  // [P][F][2L] of this channel block
    int64_t P, F;
    void load(int v, cv* c) const {
      for (int u = 0; u < T; ++u) {
        const int64_t f = v * T + u;
        reg ar = V::zero(), ai = V::zero();
        for (int64_t q = 0; q < P; ++q) {
          const cv a = cload(x + (q * F + f) * kSlot), b = cload(w + (q * F + f) * kSlot);
          ar = V::fmadd(a.r, b.r, ar);
          ai = V::fmadd(a.r, b.i, ai);
          ar = V::fnmadd(a.i, b.i, ar);
          ai = V::fmadd(a.i, b.r, ai);
        }
        st(&c[u], {ar, ai});
      }
    }
  };

  // ---- frequency-domain complex GEMM: Y_f[k][jv] = sum_c' W_f[c'][k] X_f[c'][jv] ----
  // Layouts (elements of 2L floats): X [jv][f][c'], W [kb][f][c'] (lane k % L), Y [k][jv][f];
  // so for one frequency every operand stream runs contiguously along c'.

  struct GemmArgs {
    const float* w;  // W at (kb = 0, f); koff[] adds each output channel's block and lane
    const float* x;  // X at (jv = 0, f)
    float* y;        // Y at (k = 0, jv = 0, f)
    int64_t Cp;
    ptrdiff_t xs_j;        // X floats between column vectors: F * C' * 2L
    ptrdiff_t ys_k, ys_j;  // Y floats between output channels / column vectors
  };

  // One column vector: the real and imaginary sums are split in two accumulators each, so
  // every chain takes one FMA per channel (the 2x latency-bound chains of the general block
  // would stall with only KR*2 of them).
  template <int KR>
  static void cgemm_micro1(const GemmArgs& a, const int64_t* koff, int64_t k, int64_t j) {
    reg ar[KR], ai[KR], br[KR], bi[KR];
    for (int q = 0; q < KR; ++q) ar[q] = ai[q] = br[q] = bi[q] = V::zero();
    const float* xp = a.x + j * a.xs_j;
    for (int64_t cc = 0; cc < a.Cp; ++cc) {
      const reg xr = V::loadu(xp + cc * kSlot), xi = V::loadu(xp + cc * kSlot + L);
      const float* wc = a.w + cc * kSlot;
      for (int q = 0; q < KR; ++q) {
        const reg wr = V::bcast(wc + koff[q]), wi = V::bcast(wc + koff[q] + L);
        ar[q] = V::fmadd(wr, xr, ar[q]);
        br[q] = V::fmadd(wi, xi, br[q]);
        ai[q] = V::fmadd(wr, xi, ai[q]);
        bi[q] = V::fmadd(wi, xr, bi[q]);
      }
    }
    for (int q = 0; q < KR; ++q) {
      float* o = a.y + (k + q) * a.ys_k + j * a.ys_j;
      V::storeu(o, V::sub(ar[q], br[q]));
      V::storeu(o + L, V::add(ai[q], bi[q]));
    }
  }

  template <int KR, int JR>
  static void cgemm_micro(const GemmArgs& a, const int64_t* koff, int64_t k, int64_t j) {
    if constexpr (JR == 1) return cgemm_micro1<KR>(a, koff, k, j);
    reg ar[KR][JR], ai[KR][JR];
    for (int q = 0; q < KR; ++q)
      for (int r = 0; r < JR; ++r) ar[q][r] = ai[q][r] = V::zero();
    const float* xp = a.x + j * a.xs_j;
    for (int64_t cc = 0; cc < a.Cp; ++cc) {
      const float* xc = xp + cc * kSlot;
      const float* wc = a.w + cc * kSlot;
      reg xr[JR], xi[JR];
      for (int r = 0; r < JR; ++r) {
        xr[r] = V::loadu(xc + r * a.xs_j);
        xi[r] = V::loadu(xc + r * a.xs_j + L);
      }
      for (int q = 0; q < KR; ++q) {
        const reg wr = V::bcast(wc + koff[q]);
        const reg wi = V::bcast(wc + koff[q] + L);
        for (int r = 0; r < JR; ++r) {
          ar[q][r] = V::fmadd(wr, xr[r], ar[q][r]);
          ai[q][r] = V::fmadd(wr, xi[r], ai[q][r]);
        }
        for (int r = 0; r < JR; ++r) {
          ar[q][r] = V::fnmadd(wi, xi[r], ar[q][r]);
          ai[q][r] = V::fmadd(wi, xr[r], ai[q][r]);
        }
      }
    }
    for (int q = 0; q < KR; ++q)
      for (int r = 0; r < JR; ++r) {
        float* o = a.y + (k + q) * a.ys_k + (j + r) * a.ys_j;
        V::storeu(o, ar[q][r]);
        V::storeu(o + L, ai[q][r]);
      }
  }

  template <int KR>
  static void cgemm_rows(const GemmArgs& a, const int64_t* koff, int64_t k, int64_t Jv) {
    int64_t j = 0;
    for (; j + V::JR <= Jv; j += V::JR) cgemm_micro<KR, V::JR>(a, koff, k, j);
    if constexpr (V::JR > 2)
      if (Jv - j == 2) {
        cgemm_micro<KR, 2>(a, koff, k, j);
        return;
      }
    for (; j < Jv; ++j) cgemm_micro<KR, 1>(a, koff, k, j);
  }

  // One frequency: all K/g output channels x Jv column vectors. `wkb` = floats between weight
  // blocks of L output channels (F * C' * 2L).
  static void cgemm_freq(const GemmArgs& a, int64_t Kg, ptrdiff_t wkb, int64_t Jv) {
    static_assert(V::KR >= 2 && V::KR <= 4, "register blocks of 2..4 output channels");
    for (int64_t k = 0; k < Kg; k += V::KR) {
      int64_t koff[V::KR];
      const int64_t kr = std::min<int64_t>(V::KR, Kg - k);
      for (int64_t q = 0; q < kr; ++q) koff[q] = (k + q) / L * wkb + (k + q) % L;
      if constexpr (V::KR >= 4)
        if (kr == 4) {
          cgemm_rows<4>(a, koff, k, Jv);
          continue;
        }
      if constexpr (V::KR >= 3)
        if (kr == 3) {
          cgemm_rows<3>(a, koff, k, Jv);
          continue;
        }
      if (kr == 2)
        cgemm_rows<2>(a, koff, k, Jv);
      else
        cgemm_rows<1>(a, koff, k, Jv);
    }
  }

  // ---- drivers ----

  // Offsets into the padded input of phase pidx = ia * Pb + ib: (ia * dilation) % stride.
  static void phase_offsets(const ConvProblem& p, const Geometry& g, int64_t pidx, int64_t* a,
                            int64_t* b) {
    *a = pidx / g.Pb * p.dilation_h % p.stride_h;
    *b = pidx % g.Pb * p.dilation_w % p.stride_w;
  }

  template <int T>
  static void weight_item(const ConvProblem& p, const Geometry& g, const float* w, float* packed,
                          int64_t item, float* scratch = nullptr) {
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
      for (int l = 0; l < L; ++l) {
        const int64_t c = cb * L + l;
        rows.base[l] = c < p.C ? w + c * RS : nullptr;
      }
      dst = packed + item * g.F * kSlot;
      es = kSlot;
    } else {
      // item = (group, c', kb)
      const int64_t kb = item % g.Kb, cp = item / g.Kb % g.Cp, grp = item / (g.Kb * g.Cp);
      const int64_t c = cp / g.P;
      pidx = cp % g.P;
      for (int l = 0; l < L; ++l) {
        const int64_t k = kb * L + l;
        rows.base[l] = k < Kg ? w + ((grp * Kg + k) * Cg + c) * RS : nullptr;
      }
      dst = packed + ((grp * g.Kb + kb) * g.F * g.Cp + cp) * kSlot;  // [g][kb][f][c']
      es = g.Cp * kSlot;
    }
    phase_map(pidx / g.Pb, p.R, p.dilation_h, p.stride_h, g.ph, g.Rp, T, rows.rmap);
    phase_map(pidx % g.Pb, p.S, p.dilation_w, p.stride_w, g.pw, g.Sp, T + L, rows.cmap);
    rows.contiguous = p.dilation_w == 1 && p.stride_w == 1;
    forward2d<T>(rows, static_cast<int>(g.Rp), dst, es, true, es == kSlot ? nullptr : scratch);
  }

  static int64_t weight_items(const ConvProblem& p, const Geometry& g) {
    return g.depthwise ? g.Cb * g.P : p.groups * g.Cp * g.Kb;
  }

  template <int T>
  static void pack_all(const ConvProblem& p, const Geometry& g, const float* w, float* packed) {
    const int64_t n = weight_items(p, g);
#pragma omp for schedule(static)
    for (int64_t it = 0; it < n; ++it) weight_item<T>(p, g, w, packed, it);
  }

  template <int T>
  static void depthwise(const ConvProblem& p, const Geometry& g, const float* x, const float* wt,
                        const float* bias, float* y, float* slots) {
    const int64_t tiles = g.TH * g.TW, HW = p.H * p.W, OHW = g.OH * g.OW;
    float* slot = slots + omp_get_thread_num() * g.slot_floats;
#pragma omp for schedule(static)
    for (int64_t it = 0; it < g.items; ++it) {
      // Static schedule, tiles fastest: each thread keeps its own channel blocks (their
      // weights stay in its cache, their output planes are written by it alone), and repeated
      // calls touch the same data from the same core.
      const int64_t tile = it % tiles, cb = it / tiles % g.Cb, n = it / (tiles * g.Cb);
      const int64_t th = tile / g.TW, tw = tile % g.TW;
      for (int64_t q = 0; q < g.P; ++q) {
        int64_t a, b;
        phase_offsets(p, g, q, &a, &b);
        InputRows<T> rows;
        rows.sh = p.stride_h, rows.sw = p.stride_w, rows.H = p.H, rows.W = p.W;
        for (int l = 0; l < L; ++l) {
          const int64_t c = cb * L + l;
          rows.set(l, c < p.C ? x + (n * p.C + c) * HW : nullptr,
                   th * g.mh * p.stride_h + a - p.pad_top, tw * g.mw * p.stride_w + b - p.pad_left);
        }
        forward2d<T>(rows, T, slot + q * g.F * kSlot, kSlot, false);
      }
      DwCols<T> cols{slot, wt + cb * g.P * g.F * kSlot, g.P, g.F};
      OutTiles<T> out;
      out.p = &p, out.g = &g;
      for (int l = 0; l < L; ++l) {
        const int64_t c = cb * L + l;
        out.plane[l] = c < p.C ? y + (n * p.K + c) * OHW : nullptr;
        out.bias[l] = (bias && c < p.C) ? bias[c] : 0.0f;
        out.oh0[l] = th * g.mh;
        out.ow0[l] = tw * g.mw;
      }
      out.prepare();
      inverse2d<T>(cols, slot, kSlot, static_cast<int>(g.mh), out);
    }
  }

  // `w` non-null: the KCRS weights still have to be transformed into `wdst` (= wt, in the
  // workspace); that work shares the first input-transform loop, saving a barrier.
  template <int T>
  static void general(const ConvProblem& p, const Geometry& g, const float* x, const float* w,
                      float* wdst, const float* wt, const float* bias, float* y, float* X, float* Y,
                      float* slots, float* tslots) {
    const int64_t tiles = g.TH * g.TW, J = p.N * tiles, HW = p.H * p.W, OHW = g.OH * g.OW;
    const int64_t Cg = p.Cg(), Kg = p.Kg(), Cp = g.Cp, F = g.F;
    const ptrdiff_t fs = Cp * kSlot, xs_j = F * fs;  // X [jv][f][c']
    float* slot = slots ? slots + omp_get_thread_num() * g.slot_floats : nullptr;
    float* scratch = tslots + omp_get_thread_num() * F * kSlot;  // forward-transform rows
    for (int64_t grp = 0; grp < p.groups; ++grp) {
      const float* wg = wt + grp * g.Kb * F * fs;  // W [g][kb][f][c']
      for (int64_t blk = 0; blk < g.blocks; ++blk) {
        const int64_t jv0 = blk * g.Jv, Jv = std::min(g.Jv, g.Jv_total - jv0);
        // Lane l of column vector jv is column j = (jv0 + jv) * L + l = (n, th, tw).
        auto column = [&](int64_t jv, int l, int64_t* n, int64_t* th, int64_t* tw) {
          const int64_t j = (jv0 + jv) * L + l;
          if (j >= J) return false;
          *n = j / tiles;
          *th = j % tiles / g.TW;
          *tw = j % g.TW;
          return true;
        };
        // Input transforms, item = (c', column vector). Static schedules throughout: every call
        // gives each thread the same items, so the data a thread writes stays in its cache for its
        // next call (a dynamic schedule measured much slower).
        auto input_item = [&](int64_t cp, int64_t jv) {
          const int64_t c = grp * Cg + cp / g.P;
          int64_t a, b;
          phase_offsets(p, g, cp % g.P, &a, &b);
          InputRows<T> rows;
          rows.sh = p.stride_h, rows.sw = p.stride_w, rows.H = p.H, rows.W = p.W;
          for (int l = 0; l < L; ++l) {
            int64_t n, th, tw;
            if (!column(jv, l, &n, &th, &tw)) {
              rows.set(l, nullptr, 0, 0);
              continue;
            }
            rows.set(l, x + (n * p.C + c) * HW, th * g.mh * p.stride_h + a - p.pad_top,
                     tw * g.mw * p.stride_w + b - p.pad_left);
          }
          forward2d<T>(rows, T, X + jv * xs_j + cp * kSlot, fs, false, scratch);
        };
        // The weight transforms (unpacked weights) share the first block's loop: one barrier
        // fewer.
        const int64_t nw = w && grp == 0 && blk == 0 ? weight_items(p, g) : 0;
#pragma omp for schedule(static)
        for (int64_t it = 0; it < nw + Cp * Jv; ++it) {
          if (it < nw)
            weight_item<T>(p, g, w, wdst, it, scratch);
          else
            input_item((it - nw) / Jv, (it - nw) % Jv);
        }
        if (!g.fused) {
#pragma omp for schedule(static)
          for (int64_t f = 0; f < F; ++f) {
            // Y [k][jv][f]
            const GemmArgs ga{wg + f * fs, X + f * fs,       Y + f * kSlot, Cp,
                              xs_j,        g.Jv * F * kSlot, F * kSlot};
            cgemm_freq(ga, Kg, F * fs, Jv);
          }
        }
        // Output stage, item = (output channels, column vector). With per-item products (small
        // C') an item is a block of KR channels whose spectra are formed in this thread's slot
        // (X[jv] and W[kb] are then read once per KR channels); otherwise one channel's spectra
        // come from Y. Either way they are inverted in place.
        const int64_t kstep = g.fused ? V::KR : 1, kblocks = (Kg + kstep - 1) / kstep;
        auto make_out = [&](int64_t k, int64_t jv, OutTiles<T>* out) {
          out->p = &p, out->g = &g;
          for (int l = 0; l < L; ++l) {
            int64_t n, th, tw;
            if (!column(jv, l, &n, &th, &tw)) {
              out->plane[l] = nullptr;
              out->bias[l] = 0;
              out->oh0[l] = out->ow0[l] = 0;
              continue;
            }
            out->plane[l] = y + (n * p.K + grp * Kg + k) * OHW;
            out->bias[l] = bias ? bias[grp * Kg + k] : 0.0f;
            out->oh0[l] = th * g.mh;
            out->ow0[l] = tw * g.mw;
          }
          out->prepare();
        };
#pragma omp for schedule(static)
        for (int64_t it = 0; it < kblocks * Jv; ++it) {
          const int64_t k0 = it / Jv * kstep, jv = it % Jv, nk = std::min(kstep, Kg - k0);
          if (!g.fused) {
            OutTiles<T> out;
            make_out(k0, jv, &out);
            float* base = Y + (k0 * g.Jv + jv) * F * kSlot;
            inverse2d<T>(SlotCols<T>{base, kSlot}, base, kSlot, static_cast<int>(g.mh), out);
            continue;
          }
          // Products for nk channels while the column pass loads, slot = column-pass output.
          auto block = [&](auto nk_c) {
            constexpr int NK = decltype(nk_c)::value;
            ProductCols<T, NK> cols{X + jv * xs_j, wg, {}, Cp};
            for (int q = 0; q < NK; ++q) cols.koff[q] = (k0 + q) / L * F * fs + (k0 + q) % L;
            cv c[NK][T];
            for (int v = 0; v <= T / 2; ++v) {
              cols.load(v, c);
              for (int q = 0; q < NK; ++q)
                inv_column<T>(c[q], v, slot + q * F * kSlot, kSlot, static_cast<int>(g.mh));
            }
            for (int q = 0; q < NK; ++q) {
              OutTiles<T> out;
              make_out(k0 + q, jv, &out);
              inv_rows<T>(slot + q * F * kSlot, kSlot, static_cast<int>(g.mh), out);
            }
          };
          if constexpr (V::KR >= 4)
            if (nk == 4) {
              block(std::integral_constant<int, 4>());
              continue;
            }
          if constexpr (V::KR >= 3)
            if (nk == 3) {
              block(std::integral_constant<int, 3>());
              continue;
            }
          if (nk == 2)
            block(std::integral_constant<int, 2>());
          else
            block(std::integral_constant<int, 1>());
        }
      }
    }
  }

  template <int T>
  static void run(const ConvProblem& p, const Geometry& g, const float* x, const float* w,
                  const float* packed, const float* bias, float* y, char* ws, int threads) {
    float* wt = packed ? nullptr : reinterpret_cast<float*>(ws + g.w_off);
    const float* wsrc = packed ? packed : wt;
    float* X = reinterpret_cast<float*>(ws + g.x_off);
    float* Y = reinterpret_cast<float*>(ws + g.y_off);
    float* slots = g.slots ? reinterpret_cast<float*>(ws + g.slot_off) : nullptr;
    float* tslots = reinterpret_cast<float*>(ws + g.tslot_off);
    // Every thread needs its scratch slot(s): at most g.slots (slot stage) and g.tslots.
    int64_t cap = threads;
    if (g.slots) cap = std::min(cap, g.slots);
    if (!g.depthwise) cap = std::min(cap, g.tslots);
    const int nt = static_cast<int>(std::max<int64_t>(1, cap));
#pragma omp parallel num_threads(nt)
    {
      if (g.depthwise) {
        if (!packed) pack_all<T>(p, g, w, wt);
        depthwise<T>(p, g, x, wsrc, bias, y, slots);
      } else {
        general<T>(p, g, x, packed ? nullptr : w, wt, wsrc, bias, y, X, Y, slots, tslots);
      }
    }
  }

  static void forward(const ConvProblem& p, const Geometry& g, const float* x, const float* w,
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

  static void pack(const ConvProblem& p, const Geometry& g, const float* w, float* packed,
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

  // ---- test hooks: L tiles of T x T floats, [lane][row][col]; spectra [lane][u][v][re, im] --

  template <int T>
  struct ArrayRows {
    const float* tiles;
    void load(int i, reg* dst, int stride) const {
      for (int jb = 0; jb < T; jb += L) {
        reg r[L];
        for (int l = 0; l < L; ++l)
          r[l] = V::load_range(tiles + (l * T + i) * T + jb, 0, std::min(L, T - jb));
        V::transpose(r);
        for (int q = 0; q < L && jb + q < T; ++q) dst[(jb + q) * stride] = r[q];
      }
    }
  };
  template <int T>
  struct ArrayOut {
    float* tiles;
    void store(int i, const reg* src, int stride) const {
      for (int jb = 0; jb < T; jb += L) {
        reg r[L];
        for (int q = 0; q < L; ++q) r[q] = jb + q < T ? src[(jb + q) * stride] : V::zero();
        V::transpose(r);
        for (int l = 0; l < L; ++l)
          V::store_n(tiles + (l * T + i) * T + jb, r[l], std::min(L, T - jb));
      }
    }
  };

  template <int T>
  static void test_forward(const float* tiles, float* spec) {
    std::vector<float> buf(T * (T / 2 + 1) * kSlot);  // test hook: allocation is fine here
    ArrayRows<T> rows{tiles};
    forward2d<T>(rows, T, buf.data(), kSlot, false);
    for (int l = 0; l < L; ++l)
      for (int u = 0; u < T; ++u)
        for (int v = 0; v <= T / 2; ++v) {
          const float* s = buf.data() + (v * T + u) * kSlot;
          float* o = spec + ((l * T + u) * (T / 2 + 1) + v) * 2;
          o[0] = s[l];
          o[1] = s[L + l];
        }
  }

  template <int T>
  static void test_inverse(const float* spec, float* tiles) {
    std::vector<float> buf(T * (T / 2 + 1) * kSlot);
    for (int l = 0; l < L; ++l)
      for (int u = 0; u < T; ++u)
        for (int v = 0; v <= T / 2; ++v) {
          float* s = buf.data() + (v * T + u) * kSlot;
          const float* i = spec + ((l * T + u) * (T / 2 + 1) + v) * 2;
          s[l] = i[0];
          s[L + l] = i[1];
        }
    const SlotCols<T> cols{buf.data(), kSlot};
    const ArrayOut<T> out{tiles};
    inverse2d<T>(cols, buf.data(), kSlot, T, out);
  }

  static void test_tile(int t, bool inverse, const float* in, float* out) {
    switch (t) {
      case 8:
        inverse ? test_inverse<8>(in, out) : test_forward<8>(in, out);
        break;
      case 16:
        inverse ? test_inverse<16>(in, out) : test_forward<16>(in, out);
        break;
      case 32:
        inverse ? test_inverse<32>(in, out) : test_forward<32>(in, out);
        break;
      default:
        inverse ? test_inverse<64>(in, out) : test_forward<64>(in, out);
        break;
    }
  }
};

}  // namespace
}  // namespace conv::kernels::fft
