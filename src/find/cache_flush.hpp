// Evicting a buffer from every cache level, for timing a run as a layer in a network meets its
// data: after the other layers ran (conv::Timing::cold).
#pragma once

#include <cstddef>

#include "buffer.hpp"

namespace conv {

/// Writes back and invalidates every cache line of [p, p + bytes) in all caches of the coherence
/// domain (x86 CLFLUSH, then a fence); a no-op on other architectures.
void flush_from_caches(const void* p, size_t bytes);

/// Pushes whatever the cores of `threads` OpenMP threads hold in their private caches (L1, L2)
/// out to the shared last-level cache or memory: each thread reads its own scratch of twice the
/// L2 (sysconf, else 2 MiB) plus the L1. What the layers before a layer do to its data when the
/// whole network fits in the last-level cache (conv::Timing::warm).
class PrivateCacheSweep {
 public:
  explicit PrivateCacheSweep(int threads);
  void operator()() const;
  size_t bytes_per_thread() const { return per_thread_; }

 private:
  int threads_;
  size_t per_thread_;
  AlignedBuffer scratch_;
};

}  // namespace conv
