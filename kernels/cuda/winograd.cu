// cuda.winograd: Winograd minimal filtering F(2x2,3x3) and F(4x4,3x3) (Lavin & Gray, "Fast
// Algorithms for Convolutional Neural Networks", CVPR 2016), in the non-fused structure of
// cuDNN's WINOGRAD_NONFUSED and NNPACK: one kernel transforms the input tiles (one thread per
// tile and channel), one the weights (one thread per filter, packable in a Plan), one
// cublasSgemmStridedBatched multiplies U V per (group, transform point), and one kernel applies
// the output transform and the bias (one thread per tile and output channel). The per-thread
// programs are kernels/cuda/winograd_tile.hpp (CPU-tested), the 1D transforms and the tiling are
// cpu.winograd's, and so is the accuracy contract (error_bound / add_error_scale delegate).
// Applicable: 3x3, stride 1, dilation 1; any padding, N, groups; partial edge tiles.
// Cost: per group alpha^2 GEMMs of (K/g x C/g) x (C/g x tiles) (alpha = m + 2), i.e.
// (m+2)^2 / (9 m^2) of direct convolution's FMAs, plus transforms. Workspace: V + M =
// alpha^2 * tiles * (C + K) floats, plus U = alpha^2 * K * C/g floats unless packed.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "conv/algorithm.hpp"
#include "conv/error.hpp"
#include "cpu/winograd/winograd.hpp"
#include "cuda/check.hpp"
#include "cuda/runtime.hpp"
#include "cuda/winograd_tile.hpp"
#include "kernels.hpp"

namespace conv::kernels {
namespace {

using gpu::WinoParams;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535 * 16;

unsigned blocks_for(int64_t total) {
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min(gpu::ceil_div(total, kThreads), kMaxBlocks)));
}

// Grid-stride over (channel, tile), tile fastest: writes to V are coalesced.
template <int M>
__global__ void input_kernel(WinoParams p, const float* __restrict__ x, float* __restrict__ v) {
  const int64_t total = p.s.C * p.T;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    gpu::wino_input_tile<M>(p, x, i / p.T, i % p.T, v);
}

template <int M>
__global__ void weight_kernel(gpu::ConvShape s, const float* __restrict__ w,
                              float* __restrict__ u) {
  const int64_t total = s.K * s.Cg;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    gpu::wino_weight<M>(s, w, i / s.Cg, i % s.Cg, u);
}

template <int M>
__global__ void output_kernel(WinoParams p, const float* __restrict__ mb,
                              const float* __restrict__ bias, float* __restrict__ y) {
  const int64_t total = p.s.K * p.T;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    gpu::wino_output_tile<M>(p, mb, bias, i / p.T, i % p.T, y);
}

__global__ void border_kernel(WinoParams p, const float* __restrict__ bias, float* __restrict__ y) {
  const int64_t total = p.s.N * p.s.K * p.s.OH * p.s.OW;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    gpu::wino_border(p, bias, i, y);
}

int parse(const std::string& config) {
  if (config == "m2") return 2;
  if (config == "m4") return 4;
  throw Error("config: cuda.winograd has \"m2\", \"m4\", got \"" + config + "\"");
}

WinoParams params(const ConvProblem& prob, int m) {
  return gpu::make_wino_params(prob, m);
}

size_t u_bytes(const WinoParams& p) {
  return static_cast<size_t>(p.points * p.s.K * p.s.Cg) * sizeof(float);
}
size_t vm_bytes(const WinoParams& p) {
  return static_cast<size_t>(p.points * p.T * (p.s.C + p.s.K)) * sizeof(float);
}

template <int M>
void transform_weights(const WinoParams& p, const float* w, float* u, cudaStream_t stream) {
  weight_kernel<M><<<blocks_for(p.s.K * p.s.Cg), kThreads, 0, stream>>>(p.s, w, u);
  CONVTUNE_CUDA_CHECK_LAUNCH();
}

template <int M>
void run(const WinoParams& p, const ForwardArgs& a, float* ws) {
  const auto stream = static_cast<cudaStream_t>(a.stream);
  float* v = ws;
  float* mb = v + p.points * p.T * p.s.C;
  const float* u = static_cast<const float*>(a.packed_weights);
  if (!u) {
    float* uw = mb + p.points * p.T * p.s.K;
    transform_weights<M>(p, a.w, uw, stream);
    u = uw;
  }
  border_kernel<<<blocks_for(p.s.N * p.s.K * p.s.OH * p.s.OW), kThreads, 0, stream>>>(p, a.bias,
                                                                                      a.y);
  CONVTUNE_CUDA_CHECK_LAUNCH();
  if (p.T == 0) return;
  input_kernel<M><<<blocks_for(p.s.C * p.T), kThreads, 0, stream>>>(p, a.x, v);
  CONVTUNE_CUDA_CHECK_LAUNCH();
  const gpu::GemmArgs g = gpu::wino_gemm_args(p);
  const float one = 1.0f, zero = 0.0f;
  {
    gpu::Handles h = gpu::lock_handles(a.stream);
    CONVTUNE_CUDA_CHECK(cublasSgemmStridedBatched(
        h.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, g.m, g.n, g.k, &one, v, g.lda, g.stride_a, u, g.ldb,
        g.stride_b, &zero, mb, g.ldc, g.stride_c, g.batch));
  }
  output_kernel<M><<<blocks_for(p.s.K * p.T), kThreads, 0, stream>>>(p, mb, a.bias, a.y);
  CONVTUNE_CUDA_CHECK_LAUNCH();
}

const Algorithm& cpu_model() {
  const Algorithm* a = find_algorithm("cpu.winograd");
  if (!a) throw Error("cuda.winograd: cpu.winograd (its error model) is not registered");
  return *a;
}

class Winograd final : public Algorithm {
 public:
  std::string_view id() const override { return "cuda.winograd"; }
  std::string version() const override { return "1"; }
  Device::Kind device() const override { return Device::Kind::cuda; }
  NumericClass numeric_class() const override { return NumericClass::transform_based; }

  Applicability do_applicable(const ConvProblem& p) const override {
    Applicability dev = gpu::device_check();
    if (!dev.ok) return dev;
    if (p.R != 3 || p.S != 3)
      return Applicability::no("R, S: Winograd F(m x m, 3 x 3) needs a 3x3 kernel, got " +
                               std::to_string(p.R) + "x" + std::to_string(p.S));
    if (p.stride_h != 1 || p.stride_w != 1)
      return Applicability::no("stride: cuda.winograd needs stride 1");
    if (p.dilation_h != 1 || p.dilation_w != 1)
      return Applicability::no("dilation: cuda.winograd needs dilation 1");
    // cuBLAS takes int sizes (tiles per group at m = 2 is the largest).
    const WinoParams q = params(p, 2);
    if (q.T > INT_MAX || p.Cg() > INT_MAX || p.Kg() > INT_MAX || p.groups * 16 > INT_MAX)
      return Applicability::no("a GEMM dimension exceeds cuBLAS's int range");
    return Applicability::yes();
  }

  std::vector<std::string> do_configs(const ConvProblem&) const override { return {"m2", "m4"}; }

  size_t do_workspace_bytes(const ConvProblem& p, const std::string& config) const override {
    const WinoParams q = params(p, parse(config));
    return vm_bytes(q) + u_bytes(q);
  }

  size_t do_packed_workspace_bytes(const ConvProblem& p, const std::string& config) const override {
    return vm_bytes(params(p, parse(config)));
  }

  void do_forward(const ConvProblem& p, const std::string& config,
                  const ForwardArgs& a) const override {
    const WinoParams q = params(p, parse(config));
    float* ws = static_cast<float*>(a.workspace);
    if (q.m == 2)
      run<2>(q, a, ws);
    else
      run<4>(q, a, ws);
  }

  double do_error_bound(const ConvProblem& p, const std::string& config) const override {
    parse(config);
    return cpu_model().error_bound(p, config);
  }
  void do_add_error_scale(const ConvProblem& p, const std::string& config, const float* x,
                          const float* w, double* scale, int threads) const override {
    parse(config);
    cpu_model().add_error_scale(p, config, x, w, scale, threads);
  }

  size_t do_packed_weights_bytes(const ConvProblem& p, const std::string& config) const override {
    return u_bytes(params(p, parse(config)));
  }
  // `w` and `packed` are device memory (a Plan on a CUDA device packs on that device).
  void do_pack_weights(const ConvProblem& p, const std::string& config, const float* w,
                       void* packed, int) const override {
    const WinoParams q = params(p, parse(config));
    if (q.m == 2)
      transform_weights<2>(q, w, static_cast<float*>(packed), nullptr);
    else
      transform_weights<4>(q, w, static_cast<float*>(packed), nullptr);
    CONVTUNE_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }
};

}  // namespace

const Algorithm& cuda_winograd() {
  static const Winograd algo;
  return algo;
}

}  // namespace conv::kernels
