#include "peak.hpp"

#include "conv/device.hpp"

namespace conv {

double fma_peak_avx2(int threads, double ms);  // peak_avx2.cpp

double measure_fma_peak_gflops(int threads, double ms) {
  return cpu_isa() == CpuIsa::scalar ? 0.0 : fma_peak_avx2(resolve_threads(threads), ms);
}

}  // namespace conv
