// CONVTUNE_CUDA_CHECK: turns every failed CUDA runtime, cuBLAS or cuDNN call into a conv::Error
// naming the call, its file and line, and the library's error name and text.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <string>

#include "conv/error.hpp"

namespace conv::gpu {

/// Throws conv::Error("cuda: <file>:<line>: <expr> failed: <what>").
[[noreturn]] void throw_failure(const char* expr, const char* file, int line,
                                const std::string& what);

inline void check(cudaError_t e, const char* expr, const char* file, int line) {
  if (e != cudaSuccess)
    throw_failure(expr, file, line,
                  std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e));
}
inline void check(cublasStatus_t s, const char* expr, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw_failure(expr, file, line,
                  std::string(cublasGetStatusName(s)) + ": " + cublasGetStatusString(s));
}
inline void check(cudnnStatus_t s, const char* expr, const char* file, int line) {
  if (s != CUDNN_STATUS_SUCCESS) throw_failure(expr, file, line, cudnnGetErrorString(s));
}

}  // namespace conv::gpu

/// Evaluates a cudaError_t / cublasStatus_t / cudnnStatus_t expression; throws conv::Error on
/// failure.
#define CONVTUNE_CUDA_CHECK(expr) ::conv::gpu::check((expr), #expr, __FILE__, __LINE__)

/// After a kernel launch: throws conv::Error when the launch itself failed (bad configuration,
/// too much shared memory). Errors of the running kernel surface at the next synchronisation.
#define CONVTUNE_CUDA_CHECK_LAUNCH() \
  ::conv::gpu::check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
