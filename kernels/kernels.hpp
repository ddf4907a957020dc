// The algorithm objects defined in kernels/, one accessor each; registry.cpp lists them.
#pragma once

#include "conv/algorithm.hpp"

namespace conv::kernels {

const Algorithm& cpu_direct();       // kernels/cpu/direct.cpp
const Algorithm& cpu_im2col_gemm();  // kernels/cpu/im2col_gemm.cpp
const Algorithm& cpu_onednn();       // kernels/cpu/onednn.cpp
const Algorithm& cpu_winograd();     // kernels/cpu/winograd.cpp (+ winograd_avx2.cpp)

}  // namespace conv::kernels
