#include "peak.hpp"

#include "conv/device.hpp"

namespace conv {

double fma_peak_avx2(int threads, double ms);    // peak_avx2.cpp
double fma_peak_avx512(int threads, double ms);  // peak_avx512.cpp

double measure_fma_peak_gflops(int threads, double ms) {
  switch (cpu_isa()) {
    case CpuIsa::avx512:
      return fma_peak_avx512(resolve_threads(threads), ms);
    case CpuIsa::avx2:
      return fma_peak_avx2(resolve_threads(threads), ms);
    default:
      return 0.0;
  }
}

}  // namespace conv
