// Tensors from Python (no copies; dtype, device, rank and layout checked) and NumPy outputs.
#include "arrays.hpp"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "args.hpp"
#include "conv/error.hpp"

namespace convtune_py {

namespace {

// DLPack's names: "float32", and "float32x4" for a vector dtype of 4 lanes.
std::string dtype_text(nb::dlpack::dtype t) {
  using Code = nb::dlpack::dtype_code;
  std::string text;
  switch (static_cast<Code>(t.code)) {
    case Code::Int:
      text = "int" + std::to_string(t.bits);
      break;
    case Code::UInt:
      text = "uint" + std::to_string(t.bits);
      break;
    case Code::Float:
      text = "float" + std::to_string(t.bits);
      break;
    case Code::Bfloat:
      text = "bfloat" + std::to_string(t.bits);
      break;
    case Code::Complex:
      text = "complex" + std::to_string(t.bits);
      break;
    case Code::Bool:
      text = t.bits == 8 ? std::string("bool") : "bool" + std::to_string(t.bits);
      break;
    default:
      text = "dtype code " + std::to_string(t.code) + " of " + std::to_string(t.bits) + " bits";
  }
  if (t.lanes != 1) text += "x" + std::to_string(t.lanes);
  return text;
}

// What each tensor argument is, for messages: its layout and the names of its dimensions.
struct Layout {
  const char* text;
  std::vector<const char*> dims;
};

Layout layout_of(const std::string& name) {
  if (name == "x") return {"NCHW", {"N", "C", "H", "W"}};
  if (name == "w") return {"(K, C/groups, R, S)", {"K", "C/groups", "R", "S"}};
  if (name == "bias") return {"(K,)", {"K"}};
  return {"", {}};
}

// Why a Python object is no float32 CPU array nanobind can view, for the message after "got".
[[noreturn]] void not_an_array(nb::handle v, const std::string& n) {
  const Layout layout = layout_of(n);
  const std::string want =
      n + ": expected a float32 " + (*layout.text ? layout.text + std::string(" ") : "") + "array";
  if (v.is_none()) throw conv::Error(want + ", got None");
  std::string got = type_text(v);
  nb::object dtype = nb::getattr(v, "dtype", nb::none());
  if (!dtype.is_none()) {  // a NumPy array (or alike) nanobind cannot view
    nb::object text = nb::getattr(dtype, "str", nb::none());
    nb::object native = nb::getattr(dtype, "isnative", nb::none());
    if (nb::isinstance<nb::str>(text)) {
      const std::string str = message_text(text);  // any object's attribute: maybe hostile
      if (native.is(nb::handle(Py_False)))
        throw conv::Error(n + ": expected native-endian float32, got " + str +
                          " (convert with .astype(numpy.float32))");
      got += " of dtype " + str;
    }
  }
  // nanobind's cast swallows what a raising __dlpack__ said; ask it again for the message.
  if (nb::hasattr(v, "__dlpack__")) {
    try {
      v.attr("__dlpack__")();
    } catch (nb::python_error& e) {
      if (!e.matches(PyExc_Exception)) throw;  // KeyboardInterrupt, SystemExit: not bad input
      const std::string type = message_text(e.type().attr("__name__"));
      const std::string why = message_text(e.value());
      throw conv::Error(want + ", got " + got + " whose __dlpack__() raised " + type + ": " + why);
    }
  }
  throw conv::Error(want + " (NumPy, or an object with __dlpack__), got " + got);
}

// A capsule that an earlier import consumed: nanobind refuses it, and this says why.
bool used_capsule(nb::handle c) {
  if (!PyCapsule_CheckExact(c.ptr())) return false;
  const char* name = PyCapsule_GetName(c.ptr());
  return name && std::strncmp(name, "used_", 5) == 0;
}

// What nanobind imports for `v`: NumPy arrays and capsules as they are, any other object with
// __dlpack__ as the capsule it returns. nanobind would call __dlpack__ itself, but it frees the
// tensor of that capsule without marking the capsule used, so an object that hands out one
// capsule twice (against the DLPack protocol) had its freed tensor read on the second call; a
// capsule given to nanobind is marked used, and refused when it comes back.
nb::object dlpack_source(nb::handle v) {
  if (PyCapsule_CheckExact(v.ptr()) ||
      std::strcmp(Py_TYPE(v.ptr())->tp_name, "numpy.ndarray") == 0 || !nb::hasattr(v, "__dlpack__"))
    return nb::borrow(v);
  // A plain capsule first (every nanobind 2 imports it); a DLPack 1.0 one, which can say
  // read-only, where the producer refuses that (NumPy does for read-only arrays). Where both
  // raise, nanobind's own ways (the buffer protocol) are left to try, and not_an_array() reports
  // what __dlpack__ said.
  for (const bool versioned : {false, true}) {
    try {
      return versioned ? v.attr("__dlpack__")(nb::arg("max_version") = nb::make_tuple(1, 0))
                       : v.attr("__dlpack__")();
    } catch (nb::python_error& e) {
      if (!e.matches(PyExc_Exception)) throw;  // KeyboardInterrupt, SystemExit: not bad input
    }
  }
  return nb::borrow(v);
}

// torch, where the process imported it (convtune never imports it itself).
nb::handle torch_module() {
  return PyDict_GetItemString(PyImport_GetModuleDict(), "torch");  // borrowed; no error set
}

// A torch.Tensor as DLPack can export it: on the CPU, float32, not requiring grad (under
// torch.no_grad() detached, as torch's own functions would drop the graph there). Throws
// conv::Error naming `n` otherwise; DLPack itself would say "Can't export tensors that require
// gradient", or hand a CUDA pointer over.
nb::object torch_source(nb::handle v, const std::string& n) {
  const nb::handle torch = torch_module();
  const nb::object device = v.attr("device");
  if (message_text(device.attr("type")) != "cpu")
    throw conv::Error(
        n + ": expected a CPU tensor, got a torch.Tensor on device " + message_text(device) +
        " (convtune's Python functions run on the CPU; copy it with " + n + ".cpu())");
  const nb::object dtype = v.attr("dtype");
  if (!dtype.equal(torch.attr("float32")))
    throw conv::Error(n + ": expected dtype torch.float32, got " + message_text(dtype) +
                      " (convtune computes in float32 only; convert with " + n + ".float())");
  if (!nb::cast<bool>(v.attr("requires_grad"))) return nb::borrow(v);
  if (nb::cast<bool>(torch.attr("is_grad_enabled")()))
    throw conv::Error(n +
                      ": requires_grad tensors are not supported: convtune computes no "
                      "gradients; use " +
                      n + ".detach() or torch.no_grad()");
  return v.attr("detach")();
}

// One C-contiguous copy of `a` (float32, `shape`, any strides: negative, zero, transposed), as
// numpy.ascontiguousarray makes it.
std::shared_ptr<float> contiguous_copy(const nb::ndarray<nb::ro>& a,
                                       const std::vector<int64_t>& shape, const std::string& n) {
  size_t count = 1;
  for (int64_t d : shape) count *= static_cast<size_t>(d);
  const size_t bytes = count * sizeof(float);
  void* p = std::aligned_alloc(64, ((bytes + 63) / 64) * 64);
  if (!p)
    raise_memory_error(n + ": cannot allocate " + std::to_string(bytes) +
                       " bytes for a C-contiguous copy of the " + shape_text(shape) + " array");
  std::shared_ptr<float> copy(static_cast<float*>(p), [](float* q) { std::free(q); });
  // Up to 4 dimensions, the missing leading ones of size 1.
  int64_t size[4] = {1, 1, 1, 1}, stride[4] = {0, 0, 0, 0};
  const size_t lead = 4 - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) {
    size[lead + i] = shape[i];
    stride[lead + i] = a.stride(i);
  }
  const auto* src = static_cast<const float*>(a.data());
  float* dst = copy.get();
  for (int64_t i0 = 0; i0 < size[0]; ++i0)
    for (int64_t i1 = 0; i1 < size[1]; ++i1)
      for (int64_t i2 = 0; i2 < size[2]; ++i2) {
        const float* row = src + i0 * stride[0] + i1 * stride[1] + i2 * stride[2];
        for (int64_t i3 = 0; i3 < size[3]; ++i3) *dst++ = row[i3 * stride[3]];
      }
  return copy;
}

}  // namespace

bool is_torch_tensor(nb::handle v) {
  const nb::handle torch = torch_module();
  if (!torch.is_valid() || v.is_none()) return false;
  const nb::object tensor = nb::getattr(torch, "Tensor", nb::none());
  if (tensor.is_none()) return false;
  const int r = PyObject_IsInstance(v.ptr(), tensor.ptr());
  if (r < 0) throw nb::python_error();  // a raising __class__ / __instancecheck__
  return r == 1;
}

nb::object torch_output(nb::object y) {
  // NumPy's __dlpack__: the tensor shares y's memory and keeps it alive.
  return torch_module().attr("from_dlpack")(y);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

Tensor as_tensor(nb::handle v, const char* name, size_t ndim, Strided strided) {
  Tensor t;
  const std::string n = name;
  const nb::object src = v.is_none()          ? nb::none()
                         : is_torch_tensor(v) ? dlpack_source(torch_source(v, n))
                                              : dlpack_source(v);
  if (used_capsule(src))
    throw conv::Error(n +
                      ": a DLPack capsule that was already imported (a capsule is consumed by "
                      "its first use; __dlpack__() must return a new one each call)");
  if (src.is_none() || !nb::try_cast(src, t.array, false)) not_an_array(v, n);
  const nb::ndarray<nb::ro>& a = t.array;
  if (a.device_type() != nb::device::cpu::value)
    throw conv::Error(n + ": expected an array in CPU memory, got DLPack device type " +
                      std::to_string(a.device_type()));
  if (a.dtype() != nb::dtype<float>()) {
    // Lanes alone differing read "expected float32, got float32" without them.
    const uint16_t lanes = a.dtype().lanes;
    throw conv::Error(n + ": expected dtype float32" + (lanes != 1 ? " with 1 lane" : "") +
                      ", got " + dtype_text(a.dtype()) +
                      (lanes != 1 ? " (a vector dtype of " + std::to_string(lanes) + " lanes)"
                                  : std::string(" (convert with .astype(numpy.float32))")));
  }
  for (size_t i = 0; i < a.ndim(); ++i) t.shape.push_back(static_cast<int64_t>(a.shape(i)));
  if (a.ndim() != ndim)
    throw conv::Error(n + ": expected " + std::to_string(ndim) + " dimensions, got " +
                      std::to_string(a.ndim()) + " with shape " + shape_text(t.shape));
  // Zero-size arrays first: their strides are meaningless (NumPy reports 0).
  const Layout layout = layout_of(n);
  for (size_t i = 0; i < ndim; ++i)
    if (t.shape[i] < 1)
      throw conv::Error(n + ": dimension " + std::to_string(i) +
                        (i < layout.dims.size() ? std::string(" (") + layout.dims[i] + ")" : "") +
                        " must be >= 1, got " + std::to_string(t.shape[i]) + " in shape " +
                        shape_text(t.shape));
  // C order; strides of size-1 dimensions do not matter.
  int64_t expect = 1;
  bool contiguous = true;
  for (size_t i = ndim; i-- > 0;) {
    if (t.shape[i] != 1 && a.stride(i) != expect) contiguous = false;
    expect *= t.shape[i];
  }
  t.bytes = static_cast<size_t>(expect) * sizeof(float);
  if (contiguous) {
    t.data = static_cast<const float*>(a.data());
    return t;
  }
  if (strided == Strided::kRefuse) {
    std::vector<int64_t> strides;
    for (size_t k = 0; k < ndim; ++k) strides.push_back(a.stride(k));
    throw conv::Error(n + ": expected a C-contiguous array, got strides " + shape_text(strides) +
                      " (elements) for shape " + shape_text(t.shape) + " (" + n +
                      " is written in place, so it is not copied)");
  }
  t.copy = contiguous_copy(a, t.shape, n);
  t.data = t.copy.get();
  return t;
}

float* output_arg(nb::handle v, const std::vector<int64_t>& shape,
                  const std::vector<const Tensor*>& inputs) {
  const Tensor out = as_tensor(v, "out", shape.size(), Strided::kRefuse);
  check_shape(out, "out", shape, "(N, K, OH, OW)");
  if (nb::hasattr(v, "flags")) {
    const nb::object flags = v.attr("flags");
    if (nb::hasattr(flags, "writeable") && !nb::cast<bool>(flags.attr("writeable")))
      throw conv::Error("out: the array is read-only (flags.writeable is False)");
  }
  const auto* begin = reinterpret_cast<const char*>(out.data);
  const char* end = begin + out.bytes;
  for (const Tensor* in : inputs) {
    if (!in) continue;  // (a copied input is its own memory: out may overlap the original)
    const auto* b = reinterpret_cast<const char*>(in->data);
    if (b < end && begin < b + in->bytes)
      throw conv::Error(
          "out: shares memory with an input; the convolution reads its inputs while "
          "it writes out, so pass a separate array");
  }
  return const_cast<float*>(out.data);
}

void check_shape(const Tensor& t, const char* name, const std::vector<int64_t>& want,
                 const char* what) {
  if (t.shape != want)
    throw conv::Error(std::string(name) + ": expected shape " + what + " = " + shape_text(want) +
                      ", got " + shape_text(t.shape));
}

void raise_memory_error(const std::string& message) {
  set_error(PyExc_MemoryError, message);
  throw nb::python_error();
}

NumpyArray new_array(const std::vector<int64_t>& shape, float** data, const char* name) {
  size_t count = 1;
  std::vector<size_t> dims;
  std::string text;
  for (int64_t d : shape) {
    count *= static_cast<size_t>(d);  // ConvProblem::validate keeps the byte size in 64 bits
    dims.push_back(static_cast<size_t>(d));
    text += (text.empty() ? "" : "x") + std::to_string(d);
  }
  const size_t bytes = count * sizeof(float);
  const size_t rounded = ((bytes + 63) / 64) * 64;
  void* p = rounded >= bytes ? std::aligned_alloc(64, rounded > 0 ? rounded : 64) : nullptr;
  if (!p)
    raise_memory_error(std::string(name) + ": cannot allocate " + std::to_string(bytes) +
                       " bytes for the " + text + " output");
  nb::capsule owner(p, [](void* q) noexcept { std::free(q); });
  *data = static_cast<float*>(p);
  return NumpyArray(p, dims.size(), dims.data(), owner);
}

}  // namespace convtune_py
