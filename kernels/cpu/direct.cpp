// cpu.direct: direct convolution with register blocking over output channels and output width,
// as in oneDNN's jit_avx2_conv / jit_avx512_common_conv and Georganas et al., "Anatomy of
// high-performance deep learning convolutions on SIMD architectures" (SC 2018): a block of `oc`
// output channels x `vecs` vectors of 8 (AVX2) or 16 (AVX-512) output positions stays in
// registers over the reduction over input channels and kernel taps; each step loads the input
// vectors once and broadcasts one weight per output channel (oc*vecs FMAs per oc+vecs loads).
// The reduction is split into channel chunks whose input and weights fit the L1 cache (the
// "cache blocking" of the same paper); later chunks accumulate onto the output.
//
// This file is compiled for the baseline ISA: it owns the Algorithm object, the input view and
// the threaded block loop, and calls the SIMD kernels of direct_avx2.cpp / direct_avx512.cpp
// only when conv::cpu_isa() supports them (the portable direct_scalar.cpp otherwise).
//
// Input view. A kernel needs, for a vector of consecutive output columns and one tap (r, s),
// consecutive floats. The input is therefore copied once per image into the workspace with
// zero padding and its columns split into stride_w phases (column iw' of the padded row goes to
// phase iw' % stride_w, slot iw' / stride_w), which makes every (stride, dilation, padding)
// case a unit-stride load. Unpadded stride-1 inputs are read in place; 1x1 kernels run over the
// flattened OH*OW plane (a GEMM), after a compacting copy when strided or padded.
//
// Cost: N*K*C/g*R*S*OH*OW FMAs, rounded up to whole vectors along each output row (flattened
// plane for 1x1) and to whole `oc` blocks along K/g; plus N*C*(H+pads)*(W+pads) copies for the
// input view when one is needed. Threads share (output-channel block x vector block) tasks.
// Workspace: 64 + round64(8*R*S) bytes (tap offsets) + round64(4*(C*view_plane + 32)) bytes
// when the input is copied. Packed weights (Plan): K-blocked [g][K/g/oc][C/g][R*S][oc], the last
// block zero-filled.
#include "direct.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "conv/device.hpp"
#include "conv/error.hpp"
#include "kernels.hpp"

namespace conv::kernels {
namespace direct {

namespace {

// Instantiated register blocks. AVX2: oc*vecs <= 12 accumulators plus min(oc, vecs) operands
// and a broadcast fit the 16 ymm registers, and 12 independent FMA chains cover FMA latency x 2
// ports. AVX-512: 24 accumulators of the 32 zmm.
constexpr Config kConfigs[] = {
    {4, 3, BlockIsa::avx2},    {6, 2, BlockIsa::avx2},   {3, 4, BlockIsa::avx2},
    {2, 6, BlockIsa::avx2},    {8, 1, BlockIsa::avx2},   {1, 12, BlockIsa::avx2},
    {1, 8, BlockIsa::avx2},    {1, 4, BlockIsa::avx2},   {8, 3, BlockIsa::avx512},
    {6, 4, BlockIsa::avx512},  {4, 6, BlockIsa::avx512}, {12, 2, BlockIsa::avx512},
    {1, 16, BlockIsa::avx512}, {1, 8, BlockIsa::avx512}, {1, 4, BlockIsa::avx512}};

// Zeroed floats after the view: lanes past the last output of a short row read up to lanes-1
// floats beyond it.
constexpr int64_t kSlack = 2 * kMaxLanes;
// Bytes of input and weights one chunk of the reduction may touch per register block.
constexpr int64_t kChunkBytes = 24 * 1024;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
size_t round64(size_t b) { return (b + 63) / 64 * 64; }

// How the kernels see the input, and how output vectors map onto it. Depends on the problem
// and the lane count only.
struct Geometry {
  int lanes = 8;
  bool flat = false;  // vectors run over the flattened OH*OW plane (1x1 kernels)
  bool copy = false;  // input view is a workspace copy (else x itself)
  int64_t OH = 0, OW = 0, OHW = 0;
  int64_t Hp = 0, Wp = 0;  // padded input size (copy, rows mode)
  int64_t Wq = 0;          // slots per stride_w phase (copy, rows mode)
  int64_t L = 0;           // view floats per input row (rows mode)
  int64_t plane = 0;       // view floats per channel
  int64_t row_step = 0;    // view floats between consecutive output rows (rows mode)
  int64_t vpr = 0;         // vectors per output row (rows mode)
  int64_t nvec = 0;        // vectors per output channel
  int64_t taps = 0;
  size_t tap_bytes = 0, copy_floats = 0;
};

Geometry make_geometry(const ConvProblem& p, int lanes) {
  Geometry g;
  g.lanes = lanes;
  g.OH = p.OH(), g.OW = p.OW(), g.OHW = g.OH * g.OW;
  g.taps = p.R * p.S;
  const bool unpadded = p.pad_top == 0 && p.pad_left == 0 && p.pad_bottom == 0 && p.pad_right == 0;
  if (p.R == 1 && p.S == 1) {
    g.flat = true;
    // In place only when the plane is the output plane and the shifted last vector stays inside.
    g.copy = !(unpadded && p.stride_h == 1 && p.stride_w == 1 && g.OHW >= lanes);
    g.plane = g.copy ? g.OHW : p.H * p.W;
    g.nvec = ceil_div(g.OHW, lanes);
  } else {
    g.copy = !(unpadded && p.stride_w == 1 && g.OW >= lanes);
    if (g.copy) {
      g.Hp = p.H + p.pad_top + p.pad_bottom;
      g.Wp = p.W + p.pad_left + p.pad_right;
      g.Wq = ceil_div(g.Wp, p.stride_w);
      g.L = g.Wq * p.stride_w;
      g.plane = g.Hp * g.L;
    } else {
      g.L = p.W;
      g.plane = p.H * p.W;
    }
    g.row_step = p.stride_h * g.L;
    g.vpr = ceil_div(g.OW, lanes);
    g.nvec = g.OH * g.vpr;
  }
  g.tap_bytes = round64(static_cast<size_t>(g.taps) * sizeof(int64_t));
  if (g.copy) g.copy_floats = static_cast<size_t>(p.C * g.plane + kSlack);
  return g;
}

size_t workspace_for(const Geometry& g) {
  return 64 + g.tap_bytes + round64(g.copy_floats * sizeof(float));
}

void fill_taps(const ConvProblem& p, const Geometry& g, int64_t* tap) {
  for (int64_t r = 0; r < p.R; ++r)
    for (int64_t s = 0; s < p.S; ++s) {
      const int64_t col = s * p.dilation_w;
      const int64_t off = g.copy ? (col % p.stride_w) * g.Wq + col / p.stride_w : col;
      tap[r * p.S + s] = g.flat ? 0 : r * p.dilation_h * g.L + off;
    }
}

// Copies image `x` (C x H x W) into the view `v`. Runs inside a parallel region; ends with the
// barrier of its omp for.
void copy_view(const ConvProblem& p, const Geometry& g, const float* x, float* v) {
#pragma omp single nowait
  std::fill(v + p.C * g.plane, v + g.copy_floats, 0.0f);
  if (g.flat) {
#pragma omp for schedule(static)
    for (int64_t i = 0; i < p.C * g.OH; ++i) {
      const int64_t c = i / g.OH, oh = i % g.OH;
      float* dst = v + c * g.plane + oh * g.OW;
      const int64_t ih = oh * p.stride_h - p.pad_top;
      if (ih < 0 || ih >= p.H) {
        std::fill(dst, dst + g.OW, 0.0f);
        continue;
      }
      const float* src = x + (c * p.H + ih) * p.W;
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        const int64_t iw = ow * p.stride_w - p.pad_left;
        dst[ow] = (iw >= 0 && iw < p.W) ? src[iw] : 0.0f;
      }
    }
    return;
  }
#pragma omp for schedule(static)
  for (int64_t i = 0; i < p.C * g.Hp; ++i) {
    const int64_t c = i / g.Hp, hp = i % g.Hp;
    float* dst = v + c * g.plane + hp * g.L;
    const int64_t ih = hp - p.pad_top;
    if (ih < 0 || ih >= p.H) {
      std::fill(dst, dst + g.L, 0.0f);
      continue;
    }
    const float* src = x + (c * p.H + ih) * p.W;
    if (p.stride_w == 1) {
      std::fill(dst, dst + p.pad_left, 0.0f);
      std::memcpy(dst + p.pad_left, src, p.W * sizeof(float));
      std::fill(dst + p.pad_left + p.W, dst + g.L, 0.0f);
      continue;
    }
    for (int64_t q = 0; q < p.stride_w; ++q) {
      float* d = dst + q * g.Wq;
      for (int64_t t = 0; t < g.Wq; ++t) {
        const int64_t iw = t * p.stride_w + q - p.pad_left;
        d[t] = (iw >= 0 && iw < p.W) ? src[iw] : 0.0f;
      }
    }
  }
}

// Where vector `v` of an output channel starts: its view offset, output offset and stored lanes.
// A partial last vector of a row is shifted left to end at the row's end when the row holds a
// whole vector, so no lane reads outside the row; only the new lanes are stored.
struct VecPos {
  int64_t x = 0, y = 0;
  int lo = 0, hi = 0;
};

VecPos vec_pos(const Geometry& g, int64_t v) {
  VecPos r;
  r.hi = g.lanes;
  int64_t start, len, xrow = 0, yrow = 0;
  if (g.flat) {
    start = v * g.lanes;
    len = g.OHW;
  } else {
    const int64_t oh = v / g.vpr;
    start = (v % g.vpr) * g.lanes;
    len = g.OW;
    xrow = oh * g.row_step;
    yrow = oh * g.OW;
  }
  if (start + g.lanes > len) {
    if (len >= g.lanes) {
      r.lo = static_cast<int>(start - (len - g.lanes));
      start = len - g.lanes;
    } else {
      r.hi = static_cast<int>(len - start);
    }
  }
  r.x = xrow + start;
  r.y = yrow + start;
  return r;
}

// Input channels per reduction chunk: the chunk's input rows for one vector block plus its
// weights for one channel block should stay in L1 while the other blocks sweep over them.
int64_t chunk_channels(const ConvProblem& p, const Geometry& g, const Config& cfg) {
  const int64_t span = g.flat ? cfg.vecs * g.lanes
                              : (cfg.vecs * g.lanes - 1) * p.stride_w +
                                    (p.S - 1) * p.dilation_w + 1;
  const int64_t rows = g.flat ? 1 : p.R;
  const int64_t per_channel = rows * (span * 4 / 64 + 2) * 64 + g.taps * cfg.oc * 4;
  const int64_t cb = std::max<int64_t>(1, kChunkBytes / per_channel);
  const int64_t chunks = ceil_div(p.Cg(), cb);
  return ceil_div(p.Cg(), chunks);
}

bool cpu_has(BlockIsa isa) {
  const CpuIsa have = cpu_isa();
  return isa == BlockIsa::avx2 ? have != CpuIsa::scalar : have == CpuIsa::avx512;
}

}  // namespace

std::string Config::name() const {
  return "oc" + std::to_string(oc) + "ow" + std::to_string(vecs * lanes()) +
         (isa == BlockIsa::avx512 ? "_avx512" : "");
}

const Config* all_configs(int* count) {
  *count = static_cast<int>(sizeof(kConfigs) / sizeof(kConfigs[0]));
  return kConfigs;
}

Config parse_config(const std::string& text) {
  for (const Config& c : kConfigs)
    if (c.name() == text) return c;
  std::string known;
  for (const Config& c : kConfigs) known += (known.empty() ? "" : ", ") + c.name();
  throw Error("config: cpu.direct has no config \"" + text + "\" (known: " + known + ")");
}

void forward(const ConvProblem& p, const std::string& config, const ForwardArgs& a, bool simd) {
  const Config cfg = parse_config(config);
  const Geometry g = make_geometry(p, cfg.lanes());
  const size_t need = workspace_for(g);
  if (a.workspace_size < need || !a.workspace)
    throw Error("workspace: cpu.direct " + config + " needs " + std::to_string(need) +
                " bytes, got " + std::to_string(a.workspace ? a.workspace_size : 0));
  if (!a.x || !a.y || (!a.w && !a.packed_weights))
    throw Error("x/w/y: cpu.direct needs non-null input, weights (or packed weights) and output");

  const bool use_simd = simd && cpu_has(cfg.isa);
  BlockFn fns[kMaxVecs + 1] = {};
  for (int nb = 1; nb <= cfg.vecs; ++nb) {
    if (!use_simd)
      fns[nb] = scalar_block(cfg.oc);
    else if (cfg.isa == BlockIsa::avx512)
      fns[nb] = avx512_block(cfg.oc, nb, g.flat);
    else
      fns[nb] = avx2_block(cfg.oc, nb, g.flat);
    if (!fns[nb]) throw Error("config: cpu.direct " + config + " has no kernel");
  }

  const uintptr_t base = reinterpret_cast<uintptr_t>(a.workspace);
  int64_t* tap = reinterpret_cast<int64_t*>((base + 63) / 64 * 64);
  float* view_buf = reinterpret_cast<float*>(reinterpret_cast<char*>(tap) + g.tap_bytes);
  fill_taps(p, g, tap);

  const int64_t Cg = p.Cg(), Kg = p.Kg(), T = g.taps;
  const int oc = cfg.oc;
  const int64_t nkb = ceil_div(Kg, oc), nvb = ceil_div(g.nvec, cfg.vecs);
  const int64_t cb = chunk_channels(p, g, cfg), nchunks = ceil_div(Cg, cb);

  BlockCommon common;
  common.taps = T;
  common.tap = tap;
  common.x_channel_stride = g.plane;
  common.y_k_stride = g.OHW;
  common.lanes = g.lanes;
  // Weight addressing: packed [g][kb][c][t][oc] or plain KCRS.
  const bool packed = a.packed_weights != nullptr;
  const float* wbase = packed ? static_cast<const float*>(a.packed_weights) : a.w;
  int64_t w_k_stride, w_kb_stride, w_g_stride;
  if (packed) {
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

  // Sweep the smaller operand past the larger one: with more weights than input, all vector
  // blocks for one channel block (its weights stay in L1), else all channel blocks for one
  // vector block (its input rows stay in L1).
  const bool kb_outer = Kg * T > g.plane;
  const int64_t per_group = nkb * nvb, tasks = p.groups * per_group;
  const int threads = std::max(1, a.threads);

  for (int64_t n = 0; n < p.N; ++n) {
    const float* xn = a.x + n * p.C * p.H * p.W;
    float* yn = a.y + n * p.K * g.OHW;
    const float* view = g.copy ? view_buf : xn;
#pragma omp parallel num_threads(threads)
    {
      if (g.copy) copy_view(p, g, xn, view_buf);
      // Each thread owns a contiguous range of tasks for all chunks, so chunks of one block run
      // in order on one thread and no barrier is needed between chunks.
      const int nth = omp_get_num_threads(), tid = omp_get_thread_num();
      const int64_t begin = tasks * tid / nth, end = tasks * (tid + 1) / nth;
      BlockCommon cc = common;
      Block b;
      VecPos pos[kMaxVecs];
      for (int64_t chunk = 0; chunk < nchunks; ++chunk) {
        const int64_t c0 = chunk * cb;
        cc.channels = std::min(cb, Cg - c0);
        b.accumulate = chunk > 0;
        int64_t cur_vb = -1;
        for (int64_t task = begin; task < end; ++task) {
          const int64_t grp = task / per_group, rest = task % per_group;
          const int64_t kb = kb_outer ? rest / nvb : rest % nkb;
          const int64_t vb = kb_outer ? rest % nvb : rest / nkb;
          if (vb != cur_vb) {
            cur_vb = vb;
            const int64_t v0 = vb * cfg.vecs;
            b.nvec = static_cast<int>(std::min<int64_t>(cfg.vecs, g.nvec - v0));
            for (int j = 0; j < b.nvec; ++j) pos[j] = vec_pos(g, v0 + j);
          }
          const int64_t k0 = kb * oc;
          b.kvalid = static_cast<int>(std::min<int64_t>(oc, Kg - k0));
          const float* xg = view + (grp * Cg + c0) * g.plane;
          float* yk = yn + (grp * Kg + k0) * g.OHW;
          for (int j = 0; j < b.nvec; ++j) {
            b.x[j] = xg + pos[j].x;
            b.y[j] = yk + pos[j].y;
            b.lo[j] = pos[j].lo;
            b.hi[j] = pos[j].hi;
          }
          const float* wk = wbase + grp * w_g_stride + kb * w_kb_stride + c0 * cc.w_channel_stride;
          for (int k = 0; k < oc; ++k) b.w[k] = wk + std::min(k, b.kvalid - 1) * w_k_stride;
          b.bias = a.bias ? a.bias + grp * Kg + k0 : nullptr;
          fns[b.nvec](cc, b);
        }
      }
    }
  }
}

}  // namespace direct

namespace {

class Direct final : public Algorithm {
 public:
  std::string_view id() const override { return "cpu.direct"; }
  Device::Kind device() const override { return Device::Kind::cpu; }
  NumericClass numeric_class() const override { return NumericClass::exact_order; }
  Applicability applicable(const ConvProblem&) const override { return Applicability::yes(); }

  // The blocks of the widest ISA this CPU runs (the portable kernels run the AVX2 set).
  std::vector<std::string> configs(const ConvProblem& p) const override {
    const bool z = cpu_isa() == CpuIsa::avx512;
    // One output channel per group (depthwise): only single-channel blocks make sense.
    if (p.Kg() == 1) {
      if (z) return {"oc1ow128_avx512", "oc1ow256_avx512", "oc1ow64_avx512"};
      return {"oc1ow96", "oc1ow64", "oc1ow32"};
    }
    const std::vector<const char*> names =
        z ? std::vector<const char*>{"oc8ow48_avx512", "oc6ow64_avx512", "oc12ow32_avx512",
                                     "oc4ow96_avx512"}
          : std::vector<const char*>{"oc4ow24", "oc6ow16", "oc3ow32", "oc8ow8", "oc2ow48"};
    std::vector<std::string> out;
    // Channel blocks that waste little of K/g (at most a quarter of the computed channels).
    for (const char* name : names) {
      const direct::Config c = direct::parse_config(name);
      const int64_t computed = (p.Kg() + c.oc - 1) / c.oc * c.oc;
      if (4 * (computed - p.Kg()) <= computed) out.push_back(name);
    }
    if (out.empty()) out.push_back(z ? "oc4ow96_avx512" : "oc2ow48");
    return out;
  }

  size_t workspace_bytes(const ConvProblem& p, const std::string& config) const override {
    const direct::Config c = direct::parse_config(config);
    return direct::workspace_for(direct::make_geometry(p, c.lanes()));
  }

  void forward(const ConvProblem& p, const std::string& config,
               const ForwardArgs& a) const override {
    direct::forward(p, config, a, true);
  }

  size_t packed_weights_bytes(const ConvProblem& p, const std::string& config) const override {
    const direct::Config c = direct::parse_config(config);
    const int64_t nkb = (p.Kg() + c.oc - 1) / c.oc;
    return static_cast<size_t>(p.groups * nkb * c.oc * p.Cg() * p.R * p.S) * sizeof(float);
  }

  void pack_weights(const ConvProblem& p, const std::string& config, const float* w, void* packed,
                    int threads) const override {
    const direct::Config c = direct::parse_config(config);
    const int64_t Kg = p.Kg(), Cg = p.Cg(), T = p.R * p.S, oc = c.oc;
    const int64_t nkb = (Kg + oc - 1) / oc;
    float* out = static_cast<float*>(packed);
#pragma omp parallel for schedule(static) num_threads(std::max(1, threads))
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
