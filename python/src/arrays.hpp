// Tensors from Python: float32 CPU arrays (NumPy arrays, any object with __dlpack__ such as a CPU
// torch.Tensor), read in place when C-contiguous and copied once otherwise, and new NumPy outputs.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace convtune_py {

namespace nb = nanobind;

/// A read-only view of a caller's array, or of a C-contiguous copy of it; holds a reference to
/// the array (and owns the copy) while alive.
struct Tensor {
  nb::ndarray<nb::ro> array;
  std::shared_ptr<float> copy;  ///< the C-contiguous copy `data` points into, if one was made
  const float* data = nullptr;  ///< C-contiguous float32 elements
  size_t bytes = 0;             ///< of `data`
  std::vector<int64_t> shape;
};

/// Whether as_tensor copies an array whose layout is not C-contiguous (a transposed or sliced
/// view, a channels_last tensor) or refuses it (the out= array, which is written in place).
enum class Strided { kCopy, kRefuse };

/// Views `v` (buffer protocol or DLPack) as a float32 CPU tensor of `ndim` dimensions, in C
/// order: in place when its layout is C-contiguous, else (Strided::kCopy) as one C-contiguous
/// copy, as numpy.ascontiguousarray makes it. Throws conv::Error naming `name` for None or
/// another type, a non-native byte order, another dtype, device or rank, a dimension < 1, or
/// (Strided::kRefuse) a layout that is not C-contiguous; MemoryError where the copy does not
/// fit. `name` "x", "w" or "bias" also names the layout and dimensions in messages. A
/// torch.Tensor must be on the CPU ("x: expected a CPU tensor, got a torch.Tensor on device
/// cuda:0 ..."), torch.float32 ("... convert with x.float()") and, where grad mode is on, not
/// require grad ("x: requires_grad tensors are not supported: convtune computes no gradients;
/// use x.detach() or torch.no_grad()"); under torch.no_grad() it is detached.
Tensor as_tensor(nb::handle v, const char* name, size_t ndim, Strided strided = Strided::kCopy);

/// Whether `v` is a torch.Tensor (nn.Parameter and other subclasses included), where the process
/// has imported torch.
bool is_torch_tensor(nb::handle v);

/// The NumPy output `y` as a torch.Tensor sharing its memory (torch.from_dlpack: no copy), for
/// calls whose x is a torch.Tensor.
nb::object torch_output(nb::object y);

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
