// cuda.im2col_gemm: Caffe's GPU convolution (Jia et al., "Caffe", 2014; Chellapilla et al. 2006).
// Per image, one kernel unrolls the input of all groups into a (C*R*S) x (OH*OW) column matrix in
// the workspace (one thread per column element, kernels/cuda/index.hpp's im2col_source), then one
// cublasSgemmStridedBatched call multiplies each group's (K/g) x (C/g*R*S) weights by its rows of
// the column matrix. With a bias, y is first filled with it and the GEMM accumulates (beta = 1).
// A 1x1 / stride 1 / no padding problem is already a GEMM on the input: no im2col, no workspace.
// Cost: N*K*C/g*R*S*OH*OW FMAs in cuBLAS (fp32, CUBLAS_DEFAULT_MATH: no TF32) plus
// N*C*R*S*OH*OW copies. Workspace: C*R*S*OH*OW*4 bytes (0 for the 1x1 case).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "conv/algorithm.hpp"
#include "cuda/check.hpp"
#include "cuda/index.hpp"
#include "cuda/runtime.hpp"
#include "kernels.hpp"

namespace conv::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535 * 16;  // grid-stride loops cover the rest

// I = int32_t where im2col_fits_int32(), else int64_t.
template <class I>
__global__ void im2col_kernel(gpu::ConvShape s, const float* __restrict__ x,
                              float* __restrict__ col, I total) {
  for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<I>(gridDim.x) * blockDim.x) {
    const I src = gpu::im2col_source<I>(s, i);
    col[i] = src >= 0 ? x[src] : 0.0f;
  }
}

// y[k][i] = bias[k] for one image (K x OHW).
template <class I>
__global__ void fill_bias_kernel(const float* __restrict__ bias, float* __restrict__ y, I ohw,
                                 I total) {
  for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<I>(gridDim.x) * blockDim.x)
    y[i] = bias[i / ohw];
}

unsigned blocks_for(int64_t total) {
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min(gpu::ceil_div(total, kThreads), kMaxBlocks)));
}

// Unrolls one image x into col (unless x is null: a 1x1 problem needs no im2col) and fills its
// output y with the bias (unless bias is null).
template <class I>
void launch_im2col_bias(const gpu::ConvShape& s, const float* x, float* col, const float* bias,
                        float* y, cudaStream_t stream) {
  const int64_t ohw = s.OH * s.OW;
  if (x) {
    const int64_t total = s.C * s.R * s.S * ohw;
    im2col_kernel<I><<<blocks_for(total), kThreads, 0, stream>>>(s, x, col, static_cast<I>(total));
    CONVTUNE_CUDA_CHECK_LAUNCH();
  }
  if (bias) {
    fill_bias_kernel<I><<<blocks_for(s.K * ohw), kThreads, 0, stream>>>(
        bias, y, static_cast<I>(ohw), static_cast<I>(s.K * ohw));
    CONVTUNE_CUDA_CHECK_LAUNCH();
  }
}

bool is_pointwise(const ConvProblem& p) {
  return p.R == 1 && p.S == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_top == 0 &&
         p.pad_left == 0 && p.pad_bottom == 0 && p.pad_right == 0;
}

class Im2colGemm final : public Algorithm {
 public:
  std::string_view id() const override { return "cuda.im2col_gemm"; }
  std::string version() const override { return "1"; }
  Device::Kind device() const override { return Device::Kind::cuda; }
  NumericClass numeric_class() const override { return NumericClass::exact_order; }

  Applicability do_applicable(const ConvProblem& p) const override {
    Applicability dev = gpu::device_check();
    if (!dev.ok) return dev;
    // cuBLAS takes int sizes and leading dimensions.
    const int64_t crs = p.Cg() * p.R * p.S, ohw = p.OH() * p.OW();
    if (crs > INT_MAX || ohw > INT_MAX || p.Kg() > INT_MAX || p.groups > INT_MAX)
      return Applicability::no("a GEMM dimension exceeds cuBLAS's int range (C/g*R*S = " +
                               std::to_string(crs) + ", OH*OW = " + std::to_string(ohw) + ")");
    return Applicability::yes();
  }

  std::vector<std::string> do_configs(const ConvProblem&) const override { return {"cublas"}; }

  size_t do_workspace_bytes(const ConvProblem& p, const std::string&) const override {
    if (is_pointwise(p)) return 0;
    return static_cast<size_t>(p.C * p.R * p.S) * p.OH() * p.OW() * sizeof(float);
  }

  void do_forward(const ConvProblem& p, const std::string& config,
                  const ForwardArgs& a) const override {
    if (config != "cublas")
      throw Error("config: cuda.im2col_gemm has only \"cublas\", got \"" + config + "\"");
    const gpu::ConvShape s = gpu::shape_of(p);
    const auto stream = static_cast<cudaStream_t>(a.stream);
    const int64_t ohw = s.OH * s.OW;
    const gpu::GemmArgs g = gpu::im2col_gemm_args(s);
    const bool pointwise = is_pointwise(p), small = gpu::im2col_fits_int32(s);
    float* col = static_cast<float*>(a.workspace);
    const float one = 1.0f, zero = 0.0f;
    gpu::Handles h = gpu::lock_handles(a.stream);
    cublasHandle_t blas = h.cublas();
    for (int64_t n = 0; n < s.N; ++n) {
      const float* x = a.x + n * s.C * s.H * s.W;
      float* y = a.y + n * s.K * ohw;
      const float* rhs = x;
      if (small)
        launch_im2col_bias<int32_t>(s, pointwise ? nullptr : x, col, a.bias, y, stream);
      else
        launch_im2col_bias<int64_t>(s, pointwise ? nullptr : x, col, a.bias, y, stream);
      if (!pointwise) rhs = col;
      // Without a bias, beta = 0: y is never read, so a poisoned output is fully overwritten.
      CONVTUNE_CUDA_CHECK(cublasSgemmStridedBatched(
          blas, CUBLAS_OP_N, CUBLAS_OP_N, g.m, g.n, g.k, &one, rhs, g.lda, g.stride_a, a.w, g.ldb,
          g.stride_b, a.bias ? &one : &zero, y, g.ldc, g.stride_c, g.batch));
    }
  }
};

}  // namespace

const Algorithm& cuda_im2col_gemm() {
  static const Im2colGemm algo;
  return algo;
}

}  // namespace conv::kernels
