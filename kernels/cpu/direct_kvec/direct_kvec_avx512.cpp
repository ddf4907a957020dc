// cpu.direct_kvec AVX-512 kernels (compiled with -mavx512f -mavx512bw -mavx512vl; direct_kvec.cpp
// calls them only when conv::cpu_isa() reports avx512): the register blocks of
// direct_kvec_block.hpp on zmm.
#include <immintrin.h>

#include <utility>

#include "cpu/common/simd_avx512.hpp"
#include "cpu/direct_kvec/direct_kvec_block.hpp"

namespace conv::kernels::direct {

using avx512::Zmm;

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
