// cpu.fft, AVX2/FMA build (8 lanes per ymm): the vector traits for fft_impl.hpp and the entry
// points fft.cpp calls after a run-time ISA check. Method, sources and cost: fft_impl.hpp and
// fft.cpp.
#include <immintrin.h>

#include "cpu/common/store_avx2.hpp"
#include "cpu/common/transpose_avx2.hpp"
#include "cpu/fft/fft_impl.hpp"

namespace conv::kernels::fft {
namespace {

struct V8 {
  using reg = __m256;
  static constexpr int L = 8;
  // GEMM register block: 2 output channels x 2 vectors of tiles = 8 accumulators, plus 4 tile
  // operands and 2 broadcasts, in 16 ymm registers.
  static constexpr int KR = 2, JR = 2;

  static reg zero() { return _mm256_setzero_ps(); }
  static reg set1(float a) { return _mm256_set1_ps(a); }
  static reg bcast(const float* p) { return _mm256_broadcast_ss(p); }
  static reg loadu(const float* p) { return _mm256_loadu_ps(p); }
  static void storeu(float* p, reg v) { _mm256_storeu_ps(p, v); }
  static reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
  static reg sub(reg a, reg b) { return _mm256_sub_ps(a, b); }
  static reg mul(reg a, reg b) { return _mm256_mul_ps(a, b); }
  static reg fmadd(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
  static reg fmsub(reg a, reg b, reg c) { return _mm256_fmsub_ps(a, b, c); }
  static reg fnmadd(reg a, reg b, reg c) { return _mm256_fnmadd_ps(a, b, c); }

  // All-ones in lanes [lo, hi).
  static __m256i mask(int lo, int hi) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_and_si256(_mm256_cmpgt_epi32(idx, _mm256_set1_epi32(lo - 1)),
                            _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), idx));
  }
  static reg load_range(const float* p, int lo, int hi) {
    return _mm256_maskload_ps(p, mask(lo, hi));
  }
  static reg gather_range(const float* p, int stride, int lo, int hi) {
    const __m256i idx =
        _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(stride));
    return _mm256_mask_i32gather_ps(zero(), p, idx, _mm256_castsi256_ps(mask(lo, hi)), 4);
  }
  static reg gather_idx(const float* p, const int* idx) {
    const __m256i i = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx));
    const __m256i m = _mm256_cmpgt_epi32(i, _mm256_set1_epi32(-1));
    return _mm256_mask_i32gather_ps(zero(), p, i, _mm256_castsi256_ps(m), 4);
  }
  // Plain stores, not vmaskmovps (store_avx2.hpp says why).
  static void store_n(float* p, reg v, int n) { store_first_avx(p, v, n); }
  static reg blend_range(reg a, reg b, int lo, int hi) {
    return _mm256_blendv_ps(a, b, _mm256_castsi256_ps(mask(lo, hi)));
  }

  static void transpose(reg r[8]) { transpose8x8_avx(r); }
};

}  // namespace

void forward_avx2(const ConvProblem& p, const Geometry& g, const float* x, const float* w,
                  const float* packed, const float* bias, float* y, char* ws, int threads) {
  Impl<V8>::forward(p, g, x, w, packed, bias, y, ws, threads);
}

void pack_weights_avx2(const ConvProblem& p, const Geometry& g, const float* w, float* packed,
                       int threads) {
  Impl<V8>::pack(p, g, w, packed, threads);
}

void test_tile_avx2(int t, bool inverse, const float* in, float* out) {
  Impl<V8>::test_tile(t, inverse, in, out);
}

}  // namespace conv::kernels::fft
