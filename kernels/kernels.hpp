// The algorithm objects defined in kernels/, one accessor each; registry.cpp lists them.
#pragma once

#include "conv/algorithm.hpp"

namespace conv::kernels {

const Algorithm& cpu_depthwise();    // kernels/cpu/depthwise/depthwise.cpp (+ _avx2, _avx512)
const Algorithm& cpu_direct();       // kernels/cpu/direct/direct.cpp
const Algorithm& cpu_direct_kvec();  // kernels/cpu/direct_kvec/direct_kvec.cpp
const Algorithm& cpu_im2col_gemm();  // kernels/cpu/im2col_gemm/im2col_gemm.cpp
const Algorithm& cpu_onednn();       // kernels/cpu/onednn/onednn.cpp
const Algorithm& cpu_pointwise();    // kernels/cpu/pointwise/pointwise.cpp (+ pointwise_avx2.cpp)
const Algorithm& cpu_winograd();     // kernels/cpu/winograd/winograd.cpp (+ winograd_avx2.cpp)
const Algorithm& cpu_fft();          // kernels/cpu/fft/fft.cpp (+ fft_avx2.cpp, fft_avx512.cpp)

#ifdef CONVTUNE_HAVE_CUDA
// Compiled into the plugin libconvtune_cuda.so only; kernels/cuda/plugin.cpp lists them.
const Algorithm& cuda_winograd();                     // kernels/cuda/winograd.cu
const Algorithm& cuda_fft();                          // kernels/cuda/fft.cu
const Algorithm& cuda_implicit_gemm();                // kernels/cuda/implicit_gemm.cu
const Algorithm& cuda_direct();                       // kernels/cuda/direct.cu
const Algorithm& cuda_im2col_gemm();                  // kernels/cuda/im2col_gemm.cu
const Algorithm& cuda_cudnn_implicit_gemm();          // kernels/cuda/cudnn.cpp, one per
const Algorithm& cuda_cudnn_implicit_precomp_gemm();  // cudnnConvolutionFwdAlgo_t
const Algorithm& cuda_cudnn_gemm();
const Algorithm& cuda_cudnn_direct();
const Algorithm& cuda_cudnn_fft();
const Algorithm& cuda_cudnn_fft_tiling();
const Algorithm& cuda_cudnn_winograd();
const Algorithm& cuda_cudnn_winograd_nonfused();
#endif

}  // namespace conv::kernels
