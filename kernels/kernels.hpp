// The algorithm objects defined in kernels/, one accessor each; registry.cpp lists them.
#pragma once

#include "conv/algorithm.hpp"

namespace conv::kernels {

const Algorithm& cpu_direct();       // kernels/cpu/direct_avx2.cpp
const Algorithm& cpu_im2col_gemm();  // kernels/cpu/im2col_gemm.cpp
const Algorithm& cpu_onednn();       // kernels/cpu/onednn.cpp

}  // namespace conv::kernels
