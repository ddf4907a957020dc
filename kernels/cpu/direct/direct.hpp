// Internals of cpu.direct shared by direct.cpp (Algorithm and driver, compiled for the baseline
// ISA), the register-block kernels (direct_block.hpp instantiated by direct_avx2.cpp and
// direct_avx512.cpp; portable ones in direct_scalar.cpp) and tests/test_direct.cpp.
// Not part of the public API.
#pragma once

#include <cstdint>
#include <string>

#include "conv/algorithm.hpp"
#include "conv/problem.hpp"

namespace conv::kernels::direct {

constexpr int kMaxLanes = 16;  ///< output positions per vector: 8 (ymm) or 16 (zmm)
constexpr int kMaxOc = 12;     ///< largest output-channel (or band-row) block of any config
constexpr int kMaxVecs = 16;   ///< largest number of vectors of output positions of any config

/// Which kernel family a config is written for.
enum class BlockIsa { avx2, avx512, avx512vl };

/// A register block: `oc` output channels x `vecs` vectors of `lanes` output positions. Written
/// "oc<oc>ow<lanes*vecs>" for AVX2 (ymm, 8 lanes), e.g. "oc4ow24" = 4 output channels x 3 ymm,
/// and "oc<oc>ow<lanes*vecs>_avx512" for AVX-512 (zmm, 16 lanes), e.g. "oc8ow48_avx512";
/// "oc4ow56_avx512vl" is 4 x 7 ymm (8 lanes) in the 32 registers of AVX-512VL, for planes
/// where zmm vectors would compute many unused lanes (7x7 outputs).
/// Band blocks ("oh<oc>ow...") hold `oc` consecutive output rows of one depthwise channel
/// instead of `oc` output channels: one input row load then feeds every output row it reaches
/// (weights laid out as a zero-padded band), for large depthwise kernels.
/// A "_aligned" suffix reads a 1x1 input from cache-line-aligned plane copies instead of in
/// place (direct_view.hpp: aligned_copy_optional). A "_panels" suffix (1x1 only) has each thread
/// pack the input of its vector block into a contiguous panel of (reduction chunk) x vecs*lanes
/// floats, as a GEMM packs its B operand (Goto & van de Geijn, "Anatomy of high-performance
/// matrix multiplication", 2008; BLIS, oneDNN's sgemm), and run every channel block over it.
struct Config {
  int oc = 4;
  int vecs = 3;
  BlockIsa isa = BlockIsa::avx2;
  bool band = false;
  bool aligned = false;
  bool panels = false;
  int lanes() const;  ///< 8 (ymm: AVX2, AVX-512VL) or 16 (zmm: AVX-512)
  std::string name() const;
};

/// Parses a config string; throws conv::Error naming "config" for anything that is not one of
/// the instantiated register blocks.
Config parse_config(const std::string& text);
/// parse_config(), and throws conv::Error naming "config" when the config cannot run `p` (input
/// panels need a 1x1 kernel, band blocks a depthwise problem with stride_h = dilation_h = 1).
Config parse_config_for(const ConvProblem& p, const std::string& config);

/// Every register block the kernels are instantiated for (the tuning space before filtering).
const Config* all_configs(int* count);

/// Whether `c` can run `p`: every block runs every problem except band blocks, which need one
/// input and one output channel per group, stride_h 1 and dilation_h 1 (and not 1x1), and
/// "_panels" blocks, which need a 1x1 kernel.
bool config_applies(const ConvProblem& p, const Config& c);

/// Per-call constants of the register-block kernel. Strides are in floats.
struct BlockCommon {
  int64_t channels = 0;          ///< input channels summed over (C/groups)
  int64_t taps = 0;              ///< steps per channel: R*S, or (R + oc - 1)*S for band blocks
  const int64_t* tap = nullptr;  ///< input view offset of each step
  /// Null, or the view offset of every (channel, tap) step of a block's channels in order,
  /// channel * x_channel_stride + tap[t] (then w_channel_stride = taps * w_tap_stride): the SIMD
  /// kernels run the reduction as one loop over these steps.
  const int64_t* step_x = nullptr;
  int64_t x_channel_stride = 0;  ///< input view floats between channels
  int64_t prefetch_ahead = 0;    ///< floats past a tap's input prefetched; 0: no prefetches
  /// 1x1: prefetch only in the first output-channel block of a run (Block::runs), whose input
  /// comes from L3 or memory; the later blocks find it in L1.
  bool prefetch_first_only = false;
  /// Weights prefetched this many (channel, tap) steps ahead (step_x loop only); 0: none.
  int64_t w_prefetch_steps = 0;
  int64_t w_channel_stride = 0;  ///< weight floats between input channels
  int64_t w_tap_stride = 0;      ///< weight floats between taps
  int64_t w_kb_stride = 0;       ///< weight floats between output-channel blocks (Block::runs)
  int64_t y_k_stride = 0;        ///< output floats between block rows k (channels or rows)
  int64_t bias_stride = 1;       ///< bias values between block rows k (0: one shared value)
  int lanes = 8;                 ///< output positions per vector
  /// Whole 64-byte lines of output (one zmm, or two adjacent ymm of one block) stored
  /// non-temporally; only set with y_k_stride a multiple of 16 floats, so every block row of a
  /// vector lies at the same offset within its line.
  bool stream = false;
};

/// Where a vector's lanes are stored: lanes [lo, hi) go to out + lane (+ k*y_k_stride for block
/// row k), so `out` is the address lane 0 would have; only the stored lanes are ever accessed.
/// A vector spanning several output rows (wide mode) has one segment per row.
struct Segment {
  float* out = nullptr;
  int lo = 0, hi = 0;
};
constexpr int kMaxSegs = 3;

/// One register block's pointers. Vector j covers `lanes` consecutive positions of the input
/// view starting at x[j] (channel 0, tap offset 0) and is stored through its segments.
/// Block row k (an output channel, or an output row of a band block) reads its weights from
/// w[k]; only k < kvalid are stored (w[k] of the others may repeat a valid row).
struct Block {
  const float* x[kMaxVecs];
  Segment seg[kMaxVecs][kMaxSegs];
  int nseg[kMaxVecs];
  const float* w[kMaxOc];
  const float* bias = nullptr;  ///< bias of row k at bias[k * bias_stride], or null for zero
  int kvalid = 0;               ///< block rows stored (1..oc)
  int nvec = 0;                 ///< vectors in use (1..vecs); the SIMD kernels bake it in
  bool accumulate = false;      ///< add to y (a later part of the reduction) instead of bias
  /// Consecutive output-channel blocks computed for the same vectors, one after the other:
  /// block r reads weights w[k] + r * w_kb_stride and bias from bias + r * oc, and is stored
  /// r * oc * y_k_stride floats after block 0; runs > 1 only with kvalid = oc and channel
  /// blocks (not band rows). Amortises a call over blocks of few (channel, tap) steps.
  int runs = 1;
  /// Those runs for `pos_runs` vector blocks in turn, block q's input and output `q * pos_step`
  /// floats after block 0's (1x1 planes read in place, whole vectors only; SIMD kernels only):
  /// amortises a call over 1x1 layers of few channels.
  int pos_runs = 1;
  int64_t pos_step = 0;
};

/// Computes one block: y = bias + sum over channels and taps of w * x.
using BlockFn = void (*)(const BlockCommon&, const Block&);

/// The AVX2/FMA kernel (8 lanes) for `oc` channels x `vecs` vectors, specialised for one tap
/// (1x1) when `one_tap`; null when not instantiated. Only call on a CPU with AVX2 and FMA.
BlockFn avx2_block(int oc, int vecs, bool one_tap);
/// The AVX-512 kernel (16 lanes), likewise; only call on a CPU with AVX-512F/BW/VL.
BlockFn avx512_block(int oc, int vecs, bool one_tap);
/// The AVX-512VL kernel (8 lanes in ymm, 32 registers; oc 4 only), likewise.
BlockFn avx512vl_block(int oc, int vecs, bool one_tap);
/// The portable kernel (any oc <= kMaxOc, any lanes and vecs).
BlockFn scalar_block(int oc);

/// Runs cpu.direct. With `simd`, the config's SIMD kernels run when conv::cpu_isa() supports
/// them (the portable kernels otherwise); without, the portable kernels always run. Validates
/// config and workspace (conv::Error naming the field).
void forward(const ConvProblem& p, const std::string& config, const ForwardArgs& args, bool simd);

/// Test hook: forward() with the portable kernels, whatever the CPU. (Out of line, like every
/// function here: the AVX TUs include this header, and an inline function they emitted could
/// be the copy the linker keeps.)
void forward_scalar(const ConvProblem& p, const std::string& config, const ForwardArgs& args);

}  // namespace conv::kernels::direct
