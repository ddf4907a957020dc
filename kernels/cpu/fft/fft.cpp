// cpu.fft: tiled FFT convolution (Mathieu, Henaff & LeCun, "Fast Training of Convolutional
// Networks through FFTs", ICLR 2014; Vasilache et al., "Fast Convolutional Nets With fbfft",
// ICLR 2015; NNPACK's 8x8 / 16x16 FFT tile convolutions). This file owns the Algorithm object,
// the configs and the geometry and is compiled for the baseline ISA; the transforms, products
// and drivers (fft_impl.hpp) are compiled in fft_avx2.cpp (8 lanes) and fft_avx512.cpp (16
// lanes) and run only after conv::cpu_isa() says the CPU has that ISA.
//
// Configs: "t8", "t16", "t32", "t64" pick the input tile t x t (AVX2, 8 lanes per vector);
// "t8_avx512" .. "t64_avx512" are the same with 16 lanes, offered on AVX-512 CPUs only.
//
// Method. Overlap-save: an input tile at output position (oh0, ow0) yields the
// (t-Rp+1) x (t-Sp+1) outputs starting there whose circular correlation does not wrap around
// the tile; wrapped outputs are discarded and every output is written exactly once. Per tile
// and channel a 2D real FFT keeps t x (t/2+1) complex values; per frequency the outputs are a
// complex GEMM (K/g x C') x (C' x tiles); one inverse 2D FFT per output channel and tile gives
// the outputs (+ bias). The vectors run across tiles (or channels): lane l of every register
// belongs to tile l, so transforms need no shuffles, only an L x L transpose on load and store.
//  - Stride by polyphase decomposition: a stride-s convolution is the sum over input phases
//    (a, b) of stride-1 convolutions of the phase images x_pad[i*s_h + a][j*s_w + b] with the
//    kernel taps that land on each phase. The phases become extra reduction channels:
//    C' = C/g * P. Dilation is a larger kernel with zeros inserted; combined with the stride
//    only phases that hold taps are kept: P = min(R, s_h/gcd(s_h,d_h)) * min(S, s_w/gcd(...)),
//    sub-kernel Rp x Sp with Rp = (R-1)*d_h/s_h + 1 (integer division). Applicable when
//    Rp, Sp <= 63 (some t <= 64 has Rp, Sp <= t-1).
//  - General path (any groups): per group and block of Jv column vectors (a column = one tile
//    of one image), input transforms into X, then either (C' > kFuseMaxC = 16) a
//    register-blocked complex GEMM per frequency into Y and in-place inverse transforms, or
//    (C' <= 16, "fused") per block of KR output channels the products are formed while the
//    inverse transform loads its columns (no Y; each thread keeps the column-pass results in
//    its own slot). Every stage is a static OpenMP loop, so repeated calls give each thread
//    the same items and data stay in that core's cache.
//  - Depthwise path (C/g == K/g == 1): lanes run over channels of one tile, the product is
//    elementwise (summed over phases), each thread works in its own slot.
//  - Outputs whose receptive field holds no input pixel are written as the bias alone, so the
//    transforms' rounding never lands on an output whose reference is exactly the bias.
// The frequency-domain product is our own kernel, not BLIS cgemm, which on interleaved complex data
// of these sizes is several times slower.
//
// Layouts. Lanes L = 8 or 16; one element = 2L floats (L real parts, then L imaginary parts);
// frequency (u, v) is f = v*t + u, F = t*(t/2+1); Kb = ceil(K/g / L). X block [jv][f][c'],
// Y block [k][jv][f], weights general [g][kb][f][c'] (lanes = output channels), depthwise
// [ceil(C/L)][P][f] (lanes = channels). Packed weights (Plan) are this weight array,
// conjugated (correlation) and scaled by 1/(4 t^2) (the forward transform returns 2*DFT2).
//
// Workspace (bytes), exact: 64 (alignment) + X + Y + slots + rows + W, each rounded up to 64,
// with E = 8L bytes per element:
//   general:   X = F*C'*Jv*E, Y = fused ? 0 : F*(K/g)*Jv*E,
//              slots = fused ? min(S, ceil(K/g / KR)*Jv) * KR*F*E : 0 (KR = 2 with 8 lanes,
//              4 with 16), rows = min(S, max(g*C'*Kb, C'*Jv)) * F*E (per-thread row pass of
//              the forward transforms), W = g*Kb*F*C'*E; Jv = the most column vectors with
//              F*E*(C' + (fused ? 0 : K/g))*Jv <= kBlockBudget = 4 MiB (at least 1, at most
//              ceil(N*tiles/L)), then evened out over the blocks: blocks = ceil(that / Jv),
//              Jv = ceil(ceil(N*tiles/L) / blocks);
//   depthwise: X = Y = rows = 0, slots = min(S, N*ceil(C/L)*tiles) * P*F*E,
//              W = ceil(C/L)*P*F*E;
//   S = slot_ceiling() = max(omp_get_num_procs(), omp_get_max_threads()) at the first call in
//   the process (fixed from then on), the most threads the slot stages use (one slot each).
// With packed weights forward() needs the workspace minus W (rounded).
//
// Cost, per image and group: C'*tiles/L forward and K/g*tiles/L inverse transforms of L tiles
// (about t+1, resp. t/2+1 + mh/2, complex FFTs of length t, each (t/4) log4(t) radix-4
// butterflies), F*(K/g)*C'*tiles complex multiply-adds, and g*C'*Kb weight transforms when the
// weights are not packed. Work scales with tiles*t^2 log t instead of OH*OW*R*S.
//
// Accuracy: fft_error.cpp derives the bound and the per-output tile term of the error scale.
#include "cpu/fft/fft.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "conv/device.hpp"
#include "conv/error.hpp"
#include "kernels.hpp"

namespace conv::kernels {
namespace fft {
namespace {

// C' up to which the products are formed per output block instead of by the GEMM (measured on
// the seed and large-kernel layers: about even between 4 and 64).
constexpr int64_t kFuseMaxC = 16;
constexpr double kBlockBudget = 4.0 * (1 << 20);  // bytes of X + Y per column block (fits L3)
// Configs other than the default whose workspace exceeds this are not offered.
constexpr double kMaxWorkspaceBytes = 256.0 * (1 << 20);

int64_t cdiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
size_t round64(size_t b) {
  return (b + 63) / 64 * 64;
}
int64_t floor_div(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

int64_t sub_kernel(int64_t R, int64_t dil, int64_t stride) {
  return (R - 1) * dil / stride + 1;
}

// Alive outputs [lo, hi) when they are contiguous (input extent >= dilation).
void alive_range(int64_t O, int64_t stride, int64_t pad, int64_t dil, int64_t R, int64_t H,
                 int64_t* lo, int64_t* hi) {
  // alive iff o*stride - pad + (R-1)*dil >= 0 and o*stride - pad <= H - 1
  *lo = std::clamp<int64_t>(-floor_div((R - 1) * dil - pad, stride), 0, O);
  *hi = std::clamp<int64_t>(floor_div(H - 1 + pad, stride) + 1, *lo, O);
}

}  // namespace

int slot_ceiling() {
  static const int ceiling = std::max(omp_get_num_procs(), omp_get_max_threads());
  return ceiling;
}

Geometry make_geometry(const ConvProblem& p, const Config& c) {
  const int t = c.t;
  const int64_t Rp = sub_kernel(p.R, p.dilation_h, p.stride_h);
  const int64_t Sp = sub_kernel(p.S, p.dilation_w, p.stride_w);
  if (Rp > t - 1 || Sp > t - 1)
    throw Error("config: t" + std::to_string(t) + " is too small for this problem (kernel " +
                std::to_string(Rp) + "x" + std::to_string(Sp) +
                " after dilation and polyphase split; needs at most t-1)");
  Geometry g;
  g.t = t;
  g.lanes = c.lanes;
  const int64_t L = c.lanes;
  g.F = t * (t / 2 + 1);
  g.OH = p.OH();
  g.OW = p.OW();
  g.ph = p.stride_h / std::gcd(p.stride_h, p.dilation_h);
  g.pw = p.stride_w / std::gcd(p.stride_w, p.dilation_w);
  g.Pa = std::min(p.R, g.ph);
  g.Pb = std::min(p.S, g.pw);
  g.P = g.Pa * g.Pb;
  g.Rp = sub_kernel(p.R, p.dilation_h, p.stride_h);
  g.Sp = sub_kernel(p.S, p.dilation_w, p.stride_w);
  g.mh = t - g.Rp + 1;
  g.mw = t - g.Sp + 1;
  g.TH = cdiv(g.OH, g.mh);
  g.TW = cdiv(g.OW, g.mw);
  g.Cp = p.Cg() * g.P;
  g.row_gaps = p.H < p.dilation_h;
  g.col_gaps = p.W < p.dilation_w;
  alive_range(g.OH, p.stride_h, p.pad_top, p.dilation_h, p.R, p.H, &g.oh_lo, &g.oh_hi);
  alive_range(g.OW, p.stride_w, p.pad_left, p.dilation_w, p.S, p.W, &g.ow_lo, &g.ow_hi);
  g.depthwise = p.Cg() == 1 && p.Kg() == 1;
  const int64_t tiles = g.TH * g.TW;
  const double F = g.F, elem = 8.0 * L;  // bytes per frequency element (L complex floats)
  size_t x_bytes = 0, y_bytes = 0, slot_bytes = 0;
  int64_t weight_items = 0;
  // The frequency-domain buffers are t^2/2 complex values per tile and channel: for a valid
  // problem (tensors up to 2^48 bytes) with a kernel much larger than its output, a caller-named
  // large tile can ask for more than int64 counts (t64 on a 32768x32768 kernel of 65536 channels
  // had wrapped to 2^59 bytes).
  auto refuse_over = [&](long double bytes) {
    if (bytes <= 0x1p62L) return;
    char about[32];
    std::snprintf(about, sizeof about, "%.2g", static_cast<double>(bytes));
    throw Error("config: t" + std::to_string(t) + " would need about " + about +
                " bytes of workspace for this problem, more than 2^62 (a smaller tile needs less)");
  };
  if (g.depthwise) {
    g.Cb = cdiv(p.C, L);
    refuse_over(static_cast<long double>(F) * elem * g.Cb * g.P);
    g.items = p.N * g.Cb * tiles;
    g.slots = std::min<int64_t>(slot_ceiling(), g.items);
    g.slot_floats = g.P * g.F * 2 * L;
    slot_bytes = round64(static_cast<size_t>(g.slots * g.slot_floats) * 4);
    g.w_bytes = static_cast<size_t>(g.Cb * g.P * g.F * 8 * L);
  } else {
    g.Kb = cdiv(p.Kg(), L);
    g.Jv_total = cdiv(p.N * tiles, L);
    g.fused = g.Cp <= kFuseMaxC;
    const double per_jv = F * elem * static_cast<double>(g.Cp + (g.fused ? 0 : p.Kg()));
    g.Jv = std::clamp<int64_t>(static_cast<int64_t>(kBlockBudget / per_jv), 1, g.Jv_total);
    g.blocks = cdiv(g.Jv_total, g.Jv);
    g.Jv = cdiv(g.Jv_total, g.blocks);
    refuse_over(static_cast<long double>(F) * elem *
                (static_cast<long double>(g.Cp + (g.fused ? 0 : p.Kg())) * g.Jv +
                 static_cast<long double>(p.groups) * g.Cp * g.Kb));
    x_bytes = round64(static_cast<size_t>(g.F * g.Cp * g.Jv * 8 * L));
    y_bytes = g.fused ? 0 : round64(static_cast<size_t>(g.F * p.Kg() * g.Jv * 8 * L));
    if (g.fused) {
      const int64_t kr = gemm_kr(c.lanes);
      g.items = cdiv(p.Kg(), kr) * g.Jv;
      g.slots = std::min<int64_t>(slot_ceiling(), g.items);
      g.slot_floats = kr * g.F * 2 * L;
      slot_bytes = round64(static_cast<size_t>(g.slots * g.slot_floats) * 4);
    }
    g.w_bytes = static_cast<size_t>(p.groups * g.F * g.Cp * g.Kb * 8 * L);
    weight_items = p.groups * g.Cp * g.Kb;
  }
  size_t tslot_bytes = 0;
  if (!g.depthwise) {
    // Per-thread rows of the forward transforms (input and weights), so their strided
    // destinations are written once.
    g.tslots = std::min<int64_t>(slot_ceiling(), std::max(weight_items, g.Cp * g.Jv));
    tslot_bytes = round64(static_cast<size_t>(g.tslots * g.F) * 8 * L);
  }
  g.x_off = 0;
  g.y_off = g.x_off + x_bytes;
  g.slot_off = g.y_off + y_bytes;
  g.tslot_off = g.slot_off + slot_bytes;
  g.w_off = g.tslot_off + tslot_bytes;
  g.total_bytes = 64 + g.w_off + round64(g.w_bytes);
  return g;
}

std::string Config::name() const {
  return "t" + std::to_string(t) + (lanes == 16 ? "_avx512" : "");
}

Config parse_config(const std::string& config) {
  for (int t : kTiles)
    for (int lanes : {8, 16}) {
      const Config c{t, lanes};
      if (config != c.name()) continue;
      if (lanes == 16 && cpu_isa() != CpuIsa::avx512)
        throw Error("config: " + config + " needs AVX-512, which this CPU lacks");
      return c;
    }
  throw Error("config: cpu.fft takes t8, t16, t32 or t64 (with _avx512 on AVX-512 CPUs), got \"" +
              config + "\"");
}

namespace {

class Fft final : public Algorithm {
 public:
  std::string_view id() const override { return "cpu.fft"; }
  std::string version() const override { return "1"; }
  Device::Kind device() const override { return Device::Kind::cpu; }
  NumericClass numeric_class() const override { return NumericClass::transform_based; }

  Applicability do_applicable(const ConvProblem& p) const override {
    if (cpu_isa() == CpuIsa::scalar)
      return Applicability::no(
          "isa: cpu.fft needs AVX2 and FMA, which this CPU (or CONVTUNE_MAX_ISA) lacks");
    const int64_t Rp = sub_kernel(p.R, p.dilation_h, p.stride_h);
    const int64_t Sp = sub_kernel(p.S, p.dilation_w, p.stride_w);
    if (Rp == 1 && Sp == 1)
      return Applicability::no(
          "R, S: every (sub-)kernel is 1x1 after the polyphase split: the FFT would only add "
          "transform "
          "cost and tile-wide rounding to what is a plain GEMM over channels");
    if (Rp > 63 || Sp > 63)
      return Applicability::no("R, S: the kernel after dilation and polyphase split is " +
                               std::to_string(Rp) + "x" + std::to_string(Sp) +
                               "; the largest tile (64x64) takes up to 63x63");
    return Applicability::yes();
  }

  // Tile sizes whose t-1 holds the sub-kernel, up to the first one whose single tile covers the
  // whole output (larger tiles would only transform padding), AVX2 first and then (on AVX-512
  // CPUs) the same with 16 lanes. Default first: the smallest tile at least twice the
  // sub-kernel (output tile >= half the tile), at the widest vectors available. Tiles other
  // than the default whose workspace exceeds kMaxWorkspaceBytes are left out.
  std::vector<std::string> do_configs(const ConvProblem& p) const override {
    const int64_t Rp = sub_kernel(p.R, p.dilation_h, p.stride_h);
    const int64_t Sp = sub_kernel(p.S, p.dilation_w, p.stride_w);
    const int64_t need = std::max(Rp, Sp);
    std::vector<int> fit;
    for (int t : kTiles) {
      if (need > t - 1) continue;
      fit.push_back(t);
      if (t - Rp + 1 >= p.OH() && t - Sp + 1 >= p.OW()) break;
    }
    if (fit.empty()) return {};
    int def = fit.back();
    for (int t : fit)
      if (need - 1 <= t / 2) {
        def = t;
        break;
      }
    std::vector<int> widths = {8};
    if (cpu_isa() == CpuIsa::avx512) widths.insert(widths.begin(), 16);
    std::vector<std::string> out = {Config{def, widths.front()}.name()};
    for (int lanes : widths) {
      for (int t : fit) {
        const Config c{t, lanes};
        if (c.name() == out.front()) continue;
        try {
          if (static_cast<double>(make_geometry(p, c).total_bytes) > kMaxWorkspaceBytes) continue;
        } catch (const Error&) {
          continue;  // a workspace beyond 2^62 bytes
        }
        out.push_back(c.name());
      }
    }
    return out;
  }

  size_t do_workspace_bytes(const ConvProblem& p, const std::string& config) const override {
    return make_geometry(p, parse_config(config)).total_bytes;
  }

  size_t do_packed_workspace_bytes(const ConvProblem& p, const std::string& config) const override {
    const Geometry g = make_geometry(p, parse_config(config));
    return g.total_bytes - round64(g.w_bytes);
  }

  size_t do_packed_weights_bytes(const ConvProblem& p, const std::string& config) const override {
    return make_geometry(p, parse_config(config)).w_bytes;
  }

  void do_pack_weights(const ConvProblem& p, const std::string& config, const float* w,
                       void* packed, int threads) const override {
    const Geometry g = make_geometry(p, parse_config(config));
    check_runnable();
    if (g.lanes == 16)
      pack_weights_avx512(p, g, w, static_cast<float*>(packed), threads);
    else
      pack_weights_avx2(p, g, w, static_cast<float*>(packed), threads);
  }

  void do_forward(const ConvProblem& p, const std::string& config,
                  const ForwardArgs& a) const override {
    const Geometry g = make_geometry(p, parse_config(config));
    check_runnable();
    // The workspace layout assumes a 64-byte aligned start; the 64 spare bytes allow for that.
    const uintptr_t base = reinterpret_cast<uintptr_t>(a.workspace);
    char* ws = reinterpret_cast<char*>((base + 63) / 64 * 64);
    const float* packed = static_cast<const float*>(a.packed_weights);
    const int threads = a.threads;
    if (g.lanes == 16)
      forward_avx512(p, g, a.x, a.w, packed, a.bias, a.y, ws, threads);
    else
      forward_avx2(p, g, a.x, a.w, packed, a.bias, a.y, ws, threads);
  }

  // Derived in fft_error.cpp: a per-output tile term (the tile's rms times the kernel's L1 norm,
  // per channel) plus u * (48 log2(t) + 2 sqrt(C/g * P) + 8).
  double do_error_bound(const ConvProblem& p, const std::string& config) const override {
    return fft::error_bound(p, make_geometry(p, parse_config(config)));
  }

  void do_add_error_scale(const ConvProblem& p, const std::string& config, const float* x,
                          const float* w, double* scale, int threads) const override {
    fft::add_error_scale(p, make_geometry(p, parse_config(config)), x, w, scale, threads);
  }

 private:
  static void check_runnable() {
    if (cpu_isa() == CpuIsa::scalar) throw Error("cpu.fft: this CPU lacks AVX2/FMA");
  }
};

}  // namespace
}  // namespace fft

const Algorithm& cpu_fft() {
  static const fft::Fft algo;
  return algo;
}

}  // namespace conv::kernels
