// Internals of cpu.direct shared by direct.cpp (driver, compiled for the baseline ISA),
// direct_avx2.cpp (AVX2/FMA register-block kernels) and direct_scalar.cpp (portable kernels),
// and exposed to tests/test_direct.cpp. Not part of the public API.
#pragma once

#include <cstdint>
#include <string>

#include "conv/algorithm.hpp"
#include "conv/problem.hpp"

namespace conv::kernels::direct {

constexpr int kMaxLanes = 16;  ///< output positions per vector: 8 (ymm) or 16 (zmm)
constexpr int kMaxOc = 12;     ///< largest output-channel block of any config
constexpr int kMaxVecs = 16;   ///< largest number of vectors of output positions of any config

/// Which kernel family a config is written for.
enum class BlockIsa { avx2, avx512 };

/// A register block: `oc` output channels x `vecs` vectors of `lanes` output positions. Written
/// "oc<oc>ow<lanes*vecs>" for AVX2 (ymm, 8 lanes), e.g. "oc4ow24" = 4 output channels x 3 ymm,
/// and "oc<oc>ow<lanes*vecs>_avx512" for AVX-512 (zmm, 16 lanes), e.g. "oc8ow48_avx512".
struct Config {
  int oc = 4;
  int vecs = 3;
  BlockIsa isa = BlockIsa::avx2;
  int lanes() const { return isa == BlockIsa::avx512 ? 16 : 8; }
  std::string name() const;
};

/// Parses a config string; throws conv::Error naming "config" for anything that is not one of
/// the instantiated register blocks.
Config parse_config(const std::string& text);

/// Every register block the kernels are instantiated for (the tuning space before filtering).
const Config* all_configs(int* count);

/// Per-call constants of the register-block kernel. Strides are in floats.
struct BlockCommon {
  int64_t channels = 0;           ///< input channels summed over (C/groups)
  int64_t taps = 0;               ///< R*S
  const int64_t* tap = nullptr;   ///< taps offsets into the input view, one per (r, s)
  int64_t x_channel_stride = 0;   ///< input view floats between channels
  int64_t w_channel_stride = 0;   ///< weight floats between input channels
  int64_t w_tap_stride = 0;       ///< weight floats between taps
  int64_t y_k_stride = 0;         ///< output floats between output channels (OH*OW)
  int lanes = 8;                  ///< output positions per vector
};

/// One register block's pointers. Vector j covers `lanes` consecutive output positions starting at
/// y[j] (output channel 0 of the block) and reads the input view from x[j] (channel 0, tap
/// offset 0); only lanes [lo[j], hi[j]) are stored. Output channel k reads its weights from
/// w[k]; only k < kvalid are stored (w[k] of the others may repeat a valid row).
struct Block {
  const float* x[kMaxVecs];
  float* y[kMaxVecs];
  int lo[kMaxVecs], hi[kMaxVecs];
  const float* w[kMaxOc];
  const float* bias = nullptr;  ///< kvalid values, or null for zero
  int kvalid = 0;               ///< output channels stored (1..oc)
  int nvec = 0;                 ///< vectors in use (1..vecs); the SIMD kernels bake it in
  bool accumulate = false;      ///< add to y (a later part of the reduction) instead of bias
};

/// Computes one block: y = bias + sum over channels and taps of w * x.
using BlockFn = void (*)(const BlockCommon&, const Block&);

/// The AVX2/FMA kernel (8 lanes) for `oc` channels x `vecs` vectors, specialised for one tap
/// (1x1) when `one_tap`; null when not instantiated. Only call on a CPU with AVX2 and FMA.
BlockFn avx2_block(int oc, int vecs, bool one_tap);
/// The AVX-512 kernel (16 lanes), likewise; only call on a CPU with AVX-512F/BW/VL.
BlockFn avx512_block(int oc, int vecs, bool one_tap);
/// The portable kernel (any oc <= kMaxOc, any lanes and vecs).
BlockFn scalar_block(int oc);

/// Runs cpu.direct. With `simd`, the config's SIMD kernels run when conv::cpu_isa() supports
/// them (the portable kernels otherwise); without, the portable kernels always run. Validates
/// config and workspace (conv::Error naming the field).
void forward(const ConvProblem& p, const std::string& config, const ForwardArgs& args, bool simd);

/// Test hook: forward() with the portable kernels, whatever the CPU.
inline void forward_scalar(const ConvProblem& p, const std::string& config,
                           const ForwardArgs& args) {
  forward(p, config, args, false);
}

}  // namespace conv::kernels::direct
