// Evicting a buffer from every cache level, for timing a run as a layer in a network meets its
// data: after the other layers ran (conv::Timing::cold).
#pragma once

#include <cstddef>

namespace conv {

/// Writes back and invalidates every cache line of [p, p + bytes) in all caches of the coherence
/// domain (x86 CLFLUSH, then a fence); a no-op on other architectures.
void flush_from_caches(const void* p, size_t bytes);

}  // namespace conv
