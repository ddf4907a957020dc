// cpu.pointwise AVX2/FMA kernels (compiled with -mavx2 -mfma; pointwise.cpp calls them only
// after a run-time ISA check): kb x pb dot-product tiles over 8 input-channel lanes, reduced
// across the lanes once per tile, and the 8x8 transposes that pack the input.
#include <immintrin.h>

#include <algorithm>
#include <utility>

#include "cpu/common/transpose_avx2.hpp"
#include "cpu/pointwise/pointwise.hpp"

namespace conv::kernels::pointwise {
namespace {

// The lane sums of a, b, c and d.
inline __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

template <int KB, int PB>
void tile(const Tile& t) {
  __m256 acc[KB][PB];
#pragma GCC unroll 16
  for (int k = 0; k < KB; ++k)
#pragma GCC unroll 16
    for (int j = 0; j < PB; ++j) acc[k][j] = _mm256_setzero_ps();
  auto step = [&](const __m256(&wv)[KB], const float* x) {
#pragma GCC unroll 16
    for (int j = 0; j < PB; ++j) {
      __m256 xv = _mm256_loadu_ps(x + j * 8);
      // One load per input vector: folded into each FMA it would be loaded kb times, and the
      // two load ports, not the FMAs, would bound the loop.
      asm("" : "+x"(xv));
#pragma GCC unroll 16
      for (int k = 0; k < KB; ++k) acc[k][j] = _mm256_fmadd_ps(wv[k], xv, acc[k][j]);
    }
  };
  const int64_t full = t.tail ? t.steps - 1 : t.steps;
  const float* x = t.x;
  for (int64_t s = 0; s < full; ++s, x += PB * 8) {
    __m256 wv[KB];
#pragma GCC unroll 16
    for (int k = 0; k < KB; ++k) wv[k] = _mm256_loadu_ps(t.w + k * t.w_stride + s * 8);
    step(wv, x);
  }
  if (t.tail) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(t.tail), lane);
    __m256 wv[KB];
#pragma GCC unroll 16
    for (int k = 0; k < KB; ++k) wv[k] = _mm256_maskload_ps(t.w + k * t.w_stride + full * 8, m);
    step(wv, x);
  }
  const __m256 z = _mm256_setzero_ps();
#pragma GCC unroll 16
  for (int k = 0; k < KB; ++k) {
    float s[8];
#pragma GCC unroll 16
    for (int j = 0; j < PB; j += 4)
      _mm_storeu_ps(s + j, hsum4(acc[k][j], j + 1 < PB ? acc[k][j + 1] : z,
                                 j + 2 < PB ? acc[k][j + 2] : z, j + 3 < PB ? acc[k][j + 3] : z));
    float* y = t.y + k * t.y_stride;
    if (t.first) {
      const float b = t.bias ? t.bias[k] : 0.0f;
      for (int j = 0; j < PB; ++j) y[j] = s[j] + b;
    } else {
      for (int j = 0; j < PB; ++j) y[j] += s[j];
    }
  }
}

template <int KB, int... P>
TileFn pick(int pb, std::integer_sequence<int, P...>) {
  TileFn f = nullptr;
  ((f = pb == P + 1 ? &tile<KB, P + 1> : f), ...);
  return f;
}

}  // namespace

TileFn avx2_tile(int kb, int pb) {
  switch (kb) {
    case 1:
      return pick<1>(pb, std::make_integer_sequence<int, 4>{});
    case 2:
      return pick<2>(pb, std::make_integer_sequence<int, 4>{});
    case 3:
      return pick<3>(pb, std::make_integer_sequence<int, 4>{});
    default:
      return nullptr;
  }
}

void pack8_avx2(const float* x, int64_t plane, int64_t c, int lanes, const int32_t* in, int64_t q,
                int count, int pb, int64_t P, float* dst, int64_t c0, int64_t cw) {
  float* out[8];
  for (int64_t i = 0, j = q % pb, block = q - j; i < count; ++i) {
    out[i] = dst + block * cw + (c - c0) * std::min<int64_t>(pb, P - block) + j * 8;
    if (++j == pb) j = 0, block += pb;
  }
  if (count < 8) {
    for (int i = 0; i < count; ++i)
      for (int l = 0; l < 8; ++l) out[i][l] = l < lanes ? x[(c + l) * plane + in[i]] : 0.0f;
    return;
  }
  // Offsets increase with the position, so a difference of 7 means eight consecutive floats.
  const bool consecutive = in[7] - in[0] == 7;
  __m256i idx = _mm256_setzero_si256();
  if (!consecutive)
    idx = _mm256_sub_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in)),
                           _mm256_set1_epi32(in[0]));
  __m256 r[8];
  for (int i = 0; i < 8; ++i) {
    const float* row = x + (c + i) * plane + in[0];
    r[i] = i >= lanes    ? _mm256_setzero_ps()
           : consecutive ? _mm256_loadu_ps(row)
                         : _mm256_i32gather_ps(row, idx, 4);
  }
  transpose8x8_avx(r);
  for (int i = 0; i < 8; ++i) _mm256_storeu_ps(out[i], r[i]);
}

}  // namespace conv::kernels::pointwise
