// The L2 size that the CPU kernels' cache blocking scales with. Internal to kernels/cpu.
#pragma once

#include <cstdint>

namespace conv::kernels {

/// This CPU's L2 cache per core in bytes (glibc's sysconf; 1 MiB where it does not say).
int64_t l2_cache_bytes();

}  // namespace conv::kernels
