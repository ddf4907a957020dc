// Tensors from Python (no copies; dtype, device, rank and layout checked) and NumPy outputs.
#include "arrays.hpp"

#include <cstdlib>
#include <new>
#include <string>

#include "conv/error.hpp"

namespace convtune_py {

namespace {

std::string dtype_text(nb::dlpack::dtype t) {
  std::string code;
  switch (static_cast<nb::dlpack::dtype_code>(t.code)) {
    case nb::dlpack::dtype_code::Int:
      code = "int";
      break;
    case nb::dlpack::dtype_code::UInt:
      code = "uint";
      break;
    case nb::dlpack::dtype_code::Float:
      code = "float";
      break;
    case nb::dlpack::dtype_code::Bfloat:
      code = "bfloat";
      break;
    case nb::dlpack::dtype_code::Complex:
      code = "complex";
      break;
    case nb::dlpack::dtype_code::Bool:
      return "bool";
    default:
      code = "dtype code " + std::to_string(t.code) + " of ";
  }
  return code + std::to_string(t.bits);
}

}  // namespace

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

Tensor as_tensor(nb::handle v, const char* name, size_t ndim) {
  Tensor t;
  const std::string n = name;
  if (!nb::try_cast(v, t.array, false))
    throw conv::Error(n + ": expected a float32 array (NumPy, or an object with __dlpack__), got " +
                      Py_TYPE(v.ptr())->tp_name);
  const nb::ndarray<nb::ro>& a = t.array;
  if (a.device_type() != nb::device::cpu::value)
    throw conv::Error(n + ": expected an array in CPU memory, got DLPack device type " +
                      std::to_string(a.device_type()));
  if (a.dtype() != nb::dtype<float>())
    throw conv::Error(n + ": expected dtype float32, got " + dtype_text(a.dtype()) +
                      " (convert with .astype(numpy.float32))");
  for (size_t i = 0; i < a.ndim(); ++i) t.shape.push_back(static_cast<int64_t>(a.shape(i)));
  if (a.ndim() != ndim)
    throw conv::Error(n + ": expected " + std::to_string(ndim) + " dimensions, got " +
                      std::to_string(a.ndim()) + " with shape " + shape_text(t.shape));
  // C order; strides of size-1 dimensions do not matter.
  int64_t expect = 1;
  for (size_t i = ndim; i-- > 0;) {
    if (t.shape[i] != 1 && a.stride(i) != expect) {
      std::vector<int64_t> strides;
      for (size_t k = 0; k < ndim; ++k) strides.push_back(a.stride(k));
      throw conv::Error(n + ": expected a C-contiguous array, got strides " + shape_text(strides) +
                        " (elements) for shape " + shape_text(t.shape) +
                        " (copy it with numpy.ascontiguousarray)");
    }
    expect *= t.shape[i];
  }
  t.data = static_cast<const float*>(a.data());
  return t;
}

void check_shape(const Tensor& t, const char* name, const std::vector<int64_t>& want,
                 const char* what) {
  if (t.shape != want)
    throw conv::Error(std::string(name) + ": expected shape " + what + " = " + shape_text(want) +
                      ", got " + shape_text(t.shape));
}

NumpyArray new_array(const std::vector<int64_t>& shape, float** data) {
  size_t count = 1;
  std::vector<size_t> dims;
  for (int64_t d : shape) {
    count *= static_cast<size_t>(d);
    dims.push_back(static_cast<size_t>(d));
  }
  const size_t bytes = ((count * sizeof(float) + 63) / 64) * 64;
  void* p = std::aligned_alloc(64, bytes > 0 ? bytes : 64);
  if (!p) throw std::bad_alloc();
  nb::capsule owner(p, [](void* q) noexcept { std::free(q); });
  *data = static_cast<float*>(p);
  return NumpyArray(p, dims.size(), dims.data(), owner);
}

}  // namespace convtune_py
