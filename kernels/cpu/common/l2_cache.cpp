#include "cpu/common/l2_cache.hpp"

#include <unistd.h>

namespace conv::kernels {

int64_t l2_cache_bytes() {
  static const int64_t bytes = [] {
#ifdef _SC_LEVEL2_CACHE_SIZE
    const long b = sysconf(_SC_LEVEL2_CACHE_SIZE);
#else
    const long b = 0;  // not glibc: the fallback below
#endif
    return b > 0 ? static_cast<int64_t>(b) : int64_t{1} << 20;
  }();
  return bytes;
}

}  // namespace conv::kernels
