// Internals of cpu.fft shared by fft.cpp (Algorithm object, configs and geometry, compiled for
// the baseline ISA), fft_avx2.cpp / fft_avx512.cpp (the kernels of fft_impl.hpp built for 8 and
// 16 lanes) and tests/test_fft.cpp. Not part of the public API. fft.cpp describes the method,
// the layouts and the exact workspace formula.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "conv/algorithm.hpp"
#include "conv/problem.hpp"

namespace conv::kernels::fft {

/// Per-thread scratch slots the workspace provides: max(omp_get_num_procs(),
/// omp_get_max_threads()) taken once per process (as cpu.onednn sizes its scratchpad), so
/// workspace_bytes() never changes within a process. forward() runs the slot stages with at
/// most this many threads.
int slot_ceiling();

constexpr int kTiles[] = {8, 16, 32, 64};  ///< tile sizes of the configs

/// Output channels per register block of the frequency-domain GEMM for a vector width.
constexpr int gemm_kr(int lanes) {
  return lanes == 16 ? 4 : 2;
}

/// One config: tile size t (input tile t x t) and the vector width the kernels run with
/// (lanes = tiles or channels per vector: 8 for AVX2, 16 for AVX-512). Written "t16" (AVX2) or
/// "t16_avx512".
struct Config {
  int t = 8;
  int lanes = 8;
  std::string name() const;
};

/// Parses a config string; throws conv::Error naming "config" for anything else, and for an
/// AVX-512 config on a CPU without AVX-512.
Config parse_config(const std::string& config);

/// Everything forward() derives from (problem, config): the polyphase split, the tiling, which
/// of the two paths runs, and the workspace layout. All sizes in elements unless named *_bytes.
/// A frequency element is 2 * lanes floats: the real parts of all lanes, then the imaginary
/// parts.
struct Geometry {
  int t = 0;      ///< tile size (input tile t x t)
  int lanes = 8;  ///< vector width: 8 (AVX2) or 16 (AVX-512)
  int F = 0;      ///< frequencies kept per tile: t * (t/2 + 1)
  int64_t OH = 0, OW = 0;

  // Polyphase split: tap r of the kernel lands in row phase r % ph (ph = stride_h /
  // gcd(stride_h, dilation_h)) at sub-kernel row r*dilation_h / stride_h.
  int64_t ph = 1, pw = 1;  ///< phase periods
  int64_t Pa = 1, Pb = 1;  ///< row / column phases that hold taps: min(R, ph), min(S, pw)
  int64_t P = 1;           ///< Pa * Pb
  int64_t Rp = 1, Sp = 1;  ///< sub-kernel size: (R-1)*dilation/stride + 1 (integer division)
  int64_t mh = 1, mw = 1;  ///< output tile: t - Rp + 1, t - Sp + 1
  int64_t TH = 1, TW = 1;  ///< tiles per image (ceil(OH/mh), ceil(OW/mw))
  int64_t Cp = 1;          ///< reduction channels per group: C/g * P

  // Outputs whose receptive field holds no input pixel are written as bias only, so the
  // transform's rounding leak never lands on them. Alive rows are [oh_lo, oh_hi) unless
  // row_gaps (H < dilation_h: then each row is tested).
  // Same for columns with col_gaps (W < dilation_w).
  int64_t oh_lo = 0, oh_hi = 0, ow_lo = 0, ow_hi = 0;
  bool row_gaps = false, col_gaps = false;

  bool depthwise = false;  ///< C/g == K/g == 1: lanes run over channels, elementwise product

  // General path: columns are (image, tile) pairs, J = N * TH * TW, in vectors of `lanes`.
  int64_t Kb = 0;        ///< ceil(K/g / lanes): weight lanes run over output channels
  int64_t Jv_total = 0;  ///< ceil(J / lanes)
  int64_t Jv = 0;        ///< column vectors per block
  int64_t blocks = 0;    ///< column blocks per group
  bool fused = false;    ///< per-item products (small C'): no Y, spectra formed in the slots

  // Depthwise path.
  int64_t Cb = 0;     ///< ceil(C / lanes)
  int64_t items = 0;  ///< work items of the slot stage (per-item products or depthwise)

  int64_t slots = 0;  ///< scratch slots: min(items, slot_ceiling()) (most threads of that stage)
  int64_t slot_floats = 0;
  int64_t tslots = 0;  ///< general path: forward-transform scratch slots of F elements each

  // Workspace layout, byte offsets from the 64-aligned workspace start.
  size_t x_off = 0, y_off = 0, slot_off = 0, tslot_off = 0, w_off = 0;
  size_t w_bytes = 0;      ///< transformed weights (= packed_weights_bytes)
  size_t total_bytes = 0;  ///< workspace_bytes: 64 (alignment) + everything
};

/// The geometry of problem `p` (valid) with config `c`. Throws conv::Error naming "config"
/// when the sub-kernel does not fit the tile (Rp or Sp > t - 1).
Geometry make_geometry(const ConvProblem& p, const Config& c);

/// The accuracy contract of cpu.fft (fft_error.cpp): error_bound() and the tile term that
/// add_error_scale() adds to scale[o] (N*K*OH*OW values) for host tensors x (NCHW), w (KCRS).
double error_bound(const ConvProblem& p, const Geometry& g);
void add_error_scale(const ConvProblem& p, const Geometry& g, const float* x, const float* w,
                     double* scale, int threads);

// ---- ISA entry points (fft_avx2.cpp: lanes 8; fft_avx512.cpp: lanes 16). Call only when
// conv::cpu_isa() supports them. ----

/// Transforms KCRS weights into the layout of Geometry (general: [g][Kb][f][c'][2*lanes],
/// depthwise: [Cb][P][f][2*lanes]), conjugated and scaled by 1/(4 t^2). `packed` holds
/// g.w_bytes bytes.
void pack_weights_avx2(const ConvProblem& p, const Geometry& g, const float* w, float* packed,
                       int threads);
void pack_weights_avx512(const ConvProblem& p, const Geometry& g, const float* w, float* packed,
                         int threads);

/// The convolution. `ws` is 64-byte aligned with room for g.total_bytes - 64 bytes (the weight
/// region is not touched when `packed` is non-null).
void forward_avx2(const ConvProblem& p, const Geometry& g, const float* x, const float* w,
                  const float* packed, const float* bias, float* y, char* ws, int threads);
void forward_avx512(const ConvProblem& p, const Geometry& g, const float* x, const float* w,
                    const float* packed, const float* bias, float* y, char* ws, int threads);

/// Test hooks for the 2D tile transforms on `lanes` tiles of t x t floats ([lane][row][col]).
/// Forward (inverse = false): `in` tiles -> `out` spectra [lane][u][v][re, im], u < t,
/// v <= t/2, equal to 2 * DFT2(tile) (the scale the pair-packed row pass leaves).
/// Inverse: `in` spectra (of real tiles) -> `out` tiles, t^2 * IDFT2 (normalised IDFT2 times
/// t^2), so inverse(forward(x)) = 2 t^2 x.
void test_tile_avx2(int t, bool inverse, const float* in, float* out);
void test_tile_avx512(int t, bool inverse, const float* in, float* out);

}  // namespace conv::kernels::fft
