// cpu.direct: direct convolution with register blocking over output channels and output width,
// as in oneDNN's jit_avx2_conv / jit_avx512_common_conv and Georganas et al., "Anatomy of
// high-performance deep learning convolutions on SIMD architectures" (SC 2018): a block of `oc`
// output channels x `vecs` vectors of 8 (AVX2) or 16 (AVX-512) output positions stays in
// registers over the reduction over input channels and kernel taps; each step loads the input
// vectors once and broadcasts one weight per output channel (oc*vecs FMAs per oc+vecs loads).
// Very long reductions, and 1x1 ones over input planes larger than half the L2, are split into
// channel chunks whose input rows and weights stay in L2 (the "cache blocking" of the same
// paper); later chunks accumulate onto the output.
// Depthwise problems (one input and output channel per group) also have "band" blocks of `oc`
// consecutive output rows of one channel: each input row load then feeds every output row it
// reaches, with the R x S kernel laid out as a zero-padded band of (R + oc - 1) x S x oc
// weights (the row-reuse of oneDNN's depthwise kernels, in NCHW).
//
// This file is compiled for the baseline ISA: it owns the Algorithm object, the input view and
// the threaded block loop, and calls the SIMD kernels of direct_avx2.cpp / direct_avx512.cpp
// only when conv::cpu_isa() supports them (the portable direct_scalar.cpp otherwise).
//
// Input view: direct_view.hpp (zero-padded, stride-phase-split copy, or the input in place).
//
// Cost: N*K*C/g*R*S*OH*OW FMAs, rounded up to whole vectors along each output row (flattened
// plane for 1x1, view rows in wide mode) and to whole `oc` blocks along K/g, times
// (R + oc - 1)/R for band blocks; plus N*C*(H+pads)*(W+pads) copies for the input view when one
// is needed. Threads share (output-channel or row block x vector block) tasks.
// Workspace: 64 + round64(8*taps) bytes (tap offsets) + round64(4*(C*plane + slack)) bytes when
// the input is copied + round64(4*g*taps*oc) bytes of band weights + round64(8*chunk
// channels*taps) bytes of step offsets (at most 4096 steps, else none). Packed weights (Plan):
// K-blocked [g][K/g/oc][C/g][R*S][oc] with the last block zero-filled, or the band weights.
#include "cpu/direct/direct.hpp"

#include <omp.h>
#include <xmmintrin.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "conv/device.hpp"
#include "conv/error.hpp"
#include "cpu/direct/direct_view.hpp"
#include "cpu/direct/row_pipeline.hpp"
#include "kernels.hpp"

namespace conv::kernels {
namespace direct {

namespace {

// Instantiated register blocks. AVX2: oc*vecs <= 12 accumulators plus min(oc, vecs) operands
// and a broadcast fit the 16 ymm registers, and 12 independent FMA chains cover FMA latency x 2
// ports. AVX-512: 24 accumulators of the 32 zmm (28 ymm for the AVX-512VL block).
constexpr Config kConfigs[] = {{4, 3, BlockIsa::avx2},
                               {6, 2, BlockIsa::avx2},
                               {3, 4, BlockIsa::avx2},
                               {2, 6, BlockIsa::avx2},
                               {8, 1, BlockIsa::avx2},
                               {1, 12, BlockIsa::avx2},
                               {1, 8, BlockIsa::avx2},
                               {1, 4, BlockIsa::avx2},
                               {8, 3, BlockIsa::avx512},
                               {6, 4, BlockIsa::avx512},
                               {4, 6, BlockIsa::avx512},
                               {12, 2, BlockIsa::avx512},
                               {1, 16, BlockIsa::avx512},
                               {1, 8, BlockIsa::avx512},
                               {1, 4, BlockIsa::avx512},
                               {4, 7, BlockIsa::avx512vl},
                               // Band blocks (output rows of a depthwise channel).
                               {4, 3, BlockIsa::avx2, true},
                               {6, 2, BlockIsa::avx2, true},
                               {8, 3, BlockIsa::avx512, true},
                               {6, 4, BlockIsa::avx512, true},
                               {12, 2, BlockIsa::avx512, true}};

// Bytes of input rows and weights one chunk of the reduction touches per register block. Far
// more than L1: the hardware prefetchers stream a block's operands from L2 well, and every
// extra chunk costs a reload of the accumulators; the chunking only keeps very long reductions
// (thousands of channels) from thrashing L2. Measured best between 100 KiB and 300 KiB.
constexpr int64_t kChunkBytes = 256 * 1024;

// Floats of one thread's input panel ("_panels" configs; on its stack): the reduction chunk is this
// over vecs*lanes channels. 24 KiB leaves room for the weights in a 32 KiB L1 (AMD Zen 3); smaller
// panels measured slower, larger ones no faster.
constexpr int64_t kPanelFloats = 6144;
// Vector blocks per kernel call (Block::pos_runs) at most: a bound, not a tuning choice.
constexpr int kMaxPosRuns = 1 << 16;

// Band weights of one group: step (u, s) of output row k weighs w[u - k][s] (0 outside the
// kernel), laid out [u][s][k]. `w` is the group's R x S kernel.
void fill_band(const ConvProblem& p, int band, const float* w, float* out) {
  for (int64_t u = 0; u < p.R + band - 1; ++u)
    for (int64_t s = 0; s < p.S; ++s)
      for (int64_t k = 0; k < band; ++k) {
        const int64_t r = u - k;
        out[(u * p.S + s) * band + k] = (r >= 0 && r < p.R) ? w[r * p.S + s] : 0.0f;
      }
}

// Where vector `v` of an output channel starts in the view, and where its lanes are stored (output
// offsets of lane 0 per output row, with the stored lane range). In rows mode a partial last vector
// of a row is shifted left to end at the row's end when the row holds a whole vector, so no lane
// reads outside the row; only the new lanes are stored. Filled in place and only its first nseg
// segments: the driver recomputes it per vector block, where zeroing and returning the struct (a
// copy through narrower stores) would cost a noticeable share of a small call.
struct VecPos {
  int64_t x;
  int nseg;
  int64_t y[kMaxSegs];
  int lo[kMaxSegs], hi[kMaxSegs];
};

// Rows mode takes v's output row and vector within the row (v = row * vpr + q) from the caller,
// block_pos, which steps them; the other modes ignore them.
void vec_pos(const Geometry& g, int64_t v, VecPos* out, int64_t row, int64_t q) {
  VecPos& r = *out;
  r.nseg = 0;
  if (g.wide) {
    const int64_t p0 = v * g.lanes;
    r.x = p0;
    const int64_t last = std::min(g.OH - 1, (p0 + g.lanes - 1) / g.row_step);
    for (int64_t oh = p0 / g.row_step; oh <= last; ++oh) {
      const int64_t lo = std::max<int64_t>(0, oh * g.row_step - p0);
      const int64_t hi = std::min<int64_t>(g.lanes, oh * g.row_step + g.OW - p0);
      if (hi <= lo) continue;
      r.y[r.nseg] = oh * g.OW + p0 - oh * g.row_step;
      r.lo[r.nseg] = static_cast<int>(lo);
      r.hi[r.nseg] = static_cast<int>(hi);
      ++r.nseg;
    }
    return;
  }
  int64_t start, len, xrow = 0, yrow = 0;
  if (g.panel) {
    r.x = 0;  // the driver points a block's vectors into its panel
    r.y[0] = v * g.lanes;
    r.lo[0] = 0;
    r.hi[0] = static_cast<int>(std::min<int64_t>(g.lanes, g.OHW - v * g.lanes));
    r.nseg = 1;
    return;
  }
  if (g.flat) {
    start = g.head && v > 0 ? g.head + (v - 1) * g.lanes : v * g.lanes;
    len = g.OHW;
  } else {
    start = q * g.lanes;
    len = g.OW;
    xrow = row * g.row_step;
    yrow = row * g.OW;
  }
  r.nseg = 1;
  r.lo[0] = 0;
  r.hi[0] = g.lanes;
  if (start + g.lanes > len) {
    if (len >= g.lanes) {
      r.lo[0] = static_cast<int>(start - (len - g.lanes));
      start = len - g.lanes;
    } else {
      r.hi[0] = static_cast<int>(len - start);
    }
  }
  if (g.flat && g.head && v == 0) r.hi[0] = static_cast<int>(g.head);
  r.x = xrow + start;
  r.y[0] = yrow + start;
}

// A vector stored whole in one output row at its own lanes (not the head, not a shifted tail).
bool whole_vec(const Geometry& g, const VecPos& v) {
  return v.nseg == 1 && v.lo[0] == 0 && v.hi[0] == g.lanes;
}

// vec_pos of vectors v0 .. v0 + n - 1; returns the output row of the last one in rows mode (0
// otherwise). Their rows and columns are stepped from one division: a stem block's six 64-bit
// divisions took as long as its copy of the view rows.
int64_t block_pos(const Geometry& g, int64_t v0, int n, VecPos* pos) {
  if (g.wide || g.flat) {
    for (int j = 0; j < n; ++j) vec_pos(g, v0 + j, &pos[j], 0, 0);
    return 0;
  }
  int64_t oh = v0 / g.vpr, q = v0 % g.vpr, last = oh;
  for (int j = 0; j < n; ++j) {
    vec_pos(g, v0 + j, &pos[j], oh, q);
    last = oh;
    if (++q == g.vpr) q = 0, ++oh;
  }
  return last;
}

// A 1x1 input read in place starts its vectors on vector-aligned addresses after a head vector, so
// that no load splits a cache line: loads from an input 16 bytes off a line (as malloc returns
// large blocks) are markedly slower. Only where every channel plane starts at the same offset
// within a vector (then every image does too).
void align_flat_vectors(const float* x, Geometry* g) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(x);
  const int64_t off = static_cast<int64_t>(addr / sizeof(float) % g->lanes);
  if (!g->flat || g->copy || g->panel || addr % sizeof(float) != 0 || off == 0 ||
      g->plane % g->lanes != 0)
    return;
  g->head = g->lanes - off;
  g->nvec = 1 + ceil_div(g->OHW - g->head, g->lanes);
}

// Which operand a thread sweeps past the other: with more weights than input, all vector blocks
// for one channel block (its weights stay in L1), else all channel blocks for one vector block
// (its input rows stay in L1; always so for a packed panel).
bool kb_outer(const ConvProblem& p, const Geometry& g) {
  return !g.panel && (g.band || p.Kg() * g.taps > g.plane);
}

// Input channels per reduction chunk (kChunkBytes), balanced over the chunks.
int64_t chunk_channels(const ConvProblem& p, const Geometry& g, const Config& cfg) {
  // A vector block reads, per channel, R rows (times the column phases the taps hit) of about
  // vecs*lanes + (S-1)*dilation_w/stride_w floats.
  const int64_t span = cfg.vecs * g.lanes + (p.S - 1) * p.dilation_w / p.stride_w;
  const int64_t rows = g.flat ? 1 : p.R * std::min(p.S, p.stride_w);
  const int64_t per_channel = rows * (span * 4 / 64 + 2) * 64 + g.taps * cfg.oc * 4;
  int64_t cb = std::max<int64_t>(1, kChunkBytes / per_channel);
  if (g.panel) cb = std::max<int64_t>(1, kPanelFloats / (cfg.vecs * g.lanes));
  // A 1x1 channel block re-reads the whole chunk of the input plane from L2 (kb_outer): keep that
  // within half the L2.
  if (g.flat && kb_outer(p, g))
    cb = std::min(cb, std::max<int64_t>(1, l2_cache_bytes() / 2 / (g.plane * 4)));
  const int64_t chunks = ceil_div(p.Cg(), cb);
  return ceil_div(p.Cg(), chunks);
}

// 1x1 (flat planes): how far ahead the kernel prefetches its input, 0 for not at all: eight
// channels, where consecutive channels lie 2 KiB and more apart (past the hardware stride
// prefetchers). A vector block's input over one chunk that overflows a 32 KiB L1 is re-read from L2
// by every channel block, so every block prefetches (prefetching in every block an input that stays
// in L1 is slower). One that fits is prefetched by the first block of a run (Block::runs) only,
// which reads it from L3 or memory (*first_only); not at all in kb_outer order, whose tasks are
// runs of one block. That was measured with ymm blocks only, so zmm blocks keep prefetching only
// inputs that spill.
int64_t flat_prefetch_ahead(const ConvProblem& p, const Geometry& g, const Config& cfg,
                            int64_t chunk_channels, bool* first_only) {
  const bool far = g.plane * sizeof(float) >= 2048;
  const bool spills = chunk_channels * cfg.vecs * g.lanes * sizeof(float) > 32 * 1024;
  *first_only = !spills;
  return far && (spills || (g.lanes == 8 && !kb_outer(p, g))) ? 8 * g.plane : 0;
}

// pack_panel_avx2 (direct_view.hpp) for CPUs without AVX2.
void pack_panel_scalar(const float* src, int64_t stride, int64_t rows, int64_t n, int64_t used,
                       int64_t width, float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(dst + r * width, src + r * stride, n * sizeof(float));
    std::fill(dst + r * width + n, dst + r * width + used, 0.0f);
  }
}

// Entries of the step table for cpu.direct's reduction chunks (direct_view.hpp).
int64_t steps_in_table(const ConvProblem& p, const Geometry& g, const Config& cfg) {
  return step_table_entries(g, chunk_channels(p, g, cfg));
}

bool cpu_has(BlockIsa isa) {
  const CpuIsa have = cpu_isa();
  return isa == BlockIsa::avx2 ? have != CpuIsa::scalar : have == CpuIsa::avx512;
}

}  // namespace

std::string Config::name() const {
  return (band ? "oh" : "oc") + std::to_string(oc) + "ow" + std::to_string(vecs * lanes()) +
         (isa == BlockIsa::avx512     ? "_avx512"
          : isa == BlockIsa::avx512vl ? "_avx512vl"
                                      : "") +
         (aligned ? "_aligned" : "") + (panels ? "_panels" : "");
}

int Config::lanes() const {
  return isa == BlockIsa::avx512 ? 16 : 8;
}

void forward_scalar(const ConvProblem& p, const std::string& config, const ForwardArgs& args) {
  forward(p, config, args, false);
}

bool config_applies(const ConvProblem& p, const Config& c) {
  if (c.panels) return p.R == 1 && p.S == 1;
  return !c.band ||
         (p.Cg() == 1 && p.Kg() == 1 && p.stride_h == 1 && p.dilation_h == 1 && p.R * p.S > 1);
}

const Config* all_configs(int* count) {
  *count = static_cast<int>(sizeof(kConfigs) / sizeof(kConfigs[0]));
  return kConfigs;
}

Config parse_config(const std::string& text) {
  // "oc" | "oh", block rows, "ow", output positions, optional "_avx512", optional "_aligned" or
  // "_panels"; parsed without allocating, as forward() does this on every call.
  auto ends_with = [&](const char* suffix, size_t len) {
    return text.size() > len && text.compare(text.size() - len, len, suffix) == 0;
  };
  static constexpr char kAligned[] = "_aligned", kPanels[] = "_panels";
  const bool aligned = ends_with(kAligned, sizeof(kAligned) - 1);
  const bool panels = !aligned && ends_with(kPanels, sizeof(kPanels) - 1);
  const size_t end = text.size() - (aligned  ? sizeof(kAligned) - 1
                                    : panels ? sizeof(kPanels) - 1
                                             : 0);
  size_t i = 2;
  auto number = [&](int* v) {
    const size_t start = i;
    *v = 0;
    while (i < end && i - start < 4 && text[i] >= '0' && text[i] <= '9')
      *v = *v * 10 + (text[i++] - '0');
    return i > start && text[start] != '0';
  };
  int rows = 0, positions = 0;
  const bool band = text.compare(0, 2, "oh") == 0;
  bool ok = (band || text.compare(0, 2, "oc") == 0) && number(&rows) &&
            text.compare(i, 2, "ow") == 0 && (i += 2, number(&positions));
  const bool zmm = ok && end - i == 7 && text.compare(i, 7, "_avx512") == 0;
  const bool vl = ok && end - i == 9 && text.compare(i, 9, "_avx512vl") == 0;
  ok = ok && (zmm || vl || i == end) && !((aligned || panels) && band);
  const BlockIsa isa = zmm ? BlockIsa::avx512 : vl ? BlockIsa::avx512vl : BlockIsa::avx2;
  const int lanes = zmm ? 16 : 8;
  if (ok && positions % lanes == 0)
    for (const Config& c : kConfigs)
      if (c.band == band && c.oc == rows && c.vecs * lanes == positions && c.isa == isa) {
        Config out = c;
        out.aligned = aligned;
        out.panels = panels;
        return out;
      }
  std::string known;
  for (const Config& c : kConfigs) known += (known.empty() ? "" : ", ") + c.name();
  throw Error("config: cpu.direct has no config \"" + text + "\" (known: " + known +
              "; each oc block also with \"_aligned\" or \"_panels\")");
}

Config parse_config_for(const ConvProblem& p, const std::string& config) {
  const Config cfg = parse_config(config);
  if (!config_applies(p, cfg))
    throw Error("config: cpu.direct " + config +
                (cfg.panels ? " (input panels) needs a 1x1 kernel"
                            : " (a band block) needs a depthwise problem with stride_h = "
                              "dilation_h = 1"));
  return cfg;
}

void forward(const ConvProblem& p, const std::string& config, const ForwardArgs& a, bool simd) {
  const Config cfg = parse_config_for(p, config);
  Geometry g = make_geometry(p, cfg.lanes(), cfg.band ? cfg.oc : 0, cfg.aligned);
  g.panel = cfg.panels;
  const int64_t n_steps = steps_in_table(p, g, cfg);
  align_flat_vectors(a.x, &g);

  const bool use_simd = simd && cpu_has(cfg.isa);
  BlockFn fns[kMaxVecs + 1] = {};
  for (int nb = 1; nb <= cfg.vecs; ++nb) {
    if (!use_simd)
      fns[nb] = scalar_block(cfg.oc);
    else if (cfg.isa == BlockIsa::avx512)
      fns[nb] = avx512_block(cfg.oc, nb, g.flat);
    else if (cfg.isa == BlockIsa::avx512vl)
      fns[nb] = avx512vl_block(cfg.oc, nb, g.flat);
    else
      fns[nb] = avx2_block(cfg.oc, nb, g.flat);
    if (!fns[nb]) throw Error("config: cpu.direct " + config + " has no kernel");
  }

  const uintptr_t base = reinterpret_cast<uintptr_t>(a.workspace);
  int64_t* tap = reinterpret_cast<int64_t*>((base + 63) / 64 * 64);
  float* view_buf = reinterpret_cast<float*>(reinterpret_cast<char*>(tap) + g.tap_bytes);
  float* band_buf = view_buf + round64(g.copy_floats * sizeof(float)) / sizeof(float);
  fill_taps(p, g, tap);
  int64_t* step_x =
      reinterpret_cast<int64_t*>(band_buf + round64(g.band_floats * sizeof(float)) / sizeof(float));
  fill_steps(g, tap, n_steps, step_x);

  const int64_t Cg = p.Cg(), Kg = p.Kg(), T = g.taps;
  const int oc = cfg.oc;
  // Tasks: (block of oc channels or band rows) x (block of vecs vectors, or of vecs vectors of
  // one row in band mode).
  const int64_t nkb = g.band ? ceil_div(g.OH, oc) : ceil_div(Kg, oc);
  const int64_t nvec_total = g.band ? g.vpr : g.nvec, nvb = ceil_div(nvec_total, cfg.vecs);
  // Vector block vb starts at vector first_vec(vb). A flat plane's few vectors are shared evenly,
  // so the last block is not a short one of few FMA chains; planes of rows have many blocks, where
  // the two divisions per block measurably cost time.
  const int64_t vq = nvec_total / nvb, vr = nvec_total % nvb;  // nvec_total * vb / nvb, no overflow
  auto first_vec = [&](int64_t vb) { return g.flat ? vb * vq + vb * vr / nvb : vb * cfg.vecs; };
  const int64_t cb = chunk_channels(p, g, cfg), nchunks = ceil_div(Cg, cb);

  BlockCommon common;
  common.taps = T;
  common.tap = tap;
  common.step_x = n_steps ? step_x : nullptr;
  // A panel holds channel rows of vecs*lanes floats.
  const int64_t panel_w = cfg.vecs * g.lanes;
  common.x_channel_stride = g.panel ? panel_w : g.plane;
  common.prefetch_ahead = g.panel  ? 0
                          : g.flat ? flat_prefetch_ahead(p, g, cfg, cb, &common.prefetch_first_only)
                                   : prefetch_ahead(p, g);
  // Weights that overflow the L2 come from L3 or memory in streams the hardware prefetchers follow
  // too late: a packed block is one stream of oc floats per step, KCRS rows oc slow streams. The
  // zmm blocks whose reduction runs over a step table (not 1x1, at most kMaxSteps steps a chunk)
  // prefetch them 64 steps ahead. The ymm blocks do not: with the prefetches their steps, half as
  // long, measured slower.
  if (cfg.isa == BlockIsa::avx512 && p.w_bytes() > l2_cache_bytes()) common.w_prefetch_steps = 64;
  common.y_k_stride = g.band ? g.OW : g.OHW;
  common.bias_stride = g.band ? 0 : 1;
  common.lanes = g.lanes;
  // Outputs of one image of which each thread's share overflows half its L2 (the other half holds
  // its input and weights) are stored non-temporally where whole aligned vectors allow: they would
  // only evict the input and weights on their way to memory, and a streaming store skips reading
  // each line first. Not with several chunks, whose later ones read the output back. Rows k of a
  // block lie whole lines apart (OHW a multiple of 16 floats), so the kernels stream exactly the
  // vectors that fill whole lines (direct_block.hpp).
  const int threads = a.threads;
  common.stream = !g.band && nchunks == 1 && g.OHW % 16 == 0 &&
                  2 * 4 * p.K * g.OHW > threads * l2_cache_bytes();
  // Weight addressing: band [g][u][s][row], packed [g][kb][c][t][oc] or plain KCRS.
  const bool packed = a.packed_weights != nullptr;
  const float* wbase = packed ? static_cast<const float*>(a.packed_weights) : a.w;
  int64_t w_k_stride, w_kb_stride, w_g_stride;
  if (g.band) {
    if (!packed) wbase = band_buf;
    common.w_tap_stride = oc;
    common.w_channel_stride = T * oc;
    w_k_stride = 1;
    w_kb_stride = 0;
    w_g_stride = T * oc;
  } else if (packed) {
    common.w_tap_stride = oc;
    common.w_channel_stride = T * oc;
    w_k_stride = 1;
    w_kb_stride = Cg * T * oc;
    w_g_stride = nkb * w_kb_stride;
  } else {
    common.w_tap_stride = 1;
    common.w_channel_stride = T;
    w_k_stride = Cg * T;
    w_kb_stride = oc * w_k_stride;
    w_g_stride = Kg * w_k_stride;
  }

  common.w_kb_stride = w_kb_stride;

  const bool kb_outer = direct::kb_outer(p, g);
  // Block::pos_runs: 1x1 planes read in place (a vector's view offset is its output offset),
  // output-channel blocks inner and all whole, SIMD kernels.
  const bool pos_runs_apply =
      use_simd && g.flat && !g.panel && !g.band && !kb_outer && Kg % oc == 0;
  const int64_t per_group = nkb * nvb, tasks = p.groups * per_group;
  // The threads' task ranges are bands of output positions when vector blocks are outer.
  const bool by_rows = !kb_outer && p.groups == 1;

  // Position-split tasks over a phase view of whole rows copy it as they go (row_pipeline.hpp),
  // unless there are more threads than progress counters.
  const bool pipelined =
      by_rows && g.copy && !g.flat && !g.wide && g.OW >= g.lanes && threads <= kMaxPipelineThreads;
  RowProgress progress[kMaxPipelineThreads];
  // Output rows of a task's vectors (rows mode: vpr vectors per row).
  auto task_rows = [&](int64_t task) {
    const int64_t vb = task / nkb, v0 = first_vec(vb);
    const int64_t v1 = std::min(first_vec(vb + 1), nvec_total) - 1;
    return std::pair<int64_t, int64_t>(v0 / g.vpr, v1 / g.vpr);
  };

  for (int64_t n = 0; n < p.N; ++n) {
    const float* xn = a.x + n * p.C * p.H * p.W;
    float* yn = a.y + n * p.K * g.OHW;
    const float* view = g.copy ? view_buf : xn;
    if (pipelined)
      for (int t = 0; t < threads; ++t) progress[t].rows.store(0, std::memory_order_relaxed);
#pragma omp parallel num_threads(threads)
    {
      std::optional<RowPipeline<decltype(task_rows)>> pipe;
      if (pipelined)
        pipe.emplace(p, g, xn, view_buf, tasks, task_rows, progress);
      else if (g.copy)
        copy_view(p, g, xn, view_buf, by_rows);
      if (g.band && !packed && n == 0) {
#pragma omp for schedule(static)
        for (int64_t grp = 0; grp < p.groups; ++grp)
          fill_band(p, oc, a.w + grp * p.R * p.S, band_buf + grp * T * oc);
      }
      // Each thread owns a contiguous range of tasks for all chunks, so chunks of one block run
      // in order on one thread and no barrier is needed between chunks.
      const int nth = omp_get_num_threads(), tid = omp_get_thread_num();
      const int64_t begin = tasks * tid / nth, end = tasks * (tid + 1) / nth;
      BlockCommon cc = common;
      Block b;
      VecPos pos[kMaxVecs];
      // "_panels": the current block's input, packed (g.panel; threads sharing a block each
      // pack their own). 24 KiB of stack, as cpu.direct_kvec's tiles take 16 KiB.
      alignas(64) float panel[kPanelFloats];
      for (int64_t chunk = 0; chunk < nchunks; ++chunk) {
        const int64_t c0 = chunk * cb;
        cc.channels = std::min(cb, Cg - c0);
        b.accumulate = chunk > 0;
        int64_t cur_vb = -1, cur_grp = -1, last_row = 0, cur_v0 = 0;
        bool cur_whole = false;  // every vector of the current block whole and unshifted
        // (group, outer, inner) block indices of `begin`, then stepped like an odometer: two
        // 64-bit divisions per block cost about as much as a block of few (channel, tap) steps.
        const int64_t n_inner = kb_outer ? nvb : nkb, n_outer = kb_outer ? nkb : nvb;
        int64_t grp = begin / per_group, outer = begin % per_group / n_inner,
                inner = begin % per_group % n_inner;
        for (int64_t task = begin; task < end; ++task) {
          const int64_t kb = kb_outer ? outer : inner, vb = kb_outer ? inner : outer;
          if (vb != cur_vb || grp != cur_grp) {
            cur_vb = vb;
            cur_grp = grp;
            // Band mode: the vectors of row 0; the row block offsets them below.
            const int64_t v0 = first_vec(vb);
            b.nvec = static_cast<int>(std::min(first_vec(vb + 1), nvec_total) - v0);
            last_row = block_pos(g, v0, b.nvec, pos);
            cur_v0 = v0;
            cur_whole =
                std::all_of(pos, pos + b.nvec, [&](const VecPos& v) { return whole_vec(g, v); });
            // The lanes of a last vector past the plane are computed, never stored: zeros, not
            // stack garbage (which may be NaN or denormal, slow to multiply).
            if (g.panel)
              (use_simd ? pack_panel_avx2 : pack_panel_scalar)(
                  view + (grp * Cg + c0) * g.plane + v0 * g.lanes, g.plane, cc.channels,
                  std::min<int64_t>(b.nvec * g.lanes, g.OHW - v0 * g.lanes), b.nvec * g.lanes,
                  panel_w, panel);
          }
          const int64_t k0 = kb * oc;
          const float* xg = view + (grp * Cg + c0) * g.plane;
          float* yk;
          if (g.band) {
            b.kvalid = static_cast<int>(std::min<int64_t>(oc, g.OH - k0));
            xg += k0 * g.row_step;
            yk = yn + grp * g.OHW + k0 * g.OW;
          } else {
            b.kvalid = static_cast<int>(std::min<int64_t>(oc, Kg - k0));
            yk = yn + (grp * Kg + k0) * g.OHW;
          }
          for (int j = 0; j < b.nvec; ++j) {
            b.x[j] = g.panel ? panel + j * g.lanes : xg + pos[j].x;
            b.nseg[j] = pos[j].nseg;
            for (int sg = 0; sg < pos[j].nseg; ++sg) {
              // In wide mode lane 0's address may lie before the row (or y) it is stored in;
              // integer arithmetic keeps that well defined, and the kernel never touches it.
              b.seg[j][sg].out = reinterpret_cast<float*>(reinterpret_cast<uintptr_t>(yk) +
                                                          pos[j].y[sg] * sizeof(float));
              b.seg[j][sg].lo = pos[j].lo[sg];
              b.seg[j][sg].hi = pos[j].hi[sg];
            }
          }
          const float* wk = wbase + grp * w_g_stride + kb * w_kb_stride + c0 * cc.w_channel_stride;
          for (int k = 0; k < oc; ++k) b.w[k] = wk + std::min(k, b.kvalid - 1) * w_k_stride;
          b.bias = a.bias ? a.bias + grp * Kg + (g.band ? 0 : k0) : nullptr;
          // The following full channel blocks of the same vectors, in one call.
          b.runs = 1;
          if (!kb_outer && !g.band && kb < Kg / oc) {
            b.runs = static_cast<int>(std::min(end - task, Kg / oc - kb));
            task += b.runs - 1;
            inner += b.runs - 1;
          }
          // 1x1 in place: the following vector blocks of this block's size, whole vectors, each
          // over all output-channel blocks, in the same call; a call of few channels otherwise
          // spends a noticeable share of its time here.
          b.pos_runs = 1;
          if (pos_runs_apply && kb == 0 && b.runs == nkb && cur_whole) {
            // Block sizes are vq or vq + 1 vectors (first_vec), stepped without divisions.
            int64_t rem = (vb * vr % nvb + vr) % nvb, fv = cur_v0 + b.nvec;
            for (int64_t next = vb + 1;
                 next < nvb && task + (next - vb) * nkb < end && b.pos_runs < kMaxPosRuns; ++next) {
              const int64_t size = vq + (rem + vr >= nvb ? 1 : 0);
              if (size != b.nvec) break;
              // Its vectors before the last are whole when the last is (only a plane's last
              // vector is shifted).
              VecPos last;
              vec_pos(g, fv + size - 1, &last, 0, 0);
              if (!whole_vec(g, last)) break;
              ++b.pos_runs;
              fv += size;
              rem = rem + vr >= nvb ? rem + vr - nvb : rem + vr;
            }
            b.pos_step = b.nvec * g.lanes;
            task += (b.pos_runs - 1) * nkb;
            outer += b.pos_runs - 1;
          }
          if (pipe) pipe->ready_for(last_row);
          fns[b.nvec](cc, b);
          if (++inner == n_inner) {
            inner = 0;
            if (++outer == n_outer) outer = 0, ++grp;
          }
        }
      }
      if (pipe) pipe->finish();
      if (common.stream) _mm_sfence();  // streaming stores are weakly ordered
    }
  }
}

}  // namespace direct

namespace {

class Direct final : public Algorithm {
 public:
  std::string_view id() const override { return "cpu.direct"; }
  // Raised whenever the kernels change, so that winners stored against older code are measured
  // again (the history of versions: docs/measurements.md).
  std::string version() const override { return "12"; }
  Device::Kind device() const override { return Device::Kind::cpu; }
  NumericClass numeric_class() const override { return NumericClass::exact_order; }
  // The padded, phase-split view (a few times the zero-padded input) fits int64 for every valid
  // problem (ConvProblem::validate bounds the zero-padded input to 2^48 bytes).
  Applicability do_applicable(const ConvProblem&) const override { return Applicability::yes(); }

  // The blocks of the widest ISA this CPU runs (the portable kernels run the AVX2 set).
  std::vector<std::string> do_configs(const ConvProblem& p) const override {
    const bool z = cpu_isa() == CpuIsa::avx512;
    // One output channel per group (depthwise): only single-channel blocks make sense.
    if (p.Kg() == 1) {
      std::vector<std::string> out =
          z ? std::vector<std::string>{"oc1ow128_avx512", "oc1ow64_avx512", "oc1ow256_avx512"}
            : std::vector<std::string>{"oc1ow96", "oc1ow64", "oc1ow32"};
      // Band blocks reuse each input row load for `oc` output rows at the price of oc-1 zero
      // steps per R kernel rows: measured faster for 3x3 on planes from 28x28 and for 5x5 and
      // larger (mobilenet_v2.txt, large_kernels.txt), slower on 14x14 and 7x7 3x3 planes.
      const std::vector<std::string> band =
          z ? std::vector<std::string>{"oh6ow64_avx512", "oh8ow48_avx512"}
            : std::vector<std::string>{"oh4ow24", "oh6ow16"};
      if (p.R >= 3 && direct::config_applies(p, direct::parse_config(band[0]))) {
        if (p.R >= 5 || p.OW() >= 28) {
          out.pop_back();
          out.insert(out.begin(), band.begin(), band.end());
        } else {
          out.push_back(band[0]);
        }
      }
      return out;
    }
    // Default first: on resnet50/vgg16 the wide-position blocks won on large planes and the
    // many-channel blocks on planes of 14x14 and less.
    const bool small = p.OH() * p.OW() <= 256;
    std::vector<const char*> names;
    if (z)
      names = {"oc8ow48_avx512", "oc12ow32_avx512", "oc6ow64_avx512", "oc4ow96_avx512"};
    else
      names = {"oc4ow24", "oc6ow16", "oc3ow32", "oc8ow8", "oc2ow48"};
    if (small) std::swap(names[0], names[1]);
    // Where 8-lane vectors compute an eighth fewer positions than 16-lane ones (7x7 outputs:
    // 56 against 64), the ymm block in the 32 AVX-512 registers too.
    if (z && 8 * direct::make_geometry(p, 8, 0).nvec * 8 <=
                 7 * direct::make_geometry(p, 16, 0).nvec * 16)
      names.push_back("oc4ow56_avx512vl");
    std::vector<std::string> out;
    // Channel blocks that waste little of K/g (at most a quarter of the computed channels).
    for (const char* name : names) {
      const direct::Config c = direct::parse_config(name);
      const int64_t computed = (p.Kg() + c.oc - 1) / c.oc * c.oc;
      if (4 * (computed - p.Kg()) <= computed) out.push_back(name);
    }
    // Few channels per group: the narrowest channel block, and single-channel blocks.
    if (out.empty()) {
      if (z)
        out = {"oc4ow96_avx512", "oc1ow128_avx512"};
      else
        out = {"oc2ow48", "oc1ow96"};
    }
    // 1x1 planes of 7x7 or 14x14 read in place or from aligned copies: which is faster depends
    // on the CPU (direct_view.hpp), so both are candidates.
    const size_t unaligned = out.size();
    direct::append_aligned_configs(p, z ? 16 : 8, &out);
    // Unpadded stride-1 1x1 layers with 128 input channels per group or more: also from packed
    // panels. A ymm block's channel rows, a plane apart, collide in the L1 sets and split cache
    // lines; packed, they stay in L1 for every channel block (with 64 channels packing gains
    // nothing). The zmm blocks stream their larger rows from L2 with prefetches: packed they
    // measured no faster, so they are not offered.
    if (!z && direct::dense_1x1(p) && p.Cg() >= 128)
      for (size_t i = 0; i < unaligned; ++i) out.push_back(out[i] + "_panels");
    return out;
  }

  size_t do_workspace_bytes(const ConvProblem& p, const std::string& config) const override {
    const direct::Config c = direct::parse_config_for(p, config);
    const direct::Geometry g = direct::make_geometry(p, c.lanes(), c.band ? c.oc : 0, c.aligned);
    return direct::workspace_for(g) +
           direct::round64(direct::steps_in_table(p, g, c) * sizeof(int64_t));
  }

  void do_forward(const ConvProblem& p, const std::string& config,
                  const ForwardArgs& a) const override {
    direct::forward(p, config, a, true);
  }

  size_t do_packed_weights_bytes(const ConvProblem& p, const std::string& config) const override {
    const direct::Config c = direct::parse_config(config);
    if (c.band) return direct::make_geometry(p, c.lanes(), c.oc).band_floats * sizeof(float);
    const int64_t nkb = (p.Kg() + c.oc - 1) / c.oc;
    return static_cast<size_t>(p.groups * nkb * c.oc * p.Cg() * p.R * p.S) * sizeof(float);
  }

  void do_pack_weights(const ConvProblem& p, const std::string& config, const float* w,
                       void* packed, int threads) const override {
    const direct::Config c = direct::parse_config(config);
    const int64_t Kg = p.Kg(), Cg = p.Cg(), T = p.R * p.S, oc = c.oc;
    const int64_t nkb = (Kg + oc - 1) / oc;
    float* out = static_cast<float*>(packed);
    if (c.band) {
      if (!direct::config_applies(p, c))
        throw Error("config: cpu.direct " + config + " (a band block) needs a depthwise problem");
      const int64_t steps = (p.R + oc - 1) * p.S;
#pragma omp parallel for schedule(static) num_threads(threads)
      for (int64_t grp = 0; grp < p.groups; ++grp)
        direct::fill_band(p, c.oc, w + grp * T, out + grp * steps * oc);
      return;
    }
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t gkb = 0; gkb < p.groups * nkb; ++gkb) {
      const int64_t grp = gkb / nkb, kb = gkb % nkb;
      float* dst = out + gkb * Cg * T * oc;
      for (int64_t ch = 0; ch < Cg; ++ch)
        for (int64_t t = 0; t < T; ++t)
          for (int64_t k = 0; k < oc; ++k) {
            const int64_t kk = kb * oc + k;
            dst[(ch * T + t) * oc + k] = kk < Kg ? w[((grp * Kg + kk) * Cg + ch) * T + t] : 0.0f;
          }
    }
  }
};

}  // namespace

const Algorithm& cpu_direct() {
  static const Direct algo;
  return algo;
}

}  // namespace conv::kernels
