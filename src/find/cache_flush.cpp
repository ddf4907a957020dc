#include "cache_flush.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#endif

namespace conv {

void flush_from_caches(const void* p, size_t bytes) {
#if defined(__x86_64__) || defined(__i386__)
  if (!p || bytes == 0) return;
  constexpr uintptr_t kLine = 64;
  const auto* c = static_cast<const char*>(p);
  const uintptr_t first = reinterpret_cast<uintptr_t>(c) & ~(kLine - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(c) + bytes;
  for (uintptr_t a = first; a < end; a += kLine) _mm_clflush(reinterpret_cast<const void*>(a));
  _mm_mfence();
#else
  (void)p, (void)bytes;
#endif
}

namespace {

size_t cache_bytes(int name, size_t otherwise) {
  const long v = sysconf(name);
  return v > 0 ? static_cast<size_t>(v) : otherwise;
}

}  // namespace

PrivateCacheSweep::PrivateCacheSweep(int threads)
    : threads_(threads < 1 ? 1 : threads),
      per_thread_(2 * cache_bytes(_SC_LEVEL2_CACHE_SIZE, 2u << 20) +
                  cache_bytes(_SC_LEVEL1_DCACHE_SIZE, 48u << 10)),
      scratch_(per_thread_ * static_cast<size_t>(threads_)) {
  std::memset(scratch_.data(), 1, scratch_.size());
}

void PrivateCacheSweep::operator()() const {
  static std::atomic<unsigned> sink;  // keeps the reads
  const auto* base = static_cast<const unsigned char*>(scratch_.data());
#pragma omp parallel num_threads(threads_)
  {
#ifdef _OPENMP
    const size_t t = static_cast<size_t>(omp_get_thread_num());
#else
    const size_t t = 0;
#endif
    const unsigned char* mine = base + t * per_thread_;
    unsigned char acc = 0;
    for (size_t i = 0; i < per_thread_; i += 64) acc = static_cast<unsigned char>(acc + mine[i]);
    sink.fetch_add(acc, std::memory_order_relaxed);
  }
}

}  // namespace conv
