// cuda.implicit_gemm: implicit-GEMM convolution, the GPU counterpart of cuDNN's IMPLICIT_GEMM
// (Chetlur et al., "cuDNN", 2014, section 3; the tiling of CUTLASS's implicit GEMM and of
// Volkov & Demmel's SGEMM): per group Y = W * im2col(x), with the im2col operand read from x
// through its index map, never materialised. One thread block computes a BM x BN tile of Y
// (output channels x output pixels of all images), walking the reduction C/g*R*S in BK steps
// through two shared-memory buffers (global loads of the next step overlap the FMAs of this
// one); each thread keeps a TM x TN register tile. The block program is
// kernels/cuda/implicit_gemm_block.hpp (CPU-tested); tile shapes are template parameters and
// the configs name them ("m64n64k8" = BM 64, BN 64, BK 8).
// Applicable: every problem (stride, padding, dilation, groups). Cost: N*K*C/g*R*S*OH*OW FMAs,
// in the same order as direct convolution per output. Workspace: none.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "conv/algorithm.hpp"
#include "conv/error.hpp"
#include "cuda/check.hpp"
#include "cuda/config_table.hpp"
#include "cuda/implicit_gemm_block.hpp"
#include "cuda/runtime.hpp"
#include "kernels.hpp"

namespace conv::kernels {
namespace {

using gpu::IgemmParams;

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
    igemm_kernel(IgemmParams p, const float* __restrict__ x, const float* __restrict__ w,
                 const float* __restrict__ bias, float* __restrict__ y) {
  using B = gpu::IgemmBlock<BM, BN, BK, TM, TN>;
  __shared__ float smem[B::kSmemFloats];
  const int tid = threadIdx.x;
  // Grid-stride loops with block-uniform bounds: every thread reaches every __syncthreads().
  for (int64_t g = blockIdx.z; g < p.s.groups; g += gridDim.z) {
    for (int64_t bm = blockIdx.y; bm < p.mblocks; bm += gridDim.y) {
      for (int64_t bn = blockIdx.x; bn < p.nblocks; bn += gridDim.x) {
        const typename B::Pos b = B::position(p, bn, bm, g);
        float acc[TM][TN];
        B::zero(acc);
        typename B::Regs r;
        B::load_global(p, b, 0, x, w, tid, r);
        B::store_shared(r, smem, 0, tid);
        __syncthreads();
        for (int64_t kt = 0; kt < p.ksteps; ++kt) {
          const bool more = kt + 1 < p.ksteps;
          if (more) B::load_global(p, b, (kt + 1) * BK, x, w, tid, r);
          B::compute(smem, static_cast<int>(kt & 1), tid, acc);
          if (more) B::store_shared(r, smem, static_cast<int>((kt + 1) & 1), tid);
          __syncthreads();
        }
        B::store(p, b, tid, acc, bias, y);
      }
    }
  }
}

template <int BM, int BN, int BK, int TM, int TN>
void launch(const ConvProblem& prob, const ForwardArgs& a) {
  using B = gpu::IgemmBlock<BM, BN, BK, TM, TN>;
  const IgemmParams p = B::make_params(gpu::shape_of(prob));
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(p.nblocks, 0x7fffffff)),
                  static_cast<unsigned>(std::min<int64_t>(p.mblocks, 65535)),
                  static_cast<unsigned>(std::min<int64_t>(p.s.groups, 65535)));
  igemm_kernel<BM, BN, BK, TM, TN>
      <<<grid, B::kThreads, 0, static_cast<cudaStream_t>(a.stream)>>>(p, a.x, a.w, a.bias, a.y);
  CONVTUNE_CUDA_CHECK_LAUNCH();
}

struct Config {
  const char* name;
  int bm;
  void (*run)(const ConvProblem&, const ForwardArgs&);
};

// 256 threads each. Large tiles for many channels, a narrow one for few output channels.
constexpr Config kConfigs[] = {
    {"m64n64k8", 64, launch<64, 64, 8, 4, 4>},
    {"m128n128k8", 128, launch<128, 128, 8, 8, 8>},
    {"m128n64k8", 128, launch<128, 64, 8, 8, 4>},
    {"m32n64k16", 32, launch<32, 64, 16, 2, 4>},
};

class ImplicitGemm final : public Algorithm {
 public:
  std::string_view id() const override { return "cuda.implicit_gemm"; }
  std::string version() const override { return "1"; }
  Device::Kind device() const override { return Device::Kind::cuda; }
  NumericClass numeric_class() const override { return NumericClass::exact_order; }
  Applicability do_applicable(const ConvProblem&) const override { return gpu::device_check(); }

  // Tiles taller than K/g only multiply zeros: few output channels get the narrow tile first.
  std::vector<std::string> do_configs(const ConvProblem& p) const override {
    std::vector<std::string> out;
    if (p.Kg() <= 32) out.push_back("m32n64k16");
    for (const Config& c : kConfigs)
      if (c.bm != 32 && c.bm <= std::max<int64_t>(64, p.Kg())) out.push_back(c.name);
    if (p.Kg() > 32) out.push_back("m32n64k16");
    return out;
  }

  size_t do_workspace_bytes(const ConvProblem&, const std::string&) const override { return 0; }

  void do_forward(const ConvProblem& p, const std::string& config,
                  const ForwardArgs& a) const override {
    gpu::run_config(kConfigs, id(), config, p, a);
  }
};

}  // namespace

const Algorithm& cuda_implicit_gemm() {
  static const ImplicitGemm algo;
  return algo;
}

}  // namespace conv::kernels
