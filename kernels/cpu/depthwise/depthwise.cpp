// cpu.depthwise: depthwise convolution (groups = C = K) vectorised over channels, as oneDNN's
// jit_uni_dw_conv does (nChw8c / nChw16c): per image, the NCHW input is copied into a
// zero-padded channel-blocked layout [C/lanes][Hp][Wp][lanes], every output row of every block
// is a run of vector FMAs over the R x S taps (3-column kernels at stride 1 or 2: blocks of 8
// output positions, each input vector loaded once per kernel row; else four positions per
// weight load), and the blocked output is transposed back to NCHW. The copies are part of every
// call, so the one-shot time is the whole cost. With at least 4 blocks per thread, a thread
// takes each of its blocks through all steps while the block is in cache, without barriers
// between the steps. Configs: "c8" (AVX2 8-lane vectors, portable loop without AVX2) and
// "c16_avx512". Any stride, dilation and padding; N any.
// Cost: N*C*R*S*OH*OW FMAs, plus one pass over x and y for the layout copies.
// Workspace: floats for the blocked input (C8*Hp*Wp), output (C8*OH*OW) and weights (C8*R*S),
// C8 = C rounded up to the lanes, Hp/Wp the padded input size.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "conv/algorithm.hpp"
#include "cpu/depthwise/depthwise.hpp"
#include "kernels.hpp"

namespace conv::kernels {

namespace {

using depthwise::Row;

int64_t lanes_of(const std::string& config) {
  if (config == "c8") return 8;
  if (config == "c16_avx512") return 16;
  throw Error("config: cpu.depthwise has \"c8\" and \"c16_avx512\", got \"" + config + "\"");
}

struct Shape {
  int64_t L, CB, Hp, Wp, OH, OW;
  size_t x_floats, y_floats, w_floats;
};

Shape shape(const ConvProblem& p, const std::string& config) {
  Shape s;
  s.L = lanes_of(config);
  s.CB = (p.C + s.L - 1) / s.L;
  s.Hp = p.H + p.pad_top + p.pad_bottom;
  s.Wp = p.W + p.pad_left + p.pad_right;
  s.OH = p.OH();
  s.OW = p.OW();
  s.x_floats = static_cast<size_t>(s.CB * s.Hp * s.Wp * s.L);
  s.y_floats = static_cast<size_t>(s.CB * s.OH * s.OW * s.L);
  s.w_floats = static_cast<size_t>(s.CB * (p.R * p.S + 1) * s.L);  // + the bias
  return s;
}

size_t round64(size_t floats) {
  return (floats * sizeof(float) + 63) / 64 * 64;
}

// The portable row kernel: the same loop order, `lanes` wide.
void row_portable(const Row& r, int64_t L) {
  for (int64_t ow = 0; ow < r.OW; ++ow) {
    float* y = r.y + ow * L;
    for (int64_t l = 0; l < L; ++l) y[l] = r.bias[l];
    for (int64_t i = 0; i < r.R; ++i)
      for (int64_t j = 0; j < r.S; ++j) {
        const float* w = r.w + (i * r.S + j) * L;
        const float* x = r.x + i * r.dil_h_rows + (ow * r.stride_w + j * r.dilation_w) * L;
        for (int64_t l = 0; l < L; ++l) y[l] += w[l] * x[l];
      }
  }
}

class Depthwise final : public Algorithm {
 public:
  std::string_view id() const override { return "cpu.depthwise"; }
  // Raised whenever the kernels change, so that winners stored against older code are measured
  // again (the history of versions: docs/measurements.md).
  std::string version() const override { return "2"; }
  Device::Kind device() const override { return Device::Kind::cpu; }
  NumericClass numeric_class() const override { return NumericClass::exact_order; }

  Applicability do_applicable(const ConvProblem& p) const override {
    if (p.dtype != DType::f32) return Applicability::no("dtype: cpu.depthwise runs f32 only");
    if (p.layout != Layout::NCHW) return Applicability::no("layout: cpu.depthwise runs NCHW only");
    if (!(p.groups > 1 && p.groups == p.C && p.K == p.C))
      return Applicability::no(
          "groups: cpu.depthwise runs groups = C = K only (one filter per channel), got groups " +
          std::to_string(p.groups) + ", C " + std::to_string(p.C) + ", K " + std::to_string(p.K));
    return Applicability::yes();
  }

  std::vector<std::string> do_configs(const ConvProblem&) const override {
    std::vector<std::string> out{"c8"};
    if (cpu_isa() == CpuIsa::avx512) out.push_back("c16_avx512");
    return out;
  }

  size_t do_workspace_bytes(const ConvProblem& p, const std::string& config) const override {
    const Shape s = shape(p, config);
    return round64(s.x_floats) + round64(s.y_floats) + round64(s.w_floats);
  }

  void do_forward(const ConvProblem& p, const std::string& config,
                  const ForwardArgs& a) const override {
    const Shape s = shape(p, config);
    if (s.L == 16 && cpu_isa() != CpuIsa::avx512)
      throw Error("config: cpu.depthwise c16_avx512 needs AVX-512 (this CPU, or its cap: " +
                  std::string(to_string(cpu_isa())) + ")");
    char* ws = static_cast<char*>(a.workspace);
    float* xb = reinterpret_cast<float*>(ws);
    float* yb = reinterpret_cast<float*>(ws + round64(s.x_floats));
    float* wb = reinterpret_cast<float*>(ws + round64(s.x_floats) + round64(s.y_floats));
    const int64_t L = s.L, RS = p.R * p.S, C = p.C, H = p.H, W = p.W;
    const bool avx2 = cpu_isa() >= CpuIsa::avx2;  // 16 lanes imply AVX-512, hence AVX2
    const int threads = a.threads;

    // Weights and bias, blocked once per call (in the first image's parallel region: on small
    // images this copy is a good part of the call): [CB][R*S + 1][L], padded channels zero.
    auto block_weights = [&](int64_t cb) {
      float* out = wb + cb * (RS + 1) * L;
      const int64_t lanes = std::min(L, C - cb * L);
      for (int64_t l = 0; l < lanes; ++l) {
        const float* in = a.w + (cb * L + l) * RS;
        for (int64_t t = 0; t < RS; ++t) out[t * L + l] = in[t];
        out[RS * L + l] = a.bias ? a.bias[cb * L + l] : 0.0f;
      }
      for (int64_t t = 0; t <= RS; ++t) std::fill(out + t * L + lanes, out + (t + 1) * L, 0.0f);
    };

    // Narrow images (7x7, 14x14): a row holds at most one 8x8 transpose and the scalar tails would
    // dominate, so full blocks are transposed as whole flat planes instead.
    const bool narrow = avx2 && W < 16;
    const int64_t full = avx2 ? C / L : 0;  // blocks copied with 8x8 transposes

    // Padded input row hp of block cb (padding rows and columns zero).
    auto pack_row = [&](const float* x, int64_t cb, int64_t hp) {
      const int64_t ih = hp - p.pad_top;
      float* out = xb + (cb * s.Hp + hp) * s.Wp * L;
      if (ih < 0 || ih >= H) {
        std::memset(out, 0, sizeof(float) * s.Wp * L);
        return;
      }
      std::memset(out, 0, sizeof(float) * p.pad_left * L);
      std::memset(out + (p.pad_left + W) * L, 0, sizeof(float) * p.pad_right * L);
      if (cb < full) {
        for (int64_t half = 0; half < L; half += 8) {
          const float* in[8];
          for (int64_t l = 0; l < 8; ++l) in[l] = x + ((cb * L + half + l) * H + ih) * W;
          depthwise::pack8_avx2(in, out + p.pad_left * L + half, W, L);
        }
        return;
      }
      for (int64_t l = 0; l < L; ++l) {
        const int64_t c = cb * L + l;
        float* o = out + p.pad_left * L + l;
        if (c >= C) {
          for (int64_t iw = 0; iw < W; ++iw) o[iw * L] = 0;
          continue;
        }
        const float* in = x + (c * H + ih) * W;
        for (int64_t iw = 0; iw < W; ++iw) o[iw * L] = in[iw];
      }
    };
    // A full block of a narrow image at once: its planes are flat runs.
    auto pack_plane = [&](const float* x, int64_t cb) {
      float* blk = xb + cb * s.Hp * s.Wp * L;
      std::memset(blk, 0, sizeof(float) * p.pad_top * s.Wp * L);
      std::memset(blk + (p.pad_top + H) * s.Wp * L, 0, sizeof(float) * p.pad_bottom * s.Wp * L);
      for (int64_t ih = 0; ih < H; ++ih) {
        float* out = blk + (p.pad_top + ih) * s.Wp * L;
        std::memset(out, 0, sizeof(float) * p.pad_left * L);
        std::memset(out + (p.pad_left + W) * L, 0, sizeof(float) * p.pad_right * L);
      }
      for (int64_t half = 0; half < L; half += 8) {
        const float* in[8];
        for (int64_t l = 0; l < 8; ++l) in[l] = x + (cb * L + half + l) * H * W;
        depthwise::pack8_plane_avx2(in, blk + half, H, W, s.Wp, p.pad_top, p.pad_left, L);
      }
    };
    auto compute_row = [&](int64_t cb, int64_t oh, float* out) {
      Row r;
      r.x = xb + (cb * s.Hp + oh * p.stride_h) * s.Wp * L;
      r.w = wb + cb * (RS + 1) * L;
      r.bias = r.w + RS * L;
      r.y = out;
      r.OW = s.OW, r.R = p.R, r.S = p.S;
      r.stride_w = p.stride_w, r.dilation_w = p.dilation_w;
      r.dil_h_rows = p.dilation_h * s.Wp * L;
      if (L == 16)
        depthwise::row_avx512(r);
      else if (avx2)
        depthwise::row_avx2(r);
      else
        row_portable(r, L);
    };
    // Output row oh of block cb back to NCHW: 8x8 transposes for a full block, else lane by lane.
    auto unpack_row = [&](float* y, int64_t cb, int64_t oh, const float* in) {
      if (cb < full) {
        for (int64_t half = 0; half < L; half += 8) {
          float* out[8];
          for (int64_t l = 0; l < 8; ++l) out[l] = y + ((cb * L + half + l) * s.OH + oh) * s.OW;
          depthwise::unpack8_avx2(in + half, L, out, s.OW);
        }
        return;
      }
      for (int64_t l = 0; l < L && cb * L + l < C; ++l) {
        float* out = y + ((cb * L + l) * s.OH + oh) * s.OW;
        for (int64_t ow = 0; ow < s.OW; ++ow) out[ow] = in[ow * L + l];
      }
    };
    auto unpack_plane = [&](float* y, int64_t cb) {
      for (int64_t half = 0; half < L; half += 8) {
        float* out[8];
        for (int64_t l = 0; l < 8; ++l) out[l] = y + (cb * L + half + l) * s.OH * s.OW;
        depthwise::unpack8_avx2(yb + cb * s.OH * s.OW * L + half, L, out, s.OH * s.OW);
      }
    };
    // With enough blocks, each thread takes whole blocks through all four steps (weights, input,
    // rows, output) while they are in L1/L2, with no barrier between the steps; with few, the
    // steps are split by rows with a barrier between them.
    const bool by_block = s.CB >= 4 * threads;

    for (int64_t n = 0; n < p.N; ++n) {
      const float* x = a.x + n * C * H * W;
      float* y = a.y + n * C * s.OH * s.OW;
#pragma omp parallel num_threads(threads)
      {
        if (by_block) {
#pragma omp for schedule(static)
          for (int64_t cb = 0; cb < s.CB; ++cb) {
            if (n == 0) block_weights(cb);
            float* out = yb + cb * s.OH * s.OW * L;
            if (narrow && cb < full) {
              pack_plane(x, cb);
              for (int64_t oh = 0; oh < s.OH; ++oh) compute_row(cb, oh, out + oh * s.OW * L);
              unpack_plane(y, cb);
              continue;
            }
            for (int64_t hp = 0; hp < s.Hp; ++hp) pack_row(x, cb, hp);
            // Each output row goes back to NCHW while it is in L1, from one row buffer, so the
            // block's output never makes the round trip through L2. Packing each input row just
            // before its first use measured no faster.
            for (int64_t oh = 0; oh < s.OH; ++oh) {
              compute_row(cb, oh, out);
              unpack_row(y, cb, oh, out);
            }
          }
        } else {
          if (n == 0) {
#pragma omp for schedule(static)
            for (int64_t cb = 0; cb < s.CB; ++cb) block_weights(cb);
          }
          if (narrow) {
#pragma omp for schedule(static)
            for (int64_t cb = 0; cb < full; ++cb) pack_plane(x, cb);
          }
          // With `narrow` only the rows of a partial last block are left.
#pragma omp for schedule(static)
          for (int64_t row = narrow ? full * s.Hp : 0; row < s.CB * s.Hp; ++row)
            pack_row(x, row / s.Hp, row % s.Hp);
          if (!narrow) {
            // Each row back to NCHW as soon as it is computed, as above.
#pragma omp for schedule(static)
            for (int64_t row = 0; row < s.CB * s.OH; ++row) {
              compute_row(row / s.OH, row % s.OH, yb + row * s.OW * L);
              unpack_row(y, row / s.OH, row % s.OH, yb + row * s.OW * L);
            }
          } else {
#pragma omp for schedule(static)
            for (int64_t row = 0; row < s.CB * s.OH; ++row)
              compute_row(row / s.OH, row % s.OH, yb + row * s.OW * L);
#pragma omp for schedule(static)
            for (int64_t cb = 0; cb < full; ++cb) unpack_plane(y, cb);
#pragma omp for schedule(static)  // the rows of a partial last block
            for (int64_t row = full * s.OH; row < s.CB * s.OH; ++row)
              unpack_row(y, row / s.OH, row % s.OH, yb + row * s.OW * L);
          }
        }
      }
    }
  }
};

}  // namespace

const Algorithm& cpu_depthwise() {
  static const Depthwise algo;
  return algo;
}

}  // namespace conv::kernels
