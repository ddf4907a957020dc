// cpu.direct portable kernel (compiled without AVX flags; used when conv::cpu_isa() is scalar,
// for configs whose ISA the CPU lacks, and by tests). Same register-block method as
// direct_block.hpp (oneDNN jit_avx2_conv / Georganas et al., SC 2018) written as plain loops
// over an oc x lanes accumulator tile per vector, which compilers vectorise for the baseline ISA.
// Cost per block: channels*taps*oc*vecs*lanes multiply-adds.
#include "cpu/direct/direct.hpp"

namespace conv::kernels::direct {
namespace {

// Output-channel block r of the block's run (Block::runs).
template <int OC>
void block_in_run(const BlockCommon& c, const Block& b, int r) {
  const int lanes = c.lanes;
  const int64_t yo = r * OC * c.y_k_stride;
  const float* w[OC];
  for (int k = 0; k < OC; ++k) w[k] = b.w[k] + r * c.w_kb_stride;
  const float* bias = b.bias ? b.bias + r * OC : nullptr;
  for (int j = 0; j < b.nvec; ++j) {
    float acc[OC][kMaxLanes];
    for (int k = 0; k < OC; ++k)
      for (int l = 0; l < lanes; ++l)
        acc[k][l] = (bias && k < b.kvalid) ? bias[k * c.bias_stride] : 0.0f;
    if (b.accumulate)
      for (int sg = 0; sg < b.nseg[j]; ++sg)
        for (int k = 0; k < b.kvalid; ++k)
          for (int l = b.seg[j][sg].lo; l < b.seg[j][sg].hi; ++l)
            acc[k][l] = b.seg[j][sg].out[yo + k * c.y_k_stride + l];
    const float* xp = b.x[j];
    for (int64_t ch = 0; ch < c.channels; ++ch) {
      for (int64_t t = 0; t < c.taps; ++t) {
        const float* xv = xp + c.tap[t];
        for (int k = 0; k < OC; ++k) {
          const float wv = w[k][ch * c.w_channel_stride + t * c.w_tap_stride];
          for (int l = 0; l < lanes; ++l) acc[k][l] += wv * xv[l];
        }
      }
      xp += c.x_channel_stride;
    }
    for (int sg = 0; sg < b.nseg[j]; ++sg)
      for (int k = 0; k < b.kvalid; ++k)
        for (int l = b.seg[j][sg].lo; l < b.seg[j][sg].hi; ++l)
          b.seg[j][sg].out[yo + k * c.y_k_stride + l] = acc[k][l];
  }
}

template <int OC>
void block(const BlockCommon& c, const Block& b) {
  for (int r = 0; r < b.runs; ++r) block_in_run<OC>(c, b, r);
}

}  // namespace

BlockFn scalar_block(int oc) {
  switch (oc) {
    case 1:
      return &block<1>;
    case 2:
      return &block<2>;
    case 3:
      return &block<3>;
    case 4:
      return &block<4>;
    case 6:
      return &block<6>;
    case 8:
      return &block<8>;
    case 12:
      return &block<12>;
    default:
      return nullptr;
  }
}

}  // namespace conv::kernels::direct
