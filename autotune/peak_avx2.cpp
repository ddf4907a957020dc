// FMA throughput probe: 12 independent dependency chains hide the FMA latency (4-5 cycles on two
// ports), so the loop runs at the core's peak of 2 x 8-lane FMAs per cycle.
#include <immintrin.h>
#include <omp.h>

#include <chrono>

namespace conv {

double fma_peak_avx2(int threads, double ms) {
  double total_flops = 0;
  const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : total_flops)
  {
    __m256 acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(0.5f + i);
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    long iterations = 0;
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
               .count() < ms) {
      for (int rep = 0; rep < 4096; ++rep)
        for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
      iterations += 4096;
    }
    __m256 sum = acc[0];
    for (int i = 1; i < 12; ++i) sum = _mm256_add_ps(sum, acc[i]);
    float out[8];
    _mm256_storeu_ps(out, sum);
    // Keeps the chains alive without affecting the count.
    total_flops += iterations * 12.0 * 16.0 + (out[0] == 12345.0f ? 1 : 0);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return total_flops / seconds * 1e-9;
}

}  // namespace conv
