// cpu.winograd: Winograd minimal filtering F(m x m, 3 x 3) for 3x3 stride-1 convolutions (Lavin &
// Gray, CVPR 2016; NNPACK's F(6x6,3x3); accuracy per Barabasz et al. 2018). This file is the
// Algorithm object, compiled for any x86-64 CPU; the compute is in winograd_avx2.cpp (algorithm,
// layouts, workspace formula and complexity are documented there).
// Configs: "m2", "m4", "m6" = output tile 2x2, 4x4, 6x6 (input tile 4x4, 6x6, 8x8).
#include <algorithm>
#include <cmath>
#include <string>

#include "conv/algorithm.hpp"
#include "conv/device.hpp"
#include "cpu/winograd.hpp"
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
  g.alpha = m + 2;
  g.points = g.alpha * g.alpha;
  g.OH = p.OH();
  g.OW = p.OW();
  // Padding of 3 or more adds outputs whose window is all padding; tiling them would only add
  // the rounding noise of their tile's other inputs to a result that is exactly the bias.
  g.row_lo = std::max<int64_t>(0, p.pad_top - 2);
  g.row_end = std::min(g.OH, p.pad_top + p.H);
  g.col_lo = std::max<int64_t>(0, p.pad_left - 2);
  g.col_end = std::min(g.OW, p.pad_left + p.W);
  g.TH = (g.row_end - g.row_lo + m - 1) / m;
  g.TW = (g.col_end - g.col_lo + m - 1) / m;
  g.tiles = p.N * g.TH * g.TW;
  g.Cg = p.Cg();
  g.Kg = p.Kg();
  g.Kp = (g.Kg + kVec - 1) / kVec * kVec;
  // One pass transforms, multiplies and inverse-transforms `chunk` tiles; V + M of a pass should
  // stay in the caches (measured: about 3 MiB, shared by the threads, is best on 2 MiB-L2 cores).
  if (chunk_bytes <= 0) chunk_bytes = int64_t{3} << 20;
  const int64_t per_tile = int64_t{g.points} * (g.Cg + g.Kp) * 4;
  int64_t chunk = std::max<int64_t>(1, chunk_bytes / per_tile);
  // Multiples of 24 tiles fill both the 8-tile transform vectors and the 6-tile GEMM blocks.
  if (chunk >= 48) chunk = chunk / 24 * 24;
  g.chunk = std::min(chunk, g.tiles);
  g.chunk_pad = (g.chunk + kVec - 1) / kVec * kVec;
  g.u_floats = p.groups * g.points * g.Kp * g.Cg;
  g.v_floats = g.points * g.Cg * g.chunk_pad;
  g.m_floats = g.points * g.chunk * g.Kp;
  return g;
}

}  // namespace winograd

namespace {

class Winograd final : public Algorithm {
 public:
  std::string_view id() const override { return "cpu.winograd"; }
  Device::Kind device() const override { return Device::Kind::cpu; }
  NumericClass numeric_class() const override { return NumericClass::transform_based; }

  Applicability applicable(const ConvProblem& p) const override {
    if (cpu_isa() == CpuIsa::scalar)
      return Applicability::no("needs AVX2 and FMA, which this CPU does not have");
    if (p.R != 3 || p.S != 3)
      return Applicability::no("kernel is " + std::to_string(p.R) + "x" + std::to_string(p.S) +
                               ", Winograd F(m,3) needs 3x3");
    if (p.stride_h != 1 || p.stride_w != 1) return Applicability::no("needs stride 1");
    if (p.dilation_h != 1 || p.dilation_w != 1) return Applicability::no("needs dilation 1");
    // Depthwise: each per-point GEMM would be 1 x 1 x tiles, i.e. an elementwise product. The
    // transforms then cost more than the 9 multiply-adds per output of a direct kernel, and the
    // kernel is memory-bound either way, so Winograd cannot win.
    if (p.groups > 1 && p.Cg() == 1)
      return Applicability::no(
          "depthwise (C/groups = 1): the per-point GEMMs degenerate to elementwise products, "
          "so the transforms cost more than direct convolution");
    return Applicability::yes();
  }

  std::vector<std::string> configs(const ConvProblem& p) const override {
    // Default first: larger tiles cut more multiplies but waste more on partial tiles and lose
    // accuracy; m4 is the usual best compromise, m6 pays off on large images.
    if (p.OH() >= 28 && p.OW() >= 28) return {"m6", "m4", "m2"};
    return {"m4", "m2", "m6"};
  }

  size_t workspace_bytes(const ConvProblem& p, const std::string& config) const override {
    const winograd::Geometry g = geometry(p, config);
    return static_cast<size_t>(g.u_floats + g.v_floats + g.m_floats) * sizeof(float);
  }

  void forward(const ConvProblem& p, const std::string& config,
               const ForwardArgs& a) const override {
    const winograd::Geometry g = geometry(p, config);
    const size_t need = workspace_bytes(p, config);
    if (a.workspace_size < need || (need > 0 && !a.workspace))
      throw Error("workspace: cpu.winograd " + config + " needs " + std::to_string(need) +
                  " bytes, got " + std::to_string(a.workspace_size));
    if (!a.x || !a.y) throw Error(std::string(a.x ? "y" : "x") + ": null tensor");
    if (!a.w && !a.packed_weights) throw Error("w: null and no packed weights");
    require_avx2();
    const int threads = std::max(1, a.threads);
    float* ws = static_cast<float*>(a.workspace);
    const float* u = static_cast<const float*>(a.packed_weights);
    if (!u) {
      winograd::transform_weights_avx2(p, g, a.w, ws, threads);
      u = ws;
    }
    float* v = ws + g.u_floats;
    winograd::forward_avx2(p, g, a.x, u, a.bias, a.y, v, v + g.v_floats, threads);
  }

  // Measured on uniform [-1, 1) data (tests/test_winograd.cpp) as max |y - y_ref| / sum|x*w|,
  // which grows like sqrt(C/g) (random-walk accumulation in the GEMM) on top of a constant from
  // the transforms; the bounds below are those fits times a safety factor of about 4.
  double error_bound(const ConvProblem& p, const std::string& config) const override {
    const double u = std::ldexp(1.0, -24);
    const double n = static_cast<double>(p.Cg());
    switch (winograd::parse_config(config)) {
      case 2:
        return 4 * u * (8 + 4 * std::sqrt(n));
      case 4:
        return 4 * u * (40 + 20 * std::sqrt(n));
      default:
        return 4 * u * (100 + 50 * std::sqrt(n));
    }
  }

  size_t packed_weights_bytes(const ConvProblem& p, const std::string& config) const override {
    return static_cast<size_t>(geometry(p, config).u_floats) * sizeof(float);
  }

  void pack_weights(const ConvProblem& p, const std::string& config, const float* w,
                    void* packed, int threads) const override {
    const winograd::Geometry g = geometry(p, config);
    if (!w) throw Error("w: null tensor");
    if (!packed) throw Error("packed: null buffer");
    require_avx2();
    winograd::transform_weights_avx2(p, g, w, static_cast<float*>(packed), std::max(1, threads));
  }

 private:
  static winograd::Geometry geometry(const ConvProblem& p, const std::string& config) {
    const int m = winograd::parse_config(config);
    if (m == 0)
      throw Error("config: cpu.winograd has \"m2\", \"m4\", \"m6\", got \"" + config + "\"");
    return winograd::make_geometry(p, m);
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
