// FMA throughput probe shared by the AVX2 and AVX-512 builds: 12 independent dependency chains
// hide the FMA latency (4-5 cycles on two ports), so the loop runs at the core's FMA peak.
// `Vec` supplies the vector type, its lane count, set1 and fmadd (compiled per ISA).
#pragma once

#include <omp.h>

#include <algorithm>
#include <chrono>

#include "fork_guard.hpp"

namespace conv {

// Each thread times short chunks and keeps its fastest: another process that takes the core
// for a while (a shared machine) stretches some chunks, not the peak.
template <class Vec>
double fma_peak(int threads, double ms) {
  using Clock = std::chrono::steady_clock;
  constexpr int kReps = 16384;  // about 0.1 ms per chunk
  double total_gflops = 0;
  note_parallel_region(threads);
#pragma omp parallel num_threads(threads) reduction(+ : total_gflops)
  {
    typename Vec::type acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = Vec::set1(0.5f + i);
    const auto a = Vec::set1(0.999999f), b = Vec::set1(1e-7f);
    double best = 0;
    const auto start = Clock::now();
    while (std::chrono::duration<double, std::milli>(Clock::now() - start).count() < ms) {
      const auto c0 = Clock::now();
      for (int rep = 0; rep < kReps; ++rep)
        for (int i = 0; i < 12; ++i) acc[i] = Vec::fmadd(acc[i], a, b);
      const double ns = std::chrono::duration<double, std::nano>(Clock::now() - c0).count();
      if (ns > 0) best = std::max(best, kReps * 12.0 * 2.0 * Vec::lanes / ns);
    }
    float sink = 0;
    for (int i = 0; i < 12; ++i) sink += Vec::first(acc[i]);
    // `sink` keeps the chains alive without changing the result.
    total_gflops += best + (sink == 12345.0f ? 1e-30 : 0);
  }
  return total_gflops;
}

}  // namespace conv
