#include "buffer.hpp"

#include <cstdlib>
#include <limits>

#include "conv/error.hpp"

namespace conv {

void AlignedBuffer::Free::operator()(void* p) const {
  std::free(p);
}

AlignedBuffer::AlignedBuffer(size_t bytes) {
  reserve(bytes);
}

void AlignedBuffer::reserve(size_t bytes) {
  if (bytes <= bytes_ && ptr_) return;
  // The old allocation is freed only once the new one exists: a failed reserve leaves the
  // buffer as it was.
  // aligned_alloc needs a multiple of the alignment; a zero-byte request still gets one line so
  // data() is never null.
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded < bytes) throw Error("workspace: size " + std::to_string(bytes) + " overflows");
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw Error("workspace: cannot allocate " + std::to_string(bytes) + " bytes");
  ptr_.reset(p);
  bytes_ = bytes;
}

void fill_uniform(float* data, int64_t n, uint64_t seed) {
  // splitmix64 per index: reproducible and independent of threading.
  for (int64_t i = 0; i < n; ++i) {
    uint64_t z = seed + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    data[i] = static_cast<float>(static_cast<double>(z >> 40) / 8388608.0 - 1.0);
  }
}

void poison_nan(float* data, int64_t n) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t i = 0; i < n; ++i) data[i] = nan;
}

}  // namespace conv
