// The CUDA backend's runtime: device discovery, the DeviceOps of a CUDA device (memory, copies,
// event timing, pointer checks, fingerprint) and the per-(device, stream) cuBLAS/cuDNN handles.
#include "cuda/runtime.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <utility>
#include <vector>

#include "conv/device.hpp"
#include "conv/error.hpp"
#include "cuda/check.hpp"
#include "device_ops.hpp"

namespace conv::gpu {

void throw_failure(const char* expr, const char* file, int line, const std::string& what) {
  // Paths relative to the source tree read better than the absolute __FILE__.
  const char* rel = std::strstr(file, "kernels/");
  std::ostringstream s;
  s << "cuda: " << (rel ? rel : file) << ":" << line << ": " << expr << " failed: " << what;
  throw Error(s.str());
}

namespace {

struct DeviceCount {
  int count = 0;
  std::string reason;
};

const DeviceCount& device_count_info() {
  static const DeviceCount info = [] {
    DeviceCount d;
    const cudaError_t e = cudaGetDeviceCount(&d.count);
    if (e != cudaSuccess) {
      d.count = 0;
      d.reason =
          std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
      cudaGetLastError();  // not sticky, but leave no error behind for later checks
    } else if (d.count == 0) {
      d.reason = "cudaGetDeviceCount: 0 devices";
    }
    return d;
  }();
  return info;
}

}  // namespace

int device_count() {
  return device_count_info().count;
}
const std::string& no_device_reason() {
  return device_count_info().reason;
}

Applicability device_check() {
  return device_count() > 0 ? Applicability::yes() : Applicability::no("no CUDA device");
}

int current_device() {
  int d = 0;
  CONVTUNE_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

// ---- handles ----

struct StreamHandles {
  std::mutex m;
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cudnnHandle_t cudnn = nullptr;
};

namespace {

struct HandleTable {
  std::mutex m;
  std::map<std::pair<int, cudaStream_t>, std::unique_ptr<StreamHandles>> entries;
};

// Never destroyed by a static destructor: the handles go in destroy_handles(), registered with
// atexit() after each creation so that it runs before the CUDA runtime, cuBLAS and the cuDNN
// sub-libraries (loaded during the first create) tear themselves down.
HandleTable& handle_table() {
  static HandleTable* table = new HandleTable;
  return *table;
}

void destroy_handles() {
  HandleTable& t = handle_table();
  std::lock_guard<std::mutex> lock(t.m);
  for (auto& [key, e] : t.entries) {
    std::lock_guard<std::mutex> entry_lock(e->m);
    if (cudaSetDevice(e->device) != cudaSuccess) continue;  // runtime already gone: leak
    if (e->cublas) cublasDestroy(e->cublas);
    if (e->cudnn) cudnnDestroy(e->cudnn);
    e->cublas = nullptr;
    e->cudnn = nullptr;
  }
}

}  // namespace

Handles::Handles(StreamHandles* e) : e_(e), lock_(e->m) {}

Handles lock_handles(void* stream) {
  const int device = current_device();
  const auto s = static_cast<cudaStream_t>(stream);
  HandleTable& t = handle_table();
  StreamHandles* e = nullptr;
  {
    std::lock_guard<std::mutex> lock(t.m);
    auto& slot = t.entries[{device, s}];
    if (!slot) {
      slot = std::make_unique<StreamHandles>();
      slot->device = device;
      slot->stream = s;
    }
    e = slot.get();
  }
  return Handles(e);
}

cublasHandle_t Handles::cublas() {
  if (!e_->cublas) {
    cublasHandle_t h = nullptr;
    CONVTUNE_CUDA_CHECK(cublasCreate(&h));
    std::atexit(destroy_handles);
    e_->cublas = h;
    CONVTUNE_CUDA_CHECK(cublasSetStream(h, e_->stream));
    CONVTUNE_CUDA_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
  }
  return e_->cublas;
}

cudnnHandle_t Handles::cudnn() {
  if (!e_->cudnn) {
    cudnnHandle_t h = nullptr;
    CONVTUNE_CUDA_CHECK(cudnnCreate(&h));
    std::atexit(destroy_handles);
    e_->cudnn = h;
    CONVTUNE_CUDA_CHECK(cudnnSetStream(h, e_->stream));
  }
  return e_->cudnn;
}

}  // namespace conv::gpu

namespace conv {

namespace {

std::string version_text(int v, int major_div, int minor_div) {
  std::ostringstream s;
  s << v / major_div << "." << v % major_div / minor_div;
  return s.str();
}

// Destroys CUDA events on scope exit (time_ms may throw between creation and destruction).
struct Event {
  cudaEvent_t e = nullptr;
  Event() { CONVTUNE_CUDA_CHECK(cudaEventCreate(&e)); }
  ~Event() { cudaEventDestroy(e); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};

class CudaOps final : public DeviceOps {
 public:
  explicit CudaOps(int index) : index_(index) {}

  void* alloc(size_t bytes) const override {
    activate();
    void* p = nullptr;
    // cudaMalloc(0) gives null; callers rely on a non-null pointer.
    const cudaError_t e = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear it: an allocation failure is not sticky
      throw Error(name() + ": out of memory allocating " + std::to_string(bytes) + " bytes");
    }
    CONVTUNE_CUDA_CHECK(e);
    return p;
  }

  void free(void* p) const noexcept override {
    if (!p) return;
    if (cudaSetDevice(index_) == cudaSuccess) cudaFree(p);
  }

  // Copies finish before returning (the host buffer may be reused or read at once).
  void upload(void* dst, const void* host_src, size_t bytes, void* stream) const override {
    copy(dst, host_src, bytes, stream);
  }
  void download(void* host_dst, const void* src, size_t bytes, void* stream) const override {
    copy(host_dst, src, bytes, stream);
  }

  void synchronize(void* stream) const override {
    activate();
    CONVTUNE_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
  }

  // Device time between two events recorded around the enqueued work; includes the launch
  // overhead whenever the GPU would otherwise idle, as a real caller would see it.
  double time_ms(const std::function<void()>& run, void* stream) const override {
    activate();
    const auto s = static_cast<cudaStream_t>(stream);
    Event start, stop;
    CONVTUNE_CUDA_CHECK(cudaEventRecord(start.e, s));
    run();
    CONVTUNE_CUDA_CHECK(cudaEventRecord(stop.e, s));
    CONVTUNE_CUDA_CHECK(cudaEventSynchronize(stop.e));
    float ms = 0;
    CONVTUNE_CUDA_CHECK(cudaEventElapsedTime(&ms, start.e, stop.e));
    return ms;
  }

  void check_pointer(const void* p, const char* what) const override {
    if (!p) throw Error(std::string(what) + ": null pointer given for a tensor on " + name());
    cudaPointerAttributes a{};
    const cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw Error(std::string(what) + ": cannot query pointer on " + name() +
                  " (cudaPointerGetAttributes: " + cudaGetErrorString(e) + ")");
    }
    if (a.type == cudaMemoryTypeManaged) return;
    if (a.type != cudaMemoryTypeDevice)
      throw Error(std::string(what) + ": a host pointer was given for a tensor on " + name() +
                  " (cudaPointerGetAttributes: memory type " +
                  (a.type == cudaMemoryTypeHost ? "pinned host" : "unregistered host") +
                  "); allocate it with cudaMalloc");
    if (a.device != index_)
      throw Error(std::string(what) + ": pointer is memory of cuda:" + std::to_string(a.device) +
                  ", not " + name());
  }

  std::string fingerprint(int /*threads*/) const override {
    activate();
    cudaDeviceProp prop{};
    CONVTUNE_CUDA_CHECK(cudaGetDeviceProperties(&prop, index_));
    int driver = 0, runtime = 0, cublas_major = 0, cublas_minor = 0;
    CONVTUNE_CUDA_CHECK(cudaDriverGetVersion(&driver));
    CONVTUNE_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    CONVTUNE_CUDA_CHECK(cublasGetProperty(MAJOR_VERSION, &cublas_major));
    CONVTUNE_CUDA_CHECK(cublasGetProperty(MINOR_VERSION, &cublas_minor));
    const size_t cudnn = cudnnGetVersion();  // 9xxyy: major 9, minor xx, patch yy
    std::ostringstream s;
    s << "cuda|" << prop.name << "|sm_" << prop.major << prop.minor
      << "|sms=" << prop.multiProcessorCount << "|mem=" << (prop.totalGlobalMem >> 20) << "MiB"
      << "|driver=" << version_text(driver, 1000, 10)
      << "|runtime=" << version_text(runtime, 1000, 10) << "|cudnn=" << cudnn / 10000 << "."
      << cudnn % 10000 / 100 << "." << cudnn % 100 << "|cublas=" << cublas_major << "."
      << cublas_minor;
    return s.str();
  }

 private:
  std::string name() const { return "cuda:" + std::to_string(index_); }
  void activate() const { CONVTUNE_CUDA_CHECK(cudaSetDevice(index_)); }
  void copy(void* dst, const void* src, size_t bytes, void* stream) const {
    if (bytes == 0) return;
    activate();
    const auto s = static_cast<cudaStream_t>(stream);
    CONVTUNE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
    CONVTUNE_CUDA_CHECK(cudaStreamSynchronize(s));
  }

  int index_;
};

}  // namespace

const DeviceOps& cuda_device_ops(int index) {
  const int count = gpu::device_count();
  const std::string name = "cuda:" + std::to_string(index);
  if (count == 0)
    throw Error("device: " + name + ": no CUDA device is present (" + gpu::no_device_reason() +
                ")");
  if (index < 0 || index >= count)
    throw Error("device: " + name + ": no such device (" + std::to_string(count) + " CUDA device" +
                (count == 1 ? "" : "s") + " present)");
  static const std::vector<CudaOps> ops = [count] {
    std::vector<CudaOps> v;
    for (int i = 0; i < count; ++i) v.emplace_back(i);
    return v;
  }();
  CONVTUNE_CUDA_CHECK(cudaSetDevice(index));
  return ops[index];
}

}  // namespace conv
