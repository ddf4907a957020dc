// Python argument forms: int-or-pair sizes, padding forms, Problem-or-descriptor.
#include "args.hpp"

#include <nanobind/stl/string.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "conv/error.hpp"
#include "quoted.hpp"

namespace convtune_py {

namespace {

std::string py_type_name(nb::handle v) {
  return Py_TYPE(v.ptr())->tp_name;
}

// What a message says it got: "None", or the type and the repr ("str '1'").
std::string got_text(nb::handle v) {
  return v.is_none() ? std::string("None") : type_text(v) + " " + repr_text(v);
}

// Python's bool or numpy's (not a bool subclass: PyBool_Check misses it).
bool is_bool(nb::handle v) {
  if (PyBool_Check(v.ptr())) return true;
  const std::string type = py_type_name(v);
  return type == "bool" || type == "numpy.bool_" || type == "numpy.bool";
}

// A Python int, or an integer scalar that says it is one through __index__ (numpy.int64 from
// an array's shape); bools excluded, Python's and numpy's: stride=True is a mistake, not 1.
bool is_int(nb::handle v) {
  if (is_bool(v)) return false;
  if (PyLong_Check(v.ptr())) return true;
  if (!PyIndex_Check(v.ptr()) || PyFloat_Check(v.ptr())) return false;
  // numpy.array([1, 1]) has __index__ but raises TypeError from it: not an int (its message
  // had been "must be in [0, 2^31], got array([1, 1])").
  const nb::object index = nb::steal(PyNumber_Index(v.ptr()));
  if (index.is_valid()) return true;
  // KeyboardInterrupt, MemoryError, ...: not a verdict on the type.
  if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw nb::python_error();
  PyErr_Clear();
  return false;
}

// v as int64; false when it does not fit (or its __index__ fails).
bool to_int64(nb::handle v, int64_t* out) {
  nb::object index = nb::steal(PyNumber_Index(v.ptr()));
  if (!index.is_valid()) {
    PyErr_Clear();
    return false;
  }
  return nb::try_cast<int64_t>(index, *out);
}

// An int that does not fit int64 is reported with the argument's range, not as a wrong type.
[[noreturn]] void out_of_range(const std::string& name, const char* range, nb::handle v) {
  throw conv::Error(name + ": must be in " + range + ", got " + repr_text(v));
}

bool as_int(nb::handle v, int64_t* out, const char* name, const char* range) {
  if (!is_int(v)) return false;
  if (!to_int64(v, out)) out_of_range(name, range, v);
  return true;
}

// The items of a tuple or list; false for anything else.
bool as_ints(nb::handle v, std::vector<int64_t>* out, const char* name, const char* range) {
  if (!nb::isinstance<nb::tuple>(v) && !nb::isinstance<nb::list>(v)) return false;
  out->clear();
  for (nb::handle item : v) {
    int64_t x = 0;
    if (!as_int(item, &x, name, range)) return false;
    out->push_back(x);
  }
  return true;
}

}  // namespace

std::string message_text(nb::handle v) {
  const nb::str text = nb::str(v);  // raises what str(v) raises
  // A str's UTF-8 fails only at lone surrogates: as Python prints them.
  const nb::bytes utf8 =
      nb::steal<nb::bytes>(PyUnicode_AsEncodedString(text.ptr(), "utf-8", "backslashreplace"));
  if (!utf8.is_valid()) throw nb::python_error();
  return conv::escaped(std::string_view(utf8.c_str(), utf8.size()));
}

std::string repr_text(nb::handle v) {
  return message_text(nb::repr(v));
}

std::string type_text(nb::handle v) {
  return conv::escaped(py_type_name(v));
}

void set_error(PyObject* type, const std::string& message) {
  PyObject* text = PyUnicode_DecodeUTF8(message.data(), static_cast<Py_ssize_t>(message.size()),
                                        "backslashreplace");
  if (!text) return;  // MemoryError set instead
  PyErr_SetObject(type, text);
  Py_DECREF(text);
}

int64_t int_arg(nb::handle v, const std::string& name, const char* range) {
  int64_t x = 0;
  if (!is_int(v)) throw conv::Error(name + ": expected an int, got " + got_text(v));
  if (!to_int64(v, &x)) out_of_range(name, range, v);
  return x;
}

bool bool_arg(nb::handle v, const char* name) {
  // Only a bool: check="no" or store=0 would otherwise pass by truthiness.
  if (is_bool(v)) return PyObject_IsTrue(v.ptr()) == 1;
  throw conv::Error(std::string(name) + ": expected a bool, got " + got_text(v));
}

double number_arg(nb::handle v, const char* name) {
  if (!is_bool(v)) {                             // budget_s=True is a mistake, not 1 second
    const double x = PyFloat_AsDouble(v.ptr());  // float, int, __float__ or __index__
    if (x != -1.0 || !PyErr_Occurred()) return x;
    // An int past double's range (10**400) is a number, just too large: the range check names
    // it, as int_arg's callers name an int beyond 64 bits.
    const bool overflow = PyErr_ExceptionMatches(PyExc_OverflowError) && is_int(v);
    PyErr_Clear();
    if (overflow) {
      const nb::int_ zero(0);
      return PyObject_RichCompareBool(v.ptr(), zero.ptr(), Py_LT) == 1 ? -HUGE_VAL : HUGE_VAL;
    }
  }
  throw conv::Error(std::string(name) + ": expected a number, got " + got_text(v));
}

std::optional<double> optional_number_arg(nb::handle v, const char* name) {
  if (v.is_none()) return std::nullopt;
  return number_arg(v, name);
}

std::string str_arg(nb::handle v, const char* name) {
  if (!nb::isinstance<nb::str>(v))
    throw conv::Error(std::string(name) + ": expected a str, got " + got_text(v));
  Py_ssize_t size = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(v.ptr(), &size);
  if (!utf8) {
    if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) throw nb::python_error();
    PyErr_Clear();  // this message names the argument and the character instead
    const Py_ssize_t length = PyUnicode_GetLength(v.ptr());
    for (Py_ssize_t i = 0; i < length; ++i) {
      const Py_UCS4 c = PyUnicode_ReadChar(v.ptr(), i);
      if (c >= 0xd800 && c <= 0xdfff) {
        char text[16];
        std::snprintf(text, sizeof text, "'\\u%04x'", static_cast<unsigned>(c));
        throw conv::Error(std::string(name) + ": not encodable as UTF-8: lone surrogate " + text +
                          " at index " + std::to_string(i) + " (expected UTF-8 text)");
      }
    }
    throw conv::Error(std::string(name) + ": not encodable as UTF-8 (expected UTF-8 text)");
  }
  return std::string(utf8, static_cast<size_t>(size));
}

std::optional<std::string> optional_str_arg(nb::handle v, const char* name) {
  if (v.is_none()) return std::nullopt;
  return str_arg(v, name);
}

std::string path_arg(nb::handle v, const char* name) {
  if (nb::isinstance<nb::str>(v) || nb::isinstance<nb::bytes>(v) || nb::hasattr(v, "__fspath__")) {
    // The bytes the file system sees (os.fsencode): a str that came from a file name which is
    // not UTF-8 holds lone surrogates for those bytes (PEP 383), and encodes back to them.
    nb::object raw;
    try {
      raw = nb::module_::import_("os").attr("fsencode")(v);
    } catch (nb::python_error& e) {
      // A surrogate outside \udc80-\udcff encodes to no bytes; __fspath__ may return another
      // type. Python's message, naming the argument.
      if (!e.matches(PyExc_UnicodeEncodeError) && !e.matches(PyExc_TypeError)) throw;
      throw conv::Error(std::string(name) + ": not a file name: " +
                        message_text(e.type().attr("__name__")) + ": " + message_text(e.value()));
    }
    if (nb::isinstance<nb::bytes>(raw)) {
      const nb::bytes b = nb::borrow<nb::bytes>(raw);
      const std::string out(b.c_str(), b.size());
      // The C library would stop at the NUL and use another file than the one named (as open()
      // refuses such a path with ValueError).
      if (out.find('\0') != std::string::npos)
        throw conv::Error(std::string(name) + ": a path must not contain a NUL character");
      // As the CLI's --db '': an empty path names no file (None is "the default").
      if (out.empty()) throw conv::Error(std::string(name) + ": empty path");
      return out;
    }
  }
  throw conv::Error(std::string(name) + ": expected a path (str, bytes or os.PathLike), got " +
                    (v.is_none() ? std::string("None") : type_text(v)));
}

nb::object path_object(const std::string& path) {
  return nb::module_::import_("os").attr("fsdecode")(nb::bytes(path.data(), path.size()));
}

std::optional<std::string> optional_path_arg(nb::handle v, const char* name) {
  if (v.is_none()) return std::nullopt;
  return path_arg(v, name);
}

std::pair<int64_t, int64_t> int_or_pair(nb::handle v, const char* name) {
  int64_t x = 0;
  if (as_int(v, &x, name, kSizeRange)) return {x, x};
  std::vector<int64_t> xs;
  if (as_ints(v, &xs, name, kSizeRange) && xs.size() == 2) return {xs[0], xs[1]};
  throw conv::Error(std::string(name) + ": expected an int or a pair (h, w) of ints, got " +
                    type_text(v) + " " + repr_text(v));
}

namespace {

// torch's padding='same' for one axis: a total of dilation * (kernel - 1), the odd one after
// (bottom / right), as aten's _convolution_mode splits it (it pads the input by the difference
// on the far side). Sizes out of range are left to validate(), which names them.
std::pair<int64_t, int64_t> same_pads(int64_t kernel, int64_t dilation) {
  constexpr int64_t kMax = int64_t{1} << 31;
  if (kernel < 1 || kernel > kMax || dilation < 1 || dilation > kMax) return {0, 0};
  const int64_t total = dilation * (kernel - 1);
  return {total / 2, total - total / 2};
}

// padding= as torch takes it, and pads= (top, left, bottom, right), into p.
const char* set_padding(conv::ConvProblem& p, nb::handle padding, nb::handle pads) {
  int64_t x = 0;
  std::vector<int64_t> xs;
  if (!pads.is_none()) {
    if (!as_ints(pads, &xs, "pads", kPadRange) || xs.size() != 4)
      throw conv::Error("pads: expected a 4-tuple (top, left, bottom, right) of ints, got " +
                        got_text(pads));
    // padding=0 is the default: anything else beside pads= is two answers to one question.
    if (!as_int(padding, &x, "padding", kPadRange) || x != 0)
      throw conv::Error(
          "pads: give padding= or pads=, not both (got padding=" + repr_text(padding) + ")");
    p.pad_top = xs[0], p.pad_left = xs[1], p.pad_bottom = xs[2], p.pad_right = xs[3];
    return "pads";
  }
  if (as_int(padding, &x, "padding", kPadRange)) {
    p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = x;
    return "padding";
  }
  if (nb::isinstance<nb::str>(padding)) {
    const std::string mode = str_arg(padding, "padding");
    if (mode == "valid") {
      p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 0;
      return "padding";
    }
    if (mode == "same") {
      if (p.stride_h != 1 || p.stride_w != 1)
        throw conv::Error(
            "padding: 'same' needs stride 1 (as torch.nn.functional.conv2d), got "
            "stride (" +
            std::to_string(p.stride_h) + ", " + std::to_string(p.stride_w) +
            "); give the padding as ints or pads=(top, left, bottom, right)");
      std::tie(p.pad_top, p.pad_bottom) = same_pads(p.R, p.dilation_h);
      std::tie(p.pad_left, p.pad_right) = same_pads(p.S, p.dilation_w);
      return "padding";
    }
    throw conv::Error("padding: expected 'same' or 'valid' (lower case, as torch), got str " +
                      repr_text(padding));
  }
  if (as_ints(padding, &xs, "padding", kPadRange)) {
    if (xs.size() == 2) {
      p.pad_top = p.pad_bottom = xs[0], p.pad_left = p.pad_right = xs[1];
      return "padding";
    }
    if (xs.size() == 4)
      throw conv::Error(
          "padding: a 4-tuple is ambiguous (F.pad's order is (left, right, top, bottom), "
          "ONNX's (top, left, bottom, right)); for asymmetric padding pass "
          "pads=(top, left, bottom, right), got padding=" +
          repr_text(padding));
  }
  throw conv::Error("padding: expected an int, a pair (h, w) of ints, 'same' or 'valid', got " +
                    got_text(padding));
}

}  // namespace

const char* set_geometry(conv::ConvProblem& p, nb::handle stride, nb::handle padding,
                         nb::handle dilation, nb::handle groups, nb::handle pads) {
  std::tie(p.stride_h, p.stride_w) = int_or_pair(stride, "stride");
  std::tie(p.dilation_h, p.dilation_w) = int_or_pair(dilation, "dilation");
  p.groups = int_arg(groups, "groups", kSizeRange);
  return set_padding(p, padding, pads);  // 'same' reads the stride, dilation and kernel
}

namespace {

// The Python argument (and the part of it) that holds a ConvProblem field.
std::string argument_of(const std::string& field, FieldNames names, const std::string& pad) {
  static const std::pair<const char*, const char*> kTensorDims[] = {
      {"N", "x: dimension 0 (N)"}, {"C", "x: dimension 1 (C)"}, {"H", "x: dimension 2 (H)"},
      {"W", "x: dimension 3 (W)"}, {"K", "w: dimension 0 (K)"}, {"R", "w: dimension 2 (R)"},
      {"S", "w: dimension 3 (S)"}};
  if (names == FieldNames::kTensors)
    for (const auto& [f, text] : kTensorDims)
      if (field == f) return text;
  // pads= is (top, left, bottom, right); padding= names the side.
  static const char* const kSides[] = {"top", "left", "bottom", "right"};
  for (int i = 0; i < 4; ++i)
    if (field == std::string("pad_") + kSides[i])
      return pad == "pads" ? "pads[" + std::to_string(i) + "] (" + kSides[i] + ")"
                           : pad + " (" + kSides[i] + ")";
  for (const char* pair : {"stride", "dilation"})
    for (const char* axis : {"h", "w"})
      if (field == std::string(pair) + "_" + axis) return std::string(pair) + " (" + axis + ")";
  return field;  // N, ..., groups, name: the Problem keyword of that name
}

}  // namespace

void validate_args(const conv::ConvProblem& p, FieldNames names, const char* pad_name) {
  try {
    p.validate();
  } catch (const conv::Error& e) {
    const std::string what = e.what(), prefix = "ConvProblem.";
    const size_t colon = what.find(": ");
    if (what.compare(0, prefix.size(), prefix) != 0 || colon == std::string::npos) throw;
    const std::string field = what.substr(prefix.size(), colon - prefix.size());
    throw conv::Error(argument_of(field, names, pad_name) + what.substr(colon));
  }
}

std::string python_message(const std::string& message) {
  std::string out = message;
  size_t i = 0;
  while ((i = out.find("ConvProblem.")) != std::string::npos)
    out.erase(i, std::strlen("ConvProblem."));
  // "name (TuneOptions::field)": the name is the Python keyword already.
  for (const char* options : {" (TuneOptions::", " (ForwardOptions::"}) {
    size_t end = 0;
    while ((i = out.find(options)) != std::string::npos &&
           (end = out.find(')', i)) != std::string::npos)
      out.erase(i, end + 1 - i);
  }
  return out;
}

conv::ConvProblem to_problem(nb::handle v, const char* name) {
  conv::ConvProblem p;
  if (nb::try_cast<conv::ConvProblem>(v, p)) return p;
  if (nb::isinstance<nb::str>(v)) {
    const std::string text = str_arg(v, name);  // a lone surrogate is named, not std::bad_cast
    try {
      return conv::parse_descriptor(text);
    } catch (const conv::Error& e) {
      throw conv::Error(std::string(name) + ": " + e.what());  // which argument held the text
    }
  }
  throw conv::Error(std::string(name) +
                    ": expected a convtune.Problem or a benchdnn descriptor string, got " +
                    type_text(v));
}

}  // namespace convtune_py
