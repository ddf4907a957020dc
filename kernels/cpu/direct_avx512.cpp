// cpu.direct AVX-512 register-block kernels (compiled with -mavx512f -mavx512bw -mavx512vl
// -mfma; direct.cpp calls them only when conv::cpu_isa() is avx512). Method: oneDNN's
// jit_avx512_common_conv / Georganas et al., SC 2018 (see direct_block.hpp): OC output channels
// x NV zmm vectors of 16 output positions accumulate in registers; per (channel, tap) step NV
// loads and OC broadcasts feed OC*NV FMAs.
// Cost per block: channels*taps*OC*NV zmm FMAs.
#include <immintrin.h>

#include <utility>

#include "direct_block.hpp"
#include "direct_kvec_block.hpp"

namespace conv::kernels::direct {
namespace {

struct Zmm {
  using reg = __m512;
  using mask = __mmask16;
  static constexpr int lanes = 16;
  static reg zero() { return _mm512_setzero_ps(); }
  static reg set1(float v) { return _mm512_set1_ps(v); }
  static reg loadu(const float* p) { return _mm512_loadu_ps(p); }
  static reg broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static reg fmadd(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
  static reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
  static void storeu(float* p, reg v) { _mm512_storeu_ps(p, v); }
  static void stream(float* p, reg v) { _mm512_stream_ps(p, v); }
  // Lanes [lo, hi); masked lanes are neither read nor written (no faults).
  static mask lane_mask(int lo, int hi) {
    return static_cast<mask>(((1u << hi) - 1u) & ~((1u << lo) - 1u));
  }
  static reg load_mask(const float* p, mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static void store_lanes(float* p, int lo, int hi, reg v) {
    _mm512_mask_storeu_ps(p, lane_mask(lo, hi), v);
  }
};

// ymm vectors of 8 positions in the 32 registers AVX-512VL encodes: for planes on which whole
// zmm vectors would compute many unused lanes (7x7 outputs: 56 lanes of 8 against 64 of 16).
struct YmmVl {
  using reg = __m256;
  using mask = __mmask8;
  static constexpr int lanes = 8;
  static reg zero() { return _mm256_setzero_ps(); }
  static reg set1(float v) { return _mm256_set1_ps(v); }
  static reg loadu(const float* p) { return _mm256_loadu_ps(p); }
  static reg broadcast(const float* p) { return _mm256_set1_ps(*p); }
  static reg fmadd(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
  static reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
  static void storeu(float* p, reg v) { _mm256_storeu_ps(p, v); }
  static void stream(float* p, reg v) { _mm256_stream_ps(p, v); }
  static mask lane_mask(int lo, int hi) {
    return static_cast<mask>(((1u << hi) - 1u) & ~((1u << lo) - 1u));
  }
  static reg load_mask(const float* p, mask m) { return _mm256_maskz_loadu_ps(m, p); }
  static void store_lanes(float* p, int lo, int hi, reg v) {
    _mm256_mask_storeu_ps(p, lane_mask(lo, hi), v);
  }
};

}  // namespace

BlockFn avx512vl_block(int oc, int vecs, bool one_tap) {
  // 28 accumulators, 4 broadcasts and an input vector are one more than the 32 ymm: GCC keeps
  // one accumulator on the stack (a store-forwarded round trip per step, under the step's 28
  // FMAs). Still faster than oc3 (21 accumulators, 2-10%) and oc2 x 14 (1.5x) on 7x7 outputs.
  return oc == 4 ? direct_pick<YmmVl, 4>(vecs, one_tap, std::make_integer_sequence<int, 7>{})
                 : nullptr;
}

BlockFn avx512_block(int oc, int vecs, bool one_tap) {
  // Accumulators (oc*vecs <= 24), min(oc, vecs) operands and one broadcast fit 32 zmm; oc 1
  // folds its loads into the FMAs.
  switch (oc) {
    case 1:
      return direct_pick<Zmm, 1>(vecs, one_tap, std::make_integer_sequence<int, 16>{});
    case 4:
      return direct_pick<Zmm, 4>(vecs, one_tap, std::make_integer_sequence<int, 6>{});
    case 6:
      return direct_pick<Zmm, 6>(vecs, one_tap, std::make_integer_sequence<int, 4>{});
    case 8:
      return direct_pick<Zmm, 8>(vecs, one_tap, std::make_integer_sequence<int, 3>{});
    case 12:
      return direct_pick<Zmm, 12>(vecs, one_tap, std::make_integer_sequence<int, 2>{});
    default:
      return nullptr;
  }
}

KvecFn avx512_kvec(int kb, int nw, KvecWalk walk) {
  // kb*nw <= 28 accumulators, kb weight vectors and a broadcast fit 32 zmm.
  switch (kb) {
    case 1:
      return kvec_pick<Zmm, 1>(nw, walk, std::make_integer_sequence<int, 28>{});
    case 2:
      return kvec_pick<Zmm, 2>(nw, walk, std::make_integer_sequence<int, 14>{});
    case 3:
      return kvec_pick<Zmm, 3>(nw, walk, std::make_integer_sequence<int, 9>{});
    case 4:
      return kvec_pick<Zmm, 4>(nw, walk, std::make_integer_sequence<int, 6>{});
    default:
      return nullptr;
  }
}

}  // namespace conv::kernels::direct
