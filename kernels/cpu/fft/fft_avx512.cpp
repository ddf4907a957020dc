// cpu.fft, AVX-512 build (16 lanes per zmm; needs AVX512F): the vector traits for
// fft_impl.hpp and the entry points fft.cpp calls only when conv::cpu_isa() reports avx512.
// Method, sources and cost: fft_impl.hpp and fft.cpp.
#include <immintrin.h>

// GCC 12's avx512fintrin.h builds _mm512_unpacklo_ps and friends on an intentionally undefined
// vector and then warns about it wherever they are inlined; the warning is about the header.
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__  // clang has no such warning, and warns about the name
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "cpu/fft/fft_impl.hpp"

namespace conv::kernels::fft {
namespace {

struct V16 {
  using reg = __m512;
  static constexpr int L = 16;
  // GEMM register block: 4 output channels x 2 vectors of tiles = 16 accumulators, plus 4
  // tile operands and 2 broadcasts, of 32 zmm registers.
  static constexpr int KR = 4, JR = 3;

  static reg zero() { return _mm512_setzero_ps(); }
  static reg set1(float a) { return _mm512_set1_ps(a); }
  static reg bcast(const float* p) { return _mm512_set1_ps(*p); }
  static reg loadu(const float* p) { return _mm512_loadu_ps(p); }
  static void storeu(float* p, reg v) { _mm512_storeu_ps(p, v); }
  static reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
  static reg sub(reg a, reg b) { return _mm512_sub_ps(a, b); }
  static reg mul(reg a, reg b) { return _mm512_mul_ps(a, b); }
  static reg fmadd(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
  static reg fmsub(reg a, reg b, reg c) { return _mm512_fmsub_ps(a, b, c); }
  static reg fnmadd(reg a, reg b, reg c) { return _mm512_fnmadd_ps(a, b, c); }

  // Bits [lo, hi) set, 0 <= lo, hi <= 16.
  static __mmask16 mask(int lo, int hi) {
    if (hi <= lo) return 0;
    const unsigned all = (1u << hi) - 1u, below = (1u << lo) - 1u;
    return static_cast<__mmask16>(all & ~below);
  }
  static reg load_range(const float* p, int lo, int hi) {
    return _mm512_maskz_loadu_ps(mask(lo, hi), p);
  }
  static reg gather_range(const float* p, int stride, int lo, int hi) {
    const __m512i idx =
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32(stride));
    return _mm512_mask_i32gather_ps(zero(), mask(lo, hi), idx, p, 4);
  }
  static reg gather_idx(const float* p, const int* idx) {
    const __m512i i = _mm512_loadu_si512(idx);
    const __mmask16 m = _mm512_cmpgt_epi32_mask(i, _mm512_set1_epi32(-1));
    return _mm512_mask_i32gather_ps(zero(), m, i, p, 4);
  }
  static void store_n(float* p, reg v, int n) {
    if (n >= L)
      _mm512_storeu_ps(p, v);
    else
      _mm512_mask_storeu_ps(p, mask(0, n), v);
  }
  static reg blend_range(reg a, reg b, int lo, int hi) {
    return _mm512_mask_blend_ps(mask(lo, hi), a, b);
  }

  // 16 x 16 transpose: 4x4 blocks inside 128-bit lanes, then two rounds of lane shuffles.
  static void transpose(reg r[16]) {
    __m512 t[16], u[16], v[16];
    for (int i = 0; i < 16; i += 2) {
      t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
      u[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
      u[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
      u[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
      u[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int s = 0; s < 4; ++s) {
      v[s] = _mm512_shuffle_f32x4(u[s], u[4 + s], 0x88);
      v[4 + s] = _mm512_shuffle_f32x4(u[s], u[4 + s], 0xDD);
      v[8 + s] = _mm512_shuffle_f32x4(u[8 + s], u[12 + s], 0x88);
      v[12 + s] = _mm512_shuffle_f32x4(u[8 + s], u[12 + s], 0xDD);
    }
    for (int s = 0; s < 4; ++s) {
      r[s] = _mm512_shuffle_f32x4(v[s], v[8 + s], 0x88);
      r[4 + s] = _mm512_shuffle_f32x4(v[4 + s], v[12 + s], 0x88);
      r[8 + s] = _mm512_shuffle_f32x4(v[s], v[8 + s], 0xDD);
      r[12 + s] = _mm512_shuffle_f32x4(v[4 + s], v[12 + s], 0xDD);
    }
  }
};

}  // namespace

void forward_avx512(const ConvProblem& p, const Geometry& g, const float* x, const float* w,
                    const float* packed, const float* bias, float* y, char* ws, int threads) {
  Impl<V16>::forward(p, g, x, w, packed, bias, y, ws, threads);
}

void pack_weights_avx512(const ConvProblem& p, const Geometry& g, const float* w, float* packed,
                         int threads) {
  Impl<V16>::pack(p, g, w, packed, threads);
}

void test_tile_avx512(int t, bool inverse, const float* in, float* out) {
  Impl<V16>::test_tile(t, inverse, in, out);
}

}  // namespace conv::kernels::fft
