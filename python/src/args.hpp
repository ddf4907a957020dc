// Python argument forms shared by Problem, conv2d and Plan: int-or-pair sizes, the padding forms,
// and "a Problem or a descriptor string".
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "conv/problem.hpp"

namespace convtune_py {

namespace nb = nanobind;

/// The documented ranges of a problem's sizes and of its padding, as messages quote them.
inline constexpr const char* kSizeRange = "[1, 2^31]";
inline constexpr const char* kPadRange = "[0, 2^31]";

/// A Python int (bool refused) that fits int64. Throws conv::Error "<name>: expected an int, got
/// <type> <repr>", or for an int beyond int64 "<name>: must be in <range>, got <value>" (`range`
/// is the documented one, e.g. kSizeRange; callers check the range itself later).
int64_t int_arg(nb::handle v, const std::string& name, const char* range);

/// True or False (numpy.bool_ too). Throws conv::Error "<name>: expected a bool, got <type>
/// <repr>".
bool bool_arg(nb::handle v, const char* name);

/// A real number as double: an int, a float or anything with __float__ (numpy.float32), bools
/// refused; an int beyond double's range is +-infinity (callers check the range). Throws
/// conv::Error "<name>: expected a number, got <type> <repr>".
double number_arg(nb::handle v, const char* name);

/// None, or a number as number_arg.
std::optional<double> optional_number_arg(nb::handle v, const char* name);

/// A str, as UTF-8 (NULs kept). Throws conv::Error "<name>: expected a str, got <type> <repr>",
/// or "<name>: not encodable as UTF-8: lone surrogate '\udcff' at index <i>".
std::string str_arg(nb::handle v, const char* name);

/// Python text for a message: str(v) as UTF-8, lone surrogates as \udcXX and control characters
/// (NUL too) as \xHH, so a hostile __repr__ or __str__ neither cuts nor garbles the message.
std::string message_text(nb::handle v);

/// repr(v) as message_text.
std::string repr_text(nb::handle v);

/// The name of v's type, for messages ("numpy.ndarray").
std::string type_text(nb::handle v);

/// Sets the Python error `type(message)`, bytes of `message` that are not UTF-8 (from a path
/// that is not) as \xHH: PyErr_SetString would raise UnicodeDecodeError instead.
void set_error(PyObject* type, const std::string& message);

/// None, or a str as str_arg.
std::optional<std::string> optional_str_arg(nb::handle v, const char* name);

/// A file path: str, bytes or os.PathLike, as the bytes the file system sees (os.fsencode).
/// Throws conv::Error naming `name` for another type, an empty path, a NUL character, or what
/// os.fsencode refuses (a surrogate outside \udc80-\udcff, __fspath__ of another type).
std::string path_arg(nb::handle v, const char* name);

/// A path back to Python as str (os.fsdecode: bytes that are not UTF-8 as lone surrogates).
nb::object path_object(const std::string& path);

/// None, or a path as path_arg.
std::optional<std::string> optional_path_arg(nb::handle v, const char* name);

/// An int, or a pair (h, w) of ints: (h, w). Throws conv::Error naming `name` otherwise.
std::pair<int64_t, int64_t> int_or_pair(nb::handle v, const char* name);

/// Sets the stride, padding, dilation and groups of `p` (whose R and S are set) from Python
/// arguments, as torch.nn.functional.conv2d takes them. `padding`: an int (every side), a pair
/// (h, w) (top = bottom = h, left = right = w), "valid" (0) or "same" (stride 1 only; the output
/// is H x W: a total of dilation * (kernel - 1) per axis, the odd one on the bottom / right, as
/// torch splits it). `pads`: None, or (top, left, bottom, right) as ONNX orders them, for
/// asymmetric padding; `padding` must then be left at 0. A 4-tuple `padding` is refused: its
/// order would be a guess (F.pad's is (left, right, top, bottom)). Throws conv::Error naming
/// "stride", "padding", "pads", "dilation" or "groups". Returns the padding argument's name
/// ("padding" or "pads") for validate_args.
const char* set_geometry(conv::ConvProblem& p, nb::handle stride, nb::handle padding,
                         nb::handle dilation, nb::handle groups, nb::handle pads);

/// How validate_args names a problem's fields: as the dimensions of conv2d's tensors
/// ("x: dimension 2 (H)") or as Problem's keywords ("H").
enum class FieldNames { kTensors, kKeywords };

/// p.validate(), its message naming the Python argument instead of the C++ field:
/// "ConvProblem.stride_w: must be >= 1, got 0" becomes "stride (w): must be >= 1, got 0",
/// "ConvProblem.pad_bottom: ..." "pads[2] (bottom): ..." (`pad_name` "pads") or
/// "padding (bottom): ...", and "ConvProblem.H: ..." "x: dimension 2 (H): ..." (kTensors) or
/// "H: ..." (kKeywords).
void validate_args(const conv::ConvProblem& p, FieldNames names, const char* pad_name);

/// A library message as Python shows it: the C++ names that remain after the bindings named the
/// argument they could ("ConvProblem.stride_h: ..." from a Problem's fields, "find_mode
/// (ForwardOptions::find_mode): ...") without the C++ part ("stride_h: ...", "find_mode: ...");
/// stride_h is then the Problem attribute of that name.
std::string python_message(const std::string& message);

/// A convtune.Problem, or a benchdnn descriptor string (parsed). Throws conv::Error naming `name`.
conv::ConvProblem to_problem(nb::handle v, const char* name = "problem");

}  // namespace convtune_py
