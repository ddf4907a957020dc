// cuda.direct: tiled direct convolution, the classic shared-memory GPU scheme (as in cuda-convnet,
// Krizhevsky 2012, and the CUDA C Programming Guide's tiled stencils): one thread block per
// TH x TW output tile x KPT output channels x image, the input tile + halo and the filter slices
// staged in shared memory, KPT partial sums per thread in registers. The block program lives in
// kernels/cuda/direct_block.hpp (CPU-tested); this file launches it.
// Handles every valid problem: stride, asymmetric padding, dilation, groups, depthwise; kernels
// too large for shared memory are staged a few rows/columns of taps at a time.
// Cost: N*K*C/g*R*S*OH*OW FMAs; each staged input is read from global memory once per stage and
// KPT output channels. Workspace: none.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "conv/algorithm.hpp"
#include "cuda/check.hpp"
#include "cuda/config_table.hpp"
#include "cuda/direct_block.hpp"
#include "cuda/runtime.hpp"
#include "kernels.hpp"

namespace conv::kernels {
namespace {

using gpu::DirectBlock;
using gpu::DirectParams;

template <int TH, int TW, int KPT>
__global__ void __launch_bounds__(TH* TW)
    direct_kernel(DirectParams p, const float* __restrict__ x, const float* __restrict__ w,
                  const float* __restrict__ bias, float* __restrict__ y) {
  using B = DirectBlock<TH, TW, KPT>;
  extern __shared__ float4 smem4[];  // float4: 16-byte aligned for the float4 weight reads
  float* smem = reinterpret_cast<float*>(smem4);
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * TW + tx;
  const int64_t tiles = p.tiles_h * p.tiles_w, gks = p.s.groups * p.kblocks;
  // Grid-stride loops: any problem size fits the grid limits. Every loop bound is uniform across
  // the block, so all threads reach every __syncthreads().
  for (int64_t n = blockIdx.z; n < p.s.N; n += gridDim.z) {
    for (int64_t gk = blockIdx.y; gk < gks; gk += gridDim.y) {
      for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const typename B::Pos b = B::position(p, tile, gk, n);
        float acc[KPT];
        B::init(p, b, bias, acc);
        for (int64_t c0 = 0; c0 < p.s.Cg; c0 += p.plan.channels) {
          for (int64_t r0 = 0; r0 < p.s.R; r0 += p.plan.taps_h) {
            for (int64_t s0 = 0; s0 < p.s.S; s0 += p.plan.taps_w) {
              const typename B::Stage st = B::stage(p, b, c0, r0, s0);
              __syncthreads();  // the previous stage is consumed
              B::load(p, b, st, x, w, smem, tid);
              __syncthreads();
              B::accumulate(st, smem, ty, tx, acc);
            }
          }
        }
        B::store(p, b, ty, tx, acc, y);
      }
    }
  }
}

template <int TH, int TW, int KPT>
void launch(const ConvProblem& prob, const ForwardArgs& a) {
  using B = DirectBlock<TH, TW, KPT>;
  const DirectParams p = B::make_params(gpu::shape_of(prob));
  const int64_t tiles = p.tiles_h * p.tiles_w, gks = p.s.groups * p.kblocks;
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(tiles, 0x7fffffff)),
                  static_cast<unsigned>(std::min<int64_t>(gks, 65535)),
                  static_cast<unsigned>(std::min<int64_t>(p.s.N, 65535)));
  const dim3 block(TW, TH);
  const size_t smem = static_cast<size_t>(p.plan.floats) * sizeof(float);
  direct_kernel<TH, TW, KPT>
      <<<grid, block, smem, static_cast<cudaStream_t>(a.stream)>>>(p, a.x, a.w, a.bias, a.y);
  CONVTUNE_CUDA_CHECK_LAUNCH();
}

struct Config {
  const char* name;
  int kpt;
  void (*run)(const ConvProblem&, const ForwardArgs&);
};

// Few instantiations on purpose (CI compile time): a square tile with 1, 4 or 8 channels per
// thread, and a small tile with 16 for small feature maps with many channels.
constexpr Config kConfigs[] = {
    {"t16x16k4", 4, launch<16, 16, 4>},
    {"t16x16k8", 8, launch<16, 16, 8>},
    {"t8x8k16", 16, launch<8, 8, 16>},
    {"t16x16k1", 1, launch<16, 16, 1>},
};

class Direct final : public Algorithm {
 public:
  std::string_view id() const override { return "cuda.direct"; }
  std::string version() const override { return "1"; }
  Device::Kind device() const override { return Device::Kind::cuda; }
  NumericClass numeric_class() const override { return NumericClass::exact_order; }
  Applicability do_applicable(const ConvProblem&) const override { return gpu::device_check(); }

  // Channel blocks wider than K/g only multiply zeros; depthwise gets the one-channel tile first.
  std::vector<std::string> do_configs(const ConvProblem& p) const override {
    std::vector<std::string> out;
    if (p.Kg() < 4) out.push_back("t16x16k1");
    for (const Config& c : kConfigs)
      if (c.kpt > 1 && c.kpt <= std::max<int64_t>(4, p.Kg())) out.push_back(c.name);
    return out;
  }

  size_t do_workspace_bytes(const ConvProblem&, const std::string&) const override { return 0; }

  void do_forward(const ConvProblem& p, const std::string& config,
                  const ForwardArgs& a) const override {
    gpu::run_config(kConfigs, id(), config, p, a);
  }
};

}  // namespace

const Algorithm& cuda_direct() {
  static const Direct algo;
  return algo;
}

}  // namespace conv::kernels
