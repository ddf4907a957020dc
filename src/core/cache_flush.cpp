#include "cache_flush.hpp"

#include <cstdint>

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

}  // namespace conv
