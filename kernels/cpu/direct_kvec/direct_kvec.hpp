// Internals of cpu.direct_kvec shared by direct_kvec.cpp (Algorithm and driver), the SIMD
// kernels (direct_kvec_block.hpp, instantiated by direct_avx2.cpp and direct_avx512.cpp) and
// tests. Not part of the public API.
#pragma once

#include <cstdint>
#include <string>

namespace conv::kernels::direct {

/// A register block of cpu.direct_kvec: `kb` vectors of `lanes` consecutive output channels x up
/// to max_nw() output positions. Written "oc<kb*lanes>" for AVX2 (ymm, 8 lanes), e.g. "oc16"
/// = 2 ymm of channels x 6 positions, and "oc<kb*lanes>_avx512" for AVX-512 (zmm, 16 lanes).
/// A "_aligned" suffix reads a 1x1 input from cache-line-aligned plane copies instead of in
/// place (direct_view.hpp: aligned_copy_optional). A "_whole" suffix (AVX2, kernels larger than
/// 1x1) sums all C/g input channels in one pass per block instead of in chunks whose weights stay
/// in L1. A "_nchw8c" suffix (kernels larger than 1x1, C/g a multiple of 8) reads the input from
/// an nChw8c copy of the stride-phase view (oneDNN's blocked layout) instead of a planar one.
struct KvecConfig {
  int kb = 2;
  bool zmm = false;
  bool aligned = false;
  bool whole = false;
  bool nchw8c = false;
  int lanes() const { return zmm ? 16 : 8; }
  /// Positions per block: accumulators kb*nw, min(kb, nw) held operands and one more fit the
  /// register file (16 ymm or 32 zmm).
  int max_nw() const;
  std::string name() const;
};

/// Parses a config string; throws conv::Error naming "config" for anything else.
KvecConfig parse_kvec_config(const std::string& text);

/// Per-call constants of the kernel.
struct KvecCommon {
  int64_t channels = 0;          ///< input channels summed over (C/groups, or one chunk)
  int64_t taps = 0;              ///< R*S
  const int64_t* tap = nullptr;  ///< input view offset of each tap
  /// Null, or the view offset of every (channel, tap) step of `channels` in order, channel *
  /// x_channel_stride + tap[t]: the kernel runs the reduction as one loop over these steps.
  const int64_t* step_x = nullptr;
  int64_t x_channel_stride = 0;  ///< input view floats between channels
  int64_t prefetch_ahead = 0;    ///< floats past a tap's input prefetched; 0: no prefetches
};

/// One block: nw output positions at consecutive view offsets x, x + 1, ... (tap 0, channel 0);
/// weights packed [channels][R*S][kb*lanes]; bias (kb*lanes values) or null for zero. The kernel
/// writes the sums to tile[k_vec * slab + j * lanes + lane] (position j, channel
/// k_vec*lanes + lane); the driver stores the tile to NCHW. With `partial`, the sums start from
/// the tile's values (an earlier chunk of input channels) and `bias` is ignored.
struct KvecBlock {
  const float* x = nullptr;
  const float* w = nullptr;
  const float* bias = nullptr;
  float* tile = nullptr;
  int64_t slab = 0;  ///< tile floats between vectors of channels, at least nw * lanes
  bool partial = false;
  /// Reduction step i (a step of the step table, an nChw8c (block, tap) step, else a channel),
  /// i < pf_lines, prefetches the cache line at pf + 16 * i into L2: the weights the thread
  /// packs next (one-shot), fetched while this block computes.
  const float* pf = nullptr;
  int64_t pf_lines = 0;
};

using KvecFn = void (*)(const KvecCommon&, const KvecBlock&);

/// How a kernel walks a block's reduction: (channel, tap) steps of a planar view (the step table
/// or nested loops), one tap per channel (1x1), or (block of 8 channels, tap) steps of an nChw8c
/// view, whose positions are 8 floats apart and whose 8 channels of a position are consecutive
/// (KvecCommon::channels then counts blocks of 8 and x_channel_stride is the block's plane).
enum class KvecWalk { taps, one_tap, nchw8c };

/// The AVX2/FMA kernel for kb vectors x nw positions (1 <= nw <= max_nw) and one walk; null
/// when not instantiated. Only call on a CPU with AVX2 and FMA.
KvecFn avx2_kvec(int kb, int nw, KvecWalk walk);
/// The AVX-512 kernel, likewise; only call on a CPU with AVX-512F/BW/VL.
KvecFn avx512_kvec(int kb, int nw, KvecWalk walk);

/// Stores a tile of n consecutive positions (KvecBlock's layout, `slab` floats between vectors of
/// `lanes` channels) to NCHW: y[k * y_stride + j] = the sum of channel k (< kvalid) at position
/// j (< n), 8x8 AVX transposes; needs AVX2.
void kvec_store_avx2(const float* tile, int64_t n, int lanes, int64_t slab, int kvalid, float* y,
                     int64_t y_stride);

/// Packs `rows` (<= kbl) rows of `cols` floats (row r at src + r*src_stride) transposed into
/// dst[col * dst_stride + r] for r < kbl, zero for rows >= `rows` (AVX 4x4 transposes within
/// 128-bit lanes, eight whole destination rows at a time; kbl a multiple of 8, dst_stride >= kbl;
/// needs AVX2).
void kvec_pack_avx2(const float* src, int64_t src_stride, int rows, int64_t cols, int kbl,
                    float* dst, int64_t dst_stride);

}  // namespace conv::kernels::direct
