// The CUDA backend's shared state: device discovery and the per-device, per-stream cuBLAS and
// cuDNN handles the CUDA algorithms use. Only compiled with CONVTUNE_HAVE_CUDA.
//
// Device selection: CUDA algorithms run on the calling thread's current CUDA device.
// cuda_device_ops(i) (src/device_ops.hpp) and every DeviceOps call make device i current, so the
// tuner and best_forward select the device simply by using its ops first.
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

#include <mutex>
#include <string>

#include "conv/algorithm.hpp"

namespace conv::gpu {

/// Number of CUDA devices; 0 when there is none or no usable driver. Queried once; never throws.
int device_count();
/// Why device_count() is 0, e.g. "cudaGetDeviceCount: cudaErrorNoDevice: no CUDA-capable device
/// is detected"; empty when devices exist.
const std::string& no_device_reason();
/// Applicability::no("no CUDA device") when device_count() is 0, else yes().
Applicability device_check();
/// The calling thread's current CUDA device. Throws conv::Error on failure.
int current_device();

struct StreamHandles;

/// Exclusive use of the cuBLAS and cuDNN handles bound to one (device, stream) pair for as long
/// as this object lives. Handles are created on first use, bound to that stream once, and freed
/// at process exit; two threads enqueueing on the same stream take turns, different streams
/// never share a handle (cuBLAS and cuDNN handles are not safe for concurrent use, and a cuBLAS
/// handle's internal workspace must not be shared between streams).
class Handles {
 public:
  /// cuBLAS handle with CUBLAS_DEFAULT_MATH (fp32 SGEMM stays fp32: no TF32 tensor cores).
  cublasHandle_t cublas();
  cudnnHandle_t cudnn();

 private:
  friend Handles lock_handles(void* stream);
  Handles(StreamHandles* e);
  StreamHandles* e_;
  std::unique_lock<std::mutex> lock_;
};

/// Locks the handles of (current device, `stream`); `stream` is a cudaStream_t, null = the
/// default stream. Throws conv::Error when a handle cannot be created.
Handles lock_handles(void* stream);

}  // namespace conv::gpu

namespace conv {
class DeviceOps;
/// The DeviceOps of CUDA device `index` (made current); throws conv::Error ("device: cuda:i:
/// ...") when there is no such device. Exported to libconvtune through kernels/cuda/plugin.cpp.
const DeviceOps& cuda_device_ops(int index);
}  // namespace conv
