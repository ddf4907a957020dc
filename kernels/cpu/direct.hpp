// Internals of cpu.direct shared by direct.cpp (driver, compiled for the baseline ISA),
// direct_avx2.cpp (AVX2/FMA register-block kernels) and direct_scalar.cpp (portable kernels),
// and exposed to tests/test_direct.cpp. Not part of the public API.
#pragma once

#include <cstdint>
#include <string>

#include "conv/algorithm.hpp"
#include "conv/problem.hpp"

namespace conv::kernels::direct {

constexpr int kLanes = 8;    ///< output positions per vector (one ymm of fp32)
constexpr int kMaxOc = 8;    ///< largest output-channel block of any config
constexpr int kMaxVecs = 12; ///< largest number of vectors of output positions of any config

/// A register block: `oc` output channels x `vecs` vectors of 8 output positions. Written
/// "oc<oc>ow<8*vecs>", e.g. "oc4ow24" = 4 output channels x 3 ymm of output positions.
struct Config {
  int oc = 4;
  int vecs = 3;
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
};

/// One register block's pointers. Vector j covers 8 consecutive output positions starting at
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
  int nvec = 0;                 ///< vectors in use (1..vecs); the AVX2 kernels bake it in
};

/// Computes one block: y = bias + sum over channels and taps of w * x.
using BlockFn = void (*)(const BlockCommon&, const Block&);

/// The AVX2/FMA kernel for `oc` channels x `vecs` vectors (1 <= vecs <= the config's vecs),
/// or null when not instantiated. Only call on a CPU with AVX2 and FMA.
BlockFn avx2_block(int oc, int vecs);
/// The portable kernel (any oc <= kMaxOc, vecs <= kMaxVecs).
BlockFn scalar_block(int oc, int vecs);

/// Runs cpu.direct with the given kernel family. `use_avx2` must only be true when
/// conv::cpu_isa() is not scalar. Validates config and workspace (conv::Error naming the field).
void forward(const ConvProblem& p, const std::string& config, const ForwardArgs& args,
             bool use_avx2);

/// Test hook: forward() with the portable kernels, whatever the CPU.
inline void forward_scalar(const ConvProblem& p, const std::string& config,
                           const ForwardArgs& args) {
  forward(p, config, args, false);
}

}  // namespace conv::kernels::direct
