// cpu.direct AVX2/FMA register-block kernels (compiled with -mavx2 -mfma; direct.cpp calls them
// only after a run-time ISA check). Method: oneDNN's jit_avx2_conv / Georganas et al., SC 2018
// (see direct_block.hpp): OC output channels x NV ymm vectors of 8 output positions accumulate
// in registers; per (channel, tap) step NV loads and OC broadcasts feed OC*NV FMAs.
// Cost per block: channels*taps*OC*NV ymm FMAs.
#include <utility>

#include "cpu/common/simd_avx2.hpp"
#include "cpu/direct/direct_block.hpp"

namespace conv::kernels::direct {

using avx2::Ymm;

BlockFn avx2_block(int oc, int vecs, bool one_tap) {
  // Accumulators (oc*vecs <= 12), min(oc, vecs) operands and one broadcast fit 16 ymm.
  switch (oc) {
    case 1:
      return direct_pick<Ymm, 1>(vecs, one_tap, std::make_integer_sequence<int, 12>{});
    case 2:
      return direct_pick<Ymm, 2>(vecs, one_tap, std::make_integer_sequence<int, 6>{});
    case 3:
      return direct_pick<Ymm, 3>(vecs, one_tap, std::make_integer_sequence<int, 4>{});
    case 4:
      return direct_pick<Ymm, 4>(vecs, one_tap, std::make_integer_sequence<int, 3>{});
    case 6:
      return direct_pick<Ymm, 6>(vecs, one_tap, std::make_integer_sequence<int, 2>{});
    case 8:
      return direct_pick<Ymm, 8>(vecs, one_tap, std::make_integer_sequence<int, 1>{});
    default:
      return nullptr;
  }
}

}  // namespace conv::kernels::direct
