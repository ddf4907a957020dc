// cpu.fft: tiled FFT convolution (Mathieu, Henaff & LeCun, "Fast Training of Convolutional
// Networks through FFTs", ICLR 2014; Vasilache et al., "Fast Convolutional Nets With fbfft",
// ICLR 2015; NNPACK's 8x8 / 16x16 FFT tile convolutions). This file owns the Algorithm object
// and the geometry and is compiled for the baseline ISA; the transforms, products and drivers
// are in fft_avx2.cpp and run only when conv::cpu_isa() reports AVX2+FMA.
//
// Method. Configs t8, t16, t32, t64 pick the input tile t x t. Overlap-save: an input tile at
// output position (oh0, ow0) yields the (t-Rp+1) x (t-Sp+1) outputs starting there whose
// correlation does not wrap around the tile; wrapped outputs are discarded, every output is
// written exactly once. Per tile and channel a 2D real FFT keeps t x (t/2+1) complex values;
// per frequency the outputs are a complex GEMM (K/g x C') x (C' x tiles), and one inverse 2D
// FFT per output channel and tile gives the outputs.
//  - Stride by polyphase decomposition: a stride-s convolution is the sum over input phases
//    (a, b) of stride-1 convolutions of the phase image x_pad[i*s_h + a][j*s_w + b] with the
//    kernel taps that land on that phase. The phases become extra reduction channels:
//    C' = C/g * P. Dilation inserts zeros into the kernel; combined with the stride only
//    phases that hold taps are kept (P = min(R, s_h/gcd(s_h,d_h)) * min(S, ...)) and the
//    sub-kernel is Rp x Sp with Rp = (R-1)*d_h/s_h + 1 (integer division). Applicable when
//    Rp, Sp <= t-1 for some t <= 64.
//  - General path (any groups): per group and block of column vectors (8 tiles per ymm, tiles
//    of all images), input transforms into X[f][c'][jv], then either a register-blocked complex
//    GEMM per frequency into Y[f][k][jv] followed by in-place inverse transforms, or, when
//    C' <= kFuseMaxC, the products are formed while the inverse transform loads its columns
//    (no Y; each thread inverts in its own scratch slot).
//  - Depthwise path (C/g == K/g == 1): lanes run over 8 channels of one tile, the product is
//    elementwise (summed over phases), each thread works in its own slot.
//  - Outputs whose receptive field holds no input pixel are written as the bias alone.
//
// Layouts (one "element" = 16 floats: 8 lanes real, 8 lanes imaginary; frequency (u, v) is
// f = v*t + u, F = t*(t/2+1)): X block [f][c'][Jv][16], Y block [f][K/g][Jv][16], weights
// general [g][f][c'][ceil(K/g/8)][16] (lanes = output channels), depthwise
// [ceil(C/8)][P][f][16] (lanes = channels). Packed weights (Plan) are this weight array,
// conjugated (correlation) and scaled by 1/(4 t^2) (the forward transform returns 2*DFT2).
//
// Workspace (bytes), exact: 64 (alignment) + X + Y + slots + W, each rounded up to 64, where
//   general:   X = F*C'*Jv*64, Y = fused ? 0 : F*(K/g)*Jv*64,
//              slots = fused ? min(32, K/g*Jv)*F*64 : 0, W = g*F*C'*ceil(K/g/8)*64,
//              Jv = column vectors per block, the most with X + Y <= kBlockBudget (at least 1),
//              then evened out over the blocks;
//   depthwise: X = Y = 0, slots = min(32, N*ceil(C/8)*tiles)*P*F*64, W = ceil(C/8)*P*F*64.
// With packed weights forward() needs the workspace minus W. The slot stages use at most 32
// threads.
//
// Cost: per (image, group): C'*tiles/8 forward and K/g*tiles/8 inverse 8-lane transforms
// (each about (t + 1) or (t/2 + 1 + mh/2) complex FFTs of length t), plus F*(K/g)*C'*tiles
// complex multiply-adds; weights: g*C'*ceil(K/g/8) forward transforms when not packed.
//
// Accuracy: see error_bound() below.
#include "fft.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "conv/device.hpp"
#include "conv/error.hpp"
#include "kernels.hpp"

namespace conv::kernels {
namespace fft {
namespace {

constexpr int64_t kFuseMaxC = 16;                  // C' up to which products are fused
constexpr double kBlockBudget = 4.0 * (1 << 20);  // bytes of X + Y per column block
// Configs whose transformed weights exceed this are offered only when nothing smaller fits.
constexpr double kMaxWeightBytes = 1024.0 * (1 << 20);

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

// Taps of a kernel of R taps at position o that fall inside [0, H) (1D).
int64_t overlap_1d(int64_t o, int64_t stride, int64_t pad, int64_t dil, int64_t R, int64_t H) {
  const int64_t p0 = o * stride - pad;
  if (p0 > H - 1) return 0;
  const int64_t r_lo = p0 >= 0 ? 0 : (-p0 + dil - 1) / dil;
  const int64_t r_hi = std::min(R - 1, (H - 1 - p0) / dil);
  return std::max<int64_t>(0, r_hi - r_lo + 1);
}

// Alive outputs [lo, hi) when they are contiguous (input extent >= dilation).
void alive_range(int64_t O, int64_t stride, int64_t pad, int64_t dil, int64_t R, int64_t H,
                 int64_t* lo, int64_t* hi) {
  // alive iff o*stride - pad + (R-1)*dil >= 0 and o*stride - pad <= H - 1
  *lo = std::clamp<int64_t>(-floor_div((R - 1) * dil - pad, stride), 0, O);
  *hi = std::clamp<int64_t>(floor_div(H - 1 + pad, stride) + 1, *lo, O);
}

}  // namespace

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
  if (g.depthwise) {
    g.Cb = cdiv(p.C, L);
    g.items = p.N * g.Cb * tiles;
    g.slots = std::min<int64_t>(kMaxSlots, g.items);
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
    x_bytes = round64(static_cast<size_t>(g.F * g.Cp * g.Jv * 8 * L));
    y_bytes = g.fused ? 0 : round64(static_cast<size_t>(g.F * p.Kg() * g.Jv * 8 * L));
    if (g.fused) {
      const int64_t kr = gemm_kr(c.lanes);
      g.items = cdiv(p.Kg(), kr) * g.Jv;
      g.slots = std::min<int64_t>(kMaxSlots, g.items);
      g.slot_floats = kr * g.F * 2 * L;
      slot_bytes = round64(static_cast<size_t>(g.slots * g.slot_floats) * 4);
    }
    g.w_bytes = static_cast<size_t>(p.groups * g.F * g.Cp * g.Kb * 8 * L);
  }
  g.x_off = 0;
  g.y_off = g.x_off + x_bytes;
  g.slot_off = g.y_off + y_bytes;
  g.w_off = g.slot_off + slot_bytes;
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
  Device::Kind device() const override { return Device::Kind::cpu; }
  NumericClass numeric_class() const override { return NumericClass::transform_based; }

  Applicability applicable(const ConvProblem& p) const override {
    if (cpu_isa() == CpuIsa::scalar)
      return Applicability::no("cpu.fft needs AVX2 and FMA, which this CPU lacks");
    const int64_t Rp = sub_kernel(p.R, p.dilation_h, p.stride_h);
    const int64_t Sp = sub_kernel(p.S, p.dilation_w, p.stride_w);
    if (Rp > 63 || Sp > 63)
      return Applicability::no("kernel after dilation and polyphase split is " +
                               std::to_string(Rp) + "x" + std::to_string(Sp) +
                               "; the largest tile (64x64) takes up to 63x63");
    return Applicability::yes();
  }

  // Tile sizes whose t-1 holds the sub-kernel, AVX2 first and then (on AVX-512 CPUs) the same
  // with 16 lanes. Default first: the smallest tile at least twice the sub-kernel (output tile
  // >= half the tile), at the widest vectors available. Tiles other than the default whose
  // transformed weights exceed kMaxWeightBytes are left out.
  std::vector<std::string> configs(const ConvProblem& p) const override {
    const int64_t Rp = sub_kernel(p.R, p.dilation_h, p.stride_h);
    const int64_t Sp = sub_kernel(p.S, p.dilation_w, p.stride_w);
    const int64_t need = std::max(Rp, Sp);
    std::vector<int> fit;
    for (int t : kTiles)
      if (need <= t - 1) fit.push_back(t);
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
    for (int lanes : {8, 16}) {
      if (lanes == 16 && widths.front() != 16) continue;
      for (int t : fit) {
        const Config c{t, lanes};
        if (c.name() == out.front()) continue;
        if (t != def && static_cast<double>(make_geometry(p, c).w_bytes) > kMaxWeightBytes)
          continue;
        out.push_back(c.name());
      }
    }
    return out;
  }

  size_t workspace_bytes(const ConvProblem& p, const std::string& config) const override {
    return make_geometry(p, parse_config(config)).total_bytes;
  }

  size_t packed_weights_bytes(const ConvProblem& p, const std::string& config) const override {
    return make_geometry(p, parse_config(config)).w_bytes;
  }

  void pack_weights(const ConvProblem& p, const std::string& config, const float* w, void* packed,
                    int threads) const override {
    const Geometry g = make_geometry(p, parse_config(config));
    check_runnable();
    if (!w) throw Error("w: cpu.fft pack_weights needs weights");
    if (!packed) throw Error("packed: cpu.fft pack_weights needs a destination");
    if (g.lanes == 16)
      pack_weights_avx512(p, g, w, static_cast<float*>(packed), threads);
    else
      pack_weights_avx2(p, g, w, static_cast<float*>(packed), threads);
  }

  void forward(const ConvProblem& p, const std::string& config,
               const ForwardArgs& a) const override {
    const Geometry g = make_geometry(p, parse_config(config));
    check_runnable();
    const size_t need = a.packed_weights ? g.total_bytes - round64(g.w_bytes) : g.total_bytes;
    if (a.workspace_size < need || (need > 0 && !a.workspace))
      throw Error("workspace: cpu.fft " + config + " needs " + std::to_string(need) +
                  " bytes, got " + std::to_string(a.workspace_size));
    if (!a.x || !a.y || (!a.w && !a.packed_weights))
      throw Error("ForwardArgs: cpu.fft needs x, y and w (or packed_weights)");
    // The workspace layout assumes a 64-byte aligned start; the 64 spare bytes allow for that.
    const uintptr_t base = reinterpret_cast<uintptr_t>(a.workspace);
    char* ws = reinterpret_cast<char*>((base + 63) / 64 * 64);
    const float* packed = static_cast<const float*>(a.packed_weights);
    const int threads = std::max(1, a.threads);
    if (g.lanes == 16)
      forward_avx512(p, g, a.x, a.w, packed, a.bias, a.y, ws, threads);
    else
      forward_avx2(p, g, a.x, a.w, packed, a.bias, a.y, ws, threads);
  }

  // Rounding of an FFT convolution relative to sum|x*w| per output (DESIGN.md), for data of
  // the tests' and tuner's kind (uniform in [-1, 1)). Every output of a tile receives rounding
  // from all t^2 inputs of its tile through both transforms (error ~ u * log2(t) * sigma_x *
  // ||w||_2, Parseval), while sum|x*w| only grows with the taps the output overlaps; so
  //   bound = 24 u log2(t) * ( sqrt(n) / m * (1 + 4/m) + 1/4 ),  n = C/g*R*S,
  //   m = C/g * (fewest in-image taps of any output that reads input; R*S without padding).
  // The 1 + 4/m term covers the heavy low tail of sum|x*w| + |bias| when it has few terms; the
  // 1/4 term the frequency-domain accumulation over many channels. Fitted on ~5000 runs (random
  // problems and every shared/layers file): the worst needs 4.3 instead of 24.
  double error_bound(const ConvProblem& p, const std::string& config) const override {
    const int t = parse_config(config).t;
    const double u = std::ldexp(1.0, -24);
    const double n = static_cast<double>(p.Cg() * p.R * p.S);
    const double m = std::max(1.0, static_cast<double>(p.Cg() * min_overlap(p)));
    return 24.0 * u * std::log2(t) * (std::sqrt(n) / m * (1.0 + 4.0 / m) + 0.25);
  }

 private:
  static void check_runnable() {
    if (cpu_isa() == CpuIsa::scalar) throw Error("cpu.fft: this CPU lacks AVX2/FMA");
  }

  // Fewest taps inside the input over outputs that read any input (per input channel).
  static int64_t min_overlap(const ConvProblem& p) {
    auto min_1d = [](int64_t O, int64_t stride, int64_t pad, int64_t dil, int64_t R, int64_t H) {
      int64_t best = R;
      for (int64_t o = 0; o < O; ++o) {
        const int64_t c = overlap_1d(o, stride, pad, dil, R, H);
        if (c > 0) best = std::min(best, c);
      }
      return best;
    };
    return min_1d(p.OH(), p.stride_h, p.pad_top, p.dilation_h, p.R, p.H) *
           min_1d(p.OW(), p.stride_w, p.pad_left, p.dilation_w, p.S, p.W);
  }
};

}  // namespace
}  // namespace fft

const Algorithm& cpu_fft() {
  static const fft::Fft algo;
  return algo;
}

}  // namespace conv::kernels
