// cpu.direct: direct convolution with register blocking over output channels and output width,
// as in oneDNN's jit_avx2_conv / Georganas et al., "Anatomy of high-performance deep learning
// convolutions on SIMD architectures" (SC 2018): a block of `oc` output channels x `vecs`
// vectors of 8 output positions stays in ymm registers for the whole reduction over input
// channels and kernel taps; each step loads the 8-wide input vectors once and broadcasts one
// weight per output channel (oc*vecs FMAs per oc+vecs loads).
//
// This file is compiled for the baseline ISA: it owns the Algorithm object, the input view and
// the threaded block loop, and calls the register-block kernels of direct_avx2.cpp only when
// conv::cpu_isa() reports AVX2+FMA (direct_scalar.cpp otherwise).
//
// Input view. A kernel needs, for a vector of 8 consecutive output columns and one tap (r, s),
// 8 consecutive floats. The input is therefore copied once per image into the workspace with
// zero padding and its columns split into stride_w phases (column iw' of the padded row goes to
// phase iw' % stride_w, slot iw' / stride_w), which makes every (stride, dilation, padding)
// case a unit-stride load. Unpadded stride-1 inputs are read in place; 1x1 kernels run over the
// flattened OH*OW plane (a GEMM), after a compacting copy when strided or padded.
//
// Cost: N*K*C/g*R*S*OH*OW FMAs, rounded up to whole vectors along the output width (at most 7
// wasted lanes per output row, none for flattened 1x1) and to whole `oc` blocks along K/g; plus
// N*C*(H+pads)*(W+pads) copies for the input view when one is needed.
// Workspace: 64 + round64(8*R*S) bytes (tap offsets) + 4*(C*view_plane + 16) bytes when the
// input is copied. Packed weights (Plan): K-blocked [g][K/g/oc][C/g][R*S][oc], zero-filled tail.
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

// Instantiated register blocks. Accumulators oc*vecs <= 12 plus min(oc, vecs) operands and a
// broadcast fit the 16 ymm registers; 12 independent FMA chains cover FMA latency x 2 ports.
constexpr Config kConfigs[] = {{4, 3}, {6, 2}, {3, 4}, {2, 6}, {8, 1},
                               {1, 12}, {1, 8}, {1, 4}};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
size_t round64(size_t b) { return (b + 63) / 64 * 64; }

// How the kernels see the input, and how output vectors map onto it.
struct Geometry {
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

Geometry make_geometry(const ConvProblem& p) {
  Geometry g;
  g.OH = p.OH(), g.OW = p.OW(), g.OHW = g.OH * g.OW;
  g.taps = p.R * p.S;
  const bool unpadded = p.pad_top == 0 && p.pad_left == 0 && p.pad_bottom == 0 && p.pad_right == 0;
  if (p.R == 1 && p.S == 1) {
    g.flat = true;
    g.taps = 1;
    // In place only when the plane is the output plane and the shifted last vector stays inside.
    g.copy = !(unpadded && p.stride_h == 1 && p.stride_w == 1 && g.OHW >= kLanes);
    g.plane = g.copy ? g.OHW : p.H * p.W;
    g.nvec = ceil_div(g.OHW, kLanes);
  } else {
    g.copy = !(unpadded && p.stride_w == 1 && g.OW >= kLanes);
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
    g.vpr = ceil_div(g.OW, kLanes);
    g.nvec = g.OH * g.vpr;
  }
  g.tap_bytes = round64(static_cast<size_t>(g.taps) * sizeof(int64_t));
  // Lanes past the last output of a short row read up to 7 floats beyond the view: zeroed slack.
  if (g.copy) g.copy_floats = static_cast<size_t>(p.C * g.plane + 2 * kLanes);
  return g;
}

size_t workspace_for(const Geometry& g) {
  return 64 + g.tap_bytes + round64(g.copy_floats * sizeof(float));
}

void fill_taps(const ConvProblem& p, const Geometry& g, int64_t* tap) {
  if (g.flat) {
    tap[0] = 0;
    return;
  }
  for (int64_t r = 0; r < p.R; ++r)
    for (int64_t s = 0; s < p.S; ++s) {
      const int64_t col = s * p.dilation_w;
      const int64_t off = g.copy ? (col % p.stride_w) * g.Wq + col / p.stride_w : col;
      tap[r * p.S + s] = r * p.dilation_h * g.L + off;
    }
}

// Copies image `x` (C x H x W) into the view `v`. Runs inside a parallel region.
void copy_view(const ConvProblem& p, const Geometry& g, const float* x, float* v) {
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
  } else {
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
#pragma omp single nowait
  std::fill(v + p.C * g.plane, v + g.copy_floats, 0.0f);
}

// Where vector `v` of an output channel starts: its view offset, output offset and stored lanes.
// A partial last vector of a row is shifted left to end at the row's end when the row holds a
// whole vector, so no lane reads outside the row; only the new lanes are stored.
struct VecPos {
  int64_t x = 0, y = 0;
  int lo = 0, hi = kLanes;
};

VecPos vec_pos(const Geometry& g, int64_t v) {
  VecPos r;
  int64_t start, len, xrow = 0, yrow = 0;
  if (g.flat) {
    start = v * kLanes;
    len = g.OHW;
  } else {
    const int64_t oh = v / g.vpr;
    start = (v % g.vpr) * kLanes;
    len = g.OW;
    xrow = oh * g.row_step;
    yrow = oh * g.OW;
  }
  if (start + kLanes > len) {
    if (len >= kLanes) {
      r.lo = static_cast<int>(start - (len - kLanes));
      start = len - kLanes;
    } else {
      r.hi = static_cast<int>(len - start);
    }
  }
  r.x = xrow + start;
  r.y = yrow + start;
  return r;
}

}  // namespace

std::string Config::name() const {
  return "oc" + std::to_string(oc) + "ow" + std::to_string(vecs * kLanes);
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

void forward(const ConvProblem& p, const std::string& config, const ForwardArgs& a,
             bool use_avx2) {
  const Config cfg = parse_config(config);
  const Geometry g = make_geometry(p);
  const size_t need = workspace_for(g);
  if (a.workspace_size < need || !a.workspace)
    throw Error("workspace: cpu.direct " + config + " needs " + std::to_string(need) +
                " bytes, got " + std::to_string(a.workspace ? a.workspace_size : 0));
  if (!a.x || !a.y || (!a.w && !a.packed_weights))
    throw Error("x/w/y: cpu.direct needs non-null input, weights (or packed weights) and output");

  BlockFn fns[kMaxVecs + 1] = {};
  for (int nb = 1; nb <= cfg.vecs; ++nb) {
    fns[nb] = use_avx2 ? avx2_block(cfg.oc, nb) : scalar_block(cfg.oc, nb);
    if (!fns[nb]) throw Error("config: cpu.direct " + config + " has no kernel on this CPU");
  }

  const uintptr_t base = reinterpret_cast<uintptr_t>(a.workspace);
  int64_t* tap = reinterpret_cast<int64_t*>((base + 63) / 64 * 64);
  float* view_buf = reinterpret_cast<float*>(reinterpret_cast<char*>(tap) + g.tap_bytes);
  fill_taps(p, g, tap);

  const int64_t G = p.groups, Cg = p.Cg(), Kg = p.Kg(), T = g.taps;
  const int oc = cfg.oc;
  const int64_t nkb = ceil_div(Kg, oc), nvb = ceil_div(g.nvec, cfg.vecs);

  BlockCommon common;
  common.channels = Cg;
  common.taps = T;
  common.tap = tap;
  common.x_channel_stride = g.plane;
  common.y_k_stride = g.OHW;
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

  // Keep whichever operand is larger in cache: with more weights than input, sweep all
  // positions for one channel block (weights stay in L1); otherwise all channel blocks for one
  // position block (its input stays in L1).
  const bool kb_outer = Kg * Cg * T > Cg * g.plane;
  const int64_t per_group = nkb * nvb, tasks = G * per_group;
  const int threads = std::max(1, a.threads);

  for (int64_t n = 0; n < p.N; ++n) {
    const float* xn = a.x + n * p.C * p.H * p.W;
    float* yn = a.y + n * p.K * g.OHW;
    const float* view = g.copy ? view_buf : xn;
#pragma omp parallel num_threads(threads)
    {
      if (g.copy) copy_view(p, g, xn, view_buf);  // ends with the barrier of its omp for
      const int nth = omp_get_num_threads(), tid = omp_get_thread_num();
      const int64_t begin = tasks * tid / nth, end = tasks * (tid + 1) / nth;
      Block b;
      VecPos pos[kMaxVecs];
      int64_t cur_vb = -1;
      int nb = 0;
      for (int64_t task = begin; task < end; ++task) {
        const int64_t grp = task / per_group, rest = task % per_group;
        const int64_t kb = kb_outer ? rest / nvb : rest % nkb;
        const int64_t vb = kb_outer ? rest % nvb : rest / nkb;
        if (vb != cur_vb) {
          cur_vb = vb;
          const int64_t v0 = vb * cfg.vecs;
          nb = static_cast<int>(std::min<int64_t>(cfg.vecs, g.nvec - v0));
          for (int j = 0; j < nb; ++j) pos[j] = vec_pos(g, v0 + j);
        }
        const int64_t k0 = kb * oc;
        b.kvalid = static_cast<int>(std::min<int64_t>(oc, Kg - k0));
        b.nvec = nb;
        const float* xg = view + grp * Cg * g.plane;
        float* yk = yn + (grp * Kg + k0) * g.OHW;
        for (int j = 0; j < nb; ++j) {
          b.x[j] = xg + pos[j].x;
          b.y[j] = yk + pos[j].y;
          b.lo[j] = pos[j].lo;
          b.hi[j] = pos[j].hi;
        }
        const float* wk = wbase + grp * w_g_stride + kb * w_kb_stride;
        for (int k = 0; k < oc; ++k) b.w[k] = wk + std::min(k, b.kvalid - 1) * w_k_stride;
        b.bias = a.bias ? a.bias + grp * Kg + k0 : nullptr;
        fns[nb](common, b);
      }
    }
  }
}

}  // namespace direct

namespace {

bool is_depthwise_like(const ConvProblem& p) { return p.Kg() == 1; }

class Direct final : public Algorithm {
 public:
  std::string_view id() const override { return "cpu.direct"; }
  Device::Kind device() const override { return Device::Kind::cpu; }
  NumericClass numeric_class() const override { return NumericClass::exact_order; }
  Applicability applicable(const ConvProblem&) const override { return Applicability::yes(); }

  std::vector<std::string> configs(const ConvProblem& p) const override {
    // One output channel per group: only the single-channel blocks make sense.
    if (is_depthwise_like(p)) return {"oc1ow96", "oc1ow64", "oc1ow32"};
    std::vector<std::string> out;
    const int64_t Kg = p.Kg();
    // Channel blocks that waste little of K/g (at most a quarter of the computed channels).
    for (const char* name : {"oc4ow24", "oc6ow16", "oc3ow32", "oc8ow8", "oc2ow48"}) {
      const direct::Config c = direct::parse_config(name);
      const int64_t computed = (Kg + c.oc - 1) / c.oc * c.oc;
      if (4 * (computed - Kg) <= computed) out.push_back(name);
    }
    if (out.empty()) out.push_back("oc2ow48");
    return out;
  }

  size_t workspace_bytes(const ConvProblem& p, const std::string& config) const override {
    direct::parse_config(config);
    return direct::workspace_for(direct::make_geometry(p));
  }

  void forward(const ConvProblem& p, const std::string& config,
               const ForwardArgs& a) const override {
    direct::forward(p, config, a, cpu_isa() != CpuIsa::scalar);
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
            dst[(ch * T + t) * oc + k] =
                kk < Kg ? w[((grp * Kg + kk) * Cg + ch) * T + t] : 0.0f;
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
