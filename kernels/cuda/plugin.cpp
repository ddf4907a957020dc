// The entry point of the CUDA plugin libconvtune_cuda.so: the cuda.* rows of the registry
// (kernels/registry.cpp appends them to the CPU rows, most specialised first) and the CUDA
// DeviceOps. libconvtune dlopen()s this library and calls CONVTUNE_CUDA_PLUGIN_ENTRY once
// (src/device/device_ops.cpp).
#include "conv/algorithm.hpp"
#include "cuda/runtime.hpp"
#include "device_ops.hpp"
#include "kernels.hpp"

namespace {

const conv::CudaPlugin& plugin() {
  static const conv::Algorithm* const rows[] = {
      &conv::kernels::cuda_winograd(),
      &conv::kernels::cuda_fft(),
      &conv::kernels::cuda_implicit_gemm(),
      &conv::kernels::cuda_direct(),
      &conv::kernels::cuda_im2col_gemm(),
      &conv::kernels::cuda_cudnn_implicit_gemm(),
      &conv::kernels::cuda_cudnn_implicit_precomp_gemm(),
      &conv::kernels::cuda_cudnn_gemm(),
      &conv::kernels::cuda_cudnn_direct(),
      &conv::kernels::cuda_cudnn_fft(),
      &conv::kernels::cuda_cudnn_fft_tiling(),
      &conv::kernels::cuda_cudnn_winograd(),
      &conv::kernels::cuda_cudnn_winograd_nonfused(),
  };
  static const conv::CudaPlugin p{CONVTUNE_VERSION, rows,
                                  static_cast<int>(sizeof(rows) / sizeof(rows[0])),
                                  &conv::cuda_device_ops};
  return p;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const conv::CudaPlugin*
convtune_cuda_plugin_v1() {
  return &plugin();
}
