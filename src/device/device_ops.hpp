// Memory, copies, synchronisation and timing on one device: what the tuner, best_forward and
// Plan need to run any algorithm without knowing which device it is on.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "conv/device.hpp"

namespace conv {

class DeviceOps {
 public:
  virtual ~DeviceOps() = default;
  /// Throws conv::Error ("<device>: out of memory allocating N bytes") on failure; never null.
  virtual void* alloc(size_t bytes) const = 0;
  virtual void free(void* p) const noexcept = 0;
  virtual void upload(void* dst, const void* host_src, size_t bytes, void* stream) const = 0;
  virtual void download(void* host_dst, const void* src, size_t bytes, void* stream) const = 0;
  virtual void synchronize(void* stream) const = 0;
  /// Milliseconds `run` takes on the device (steady clock on the CPU, events on a GPU).
  virtual double time_ms(const std::function<void()>& run, void* stream) const = 0;
  /// Throws conv::Error when `p` is not memory of this device (a host pointer given for a GPU).
  virtual void check_pointer(const void* p, const char* what) const = 0;
  /// See Device::fingerprint.
  virtual std::string fingerprint(int threads) const = 0;
};

/// The ops of `d`; throws conv::Error ("device: ...") when the device does not exist or this
/// build has no backend for it.
const DeviceOps& device_ops(const Device& d);

/// oneDNN's own ISA cap as the environment sets it (ONEDNN_MAX_CPU_ISA, else DNNL_MAX_CPU_ISA;
/// empty is unset, as oneDNN reads them), or null. cpu.onednn leaves such a cap alone, and the
/// CPU fingerprint names it where it is below the ISA our kernels use.
const char* onednn_max_isa_env();

/// An allocation on one device (RAII).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceOps& ops, size_t bytes)
      : ops_(&ops), ptr_(ops.alloc(bytes)), size_(bytes) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    reset();
    ops_ = o.ops_, ptr_ = o.ptr_, size_ = o.size_;
    o.ptr_ = nullptr, o.size_ = 0;
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }

  void* data() const { return ptr_; }
  float* floats() const { return static_cast<float*>(ptr_); }
  size_t size() const { return size_; }
  void reset() {
    if (ptr_) ops_->free(ptr_);
    ptr_ = nullptr, size_ = 0;
  }
  /// Grows to at least `bytes` (contents not kept). When the allocation throws, the buffer is
  /// left as it was: callers still hold its old size (the tuner's shared workspace).
  void reserve(const DeviceOps& ops, size_t bytes) {
    if (ptr_ && ops_ == &ops && bytes <= size_) return;
    DeviceBuffer grown(ops, bytes);
    *this = std::move(grown);
  }

 private:
  const DeviceOps* ops_ = nullptr;
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

class Algorithm;

/// The CUDA backend is a plugin, libconvtune_cuda.so (kernels/cuda/), that libconvtune
/// dlopen()s at run time from its own directory (found with dladdr), so that libconvtune links
/// no CUDA library and loads on any machine. The plugin exports one extern "C" function,
/// CONVTUNE_CUDA_PLUGIN_ENTRY, returning this table. The environment variable
/// CONVTUNE_CUDA_PLUGIN overrides the path ("" or "none": do not load any).
struct CudaPlugin {
  const char* version;                 ///< conv::version() the plugin was built with
  const Algorithm* const* algorithms;  ///< the cuda.* rows of the registry, in order
  int algorithm_count;
  const DeviceOps& (*device_ops)(int index);  ///< throws conv::Error ("device: cuda:i: ...")
};
#define CONVTUNE_CUDA_PLUGIN_ENTRY "convtune_cuda_plugin_v1"
using CudaPluginEntry = const CudaPlugin* (*)();

/// The loaded CUDA plugin (loaded on the first call, never unloaded), or null when it is absent
/// or unusable; cuda_plugin_status() then says why (the dlerror() text, a missing file, a
/// version mismatch), else it names the loaded file.
const CudaPlugin* cuda_plugin();
const std::string& cuda_plugin_status();

}  // namespace conv
