// cpu.pointwise: 1x1 convolution (groups 1, no padding, any stride) as inner products along the
// input channels, with the weights read in place. For each image, the input's output positions
// are packed channel-innermost (NHWC, as oneDNN's nhwc/brgemm 1x1 kernels read it) in chunks of
// the config's channel count; a register tile of kb output channels x pb positions then holds
// kb*pb vectors of 8 partial sums over the chunk (kb weight vectors from the KCRS rows, one
// input vector per position, kb*pb FMAs per step of 8 channels), reduced across the lanes once
// per tile and stored to NCHW, the first chunk with the bias, later chunks added.
// Why: the weights of a 1x1 layer are a K x C matrix already laid out along the reduction, so
// nothing of the (often larger) weights is packed per call, only the input; where the weights
// outweigh the image (resnet50 res5, 2048 -> 512 at 7x7: 4 MB of weights, 0.4 MB of input), the
// kernels that vectorise over output channels (cpu.direct_kvec) spend a large share of a one-shot
// call packing weights.
// Loop order (Goto and van de Geijn's GEMM blocking for an inner-product kernel): for each range
// of positions whose packed chunk fits L2 (256 KiB), each chunk, each of the thread's blocks of kb
// output channels (its kb weight rows of the chunk stay in L1), each block of pb positions, the
// tile sums one chunk. Threads split the output channels; the packing is split into (8 channels,
// 8 positions) items, with a barrier before the tiles.
// Packed layout of a chunk of width cw (channels rounded up to 8, zero beyond C): position blocks
// of pb (the last may be shorter), each [cw/8][positions][8], so a tile reads one stream.
// Cost: N*K*C*OH*OW FMAs, one pass over the output per chunk after the first, and the packing
// (N*C*OH*OW floats through 8x8 transposes). Workspace: 64 + round64(4*OH*OW*C8) + round64(4*OH*OW)
// bytes, C8 = C rounded up to 8.
#include <omp.h>

#include <algorithm>
#include <limits>
#include <string>

#include "conv/device.hpp"
#include "conv/error.hpp"
#include "cpu/pointwise/pointwise.hpp"
#include "kernels.hpp"

namespace conv::kernels {
namespace pointwise {

namespace {

/// A register tile: `kb` output channels x up to `pb` output positions, one ymm accumulator of 8
/// input-channel lanes per pair (kb*pb + kb weight vectors + one input vector <= 16 ymm).
/// Written "k<kb>p<pb>_c<chunk>": the reduction over C runs in chunks of `chunk` channels (a
/// multiple of 8) whose packed input stays in L2 and whose kb weight rows stay in L1.
struct Config {
  int kb = 3, pb = 4, chunk = 512;
  std::string name() const {
    return "k" + std::to_string(kb) + "p" + std::to_string(pb) + "_c" + std::to_string(chunk);
  }
};

// 2 x 6 tiles (as many FMAs per step, half again as many input loads from L2 per FMA) measured
// slower than 3 x 4 on every 1x1 layer of resnet50 and mobilenet_v2, so they are not offered.
// Chunks of 512 measured faster than 256 on every layer with more than 256 channels; 256 stays the
// tuner's choice, as it halves the weight rows a block keeps in L1 and doubles the positions per
// range.
const Config kConfigs[] = {{3, 4, 512}, {3, 4, 256}};

// Throws conv::Error naming "config" for anything but the names of kConfigs.
Config parse_config(const std::string& text) {
  std::string known;
  for (const Config& c : kConfigs) {
    if (c.name() == text) return c;
    known += (known.empty() ? "" : ", ") + c.name();
  }
  throw Error("config: cpu.pointwise has no config \"" + text + "\" (known: " + known + ")");
}

int64_t round64(int64_t bytes) {
  return (bytes + 63) / 64 * 64;
}

struct Shape {
  int64_t P = 0;   // output positions per image
  int64_t C8 = 0;  // channels rounded up to 8
  int64_t x_bytes() const { return round64(4 * P * C8); }
  int64_t in_bytes() const { return round64(4 * P); }
  int64_t workspace() const { return 64 + x_bytes() + in_bytes(); }
};

Shape shape(const ConvProblem& p) {
  return {p.OH() * p.OW(), (p.C + 7) / 8 * 8};
}

class Pointwise final : public Algorithm {
 public:
  std::string_view id() const override { return "cpu.pointwise"; }
  std::string version() const override { return "1"; }
  Device::Kind device() const override { return Device::Kind::cpu; }
  NumericClass numeric_class() const override { return NumericClass::exact_order; }

  Applicability do_applicable(const ConvProblem& p) const override {
    if (cpu_isa() == CpuIsa::scalar)
      return Applicability::no(
          "isa: cpu.pointwise needs AVX2 and FMA (the CPU or CONVTUNE_MAX_ISA has neither)");
    if (p.dtype != DType::f32) return Applicability::no("dtype: cpu.pointwise runs f32 only");
    if (p.layout != Layout::NCHW) return Applicability::no("layout: cpu.pointwise runs NCHW only");
    if (p.R != 1 || p.S != 1)
      return Applicability::no("R, S: cpu.pointwise runs 1x1 kernels only, got " +
                               std::to_string(p.R) + "x" + std::to_string(p.S));
    if (p.groups != 1)
      return Applicability::no("groups: cpu.pointwise runs groups = 1 only, got " +
                               std::to_string(p.groups));
    if (p.pad_top || p.pad_left || p.pad_bottom || p.pad_right)
      return Applicability::no(
          "padding: cpu.pointwise runs unpadded problems only, got top, left, bottom, right " +
          std::to_string(p.pad_top) + ", " + std::to_string(p.pad_left) + ", " +
          std::to_string(p.pad_bottom) + ", " + std::to_string(p.pad_right));
    // Positions and their input offsets are int32 in the packing table (and gather indices).
    if (p.H * p.W > std::numeric_limits<int32_t>::max())
      return Applicability::no(
          "H, W: cpu.pointwise takes input planes of up to 2^31 - 1 floats, got " +
          std::to_string(p.H) + "x" + std::to_string(p.W));
    return Applicability::yes();
  }

  std::vector<std::string> do_configs(const ConvProblem& p) const override {
    std::vector<std::string> out;
    for (const Config& c : kConfigs)
      // With C <= 256 both are one chunk and differ only in the positions per range.
      if (c.chunk == 256 || p.C > 256) out.push_back(c.name());
    return out;
  }

  size_t do_workspace_bytes(const ConvProblem& p, const std::string& config) const override {
    parse_config(config);
    return static_cast<size_t>(shape(p).workspace());
  }

  void do_forward(const ConvProblem& p, const std::string& config,
                  const ForwardArgs& a) const override {
    const Config cfg = parse_config(config);
    const Shape s = shape(p);
    const int threads = a.threads;

    TileFn fns[5] = {};
    for (int n = 1; n <= cfg.pb; ++n) fns[n] = avx2_tile(cfg.kb, n);
    TileFn tail_fns[5] = {};  // the last block of output channels, when K % kb != 0
    const int ktail = static_cast<int>(p.K % cfg.kb);
    for (int n = 1; ktail && n <= cfg.pb; ++n) tail_fns[n] = avx2_tile(ktail, n);

    const uintptr_t base = (reinterpret_cast<uintptr_t>(a.workspace) + 63) / 64 * 64;
    float* xp = reinterpret_cast<float*>(base);
    // Input offset of each output position, int32 as gather indices (so divisions by OW happen
    // once per call, not per pack).
    int32_t* in = reinterpret_cast<int32_t*>(base + s.x_bytes());
    const int64_t P = s.P, OW = p.OW(), C = p.C, K = p.K, plane = p.H * p.W;
    for (int64_t q = 0; q < P; ++q)
      in[q] = static_cast<int32_t>(q / OW * p.stride_h * p.W + q % OW * p.stride_w);
    // Position ranges whose packed chunk fits a 256 KiB L2, in whole position blocks.
    const int64_t chunk = cfg.chunk;
    const int64_t span = std::max<int64_t>(cfg.pb, 65536 / chunk / cfg.pb * cfg.pb);
    const int64_t ranges = (P + span - 1) / span;
    const int64_t kblocks = (K + cfg.kb - 1) / cfg.kb;
    const int64_t groups8 = s.C8 / 8, pgroups = (P + 7) / 8;

    for (int64_t n = 0; n < p.N; ++n) {
      const float* x = a.x + n * C * plane;
      float* y = a.y + n * K * P;
#pragma omp parallel num_threads(threads)
      {
        const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
        // Packing: (8 channels, 8 positions) items split evenly, positions innermost.
        const int64_t items = groups8 * pgroups;
        for (int64_t i = items * t / nt; i < items * (t + 1) / nt; ++i) {
          const int64_t c = i / pgroups * 8, q = i % pgroups * 8;
          const int64_t c0 = c / chunk * chunk, cw = (std::min(chunk, C - c0) + 7) / 8 * 8;
          pack8_avx2(x, plane, c, static_cast<int>(std::min<int64_t>(8, C - c)), in + q, q,
                     static_cast<int>(std::min<int64_t>(8, P - q)), cfg.pb, P, xp + c0 * P, c0, cw);
        }
#pragma omp barrier
        const int64_t kb0 = kblocks * t / nt, kb1 = kblocks * (t + 1) / nt;
        for (int64_t r = 0; r < ranges; ++r) {
          const int64_t q0 = r * span, q1 = std::min(P, q0 + span);
          for (int64_t c0 = 0; c0 < C; c0 += chunk) {
            const int64_t cn = std::min(chunk, C - c0), cw = (cn + 7) / 8 * 8;
            Tile tl;
            tl.w_stride = C;
            tl.steps = cw / 8;
            tl.tail = static_cast<int>(cn % 8);
            tl.y_stride = P;
            tl.first = c0 == 0;
            for (int64_t kb = kb0; kb < kb1; ++kb) {
              const int64_t k = kb * cfg.kb;
              const TileFn* f = k + cfg.kb > K ? tail_fns : fns;
              tl.w = a.w + k * C + c0;
              tl.bias = a.bias ? a.bias + k : nullptr;
              for (int64_t q = q0; q < q1; q += cfg.pb) {
                tl.x = xp + c0 * P + q * cw;
                tl.y = y + k * P + q;
                f[std::min<int64_t>(cfg.pb, P - q)](tl);
              }
            }
          }
        }
      }
    }
  }
};

}  // namespace
}  // namespace pointwise

const Algorithm& cpu_pointwise() {
  static const pointwise::Pointwise algo;
  return algo;
}

}  // namespace conv::kernels
