// The machine's measured fp32 FMA peak, the 100% of `autotune explain`'s "% of peak" column.
#pragma once

namespace conv {

/// Runs independent FMA chains of the widest vectors this CPU has (AVX-512 or AVX2) on `threads`
/// threads for about `ms` milliseconds and returns the achieved GFLOP/s (2 FLOPs per lane per FMA).
/// 0 when the CPU has no AVX2/FMA.
double measure_fma_peak_gflops(int threads, double ms = 100);

}  // namespace conv
