// cpu.direct AVX-512 register-block kernels (compiled with -mavx512f -mavx512bw -mavx512vl
// -mfma; direct.cpp calls them only when conv::cpu_isa() is avx512). Method: oneDNN's
// jit_avx512_common_conv / Georganas et al., SC 2018 (see direct_block.hpp): OC output channels
// x NV zmm vectors of 16 output positions accumulate in registers; per (channel, tap) step NV
// loads and OC broadcasts feed OC*NV FMAs.
// Cost per block: channels*taps*OC*NV zmm FMAs.
#include <utility>

#include "cpu/common/simd_avx512.hpp"
#include "cpu/direct/direct_block.hpp"

namespace conv::kernels::direct {

using avx512::YmmVl;
using avx512::Zmm;

BlockFn avx512vl_block(int oc, int vecs, bool one_tap) {
  // 28 accumulators, 4 broadcasts and an input vector are one more than the 32 ymm: GCC keeps one
  // accumulator on the stack (a store-forwarded round trip per step, under the step's 28 FMAs).
  // Still faster than oc3 (21 accumulators) and oc2 x 14 on 7x7 outputs.
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

}  // namespace conv::kernels::direct
