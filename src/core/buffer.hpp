// Internal helpers shared by the tuner, kernels and tests: aligned host buffers and test data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace conv {

/// A 64-byte aligned host allocation (RAII). Throws conv::Error ("workspace: ...") when the
/// allocation fails.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes);
  void* data() const { return ptr_.get(); }
  float* floats() const { return static_cast<float*>(ptr_.get()); }
  size_t size() const { return bytes_; }
  /// Grows to at least `bytes` (contents not kept). Throws conv::Error ("workspace: ...") when
  /// the allocation fails, leaving the buffer as it was.
  void reserve(size_t bytes);

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> ptr_;
  size_t bytes_ = 0;
};

/// Fills `n` floats with uniform values in [-1, 1) from a counter-based generator seeded by
/// `seed` (same seed, same data; no zeros in practice).
void fill_uniform(float* data, int64_t n, uint64_t seed);

/// Writes quiet NaNs into `n` floats, so an output element a kernel forgets to write is caught.
void poison_nan(float* data, int64_t n);

}  // namespace conv
