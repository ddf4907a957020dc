// The input view of cpu.direct and cpu.direct_kvec: how the direct kernels see the input (a
// zero-padded, stride-phase-split workspace copy, or the input itself), the tap offsets into it,
// and the copy. Internal to kernels/cpu; not part of the public API.
//
// A kernel needs, for consecutive output columns and one tap (r, s), consecutive floats. The
// input is therefore copied once per image into the workspace, zero padded and split into
// stride phases (space-to-depth): padded pixel (ih', iw') goes to phase plane
// (ih' % stride_h, iw' % stride_w) at row ih' / stride_h, column iw' / stride_w. Every (stride,
// dilation, padding) case then reads unit-stride rows, and consecutive output rows are
// consecutive phase rows, so blocks may run across row ends ("wide" mode, for short rows).
// Unpadded inputs with stride_w 1 are read in place; 1x1 kernels run over the flattened OH*OW
// plane (a GEMM), after a compacting copy when strided or padded (or, as a config, to align
// the planes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "conv/problem.hpp"
#include "cpu/common/l2_cache.hpp"
#include "cpu/direct/direct.hpp"

namespace conv::kernels::direct {

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
inline size_t round64(size_t b) {
  return (b + 63) / 64 * 64;
}

// Zeroed floats after the view, plus (band + 1) view rows: lanes past the last output position
// read up to lanes-1 floats beyond it, up to a row more in wide mode, and band blocks reaching
// past OH up to band-1 rows more.
constexpr int64_t kSlack = 2 * kMaxLanes;

// How the kernels see the input, and how output vectors map onto it. Depends on the problem
// and the config's lane count and band only.
struct Geometry {
  int lanes = 8;
  bool flat = false;  // vectors run over the flattened OH*OW plane (1x1 kernels)
  bool copy = false;  // input view is a workspace copy (else x itself)
  bool wide = false;  // vectors run over whole view rows; view columns OW..Wq-1 are unused
  // Flat only (a "_panels" config, set by cpu.direct's driver): vector v covers positions
  // v*lanes.. of a per-thread panel packed from the view; no vector is shifted.
  bool panel = false;
  int band = 0;  // band mode: output rows per block (0: channel blocks)
  int64_t OH = 0, OW = 0, OHW = 0;
  int64_t Hp = 0, Wp = 0;  // padded input size (copy, rows mode)
  int64_t Hq = 0, Wq = 0;  // rows and columns of one phase plane (copy, rows mode)
  // Phases stored per dimension: min(stride, padded size). A stride beyond the padded input
  // (one output row, OH = 1) leaves the other phases empty and never read, and storing them
  // would make the view stride_h * stride_w planes large.
  int64_t Ph = 0, Pw = 0;
  int64_t plane = 0;       // view floats per channel (channel stride of the view)
  int64_t plane_used = 0;  // of which the copy writes the first ones (copy)
  int64_t row_step = 0;    // view floats between consecutive output rows (rows mode)
  int64_t vpr = 0;         // vectors per output row (rows mode)
  int64_t nvec = 0;        // vectors per output channel
  // Flat views read in place: positions before the input's first vector-aligned one, which
  // vector 0 alone covers (set per call from the input's address; 0 otherwise).
  int64_t head = 0;
  // Channels interleaved per view plane: 1 (planar, NCHW-like), or 8 (nChw8c: a plane holds 8
  // channels, each position's 8 consecutive; plane, plane_used and tap offsets count floats, the
  // block positions and row_step count positions, 8 floats each).
  int cblock = 1;
  int64_t taps = 0;  // steps per channel: R*S, or (R + band - 1)*S in band mode
  size_t tap_bytes = 0, copy_floats = 0;
  size_t band_floats = 0;  // band weights, groups x taps x band (band mode)
};

/// The view for vectors of `lanes` positions (8 or 16), in band mode for `band` > 0 rows. With
/// `aligned`, a 1x1 input that could be read in place is copied into cache-line-aligned planes
/// (see aligned_copy_optional). With `cblock` 8 (C a multiple of 8, not band mode) the view is
/// the stride-phase copy in nChw8c order (oneDNN's blocked layout), even where planar views
/// would read the input in place.
Geometry make_geometry(const ConvProblem& p, int lanes, int band, bool aligned = false,
                       int cblock = 1);
/// A 1x1 problem whose input plane is its output plane (stride 1, no padding).
bool dense_1x1(const ConvProblem& p);
/// Whether `aligned` changes the view of `p`: a 1x1, stride 1, unpadded problem whose planes (OH*OW
/// floats) are not whole cache lines. Reading such planes in place or from an aligned copy is the
/// tuner's choice: which is faster depends on the CPU.
bool aligned_copy_optional(const ConvProblem& p, int lanes);
/// Appends each config of `configs` with "_aligned" where aligned_copy_optional(p, lanes).
void append_aligned_configs(const ConvProblem& p, int lanes, std::vector<std::string>* configs);
/// How far ahead of a tap's input (in floats) the kernels prefetch: the next channel's, or for a
/// stride-phase view of 512 floats a channel and more, with 16 channels or more per group, the one
/// after it (with 1 or 3 channels that measured slower). 0 (no prefetch) for AVX2 blocks with 3
/// channels per group or fewer, whose prefetches mostly fall past the last channel (on AVX-512 the
/// effect is mixed, so those blocks keep prefetching).
inline int64_t prefetch_ahead(const ConvProblem& p, const Geometry& g) {
  if (p.Cg() <= 3 && g.lanes == 8) return 0;
  return g.plane * (g.Ph * g.Pw > 1 && g.plane >= 512 && p.Cg() >= 16 ? 2 : 1);
}
/// Workspace bytes: alignment, tap offsets, view copy and band weights.
size_t workspace_for(const Geometry& g);
/// Tap offsets into the view, taps entries.
void fill_taps(const ConvProblem& p, const Geometry& g, int64_t* tap);
/// Steps (channels x taps) of one reduction chunk up to which the kernels get a table of their
/// view offsets (BlockCommon/KvecCommon::step_x, 32 KiB); longer reductions have many taps per
/// channel and keep the nested channel and tap loops.
constexpr int64_t kMaxSteps = 4096;
/// Entries of the step table for chunks of `chunk_channels` channels: chunk_channels * taps, or 0
/// for none (1x1 views, more than kMaxSteps).
inline int64_t step_table_entries(const Geometry& g, int64_t chunk_channels) {
  const int64_t n = chunk_channels * g.taps;
  return g.flat || n > kMaxSteps ? 0 : n;
}
/// Fills the step table: step_x[c * taps + t] = c * plane + tap[t], n entries (a multiple of
/// taps).
void fill_steps(const Geometry& g, const int64_t* tap, int64_t n, int64_t* step_x);
/// Copies image `x` (C x H x W) into the view `v`. Call inside a parallel region (every thread);
/// ends with a barrier. The threads split the copy by channels, or with
/// `by_rows` by view rows (every channel's rows of one band of output rows, each stride phase
/// alike): pass it when the kernel's threads split the output plane by positions, so each
/// thread reads the view rows it wrote itself rather than rows in the other core's cache (the
/// measurements are in the README's cpu.direct row). cpu.direct's position-split tasks copy their
/// rows with copy_view_rows instead, as they reach them (row_pipeline.hpp).
void copy_view(const ConvProblem& p, const Geometry& g, const float* x, float* v,
               bool by_rows = false);
/// Copies phase rows [lo, hi) of channel `c` (of channel block `c` in an nChw8c view) of image
/// `x` into the view `v`, every row phase (a rows-mode view: not flat). What copy_view runs per
/// band; the caller synchronises.
void copy_view_rows(const ConvProblem& p, const Geometry& g, const float* x, float* v, int64_t c,
                    int64_t lo, int64_t hi);
/// copy_view_rows of an nChw8c view (cblock 8), by 8x8 AVX transposes (direct_avx2.cpp; needs
/// AVX2).
void copy_view_rows_nchw8c(const ConvProblem& p, const Geometry& g, const float* x, float* v,
                           int64_t cb, int64_t lo, int64_t hi);
/// Copies `rows` rows of `n` floats, `stride` floats apart from `src`, to rows `width` floats
/// apart at `dst`, zero-filling each from n to `used` (a multiple of 8, at most width); needs
/// AVX2 (direct_avx2.cpp).
void pack_panel_avx2(const float* src, int64_t stride, int64_t rows, int64_t n, int64_t used,
                     int64_t width, float* dst);
/// One input row split into its `step` (2 or 4) column phases at once: phase q's floats
/// d0[q * d_stride + t] = src[step*t + q + first] for t < n, zero where that index is outside
/// [0, W). One pass over the row, 8 floats per phase from each 8*step source floats
/// (direct_avx2.cpp; needs AVX2).
void phase_rows_avx2(const float* src, int64_t W, int64_t first, int step, float* d0,
                     int64_t d_stride, int64_t n);

}  // namespace conv::kernels::direct
