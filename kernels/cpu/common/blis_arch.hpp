// BLIS's kernel set for cpu.im2col_gemm (see blis_arch.cpp).
#pragma once

#include <string>

namespace conv::kernels {

/// Starts BLIS, once per process, with the sub-configuration of convtune's ISA (cpu_isa()) unless
/// the user set BLIS_ARCH_TYPE. Call before any BLIS call. Throws conv::Error naming
/// CONVTUNE_MAX_ISA or BLIS_ARCH_TYPE when either holds a value BLIS cannot run (and starts BLIS
/// on a later call only).
void blis_start();

/// BLIS's version and the sub-configuration whose kernels it runs, e.g. "0.9.0.skx". Starts BLIS
/// (blis_start()); where that throws, "<version>.unstarted" (never throws).
std::string blis_kernels();

}  // namespace conv::kernels
