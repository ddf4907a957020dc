// Tensors from Python: float32, C-contiguous CPU arrays taken without copying (NumPy arrays, any
// object with __dlpack__ such as a CPU torch.Tensor), and new NumPy outputs.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <string>
#include <vector>

namespace convtune_py {

namespace nb = nanobind;

/// A read-only view of a caller's array; holds a reference to it while alive.
struct Tensor {
  nb::ndarray<nb::ro> array;
  const float* data = nullptr;
  std::vector<int64_t> shape;
};

/// Views `v` (buffer protocol or DLPack) as a float32, C-contiguous CPU tensor of `ndim`
/// dimensions, without copying. Throws conv::Error naming `name` for None or another type, a
/// non-native byte order, another dtype, device or rank, a dimension < 1, or a non-contiguous
/// layout. `name` "x", "w" or "bias" also names the layout and dimensions in messages.
Tensor as_tensor(nb::handle v, const char* name, size_t ndim);

/// Throws conv::Error `<name>: expected shape <want>, got <shape>` unless the shapes are equal;
/// `what` describes `want` (e.g. "(K, C/groups, R, S)").
void check_shape(const Tensor& t, const char* name, const std::vector<int64_t>& want,
                 const char* what);

/// The `out=` array: a caller's float32, C-contiguous CPU array of `shape` (N, K, OH, OW) that
/// the result is written into, as `as_tensor` takes it. Throws conv::Error naming "out" as
/// as_tensor does, for another shape, for a read-only array (flags.writeable False), and for
/// memory shared with any of `inputs` (the convolution reads them while writing out).
float* output_arg(nb::handle v, const std::vector<int64_t>& shape,
                  const std::vector<const Tensor*>& inputs);

/// "(1, 3, 224, 224)"
std::string shape_text(const std::vector<int64_t>& shape);

/// A new, uninitialised float32 NumPy array of `shape` that owns its memory (64-byte aligned).
/// Raises MemoryError "<name>: cannot allocate <bytes> bytes for the NxKxOHxOW output" when
/// the memory is not there.
using NumpyArray = nb::ndarray<nb::numpy, float>;
NumpyArray new_array(const std::vector<int64_t>& shape, float** data, const char* name = "y");

/// Sets MemoryError(message) and throws nb::python_error (the GIL must be held).
[[noreturn]] void raise_memory_error(const std::string& message);

}  // namespace convtune_py
