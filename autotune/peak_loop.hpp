// FMA throughput probe shared by the AVX2 and AVX-512 builds: 12 independent dependency chains
// hide the FMA latency (4-5 cycles on two ports), so the loop runs at the core's FMA peak.
// `Vec` supplies the vector type, its lane count, set1 and fmadd (compiled per ISA).
#pragma once

#include <omp.h>

#include <chrono>

namespace conv {

template <class Vec>
double fma_peak(int threads, double ms) {
  using Clock = std::chrono::steady_clock;
  double total_flops = 0;
  const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : total_flops)
  {
    typename Vec::type acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = Vec::set1(0.5f + i);
    const auto a = Vec::set1(0.999999f), b = Vec::set1(1e-7f);
    long iterations = 0;
    const auto start = Clock::now();
    while (std::chrono::duration<double, std::milli>(Clock::now() - start).count() < ms) {
      for (int rep = 0; rep < 4096; ++rep)
        for (int i = 0; i < 12; ++i) acc[i] = Vec::fmadd(acc[i], a, b);
      iterations += 4096;
    }
    float sink = 0;
    for (int i = 0; i < 12; ++i) sink += Vec::first(acc[i]);
    // `sink` keeps the chains alive without changing the count.
    total_flops += iterations * 12.0 * 2.0 * Vec::lanes + (sink == 12345.0f ? 1 : 0);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return total_flops / seconds * 1e-9;
}

}  // namespace conv
