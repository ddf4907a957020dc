// cuda.cudnn.<algo>: NVIDIA cuDNN's forward convolutions (Chetlur et al., "cuDNN: Efficient
// Primitives for Deep Learning", 2014), each of cuDNN's eight cudnnConvolutionFwdAlgo_t values
// registered as its own candidate, through the legacy API that cuDNN 9 keeps in libcudnn_cnn
// (cudnnConvolutionForward + cudnnAddTensor for the bias). Whether an algorithm applies and how
// much workspace it needs is asked of cuDNN (cudnnGetConvolutionForwardWorkspaceSize), never
// guessed. Math type CUDNN_FMA_MATH: no TF32 tensor cores, so fp32 comparisons are fair.
// Cost: cuDNN's (GEMM-like N*K*C/g*R*S*OH*OW FMAs for the GEMM and direct families; transform
// domain for FFT and Winograd). Workspace: as cuDNN reports.
#include <cudnn.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "conv/algorithm.hpp"
#include "cuda/check.hpp"
#include "cuda/runtime.hpp"
#include "kernels.hpp"

namespace conv::kernels {
namespace {

struct AlgoInfo {
  const char* id;
  cudnnConvolutionFwdAlgo_t algo;
  NumericClass numeric;
};

constexpr int kAlgoCount = 8;
constexpr AlgoInfo kAlgos[kAlgoCount] = {
    {"cuda.cudnn.implicit_gemm", CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
     NumericClass::exact_order},
    {"cuda.cudnn.implicit_precomp_gemm", CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
     NumericClass::exact_order},
    {"cuda.cudnn.gemm", CUDNN_CONVOLUTION_FWD_ALGO_GEMM, NumericClass::exact_order},
    {"cuda.cudnn.direct", CUDNN_CONVOLUTION_FWD_ALGO_DIRECT, NumericClass::exact_order},
    {"cuda.cudnn.fft", CUDNN_CONVOLUTION_FWD_ALGO_FFT, NumericClass::transform_based},
    {"cuda.cudnn.fft_tiling", CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING, NumericClass::transform_based},
    {"cuda.cudnn.winograd", CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, NumericClass::transform_based},
    {"cuda.cudnn.winograd_nonfused", CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED,
     NumericClass::transform_based},
};

// cuDNN pads both sides by the same amount. A problem whose bottom/right padding differs from
// its top/left padding is still exactly cuDNN's symmetric one when the difference does not
// change OH and OW: every output reads the same inputs, and the extra padding is never read.
Applicability padding_check(const ConvProblem& p) {
  const int64_t ext_h = (p.R - 1) * p.dilation_h + 1, ext_w = (p.S - 1) * p.dilation_w + 1;
  const bool rows_ok =
      p.pad_top == p.pad_bottom ||
      (p.H + 2 * p.pad_top >= ext_h && (p.H + 2 * p.pad_top - ext_h) / p.stride_h + 1 == p.OH());
  const bool cols_ok =
      p.pad_left == p.pad_right ||
      (p.W + 2 * p.pad_left >= ext_w && (p.W + 2 * p.pad_left - ext_w) / p.stride_w + 1 == p.OW());
  if (rows_ok && cols_ok) return Applicability::yes();
  return Applicability::no(
      "cuDNN has only symmetric padding, and this problem's asymmetric padding (top " +
      std::to_string(p.pad_top) + ", bottom " + std::to_string(p.pad_bottom) + ", left " +
      std::to_string(p.pad_left) + ", right " + std::to_string(p.pad_right) +
      ") gives another output size than top/left padding on both sides would");
}

// Fewest kernel taps that land inside the input, over the outputs of one dimension. Only the
// first and last `edge` outputs can read padding, so only those are counted.
int64_t min_taps_inside(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t pad,
                        int64_t pad_end, int64_t dilation) {
  const int64_t edge = (std::max(pad, pad_end) + (kernel - 1) * dilation + 1) / stride + 2;
  int64_t fewest = kernel;
  auto count = [&](int64_t o) {
    int64_t inside = 0;
    for (int64_t t = 0; t < kernel; ++t) {
      const int64_t i = o * stride - pad + t * dilation;
      inside += i >= 0 && i < in;
    }
    fewest = std::min(fewest, inside);
  };
  for (int64_t o = 0; o < std::min(out, edge); ++o) count(o);
  for (int64_t o = std::max<int64_t>(0, out - edge); o < out; ++o) count(o);
  return fewest;
}

// Descriptors and cuDNN's answers for one problem on one device; read-only once built (cuDNN
// only reads descriptors, so threads share them).
struct Setup {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  std::string error;  // non-empty: cuDNN rejected the descriptors (the reason)
  bool supported[kAlgoCount] = {};
  size_t workspace[kAlgoCount] = {};
  std::string reason[kAlgoCount];

  ~Setup() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (bias) cudnnDestroyTensorDescriptor(bias);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

// Runs one descriptor call; records the first failure in `error`.
bool ok(cudnnStatus_t s, const char* call, std::string& error) {
  if (s == CUDNN_STATUS_SUCCESS) return true;
  if (error.empty())
    error = std::string("cuDNN rejects the problem: ") + call + ": " + cudnnGetErrorString(s);
  return false;
}

std::unique_ptr<Setup> build_setup(const ConvProblem& p) {
  auto su = std::make_unique<Setup>();
  std::string& err = su->error;
  for (int64_t v : {p.N, p.C, p.H, p.W, p.K, p.R, p.S, p.OH(), p.OW(), p.pad_top, p.pad_left})
    if (v > INT_MAX) err = "a size exceeds cuDNN's int range";
  if (!err.empty()) return su;
  const int N = static_cast<int>(p.N), C = static_cast<int>(p.C), H = static_cast<int>(p.H),
            W = static_cast<int>(p.W), K = static_cast<int>(p.K), OH = static_cast<int>(p.OH()),
            OW = static_cast<int>(p.OW());
  ok(cudnnCreateTensorDescriptor(&su->x), "cudnnCreateTensorDescriptor", err) &&
      ok(cudnnCreateTensorDescriptor(&su->y), "cudnnCreateTensorDescriptor", err) &&
      ok(cudnnCreateTensorDescriptor(&su->bias), "cudnnCreateTensorDescriptor", err) &&
      ok(cudnnCreateFilterDescriptor(&su->w), "cudnnCreateFilterDescriptor", err) &&
      ok(cudnnCreateConvolutionDescriptor(&su->conv), "cudnnCreateConvolutionDescriptor", err) &&
      ok(cudnnSetTensor4dDescriptor(su->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, C, H, W),
         "cudnnSetTensor4dDescriptor(x)", err) &&
      ok(cudnnSetFilter4dDescriptor(su->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, K,
                                    static_cast<int>(p.Cg()), static_cast<int>(p.R),
                                    static_cast<int>(p.S)),
         "cudnnSetFilter4dDescriptor", err) &&
      ok(cudnnSetConvolution2dDescriptor(
             su->conv, static_cast<int>(p.pad_top), static_cast<int>(p.pad_left),
             static_cast<int>(p.stride_h), static_cast<int>(p.stride_w),
             static_cast<int>(p.dilation_h), static_cast<int>(p.dilation_w),
             CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
         "cudnnSetConvolution2dDescriptor", err) &&
      ok(cudnnSetConvolutionGroupCount(su->conv, static_cast<int>(p.groups)),
         "cudnnSetConvolutionGroupCount", err) &&
      ok(cudnnSetConvolutionMathType(su->conv, CUDNN_FMA_MATH), "cudnnSetConvolutionMathType",
         err) &&
      ok(cudnnSetTensor4dDescriptor(su->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, K, OH, OW),
         "cudnnSetTensor4dDescriptor(y)", err) &&
      ok(cudnnSetTensor4dDescriptor(su->bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, K, 1, 1),
         "cudnnSetTensor4dDescriptor(bias)", err);
  if (!err.empty()) return su;
  int dims[4] = {};
  if (!ok(cudnnGetConvolution2dForwardOutputDim(su->conv, su->x, su->w, &dims[0], &dims[1],
                                                &dims[2], &dims[3]),
          "cudnnGetConvolution2dForwardOutputDim", err))
    return su;
  if (dims[0] != N || dims[1] != K || dims[2] != OH || dims[3] != OW) {
    err = "cuDNN computes another output shape (" + std::to_string(dims[2]) + "x" +
          std::to_string(dims[3]) + " instead of " + std::to_string(OH) + "x" + std::to_string(OW) +
          ")";
    return su;
  }
  gpu::Handles h = gpu::lock_handles(nullptr);
  cudnnHandle_t handle = h.cudnn();
  for (int i = 0; i < kAlgoCount; ++i) {
    size_t bytes = 0;
    const cudnnStatus_t s = cudnnGetConvolutionForwardWorkspaceSize(handle, su->x, su->w, su->conv,
                                                                    su->y, kAlgos[i].algo, &bytes);
    su->supported[i] = s == CUDNN_STATUS_SUCCESS;
    su->workspace[i] = su->supported[i] ? bytes : 0;
    if (!su->supported[i])
      su->reason[i] = std::string(
                          "cuDNN does not support it for this problem "
                          "(cudnnGetConvolutionForwardWorkspaceSize: ") +
                      cudnnGetErrorString(s) + ")";
  }
  return su;
}

struct SetupCache {
  std::mutex m;
  std::map<std::pair<int, std::string>, std::unique_ptr<Setup>> entries;
};

// Freed by an atexit() handler registered after the first cuDNN call, so that it runs before
// cuDNN's own libraries are torn down (see runtime.cpp).
SetupCache& setup_cache() {
  static SetupCache* cache = new SetupCache;
  return *cache;
}

void destroy_setups() {
  SetupCache& c = setup_cache();
  std::lock_guard<std::mutex> lock(c.m);
  c.entries.clear();
}

// The setup of `p` on the current device, built once (this queries cuDNN: keep it out of any
// held Handles lease).
const Setup& setup(const ConvProblem& p) {
  const int device = gpu::current_device();
  SetupCache& c = setup_cache();
  std::lock_guard<std::mutex> lock(c.m);
  auto& slot = c.entries[{device, p.key()}];
  if (!slot) {
    const bool first = c.entries.size() == 1;
    slot = build_setup(p);
    if (first) std::atexit(destroy_setups);
  }
  return *slot;
}

class Cudnn final : public Algorithm {
 public:
  explicit Cudnn(int index) : info_(kAlgos[index]), index_(index) {}

  std::string_view id() const override { return info_.id; }
  // cuDNN picks and writes the kernels: another cuDNN is another implementation.
  std::string version() const override { return "1+cudnn." + std::to_string(cudnnGetVersion()); }
  Device::Kind device() const override { return Device::Kind::cuda; }
  NumericClass numeric_class() const override { return info_.numeric; }

  Applicability do_applicable(const ConvProblem& p) const override {
    Applicability a = gpu::device_check();
    if (!a.ok) return a;
    a = padding_check(p);
    if (!a.ok) return a;
    try {
      const Setup& su = setup(p);
      if (!su.error.empty()) return Applicability::no(su.error);
      if (!su.supported[index_]) return Applicability::no(su.reason[index_]);
    } catch (const Error& e) {
      return Applicability::no(e.what());
    }
    return Applicability::yes();
  }

  std::vector<std::string> do_configs(const ConvProblem&) const override { return {"fma"}; }

  size_t do_workspace_bytes(const ConvProblem& p, const std::string&) const override {
    if (!applicable(p).ok) return 0;
    return setup(p).workspace[index_];
  }

  // Winograd and FFT round in a transformed domain, so their error follows the transform's
  // magnitudes, not an output's own receptive field: outputs at a padded border, where few taps
  // land inside the input, get a larger relative error. The bounds follow the shape of the CPU
  // Winograd and FFT bounds (kernels/cpu/winograd/winograd.cpp, kernels/cpu/fft/fft.cpp: the most
  // generous tile, border windows, FFT growth with log2 of the transform size) with a safety factor
  // of 4, as cuDNN's tiles are not known here; never below 8x the exact-order bound. cuDNN's
  // WINOGRAD_NONFUSED on 5x5 filters can exceed it and is then rejected. scripts/gpu-check.sh lists
  // rejected candidates.
  double do_error_bound(const ConvProblem& p, const std::string&) const override {
    const double exact = exact_order_error_bound(p);
    if (info_.numeric == NumericClass::exact_order) return exact;
    const double u = std::ldexp(1.0, -24);
    const double window = std::max<int64_t>(
        1,
        min_taps_inside(p.H, p.OH(), p.R, p.stride_h, p.pad_top, p.pad_bottom, p.dilation_h) *
            min_taps_inside(p.W, p.OW(), p.S, p.stride_w, p.pad_left, p.pad_right, p.dilation_w));
    const double taps = static_cast<double>(p.R * p.S);
    double bound;
    if (info_.algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT ||
        info_.algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING) {
      const double n = static_cast<double>(p.Cg()) * taps, m = p.Cg() * window;
      const double extent = static_cast<double>(
          std::max(p.H + p.pad_top + p.pad_bottom, p.W + p.pad_left + p.pad_right));
      const double t = info_.algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ? 32 : extent;
      bound = 4 * 24 * u * std::log2(std::max(2.0, t)) * (std::sqrt(n) / m * (1 + 4 / m) + 0.25);
    } else {
      const double n = std::sqrt(static_cast<double>(p.Cg()));
      bound = 4 * u * std::pow(taps / window, 1.5) * (1000 / n + 150 + 50 * n);
    }
    return std::max(bound, 8 * exact);
  }

  void do_forward(const ConvProblem& p, const std::string& config,
                  const ForwardArgs& a) const override {
    if (config != "fma")
      throw Error(std::string("config: ") + info_.id + " has only \"fma\", got \"" + config + "\"");
    const Setup& su = setup(p);
    const float one = 1.0f, zero = 0.0f;
    gpu::Handles h = gpu::lock_handles(a.stream);
    cudnnHandle_t handle = h.cudnn();
    // beta = 0: y is not read, so a poisoned output is fully overwritten.
    CONVTUNE_CUDA_CHECK(cudnnConvolutionForward(handle, &one, su.x, a.x, su.w, a.w, su.conv,
                                                info_.algo, a.workspace, a.workspace_size, &zero,
                                                su.y, a.y));
    if (a.bias) CONVTUNE_CUDA_CHECK(cudnnAddTensor(handle, &one, su.bias, a.bias, &one, su.y, a.y));
  }

 private:
  AlgoInfo info_;
  int index_;
};

const Algorithm& cudnn_algo(int index) {
  static const std::vector<Cudnn> algos = [] {
    std::vector<Cudnn> v;
    for (int i = 0; i < kAlgoCount; ++i) v.emplace_back(i);
    return v;
  }();
  return algos[index];
}

}  // namespace

const Algorithm& cuda_cudnn_implicit_gemm() {
  return cudnn_algo(0);
}
const Algorithm& cuda_cudnn_implicit_precomp_gemm() {
  return cudnn_algo(1);
}
const Algorithm& cuda_cudnn_gemm() {
  return cudnn_algo(2);
}
const Algorithm& cuda_cudnn_direct() {
  return cudnn_algo(3);
}
const Algorithm& cuda_cudnn_fft() {
  return cudnn_algo(4);
}
const Algorithm& cuda_cudnn_fft_tiling() {
  return cudnn_algo(5);
}
const Algorithm& cuda_cudnn_winograd() {
  return cudnn_algo(6);
}
const Algorithm& cuda_cudnn_winograd_nonfused() {
  return cudnn_algo(7);
}

}  // namespace conv::kernels
