// cuda.fft: FFT convolution with cuFFT (Mathieu, Henaff & LeCun, "Fast Training of Convolutional
// Networks through FFTs", ICLR 2014; Vasilache et al., "Fast Convolutional Nets With fbfft",
// ICLR 2015: batched 2D real transforms and one complex GEMM per frequency). Steps: the input's
// phase tiles and the flipped sub-kernels are packed into real T x T tiles (kernels/cuda/
// fft_index.hpp, CPU-tested), cuFFT R2C transforms them into frequency-major spectra,
// cublasCgemmStridedBatched multiplies per (frequency, group) (depthwise: an elementwise product
// summed over phases), cuFFT C2R transforms back, and the epilogue crops, scales and adds the
// bias. Configs: "full" (one T x T transform covering the whole padded phase image, T the next
// 2^a 3^b 5^c 7^d size) and overlap-save tiles "t16", "t32", "t64" (cpu.fft's tiling).
// Stride by cpu.fft's polyphase decomposition, dilation by zero insertion (its geometry is used
// as is, and so is its accuracy contract, error_bound / add_error_scale with t = T).
// Applicable when the sub-kernel fits the largest transform (Rp, Sp <= T - 1) and cuBLAS's int
// sizes hold. cuFFT plans are cached per (device, stream, size, batch; the 48 most recently used)
// and created on the first call (the tuner's untimed warm-up run), never inside a timed run.
// Cost: (N*C'*tiles + K*C') forward and N*K*tiles inverse T x T real FFTs (O(T^2 log T) each)
// plus F*(K/g)*C'*tiles*g complex multiply-adds, F = T*(T/2+1).
// Workspace: real tiles max(Xr, Wr, Yr) + spectra Xf + Yf (+ Wf unless packed), in bytes
// 4*T^2*max(g*C'*J, K*C', K*J) + 8*F*(g*C'*J + K*J [+ K*C']).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cufft.h>

#include <algorithm>
#include <climits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "conv/algorithm.hpp"
#include "conv/error.hpp"
#include "cpu/fft/fft.hpp"
#include "cuda/check.hpp"
#include "cuda/fft_index.hpp"
#include "cuda/runtime.hpp"
#include "device_ops.hpp"
#include "kernels.hpp"

namespace conv::kernels {
namespace {

using gpu::Cf;
using gpu::FftParams;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535 * 16;
constexpr int kTiles[] = {16, 32, 64};
// Configs other than the first whose workspace exceeds this are not offered.
constexpr double kMaxWorkspaceBytes = 4.0 * (1u << 30);

unsigned blocks_for(int64_t total) {
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min(gpu::ceil_div(total, kThreads), kMaxBlocks)));
}

void check_fft(cufftResult r, const char* expr, const char* file, int line) {
  if (r != CUFFT_SUCCESS)
    gpu::throw_failure(expr, file, line, "cufftResult " + std::to_string(static_cast<int>(r)));
}
#define CONVTUNE_CUFFT_CHECK(expr) check_fft((expr), #expr, __FILE__, __LINE__)

#define GRID_STRIDE(i, total)                                                                \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (total); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

__global__ void pack_input_kernel(FftParams p, const float* __restrict__ x, float* __restrict__ xr,
                                  int64_t total) {
  GRID_STRIDE(i, total) xr[i] = gpu::fft_input_value(p, x, i);
}
__global__ void pack_weight_kernel(FftParams p, const float* __restrict__ w, float* __restrict__ wr,
                                   int64_t total) {
  GRID_STRIDE(i, total) wr[i] = gpu::fft_weight_value(p, w, i);
}
__global__ void depthwise_kernel(FftParams p, const Cf* __restrict__ xf, const Cf* __restrict__ wf,
                                 Cf* __restrict__ yf, int64_t total) {
  GRID_STRIDE(i, total) gpu::fft_depthwise_product(p, xf, wf, yf, i);
}
__global__ void output_kernel(FftParams p, const float* __restrict__ yr,
                              const float* __restrict__ bias, float* __restrict__ y,
                              int64_t total) {
  GRID_STRIDE(i, total) y[i] = gpu::fft_output_value(p, yr, bias, i);
}

// ---- configs and geometry ----

int64_t full_size(const ConvProblem& p) {
  return gpu::fft_full_size(p);
}

int64_t parse(const ConvProblem& p, const std::string& config) {
  if (config == "full") return full_size(p);
  for (int t : kTiles)
    if (config == "t" + std::to_string(t)) return t;
  throw Error("config: cuda.fft has \"full\", \"t16\", \"t32\", \"t64\", got \"" + config + "\"");
}

fft::Geometry cpu_geometry(const ConvProblem& p, int64_t T) {
  return gpu::fft_cpu_geometry(p, T);
}

FftParams params(const ConvProblem& p, int64_t T) {
  return gpu::make_fft_params(p, T);
}

bool depthwise(const FftParams& q) {
  return q.s.Cg == 1 && q.s.Kg == 1;
}

struct Sizes {
  int64_t real_floats;  // max(Xr, Wr, Yr)
  int64_t xf, yf, wf;   // complex elements
};

// Throws conv::Error "config: ..." where the buffers would need more than 2^62 bytes: a valid
// problem (tensors up to 2^48 bytes) with many tiles of a kernel much larger than its output can
// ask for more than int64 counts (as cpu.fft's make_geometry refuses).
Sizes sizes(const FftParams& q) {
  const int64_t TT = q.T * q.T, G = q.s.groups;
  const long double F = q.F, Cp = q.Cp, J = q.J, K = q.s.K;
  const long double bytes =
      4.0L * TT * std::max({G * Cp * J, K * Cp, K * J}) + 8.0L * F * (G * Cp * J + K * J + K * Cp);
  if (bytes > 0x1p62L)
    throw Error("config: a " + std::to_string(q.T) + "x" + std::to_string(q.T) +
                " transform would need more than 2^62 bytes of buffers for this problem");
  Sizes z;
  z.real_floats = TT * std::max({G * q.Cp * q.J, q.s.K * q.Cp, q.s.K * q.J});
  z.xf = q.F * G * q.Cp * q.J;
  z.yf = q.F * q.s.K * q.J;
  z.wf = q.F * q.s.K * q.Cp;
  return z;
}

size_t round256(size_t b) {
  return (b + 255) / 256 * 256;
}

size_t bytes_without_weights(const Sizes& z) {
  return round256(z.real_floats * 4) + round256(z.xf * 8) + round256(z.yf * 8);
}

// ---- cuFFT plans, per (device, stream, T, batch, direction) ----

struct PlanKey {
  int device;
  cudaStream_t stream;
  int64_t T, batch;
  bool inverse;
  bool operator<(const PlanKey& o) const {
    return std::tie(device, stream, T, batch, inverse) <
           std::tie(o.device, o.stream, o.T, o.batch, o.inverse);
  }
};

struct CachedPlan {
  std::mutex m;
  cufftHandle h = 0;
  bool made = false;
  uint64_t last_use = 0;
  CachedPlan() = default;
  CachedPlan(const CachedPlan&) = delete;
  CachedPlan& operator=(const CachedPlan&) = delete;
  // cufftDestroy frees the work area with cudaFree, which waits for the work queued with it.
  ~CachedPlan() {
    if (made) cufftDestroy(h);
  }
};

// At most this many plans (each holds a work area on the GPU); the least recently used goes.
constexpr size_t kMaxPlans = 48;

struct PlanTable {
  std::mutex m;
  std::map<PlanKey, std::shared_ptr<CachedPlan>> plans;
  uint64_t clock = 0;
};

// Never destroyed (as the cuBLAS handles in runtime.cpp: no teardown after the CUDA runtime's).
PlanTable& plan_table() {
  static auto* t = new PlanTable;
  return *t;
}

// Forward: `batch` real T x T tiles (contiguous) -> frequency-major spectra (element f of batch b
// at f * batch + b). Inverse: the reverse. Bound to `stream` once, when created.
std::shared_ptr<CachedPlan> plan_for(int64_t T, int64_t batch, bool inverse, cudaStream_t stream) {
  const PlanKey key{gpu::current_device(), stream, T, batch, inverse};
  PlanTable& t = plan_table();
  std::lock_guard<std::mutex> lock(t.m);
  auto& slot = t.plans[key];
  if (!slot) {
    auto cp = std::make_shared<CachedPlan>();
    long long n[2] = {T, T}, real_embed[2] = {T, T}, cplx_embed[2] = {T, T / 2 + 1};
    size_t work = 0;
    CONVTUNE_CUFFT_CHECK(cufftCreate(&cp->h));
    cp->made = true;
    if (!inverse)
      CONVTUNE_CUFFT_CHECK(cufftMakePlanMany64(cp->h, 2, n, real_embed, 1, T * T, cplx_embed, batch,
                                               1, CUFFT_R2C, batch, &work));
    else
      CONVTUNE_CUFFT_CHECK(cufftMakePlanMany64(cp->h, 2, n, cplx_embed, batch, 1, real_embed, 1,
                                               T * T, CUFFT_C2R, batch, &work));
    CONVTUNE_CUFFT_CHECK(cufftSetStream(cp->h, stream));
    slot = std::move(cp);
  }
  slot->last_use = ++t.clock;
  std::shared_ptr<CachedPlan> out = slot;
  while (t.plans.size() > kMaxPlans) {
    auto oldest = t.plans.begin();
    for (auto it = t.plans.begin(); it != t.plans.end(); ++it)
      if (it->second->last_use < oldest->second->last_use) oldest = it;
    t.plans.erase(oldest);  // destroyed when its last user lets go
  }
  return out;
}

void forward_fft(int64_t T, int64_t batch, float* in, Cf* out, cudaStream_t stream) {
  const std::shared_ptr<CachedPlan> pl = plan_for(T, batch, false, stream);
  std::lock_guard<std::mutex> lock(pl->m);  // the plan's work area: one call at a time
  CONVTUNE_CUFFT_CHECK(cufftExecR2C(pl->h, in, reinterpret_cast<cufftComplex*>(out)));
}
void inverse_fft(int64_t T, int64_t batch, Cf* in, float* out, cudaStream_t stream) {
  const std::shared_ptr<CachedPlan> pl = plan_for(T, batch, true, stream);
  std::lock_guard<std::mutex> lock(pl->m);
  CONVTUNE_CUFFT_CHECK(cufftExecC2R(pl->h, reinterpret_cast<cufftComplex*>(in), out));
}

// Wr into `real`, then Wf.
void transform_weights(const FftParams& q, const float* w, float* real, Cf* wf,
                       cudaStream_t stream) {
  const int64_t total = q.s.K * q.Cp * q.T * q.T;
  pack_weight_kernel<<<blocks_for(total), kThreads, 0, stream>>>(q, w, real, total);
  CONVTUNE_CUDA_CHECK_LAUNCH();
  forward_fft(q.T, q.s.K * q.Cp, real, wf, stream);
}

class Fft final : public Algorithm {
 public:
  std::string_view id() const override { return "cuda.fft"; }
  std::string version() const override { return "1"; }
  Device::Kind device() const override { return Device::Kind::cuda; }
  NumericClass numeric_class() const override { return NumericClass::transform_based; }

  Applicability do_applicable(const ConvProblem& p) const override {
    Applicability dev = gpu::device_check();
    if (!dev.ok) return dev;
    const int64_t T = full_size(p);
    if (T > 4096)
      return Applicability::no("the whole-image transform would be " + std::to_string(T) + "x" +
                               std::to_string(T) + " (at most 4096x4096)");
    const FftParams q = params(p, T);
    try {
      sizes(q);  // buffers of more than 2^62 bytes are refused there
    } catch (const Error& e) {
      return Applicability::no(e.what());
    }
    if (q.J > INT_MAX || q.Cp > INT_MAX || p.Kg() > INT_MAX || q.F * p.groups > INT_MAX)
      return Applicability::no("a GEMM dimension exceeds cuBLAS's int range");
    return Applicability::yes();
  }

  std::vector<std::string> do_configs(const ConvProblem& p) const override {
    std::vector<std::string> out = {"full"};
    const int64_t T = full_size(p);
    for (int t : kTiles) {
      const int64_t Rp = (p.R - 1) * p.dilation_h / p.stride_h + 1;
      const int64_t Sp = (p.S - 1) * p.dilation_w / p.stride_w + 1;
      if (Rp > t - 1 || Sp > t - 1 || t >= T) continue;
      const std::string name = "t" + std::to_string(t);
      try {
        if (static_cast<double>(do_workspace_bytes(p, name)) > kMaxWorkspaceBytes) continue;
      } catch (const Error&) {
        continue;  // beyond 2^62 bytes
      }
      out.push_back(name);
    }
    return out;
  }

  size_t do_workspace_bytes(const ConvProblem& p, const std::string& config) const override {
    const Sizes z = sizes(params(p, parse(p, config)));
    return bytes_without_weights(z) + round256(z.wf * 8);
  }

  size_t do_packed_workspace_bytes(const ConvProblem& p, const std::string& config) const override {
    return bytes_without_weights(sizes(params(p, parse(p, config))));
  }

  void do_forward(const ConvProblem& p, const std::string& config,
                  const ForwardArgs& a) const override {
    const FftParams q = params(p, parse(p, config));
    const Sizes z = sizes(q);
    const auto stream = static_cast<cudaStream_t>(a.stream);
    char* ws = static_cast<char*>(a.workspace);
    float* real = reinterpret_cast<float*>(ws);
    Cf* xf = reinterpret_cast<Cf*>(ws + round256(z.real_floats * 4));
    Cf* yf = reinterpret_cast<Cf*>(reinterpret_cast<char*>(xf) + round256(z.xf * 8));
    const Cf* wf = static_cast<const Cf*>(a.packed_weights);
    if (!wf) {
      Cf* wt = reinterpret_cast<Cf*>(reinterpret_cast<char*>(yf) + round256(z.yf * 8));
      transform_weights(q, a.w, real, wt, stream);
      wf = wt;
    }
    const int64_t xtotal = p.groups * q.Cp * q.J * q.T * q.T;
    pack_input_kernel<<<blocks_for(xtotal), kThreads, 0, stream>>>(q, a.x, real, xtotal);
    CONVTUNE_CUDA_CHECK_LAUNCH();
    forward_fft(q.T, p.groups * q.Cp * q.J, real, xf, stream);
    if (depthwise(q)) {
      const int64_t total = q.F * p.groups * q.J;
      depthwise_kernel<<<blocks_for(total), kThreads, 0, stream>>>(q, xf, wf, yf, total);
      CONVTUNE_CUDA_CHECK_LAUNCH();
    } else {
      const gpu::GemmArgs g = gpu::fft_gemm_args(q);
      const cuComplex one = {1.0f, 0.0f}, zero = {0.0f, 0.0f};
      gpu::Handles h = gpu::lock_handles(a.stream);
      CONVTUNE_CUDA_CHECK(cublasCgemmStridedBatched(
          h.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, g.m, g.n, g.k, &one,
          reinterpret_cast<const cuComplex*>(xf), g.lda, g.stride_a,
          reinterpret_cast<const cuComplex*>(wf), g.ldb, g.stride_b, &zero,
          reinterpret_cast<cuComplex*>(yf), g.ldc, g.stride_c, g.batch));
    }
    inverse_fft(q.T, p.K * q.J, yf, real, stream);
    const int64_t ytotal = p.N * p.K * p.OH() * p.OW();
    output_kernel<<<blocks_for(ytotal), kThreads, 0, stream>>>(q, real, a.bias, a.y, ytotal);
    CONVTUNE_CUDA_CHECK_LAUNCH();
  }

  double do_error_bound(const ConvProblem& p, const std::string& config) const override {
    return fft::error_bound(p, cpu_geometry(p, parse(p, config)));
  }
  void do_add_error_scale(const ConvProblem& p, const std::string& config, const float* x,
                          const float* w, double* scale, int threads) const override {
    fft::add_error_scale(p, cpu_geometry(p, parse(p, config)), x, w, scale, threads);
  }

  size_t do_packed_weights_bytes(const ConvProblem& p, const std::string& config) const override {
    return static_cast<size_t>(sizes(params(p, parse(p, config))).wf) * 8;
  }
  // `w` and `packed` are device memory; the real kernel tiles go to a temporary buffer.
  void do_pack_weights(const ConvProblem& p, const std::string& config, const float* w,
                       void* packed, int) const override {
    const FftParams q = params(p, parse(p, config));
    const DeviceBuffer real(cuda_device_ops(gpu::current_device()),
                            static_cast<size_t>(q.s.K * q.Cp * q.T * q.T) * 4);
    transform_weights(q, w, real.floats(), static_cast<Cf*>(packed), nullptr);
    CONVTUNE_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }
};

}  // namespace

const Algorithm& cuda_fft() {
  static const Fft algo;
  return algo;
}

}  // namespace conv::kernels
