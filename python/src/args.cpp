// Python argument forms: int-or-pair sizes, padding forms, Problem-or-descriptor.
#include "args.hpp"

#include <nanobind/stl/string.h>

#include <string>
#include <tuple>
#include <vector>

#include "conv/error.hpp"

namespace convtune_py {

namespace {

std::string py_type_name(nb::handle v) {
  return Py_TYPE(v.ptr())->tp_name;
}

std::string repr_text(nb::handle v) {
  return nb::repr(v).c_str();
}

// A Python int (bool excluded: stride=True is a mistake, not 1).
bool as_int(nb::handle v, int64_t* out) {
  if (!PyLong_Check(v.ptr()) || PyBool_Check(v.ptr())) return false;
  return nb::try_cast<int64_t>(v, *out);
}

// The items of a tuple or list; false for anything else.
bool as_ints(nb::handle v, std::vector<int64_t>* out) {
  if (!nb::isinstance<nb::tuple>(v) && !nb::isinstance<nb::list>(v)) return false;
  out->clear();
  for (nb::handle item : v) {
    int64_t x = 0;
    if (!as_int(item, &x)) return false;
    out->push_back(x);
  }
  return true;
}

}  // namespace

std::pair<int64_t, int64_t> int_or_pair(nb::handle v, const char* name) {
  int64_t x = 0;
  if (as_int(v, &x)) return {x, x};
  std::vector<int64_t> xs;
  if (as_ints(v, &xs) && xs.size() == 2) return {xs[0], xs[1]};
  throw conv::Error(std::string(name) + ": expected an int or a pair (h, w) of ints, got " +
                    py_type_name(v) + " " + repr_text(v));
}

std::array<int64_t, 4> padding_arg(nb::handle v) {
  int64_t x = 0;
  if (as_int(v, &x)) return {x, x, x, x};
  std::vector<int64_t> xs;
  if (as_ints(v, &xs)) {
    if (xs.size() == 2) return {xs[0], xs[0], xs[1], xs[1]};
    if (xs.size() == 4) return {xs[0], xs[1], xs[2], xs[3]};
  }
  throw conv::Error(
      "padding: expected an int, a pair (h, w) or a 4-tuple (top, bottom, left, right) of ints, "
      "got " +
      py_type_name(v) + " " + repr_text(v));
}

void set_geometry(conv::ConvProblem& p, nb::handle stride, nb::handle padding, nb::handle dilation,
                  int64_t groups) {
  std::tie(p.stride_h, p.stride_w) = int_or_pair(stride, "stride");
  const auto pad = padding_arg(padding);
  p.pad_top = pad[0], p.pad_bottom = pad[1], p.pad_left = pad[2], p.pad_right = pad[3];
  std::tie(p.dilation_h, p.dilation_w) = int_or_pair(dilation, "dilation");
  p.groups = groups;
}

conv::ConvProblem to_problem(nb::handle v, const char* name) {
  conv::ConvProblem p;
  if (nb::try_cast<conv::ConvProblem>(v, p)) return p;
  if (nb::isinstance<nb::str>(v)) return conv::parse_descriptor(nb::cast<std::string>(v));
  throw conv::Error(std::string(name) +
                    ": expected a convtune.Problem or a benchdnn descriptor string, got " +
                    py_type_name(v));
}

}  // namespace convtune_py
