// cpu.direct portable kernel (compiled without AVX flags; used when conv::cpu_isa() is scalar
// and by tests). Same register-block method as direct_avx2.cpp (oneDNN jit_avx2_conv /
// Georganas et al., SC 2018) written as plain loops over an oc x 8 accumulator tile per vector,
// which compilers vectorise for the baseline ISA.
// Cost per block: channels*taps*oc*vecs*8 multiply-adds.
#include "direct.hpp"

namespace conv::kernels::direct {
namespace {

void block(const BlockCommon& c, const Block& b, int oc, int nv) {
  for (int j = 0; j < nv; ++j) {
    float acc[kMaxOc][kLanes];
    for (int k = 0; k < oc; ++k)
      for (int l = 0; l < kLanes; ++l) acc[k][l] = (b.bias && k < b.kvalid) ? b.bias[k] : 0.0f;
    const float* xp = b.x[j];
    for (int64_t ch = 0; ch < c.channels; ++ch) {
      for (int64_t t = 0; t < c.taps; ++t) {
        const float* xv = xp + c.tap[t];
        for (int k = 0; k < oc; ++k) {
          const float wv = b.w[k][ch * c.w_channel_stride + t * c.w_tap_stride];
          for (int l = 0; l < kLanes; ++l) acc[k][l] += wv * xv[l];
        }
      }
      xp += c.x_channel_stride;
    }
    for (int k = 0; k < b.kvalid; ++k)
      for (int l = b.lo[j]; l < b.hi[j]; ++l) b.y[j][k * c.y_k_stride + l] = acc[k][l];
  }
}

template <int OC>
void block_oc(const BlockCommon& c, const Block& b) {
  block(c, b, OC, b.nvec);
}

}  // namespace

BlockFn scalar_block(int oc, int /*vecs*/) {
  switch (oc) {
    case 1:
      return &block_oc<1>;
    case 2:
      return &block_oc<2>;
    case 3:
      return &block_oc<3>;
    case 4:
      return &block_oc<4>;
    case 6:
      return &block_oc<6>;
    case 8:
      return &block_oc<8>;
    default:
      return nullptr;
  }
}

}  // namespace conv::kernels::direct
