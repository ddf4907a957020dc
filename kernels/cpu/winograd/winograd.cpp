// cpu.winograd: Winograd minimal filtering F(m x m, r x r) for 3x3 and 5x5 stride-1 convolutions
// (Lavin & Gray, CVPR 2016; NNPACK's F(6x6,3x3); accuracy per Barabasz et al. 2018). This file is
// the Algorithm object, compiled for any x86-64 CPU (on CPUs without AVX2 + FMA it reports itself
// not applicable); the compute is in winograd_avx2.cpp (+ winograd_avx512.cpp for the GEMM and the
// weight transform), whose header documents the algorithm, layouts and workspace formula. Configs:
// "m2", "m4", "m6" = output tile 2x2, 4x4, 6x6 (3x3 kernels: input tile 4x4, 6x6, 8x8); 5x5 kernels
// have "m2", "m4" (input tile 6x6, 8x8: F(2x2,5x5), F(4x4,5x5)). Cost: 2 * alpha^2 * K * C/g * N *
// ceil(OH/m) * ceil(OW/m) flops in the GEMMs (alpha = m + r - 1), i.e. direct convolution's flops
// divided by 2.25, 4 and 5.06 for 3x3 and by 2.78 and 6.25 for 5x5 (before partial tiles), plus the
// transforms: O(alpha^2 (C + K) / m^2) per output pixel, and O(alpha^2 K C/g) for the weights (once
// per Plan with packed weights). Workspace: U + V + M (see winograd_avx2.cpp) from the first
// 64-byte boundary, plus 64 bytes for that alignment: the GEMM jobs of a shared pass write whole
// cache lines of M, which a misaligned workspace would make two threads share. It always includes
// U, which forward() only uses when no packed weights are given: workspace_bytes() does not know
// which path a caller takes. Dilated stride-1 problems whose H, W and pads are multiples of the
// dilation run as the batch of their dilation phases (space_to_batch.hpp), with the input and
// output as phases in the workspace (+ round64(x bytes) + round64(y bytes)) and one extra pass over
// each.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "conv/algorithm.hpp"
#include "conv/device.hpp"
#include "cpu/common/space_to_batch.hpp"
#include "cpu/winograd/winograd.hpp"
#include "kernels.hpp"

namespace conv::kernels {
namespace winograd {

int parse_config(const std::string& config) {
  if (config == "m2") return 2;
  if (config == "m4") return 4;
  if (config == "m6") return 6;
  return 0;
}

Geometry make_geometry(const ConvProblem& p, int m, int64_t chunk_bytes) {
  Geometry g;
  g.m = m;
  g.r = static_cast<int>(p.R);
  g.alpha = m + g.r - 1;
  g.points = g.alpha * g.alpha;
  g.OH = p.OH();
  g.OW = p.OW();
  // Padding of r or more adds outputs whose window is all padding; tiling them would only add
  // the rounding noise of their tile's other inputs to a result that is exactly the bias.
  g.row_lo = std::max<int64_t>(0, p.pad_top - (g.r - 1));
  g.row_end = std::min(g.OH, p.pad_top + p.H);
  g.col_lo = std::max<int64_t>(0, p.pad_left - (g.r - 1));
  g.col_end = std::min(g.OW, p.pad_left + p.W);
  g.TH = (g.row_end - g.row_lo + m - 1) / m;
  g.TW = (g.col_end - g.col_lo + m - 1) / m;
  g.tiles = p.N * g.TH * g.TW;
  g.Cg = p.Cg();
  g.Kg = p.Kg();
  g.Kp = (g.Kg + kVec - 1) / kVec * kVec;
  // One pass transforms, multiplies and inverse-transforms `chunk` tiles. Its V + M (all points)
  // should stay in the last-level cache, and one point's V (C/g x chunk), which the GEMM re-reads
  // for every block of 16 output channels, in L2. Every pass reads all of U, so for the large U
  // of many-channel layers the biggest chunk these allow is also the one that reads U least.
  if (chunk_bytes <= 0) chunk_bytes = int64_t{12} << 20;
  const int64_t per_tile = int64_t{g.points} * (g.Cg + g.Kp) * 4;
  const int64_t v_point_bytes = int64_t{768} << 10;
  int64_t chunk =
      std::max<int64_t>(1, std::min(chunk_bytes / per_tile, v_point_bytes / (4 * g.Cg)));
  // Multiples of 24 tiles fill both the 8-tile transform vectors and the 6-tile GEMM blocks.
  if (chunk >= 48) chunk = chunk / 24 * 24;
  if (chunk < g.tiles) {
    // Equal passes: 100 tiles in chunks of 96 would leave a pass of 4.
    const int64_t passes = (g.tiles + chunk - 1) / chunk;
    chunk = (g.tiles + passes - 1) / passes;
    chunk = (chunk + kVec - 1) / kVec * kVec;
  }
  g.chunk = std::min(chunk, g.tiles);
  g.chunk_pad = (g.chunk + kVec - 1) / kVec * kVec;
  g.u_pstride = odd_lines(g.Kp * g.Cg);
  g.v_pstride = odd_lines(g.Cg * g.chunk_pad);
  g.m_kstride = odd_lines(g.Kp);
  g.u_floats = p.groups * g.points * g.u_pstride;
  g.v_group = g.points * g.v_pstride;
  g.m_group = g.chunk * g.points * g.m_kstride;
  if (p.groups > 1 && g.chunk >= g.tiles && p.groups * (g.v_group + g.m_group) * 4 <= chunk_bytes)
    g.pass_groups = p.groups;
  g.v_floats = g.pass_groups * g.v_group;
  g.m_floats = g.pass_groups * g.m_group;
  return g;
}

Schedule make_schedule(const Geometry& g, int threads, bool avx512) {
  Schedule s;
  s.avx512 = avx512;
  const int64_t T = std::max(1, threads), P = g.points;
  // A per-thread pass keeps its V and M in (three quarters of) a 2 MiB L2; its slices of the
  // shared workspace must hold it, and more tiles than a thread's share would leave threads idle.
  const int64_t l2_bytes = kL2WorkingBytes, tile_bytes = 4 * P * (g.Cg + g.m_kstride);
  const int64_t share = (g.tiles + T - 1) / T;
  int64_t sub = std::min({l2_bytes / tile_bytes, share, g.chunk / T});
  auto fits = [&](int64_t n) {
    return T * n <= g.chunk &&
           T * P * odd_lines(g.Cg * ((n + kVec - 1) / kVec * kVec)) <= g.v_group;
  };
  // Whole 6-tile GEMM blocks and 8-tile transform vectors where there is room for them. Fewer than
  // 24 tiles go up to whole transform vectors where the pass still fits the whole L2 and is not a
  // thread's entire share (which would end the shared pass's fused one-shot weight transform): a
  // pass of 18 tiles transforms 24, and every pass reads all of U.
  if (sub >= 24) {
    sub = sub / 24 * 24;
  } else if (sub >= 12) {
    const int64_t up = (sub + kVec - 1) / kVec * kVec;
    sub = up < share && 3 * up * tile_bytes <= 4 * l2_bytes ? up : sub / 6 * 6;
  }
  while (sub > 0 && !fits(sub)) --sub;
  if (sub < 1) return s;
  // Bytes through the last-level cache: per-thread passes read U once each; shared passes read
  // U once per chunk, and when a chunk's V and M do not fit the threads' L2s also write and read
  // those there, weighted 4x (fitted to VGG-16 and ResNet-50 timings: those accesses are
  // scattered over P rows, U is read in long runs, and shared passes wait at three barriers).
  const double u_bytes = 4.0 * P * g.Kp * g.Cg;
  const double per_thread = u_bytes * static_cast<double>((g.tiles + sub - 1) / sub);
  double shared = u_bytes * static_cast<double>((g.tiles + g.chunk - 1) / g.chunk);
  if (g.chunk * tile_bytes > T * l2_bytes)
    shared += 4 * 2 * static_cast<double>(tile_bytes) * static_cast<double>(g.tiles);
  if (per_thread > shared) return s;
  s.per_thread = true;
  s.passes = (g.tiles + sub - 1) / sub;
  s.longer = s.passes;
  if (T > 1 && sub >= 4 * kPassStep) {
    // As many passes per thread, of whole 4-tile steps. 196 tiles in passes of 24 leave one thread
    // a ninth pass of 4 tiles, which costs half a pass (it streams all of U) while the other thread
    // waits; 8 passes (one of 28, seven of 24) read U once fewer and end together. A pass may grow
    // by a sixth for that, even a little past the L2.
    const int64_t steps = (g.tiles + kPassStep - 1) / kPassStep, per = sub / kPassStep;
    int64_t passes = (steps + per - 1) / per;
    const int64_t down = passes / T * T;
    const int64_t down_sub = down > 0 ? (steps + down - 1) / down * kPassStep : 0;
    if (down > 0 && 6 * down_sub <= 7 * sub && fits(down_sub))
      passes = down;
    else
      passes = std::min((passes + T - 1) / T * T, steps);
    sub = (steps + passes - 1) / passes * kPassStep;
    s.passes = passes;
    s.longer = steps % passes == 0 ? passes : steps % passes;
  }
  s.sub = sub;
  s.sub_pad = (sub + kVec - 1) / kVec * kVec;
  s.sub_v_pstride = odd_lines(g.Cg * s.sub_pad);
  return s;
}

int64_t fused_jobs_merged(const Geometry& g, const Schedule& s, int threads) {
  // Fused jobs each read all of V. Where V is the bigger operand and it and a job's U slice
  // overflow an L2, V comes from the last-level cache every time, so fewer, larger jobs (whose U
  // slices spill from L2 instead) read it fewer times. With V the smaller operand or both in L2,
  // larger jobs measured slower.
  constexpr int64_t kMergedChannels = 64;
  const int64_t jc = job_channels(s), kjobs = (g.Kp + jc - 1) / jc;
  const int64_t job_u = job_u_floats(g, s), T = std::max(1, threads);
  const bool big_v = g.v_group > job_u && 4 * (g.v_group + job_u) > kL2WorkingBytes;
  int64_t merge = big_v ? kMergedChannels / jc : 1;
  while (merge > 1 && (kjobs < 2 * T * merge || T * merge * job_u > g.points * g.u_pstride))
    merge /= 2;
  return merge;
}

int64_t fused_channels(const Geometry& g, const Schedule& s, int64_t merge) {
  // A job's U slice and V overflowing an L2 (a job's U is P/r^2 times its weights): the slice would
  // go to the last-level cache as the transform writes it and come back for the GEMMs. Steps of
  // half an L2 keep a step's slice and V rows in L2. Not where the jobs are merged for a large V,
  // which the GEMMs stream from the last-level cache anyway, nor where the two fit: there steps
  // measured slower.
  const int64_t bytes = 4 * (job_u_floats(g, s) + g.v_group);
  if (merge > 1 || bytes <= kL2WorkingBytes) return g.Cg;
  const int64_t steps = (2 * bytes + kL2WorkingBytes - 1) / kL2WorkingBytes;
  return (g.Cg + steps - 1) / steps;
}

}  // namespace winograd

namespace {

class Winograd final : public Algorithm {
 public:
  std::string_view id() const override { return "cpu.winograd"; }
  // Raised whenever the kernels change, so that winners stored against older code are measured
  // again (the history of versions: docs/measurements.md).
  std::string version() const override { return "7"; }
  Device::Kind device() const override { return Device::Kind::cpu; }
  NumericClass numeric_class() const override { return NumericClass::transform_based; }

  Applicability do_applicable(const ConvProblem& p) const override {
    if (cpu_isa() == CpuIsa::scalar)
      return Applicability::no(
          "isa: cpu.winograd needs AVX2 and FMA, which this CPU does not have");
    if (p.R != p.S || (p.R != 3 && p.R != 5))
      return Applicability::no("R, S: kernel is " + std::to_string(p.R) + "x" +
                               std::to_string(p.S) + ", Winograd F(m,3) / F(m,5) needs 3x3 or 5x5");
    if (p.stride_h != 1 || p.stride_w != 1)
      return Applicability::no("stride: cpu.winograd needs stride 1, got " +
                               std::to_string(p.stride_h) + "x" + std::to_string(p.stride_w));
    if ((p.dilation_h != 1 || p.dilation_w != 1) && !dilation_batch_problem(p))
      return Applicability::no(
          "dilation: runs as a batch of dilation phases, which needs H, W and every pad to be "
          "multiples of the dilation");
    // Depthwise: each per-point GEMM would be 1 x 1 x tiles, i.e. an elementwise product. The
    // transforms then cost more than the 9 multiply-adds per output of a direct kernel, and the
    // kernel is memory-bound either way, so Winograd cannot win.
    if (p.groups > 1 && p.Cg() == 1)
      return Applicability::no(
          "groups: depthwise (C/groups = 1): the per-point GEMMs degenerate to elementwise "
          "products, so the transforms cost more than direct convolution");
    return Applicability::yes();
  }

  std::vector<std::string> do_configs(const ConvProblem& problem) const override {
    const ConvProblem p = dilation_batch_problem(problem).value_or(problem);
    // 5x5: F(4x4,5x5) has 6.25x fewer multiplications than direct convolution, F(2x2,5x5) 2.78x
    // but less padding on tiny images.
    if (p.R == 5)
      return p.OH() <= 8 || p.OW() <= 8 ? std::vector<std::string>{"m2", "m4"}
                                        : std::vector<std::string>{"m4", "m2"};
    // Default first (measured on VGG-16 / ResNet-50 with 2 threads): m4 is best or close on most
    // layers; m6 wins on large images with few channels, where the transforms dominate; m2 on
    // tiny images, where bigger tiles are mostly padding and U (P * K * C floats) is read for
    // only a few tiles.
    if (p.OH() <= 8 || p.OW() <= 8) return {"m2", "m4", "m6"};
    if (p.Cg() <= 128 && p.OH() >= 56 && p.OW() >= 56) return {"m6", "m4", "m2"};
    return {"m4", "m6", "m2"};
  }

  // A dilated problem adds its input and output as dilation phases (space_to_batch.hpp).
  size_t do_workspace_bytes(const ConvProblem& p, const std::string& config) const override {
    const winograd::Geometry g = geometry(p, config);
    const size_t phases = dilated(p) ? phase_bytes(p.x_bytes()) + phase_bytes(p.y_bytes()) : 0;
    return static_cast<size_t>(g.u_floats + g.v_floats + g.m_floats) * sizeof(float) + phases + 64;
  }

  void do_forward(const ConvProblem& p, const std::string& config,
                  const ForwardArgs& a) const override {
    require_avx2();
    const int threads = a.threads;
    const uintptr_t base = reinterpret_cast<uintptr_t>(a.workspace);
    float* ws = reinterpret_cast<float*>((base + 63) / 64 * 64);
    if (!dilated(p)) {
      run(p, config, a, ws, a.x, a.y, threads);
      return;
    }
    // Dilated: the phases of x as a batch, the batch's output back into y's pixels.
    const ConvProblem q = undilated(p);
    const winograd::Geometry g = geometry(q, config);
    char* phases = reinterpret_cast<char*>(ws) +
                   static_cast<size_t>(g.u_floats + g.v_floats + g.m_floats) * sizeof(float);
    float* xb = reinterpret_cast<float*>(phases);
    float* yb = reinterpret_cast<float*>(phases + phase_bytes(p.x_bytes()));
    space_to_batch(a.x, xb, p.N, p.C, p.H, p.W, p.dilation_h, p.dilation_w, false, threads);
    run(q, config, a, ws, xb, yb, threads);
    space_to_batch(yb, a.y, p.N, p.K, p.OH(), p.OW(), p.dilation_h, p.dilation_w, true, threads);
  }

 private:
  // forward() of an undilated problem on input x and output y with the 64-byte aligned
  // workspace `ws`; the rest from `a`.
  static void run(const ConvProblem& p, const std::string& config, const ForwardArgs& a, float* ws,
                  const float* x, float* y, int threads) {
    const winograd::Geometry g = geometry(p, config);
    // One-shot (no packed weights): the weight transform into the workspace is fused into the
    // first pass (forward_avx2).
    const bool one_shot = a.packed_weights == nullptr;
    const float* u = one_shot ? ws : static_cast<const float*>(a.packed_weights);
    float* v = ws + g.u_floats;
    const winograd::Schedule s = winograd::make_schedule(g, threads, cpu_isa() == CpuIsa::avx512);
    winograd::forward_avx2(p, g, s, x, one_shot ? a.w : nullptr, one_shot ? ws : nullptr, u, a.bias,
                           y, v, v + g.v_floats, threads);
  }

 public:
  // Derived in winograd_error.cpp: a componentwise transform term E_o per output plus
  // 2 u sqrt(4 alpha + 2 r + 4 + C/g).
  double do_error_bound(const ConvProblem& p, const std::string& config) const override {
    return winograd::error_bound(undilated(p), geometry(p, config));
  }

  void do_add_error_scale(const ConvProblem& p, const std::string& config, const float* x,
                          const float* w, double* scale, int threads) const override {
    if (!dilated(p)) {
      winograd::add_error_scale(p, geometry(p, config), x, w, scale, threads);
      return;
    }
    // The batch's tiles in the batch's layout, then back to y's pixels.
    const ConvProblem q = undilated(p);
    std::vector<float> xb(static_cast<size_t>(p.x_elems()));
    std::vector<double> sb(static_cast<size_t>(p.y_elems()));
    const int64_t dh = p.dilation_h, dw = p.dilation_w;
    space_to_batch(x, xb.data(), p.N, p.C, p.H, p.W, dh, dw, false, threads);
    space_to_batch(scale, sb.data(), p.N, p.K, p.OH(), p.OW(), dh, dw, false, threads);
    winograd::add_error_scale(q, geometry(q, config), xb.data(), w, sb.data(), threads);
    space_to_batch(sb.data(), scale, p.N, p.K, p.OH(), p.OW(), dh, dw, true, threads);
  }

  size_t do_packed_weights_bytes(const ConvProblem& p, const std::string& config) const override {
    return static_cast<size_t>(geometry(p, config).u_floats) * sizeof(float);
  }

  void do_pack_weights(const ConvProblem& p, const std::string& config, const float* w,
                       void* packed, int threads) const override {
    const winograd::Geometry g = geometry(p, config);
    require_avx2();
    winograd::transform_weights_avx2(undilated(p), g, w, static_cast<float*>(packed), threads,
                                     cpu_isa() == CpuIsa::avx512);
  }

 private:
  static bool dilated(const ConvProblem& p) { return p.dilation_h != 1 || p.dilation_w != 1; }
  // The problem the kernels run: a dilated one as its batch of dilation phases. Throws for a
  // dilated problem that has none (applicable() says no), which F(m,3) would get wrong.
  static ConvProblem undilated(const ConvProblem& p) {
    if (!dilated(p)) return p;
    if (const std::optional<ConvProblem> q = dilation_batch_problem(p)) return *q;
    throw Error(
        "dilation: cpu.winograd runs a dilated problem only when H, W and every pad are "
        "multiples of the dilation");
  }
  // Bytes of a tensor's dilation phases in the workspace: whole cache lines.
  static size_t phase_bytes(int64_t bytes) { return static_cast<size_t>((bytes + 63) / 64 * 64); }
  static winograd::Geometry geometry(const ConvProblem& p, const std::string& config) {
    const int m = winograd::parse_config(config);
    if (m == 0)
      throw Error("config: cpu.winograd has \"m2\", \"m4\", \"m6\", got \"" + config + "\"");
    if (p.R != p.S || (p.R != 3 && p.R != 5))
      throw Error("ConvProblem.R: cpu.winograd needs a 3x3 or 5x5 kernel, got " +
                  std::to_string(p.R) + "x" + std::to_string(p.S));
    if (p.R == 5 && m == 6)
      throw Error("config: cpu.winograd has \"m2\" and \"m4\" for 5x5 kernels, got \"m6\"");
    return winograd::make_geometry(undilated(p), m);
  }
  static void require_avx2() {
    if (cpu_isa() == CpuIsa::scalar)
      throw Error("cpu.winograd: needs AVX2 and FMA, which this CPU does not have");
  }
};

}  // namespace

const Algorithm& cpu_winograd() {
  static const Winograd algo;
  return algo;
}

}  // namespace conv::kernels
