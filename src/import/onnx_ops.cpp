// The shape rules of the ONNX operators between a network's input and its convolutions, after
// the ONNX operator specification (onnx/docs/Operators.md). Every attribute and constant input is
// range-checked before arithmetic; dims stay in [0, 2^31] or the node is refused. A rule that
// cannot infer (a value computed at run time, an unknown dim where a number is needed) leaves its
// outputs unknown and says why.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <unordered_map>

#include "onnx_shapes.hpp"
#include "quoted.hpp"

namespace conv::import::onnx_import {

namespace {

Dim num(int64_t v) {
  return {v, ""};
}

/// `v` as text, an integer where it is one (a cast of a double outside int64 is undefined).
std::string text(double v) {
  if (std::abs(v) < 9e18 && v == std::floor(v)) return std::to_string(static_cast<int64_t>(v));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

/// `v` as a dim of output `what`, refusing the node when it is negative or over 2^31.
Dim checked(const OpIo& io, double v, const std::string& what) {
  if (!(v >= 0 && v <= static_cast<double>(kMaxValue)))
    io.at.fail(what + ": " + text(v) + " is out of range [0, 2^31]");
  return num(static_cast<int64_t>(v));
}

/// The product of dims [from, to) of `t`, or -1 when one is not a number.
double product(const TensorInfo& t, int from, int to) {
  double p = 1;
  for (int i = from; i < to; ++i) {
    if (!t.dims[static_cast<size_t>(i)].known()) return -1;
    p *= static_cast<double>(t.dims[static_cast<size_t>(i)].value);
  }
  return p;
}

/// An axis attribute or value in [-rank, rank) (or [-rank, rank] when `inclusive`) as [0, rank).
int axis(const OpIo& io, double a, int rank, const std::string& what, bool inclusive = false) {
  const int hi = inclusive ? rank : rank - 1;
  if (!(a >= -rank && a <= hi) || a != std::floor(a))
    io.at.fail(what + ": " + std::to_string(static_cast<int64_t>(a)) + " is out of range [" +
               std::to_string(-rank) + ", " + std::to_string(hi) + "] for rank " +
               std::to_string(rank));
  return static_cast<int>(a < 0 ? a + rank : a);
}

/// Integer constants (axes, shapes, pads) from input `i` or attribute `attr`: the attribute when
/// the node has it (older opsets), else the input; nullptr (why set) when neither is readable.
bool ints_from(OpIo& io, size_t i, const char* attr, const char* role, std::vector<int64_t>& out,
               bool optional = false) {
  if (const onnx::AttributeProto* a = *attr ? find_attr(io.at.node, attr) : nullptr) {
    if (type_of(*a) != onnx::AttributeProto::INTS)
      io.at.fail("attribute " + quoted(attr) + ": expected INTS");
    out.assign(a->ints().begin(), a->ints().end());
    return true;
  }
  if (static_cast<int>(i) >= io.at.node.input_size() ||
      io.at.node.input(static_cast<int>(i)).empty()) {
    if (optional) return false;
    io.why = std::string("its ") + role + " is missing";
    return false;
  }
  const std::vector<double>* v = io.values(i, role);
  if (!v) return false;
  out.clear();
  for (const double d : *v) {
    if (d != std::floor(d)) io.at.fail(std::string("input ") + role + ": value is not an integer");
    // INT64_MAX ("to the end" in Slice) and beyond: still huge after the conversion.
    const double huge = 4.6e18;
    out.push_back(static_cast<int64_t>(std::clamp(d, -huge, huge)));
  }
  return true;
}

bool need(OpIo& io, size_t i) {
  if (io.input(i)) return true;
  if (io.why.empty()) io.why = "the shape of an input is unknown";
  return false;
}

void set_out(OpIo& io, size_t o, std::vector<Dim> dims) {
  if (o >= io.out.size()) return;
  io.out[o].ranked = true;
  io.out[o].dims = std::move(dims);
}

void set_value(OpIo& io, size_t o, std::vector<double> v) {
  if (o >= io.out.size() || v.size() > TensorInfo::kMaxValues) return;
  for (const double d : v)
    if (!(std::abs(d) <= 9007199254740992.0) && std::isfinite(d)) return;  // inexact past 2^53
  io.out[o].has_value = true;
  io.out[o].value = std::move(v);
}

// --- elementwise -------------------------------------------------------------------------------

/// Output 0 (and every other output, as Dropout's mask) has input 0's shape and value.
void same_shape(OpIo& io) {
  if (!need(io, 0)) return;
  for (size_t o = 0; o < io.out.size(); ++o) {
    set_out(io, o, io.in[0]->dims);
    if (o == 0 && io.in[0]->has_value) set_value(io, 0, io.in[0]->value);
  }
}

/// Only output 0 has input 0's shape (BatchNormalization's running stats, LayerNormalization's
/// mean are other shapes and never a Conv's input).
void first_same_shape(OpIo& io) {
  if (!need(io, 0)) return;
  set_out(io, 0, io.in[0]->dims);
}

/// Multidirectional (numpy) broadcasting of all inputs; values for small 1-D arithmetic.
void broadcast(OpIo& io) {
  std::vector<Dim> dims;
  for (size_t i = 0; i < io.in.size(); ++i) {
    if (io.at.node.input(static_cast<int>(i)).empty()) continue;
    if (!need(io, i)) return;
    const auto& d = io.in[i]->dims;
    if (d.size() > dims.size()) dims.insert(dims.begin(), d.size() - dims.size(), num(1));
    for (size_t k = 0; k < d.size(); ++k) {
      Dim& o = dims[dims.size() - d.size() + k];
      const Dim& b = d[k];
      if (b.known() && b.value == 1) continue;
      if (o.known() && o.value == 1)
        o = b;
      else if (o.known() && b.known() && o.value != b.value)
        io.at.fail("inputs cannot be broadcast: " + shape_string(*io.in[0]) + " and " +
                   shape_string(*io.in[i]));
      else if (!o.known() && b.known())
        o = b;
      else if (!o.known() && !b.known() && o.param != b.param)
        o = Dim{};
    }
  }
  set_out(io, 0, dims);
  // Shape arithmetic (e.g. H * 2 for Resize sizes) on 1-D constants.
  const std::string& op = io.at.node.op_type();
  if (io.in.size() != 2 || !io.in[0] || !io.in[1] || !io.in[0]->has_value || !io.in[1]->has_value ||
      (op != "Add" && op != "Sub" && op != "Mul" && op != "Div"))
    return;
  const auto &a = io.in[0]->value, &b = io.in[1]->value;
  if (a.size() != b.size() && a.size() != 1 && b.size() != 1) return;
  std::vector<double> v(std::max(a.size(), b.size()));
  for (size_t k = 0; k < v.size(); ++k) {
    const double x = a[a.size() == 1 ? 0 : k], y = b[b.size() == 1 ? 0 : k];
    if (op == "Div" && y == 0) return;
    v[k] = op == "Add" ? x + y : op == "Sub" ? x - y : op == "Mul" ? x * y : std::trunc(x / y);
  }
  set_value(io, 0, v);
}

// --- convolution and pooling -------------------------------------------------------------------

/// Output spatial size of a window sliding over `in` (ONNX convPoolShapeInference; ceil_mode as
/// PyTorch and ONNX Runtime: the last window must start inside the input or its left pad).
Dim window_out(const OpIo& io, const Dim& in, int64_t k, int64_t s, int64_t d, int64_t pb,
               int64_t pe, const std::string& auto_pad, bool ceil_mode, int axis) {
  if (!in.known()) return {};
  const double extent = static_cast<double>((k - 1) * d + 1);  // k, d <= 2^31: exact in double
  const double x = static_cast<double>(in.value);
  const std::string what = "output dimension " + std::to_string(axis);
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER")
    return checked(io, std::ceil(x / s), what);
  if (auto_pad == "VALID") {
    if (x < extent)
      io.at.fail("input dimension " + std::to_string(axis) + " = " + std::to_string(in.value) +
                 " is smaller than the window (" + std::to_string(static_cast<int64_t>(extent)) +
                 ")");
    return checked(io, std::floor((x - extent) / s) + 1, what);
  }
  const double span = x + static_cast<double>(pb + pe) - extent;
  if (span < 0)
    io.at.fail("input dimension " + std::to_string(axis) + " = " + std::to_string(in.value) +
               " plus pads is smaller than the window (" +
               std::to_string(static_cast<int64_t>(extent)) + ")");
  double out = (ceil_mode ? std::ceil(span / s) : std::floor(span / s)) + 1;
  if (ceil_mode && (out - 1) * s >= x + static_cast<double>(pb)) out -= 1;
  return checked(io, out, what);
}

/// Conv, ConvInteger, QLinearConv (X and W at `x`, `w`), MaxPool, AveragePool, LpPool (`w` < 0:
/// the window is kernel_shape).
void conv_pool(OpIo& io, size_t x, int w) {
  if (!need(io, x)) return;
  const TensorInfo& X = *io.in[x];
  if (X.rank() < 3)
    io.at.fail("input X: expected at least 3 dims (N, C, spatial), got " + shape_string(X));
  const int sp = X.rank() - 2;
  const TensorInfo* W = w >= 0 ? io.input(static_cast<size_t>(w)) : nullptr;
  if (w >= 0 && W && W->rank() != X.rank())
    io.at.fail("input W " + shape_string(*W) + ": rank differs from X's " + shape_string(X));
  std::vector<int64_t> kernel = ints_attr(io.at, "kernel_shape", static_cast<size_t>(sp), 1, {});
  if (kernel.empty()) {
    if (w < 0) io.at.fail("attribute \"kernel_shape\": missing (a pooling node needs it)");
    if (!W) return void(io.why = "the shape of its weights is unknown");
    for (int i = 0; i < sp; ++i) {
      const Dim& d = W->dims[static_cast<size_t>(i + 2)];
      if (!d.known() || d.value < 1) return void(io.why = "its weights' spatial dims are unknown");
      kernel.push_back(d.value);
    }
  }
  const auto strides = ints_attr(io.at, "strides", static_cast<size_t>(sp), 1,
                                 std::vector<int64_t>(static_cast<size_t>(sp), 1));
  const auto dilations = ints_attr(io.at, "dilations", static_cast<size_t>(sp), 1,
                                   std::vector<int64_t>(static_cast<size_t>(sp), 1));
  const auto pads = ints_attr(io.at, "pads", static_cast<size_t>(2 * sp), 0,
                              std::vector<int64_t>(static_cast<size_t>(2 * sp), 0));
  const std::string auto_pad = auto_pad_attr(io.at);
  const bool ceil_mode = int_attr(io.at, "ceil_mode", 0, 0) != 0;
  std::vector<Dim> out{X.dims[0], w >= 0 ? (W ? W->dims[0] : Dim{}) : X.dims[1]};
  for (int i = 0; i < sp; ++i) {
    const auto k = static_cast<size_t>(i);
    out.push_back(window_out(io, X.dims[k + 2], kernel[k], strides[k], dilations[k], pads[k],
                             pads[k + static_cast<size_t>(sp)], auto_pad, ceil_mode, i + 2));
  }
  set_out(io, 0, out);
  set_out(io, 1, out);  // MaxPool's Indices
}

void conv(OpIo& io) {
  conv_pool(io, 0, 1);
}
void qlinear_conv(OpIo& io) {
  conv_pool(io, 0, 3);
}
void pool(OpIo& io) {
  conv_pool(io, 0, -1);
}

void global_pool(OpIo& io) {
  if (!need(io, 0)) return;
  const TensorInfo& X = *io.in[0];
  if (X.rank() < 2) io.at.fail("input X: expected at least 2 dims, got " + shape_string(X));
  std::vector<Dim> out{X.dims[0], X.dims[1]};
  out.resize(X.dims.size(), num(1));
  set_out(io, 0, out);
}

// --- layout ------------------------------------------------------------------------------------

void flatten(OpIo& io) {
  if (!need(io, 0)) return;
  const TensorInfo& X = *io.in[0];
  const int a = axis(io, static_cast<double>(int_attr(io.at, "axis", -kMaxValue, 1)), X.rank(),
                     "attribute \"axis\"", true);
  const double lo = product(X, 0, a), hi = product(X, a, X.rank());
  set_out(io, 0,
          {lo < 0 ? Dim{} : checked(io, lo, "output dimension 0"),
           hi < 0 ? Dim{} : checked(io, hi, "output dimension 1")});
  if (X.has_value) set_value(io, 0, X.value);
}

void reshape(OpIo& io) {
  if (!need(io, 0)) return;
  const TensorInfo& X = *io.in[0];
  std::vector<int64_t> shape;
  if (!ints_from(io, 1, "shape", "shape", shape)) return;
  const bool allow_zero = int_attr(io.at, "allowzero", 0, 0) != 0;
  std::vector<Dim> out;
  int infer_at = -1;
  double known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t s = shape[i];
    if (s == -1) {
      if (infer_at >= 0) io.at.fail("input shape: more than one -1 in " + list(shape));
      infer_at = static_cast<int>(i);
      out.push_back({});
    } else if (s == 0 && !allow_zero) {
      if (i >= X.dims.size())
        io.at.fail("input shape: 0 at index " + std::to_string(i) +
                   " copies a dim X does not have");
      out.push_back(X.dims[i]);
    } else {
      out.push_back(checked(io, static_cast<double>(s), "input shape: value " + std::to_string(i)));
    }
    if (out.back().known()) known *= static_cast<double>(out.back().value);
  }
  const double total = product(X, 0, X.rank());
  if (infer_at >= 0 && total >= 0 && known > 0) {
    if (std::fmod(total, known) != 0)
      io.at.fail("input shape: " + list(shape) + " does not divide the " + text(total) +
                 " elements of X");
    out[static_cast<size_t>(infer_at)] = checked(io, total / known, "output dimension");
  } else if (infer_at < 0 && total >= 0 &&
             std::all_of(out.begin(), out.end(), [](const Dim& d) { return d.known(); }) &&
             known != total) {
    io.at.fail("input shape: " + list(shape) + " has " + text(known) + " elements, X has " +
               text(total));
  }
  set_out(io, 0, out);
  if (X.has_value) set_value(io, 0, X.value);
}

void transpose(OpIo& io) {
  if (!need(io, 0)) return;
  const TensorInfo& X = *io.in[0];
  std::vector<int64_t> perm = ints_attr(io.at, "perm", static_cast<size_t>(X.rank()), 0, {});
  if (perm.empty())
    for (int i = X.rank() - 1; i >= 0; --i) perm.push_back(i);
  std::vector<bool> used(perm.size(), false);
  std::vector<Dim> out;
  for (const int64_t p : perm) {
    if (p >= X.rank() || used[static_cast<size_t>(p)])
      io.at.fail("attribute \"perm\": " + list(perm) + " is not a permutation of " +
                 std::to_string(X.rank()) + " axes");
    used[static_cast<size_t>(p)] = true;
    out.push_back(X.dims[static_cast<size_t>(p)]);
  }
  set_out(io, 0, out);
}

void concat(OpIo& io) {
  if (io.in.empty()) io.at.fail("no inputs");
  for (size_t i = 0; i < io.in.size(); ++i)
    if (!need(io, i)) return;
  const int rank = io.in[0]->rank();
  const onnx::AttributeProto* a = find_attr(io.at.node, "axis");
  if (!a) io.at.fail("attribute \"axis\": missing");
  const int ax = axis(io, static_cast<double>(int_attr(io.at, "axis", -kMaxValue, 0)), rank,
                      "attribute \"axis\"");
  std::vector<Dim> out = io.in[0]->dims;
  out[static_cast<size_t>(ax)] = num(0);
  std::vector<double> values;
  bool all_values = rank == 1;
  for (const TensorInfo* t : io.in) {
    if (t->rank() != rank)
      io.at.fail("inputs of ranks " + std::to_string(rank) + " and " + std::to_string(t->rank()));
    for (int k = 0; k < rank; ++k) {
      Dim& o = out[static_cast<size_t>(k)];
      const Dim& d = t->dims[static_cast<size_t>(k)];
      if (k == ax)
        o = o.known() && d.known() ? checked(io, static_cast<double>(o.value + d.value),
                                             "output dimension " + std::to_string(k))
                                   : Dim{};
      else if (o.known() && d.known() && o.value != d.value)
        io.at.fail("input dims differ on axis " + std::to_string(k) + ": " +
                   shape_string(*io.in[0]) + " and " + shape_string(*t));
      else if (!o.known() && d.known())
        o = d;
    }
    all_values = all_values && t->has_value;
    if (all_values) values.insert(values.end(), t->value.begin(), t->value.end());
  }
  set_out(io, 0, out);
  if (all_values) set_value(io, 0, values);
}

void split(OpIo& io) {
  if (!need(io, 0)) return;
  const TensorInfo& X = *io.in[0];
  const int ax = axis(io, static_cast<double>(int_attr(io.at, "axis", -kMaxValue, 0)), X.rank(),
                      "attribute \"axis\"");
  const Dim& d = X.dims[static_cast<size_t>(ax)];
  std::vector<int64_t> parts;
  const size_t n = io.out.size();
  if (!ints_from(io, 1, "split", "split", parts, true)) {
    if (!io.why.empty()) return;
    if (!d.known()) return void(io.why = "the dim it splits is unknown");
    const int64_t each = (d.value + static_cast<int64_t>(n) - 1) / static_cast<int64_t>(n);
    for (size_t i = 0; i < n; ++i)
      parts.push_back(
          std::max<int64_t>(0, std::min(each, d.value - each * static_cast<int64_t>(i))));
  }
  if (parts.size() != n)
    io.at.fail("split: " + std::to_string(parts.size()) + " sizes for " + std::to_string(n) +
               " outputs");
  int64_t sum = 0;
  for (size_t i = 0; i < n; ++i) {
    std::vector<Dim> out = X.dims;
    out[static_cast<size_t>(ax)] = checked(io, static_cast<double>(parts[i]), "split");
    sum += parts[i];
    set_out(io, i, out);
  }
  if (d.known() && sum != d.value)
    io.at.fail("split: sizes " + list(parts) + " do not add up to dimension " + std::to_string(ax) +
               " = " + std::to_string(d.value));
}

void unsqueeze(OpIo& io) {
  if (!need(io, 0)) return;
  const TensorInfo& X = *io.in[0];
  std::vector<int64_t> axes;
  if (!ints_from(io, 1, "axes", "axes", axes)) return;
  const int rank = X.rank() + static_cast<int>(axes.size());
  std::vector<bool> inserted(static_cast<size_t>(rank), false);
  for (const int64_t a : axes) {
    const int k = axis(io, static_cast<double>(a), rank, "axes");
    if (inserted[static_cast<size_t>(k)]) io.at.fail("axes: " + list(axes) + " repeats an axis");
    inserted[static_cast<size_t>(k)] = true;
  }
  std::vector<Dim> out;
  size_t from = 0;
  for (int k = 0; k < rank; ++k)
    out.push_back(inserted[static_cast<size_t>(k)] ? num(1) : X.dims[from++]);
  set_out(io, 0, out);
  if (X.has_value) set_value(io, 0, X.value);
}

void squeeze(OpIo& io) {
  if (!need(io, 0)) return;
  const TensorInfo& X = *io.in[0];
  std::vector<int64_t> axes;
  std::vector<bool> drop(X.dims.size(), false);
  if (ints_from(io, 1, "axes", "axes", axes, true)) {
    for (const int64_t a : axes) {
      const int k = axis(io, static_cast<double>(a), X.rank(), "axes");
      const Dim& d = X.dims[static_cast<size_t>(k)];
      if (d.known() && d.value != 1)
        io.at.fail("axes: dimension " + std::to_string(k) + " is " + std::to_string(d.value) +
                   ", not 1");
      drop[static_cast<size_t>(k)] = true;
    }
  } else {
    if (!io.why.empty()) return;
    for (size_t k = 0; k < X.dims.size(); ++k) {
      if (!X.dims[k].known()) return void(io.why = "without axes it needs every dim known");
      drop[k] = X.dims[k].value == 1;
    }
  }
  std::vector<Dim> out;
  for (size_t k = 0; k < X.dims.size(); ++k)
    if (!drop[k]) out.push_back(X.dims[k]);
  set_out(io, 0, out);
  if (X.has_value) set_value(io, 0, X.value);
}

void pad(OpIo& io) {
  if (!need(io, 0)) return;
  const TensorInfo& X = *io.in[0];
  std::vector<int64_t> pads, axes;
  if (!ints_from(io, 1, "pads", "pads", pads)) return;
  if (!ints_from(io, 3, "", "axes", axes, true)) {
    if (!io.why.empty()) return;
    for (int k = 0; k < X.rank(); ++k) axes.push_back(k);
  }
  if (pads.size() != 2 * axes.size())
    io.at.fail("pads: " + std::to_string(pads.size()) + " values for " +
               std::to_string(axes.size()) + " axes (expected begins then ends)");
  std::vector<Dim> out = X.dims;
  for (size_t i = 0; i < axes.size(); ++i) {
    const auto k = static_cast<size_t>(axis(io, static_cast<double>(axes[i]), X.rank(), "axes"));
    if (!out[k].known()) continue;
    const double v = static_cast<double>(out[k].value) + static_cast<double>(pads[i]) +
                     static_cast<double>(pads[i + axes.size()]);
    out[k] = checked(io, v, "output dimension " + std::to_string(k));
  }
  set_out(io, 0, out);
}

/// Resize (opset 10: X, scales; 11+: X, roi, scales, sizes) and Upsample (scales).
void resize(OpIo& io) {
  if (!need(io, 0)) return;
  const TensorInfo& X = *io.in[0];
  const auto& node = io.at.node;
  const bool old = node.op_type() == "Upsample" || io.opset < 11;
  const size_t scales_at = old ? 1 : 2;
  if (find_attr(node, "axes")) return void(io.why = "the \"axes\" attribute is not covered");
  std::vector<Dim> out = X.dims;
  const bool has_sizes = !old && node.input_size() > 3 && !node.input(3).empty();
  if (has_sizes) {
    const std::vector<double>* sizes = io.values(3, "sizes");
    if (!sizes) return;
    if (sizes->size() != X.dims.size())
      io.at.fail("input sizes: " + std::to_string(sizes->size()) + " values for rank " +
                 std::to_string(X.rank()));
    for (size_t k = 0; k < out.size(); ++k)
      out[k] = checked(io, (*sizes)[k], "input sizes: value " + std::to_string(k));
    return set_out(io, 0, out);
  }
  std::vector<double> scales;
  if (const onnx::AttributeProto* a = find_attr(node, "scales")) {
    scales.assign(a->floats().begin(), a->floats().end());
  } else {
    const std::vector<double>* s = io.values(scales_at, "scales");
    if (!s) return;
    scales = *s;
  }
  if (scales.size() != X.dims.size())
    io.at.fail("scales: " + std::to_string(scales.size()) + " values for rank " +
               std::to_string(X.rank()));
  for (size_t k = 0; k < out.size(); ++k) {
    if (!(scales[k] > 0 && scales[k] <= static_cast<double>(kMaxValue)))
      io.at.fail("scales: value " + std::to_string(k) + " is not in (0, 2^31]");
    if (out[k].known())
      out[k] = checked(io, std::floor(static_cast<double>(out[k].value) * scales[k]),
                       "output dimension " + std::to_string(k));
    else if (scales[k] != 1)
      out[k] = Dim{};
  }
  set_out(io, 0, out);
}

void slice(OpIo& io) {
  if (!need(io, 0)) return;
  const TensorInfo& X = *io.in[0];
  std::vector<int64_t> starts, ends, axes, steps;
  if (!ints_from(io, 1, "starts", "starts", starts) || !ints_from(io, 2, "ends", "ends", ends))
    return;
  if (!ints_from(io, 3, "axes", "axes", axes, true)) {
    if (!io.why.empty()) return;
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  }
  if (!ints_from(io, 4, "", "steps", steps, true)) {
    if (!io.why.empty()) return;
    steps.assign(starts.size(), 1);
  }
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    io.at.fail("starts, ends, axes and steps: lengths differ");
  std::vector<Dim> out = X.dims;
  std::vector<double> value = X.value;
  bool sliced = X.has_value && X.rank() == 1;  // a 1-D constant, sliced along with its dim
  for (size_t i = 0; i < starts.size(); ++i) {
    const auto k = static_cast<size_t>(axis(io, static_cast<double>(axes[i]), X.rank(), "axes"));
    if (steps[i] == 0) io.at.fail("steps: value " + std::to_string(i) + " is 0");
    if (!out[k].known()) {
      sliced = false;
      continue;
    }
    // Clamped as the spec says; int64 limits (INT64_MAX for "to the end") are common.
    const double n = static_cast<double>(out[k].value), step = static_cast<double>(steps[i]);
    const auto clamp = [&](double v, double lo, double hi) {
      v = v < 0 ? v + n : v;
      return std::min(std::max(v, lo), hi);
    };
    const double b = step > 0 ? clamp(static_cast<double>(starts[i]), 0, n)
                              : clamp(static_cast<double>(starts[i]), 0, n - 1);
    const double e = step > 0 ? clamp(static_cast<double>(ends[i]), 0, n)
                              : clamp(static_cast<double>(ends[i]), -1, n);
    const double len = std::max(0.0, std::ceil((e - b) / step));
    out[k] = checked(io, len, "output dimension " + std::to_string(k));
    sliced = sliced && value.size() == static_cast<size_t>(n);
    if (sliced) {
      std::vector<double> v;
      for (double j = b; v.size() < static_cast<size_t>(len); j += step)
        v.push_back(value[static_cast<size_t>(j)]);
      value = v;
    }
  }
  set_out(io, 0, out);
  if (sliced) set_value(io, 0, value);
}

// --- shape values ------------------------------------------------------------------------------

void shape(OpIo& io) {
  if (!need(io, 0)) return;
  const TensorInfo& X = *io.in[0];
  const int r = X.rank();
  int b = static_cast<int>(std::clamp<int64_t>(int_attr(io.at, "start", -kMaxValue, 0), -r, r));
  int e = static_cast<int>(std::clamp<int64_t>(int_attr(io.at, "end", -kMaxValue, r), -r, r));
  b = b < 0 ? b + r : b;
  e = std::max(b, e < 0 ? e + r : e);
  set_out(io, 0, {num(e - b)});
  std::vector<double> v;
  for (int k = b; k < e; ++k) {
    if (!X.dims[static_cast<size_t>(k)].known()) return;
    v.push_back(static_cast<double>(X.dims[static_cast<size_t>(k)].value));
  }
  set_value(io, 0, v);
}

void gather(OpIo& io) {
  if (!need(io, 0) || !need(io, 1)) return;
  const TensorInfo &X = *io.in[0], &I = *io.in[1];
  if (X.rank() < 1) io.at.fail("input data: a scalar cannot be gathered from");
  const auto ax =
      static_cast<size_t>(axis(io, static_cast<double>(int_attr(io.at, "axis", -kMaxValue, 0)),
                               X.rank(), "attribute \"axis\""));
  std::vector<Dim> out(X.dims.begin(), X.dims.begin() + static_cast<std::ptrdiff_t>(ax));
  out.insert(out.end(), I.dims.begin(), I.dims.end());
  out.insert(out.end(), X.dims.begin() + static_cast<std::ptrdiff_t>(ax) + 1, X.dims.end());
  set_out(io, 0, out);
  if (!X.has_value || !I.has_value || X.rank() != 1) return;
  std::vector<double> v;
  const double n = static_cast<double>(X.value.size());
  for (const double i : I.value) {
    if (!(i >= -n && i < n) || i != std::floor(i))
      io.at.fail("input indices: " + text(i) + " is out of range for " +
                 std::to_string(X.value.size()) + " values");
    v.push_back(X.value[static_cast<size_t>(i < 0 ? i + n : i)]);
  }
  set_value(io, 0, v);
}

void constant(OpIo& io) {
  const auto& node = io.at.node;
  if (node.attribute_size() != 1)
    io.at.fail("expected exactly one attribute (value, value_int, value_ints, ...)");
  const onnx::AttributeProto& a = node.attribute(0);
  if (a.name() == "value") {
    if (!a.has_t()) io.at.fail("attribute \"value\": expected a TENSOR");
    TensorInfo t = tensor_info(
        a.t(), [&](const std::string& what) { io.at.fail("attribute \"value\": " + what); });
    if (!io.out.empty()) io.out[0] = std::move(t);
  } else if (a.name() == "value_int" || a.name() == "value_float") {
    set_out(io, 0, {});
    set_value(io, 0, {a.name() == "value_int" ? static_cast<double>(a.i()) : a.f()});
  } else if (a.name() == "value_ints" || a.name() == "value_floats") {
    const bool ints = a.name() == "value_ints";
    const size_t n = static_cast<size_t>(ints ? a.ints_size() : a.floats_size());
    set_out(io, 0, {num(static_cast<int64_t>(n))});
    std::vector<double> v;
    for (size_t i = 0; i < n && n <= TensorInfo::kMaxValues; ++i)
      v.push_back(ints ? static_cast<double>(a.ints(static_cast<int>(i)))
                       : a.floats(static_cast<int>(i)));
    if (n <= TensorInfo::kMaxValues) set_value(io, 0, v);
  } else {
    io.why = "its " + quoted(a.name()) + " value is not read by the importer";
  }
}

void constant_of_shape(OpIo& io) {
  std::vector<int64_t> shape;
  if (!ints_from(io, 0, "", "input", shape)) return;
  std::vector<Dim> out;
  for (size_t k = 0; k < shape.size(); ++k)
    out.push_back(checked(io, static_cast<double>(shape[k]), "input: value " + std::to_string(k)));
  set_out(io, 0, out);
}

void expand(OpIo& io) {
  if (!need(io, 0)) return;
  std::vector<int64_t> shape;
  if (!ints_from(io, 1, "", "shape", shape)) return;
  TensorInfo target;
  target.ranked = true;
  for (size_t k = 0; k < shape.size(); ++k)
    target.dims.push_back(
        checked(io, static_cast<double>(shape[k]), "input shape: value " + std::to_string(k)));
  OpIo pair{io.at, io.opset, {io.in[0], &target}, std::vector<TensorInfo>(1), ""};
  broadcast(pair);
  set_out(io, 0, pair.out[0].dims);
}

void tile(OpIo& io) {
  if (!need(io, 0)) return;
  std::vector<int64_t> repeats;
  if (!ints_from(io, 1, "", "repeats", repeats)) return;
  const TensorInfo& X = *io.in[0];
  if (repeats.size() != X.dims.size())
    io.at.fail("input repeats: " + std::to_string(repeats.size()) + " values for rank " +
               std::to_string(X.rank()));
  std::vector<Dim> out = X.dims;
  for (size_t k = 0; k < out.size(); ++k)
    if (out[k].known())
      out[k] = checked(io, static_cast<double>(out[k].value) * static_cast<double>(repeats[k]),
                       "output dimension " + std::to_string(k));
  set_out(io, 0, out);
}

void reduce(OpIo& io) {
  if (!need(io, 0)) return;
  const TensorInfo& X = *io.in[0];
  const bool keep = int_attr(io.at, "keepdims", 0, 1) != 0;
  std::vector<int64_t> axes;
  std::vector<bool> reduced(X.dims.size(), false);
  if (ints_from(io, 1, "axes", "axes", axes, true) && !axes.empty()) {
    for (const int64_t a : axes)
      reduced[static_cast<size_t>(axis(io, static_cast<double>(a), X.rank(), "axes"))] = true;
  } else {
    if (!io.why.empty()) return;
    if (int_attr(io.at, "noop_with_empty_axes", 0, 0) != 0) return set_out(io, 0, X.dims);
    reduced.assign(X.dims.size(), true);
  }
  std::vector<Dim> out;
  for (size_t k = 0; k < X.dims.size(); ++k)
    if (!reduced[k])
      out.push_back(X.dims[k]);
    else if (keep)
      out.push_back(num(1));
  set_out(io, 0, out);
}

void gemm(OpIo& io) {
  if (!need(io, 0) || !need(io, 1)) return;
  const TensorInfo &A = *io.in[0], &B = *io.in[1];
  if (A.rank() != 2 || B.rank() != 2)
    io.at.fail("inputs A and B: expected 2 dims each, got " + shape_string(A) + " and " +
               shape_string(B));
  const bool ta = int_attr(io.at, "transA", 0, 0) != 0, tb = int_attr(io.at, "transB", 0, 0) != 0;
  set_out(io, 0, {A.dims[ta ? 1 : 0], B.dims[tb ? 0 : 1]});
}

void matmul(OpIo& io) {
  if (!need(io, 0) || !need(io, 1)) return;
  TensorInfo A = *io.in[0], B = *io.in[1];
  if (A.rank() < 1 || B.rank() < 1) io.at.fail("inputs must have at least 1 dim");
  const bool a1 = A.rank() == 1, b1 = B.rank() == 1;
  if (a1) A.dims.insert(A.dims.begin(), num(1));
  if (b1) B.dims.push_back(num(1));
  TensorInfo batch_a, batch_b;
  batch_a.ranked = batch_b.ranked = true;
  batch_a.dims.assign(A.dims.begin(), A.dims.end() - 2);
  batch_b.dims.assign(B.dims.begin(), B.dims.end() - 2);
  OpIo pair{io.at, io.opset, {&batch_a, &batch_b}, std::vector<TensorInfo>(1), ""};
  broadcast(pair);
  std::vector<Dim> out = pair.out[0].dims;
  if (!a1) out.push_back(A.dims[A.dims.size() - 2]);
  if (!b1) out.push_back(B.dims.back());
  set_out(io, 0, out);
}

void depth_space(OpIo& io) {
  if (!need(io, 0)) return;
  const TensorInfo& X = *io.in[0];
  if (X.rank() != 4) io.at.fail("input: expected 4 dims, got " + shape_string(X));
  const int64_t b = int_attr(io.at, "blocksize", 1, -1);
  if (b < 1) io.at.fail("attribute \"blocksize\": missing");
  const bool to_space = io.at.node.op_type() == "DepthToSpace";
  const double bb = static_cast<double>(b) * static_cast<double>(b);
  std::vector<Dim> out = X.dims;
  const auto scale = [&](size_t k, double f) {
    if (!out[k].known()) return;
    const double v = static_cast<double>(out[k].value) * f;
    if (v != std::floor(v))
      io.at.fail("attribute \"blocksize\": " + std::to_string(b) + " does not divide dimension " +
                 std::to_string(k) + " = " + std::to_string(out[k].value));
    out[k] = checked(io, v, "output dimension " + std::to_string(k));
  };
  scale(1, to_space ? 1 / bb : bb);
  scale(2, to_space ? static_cast<double>(b) : 1.0 / static_cast<double>(b));
  scale(3, to_space ? static_cast<double>(b) : 1.0 / static_cast<double>(b));
  set_out(io, 0, out);
}

}  // namespace

Rule rule_for(const std::string& op_type) {
  // The table: every op the importer infers, by rule.
  static const std::unordered_map<std::string, Rule> rules = {
      // Output 0 (and masks) shaped as input 0; values pass through Identity and Cast.
      {"Identity", same_shape},
      {"Cast", same_shape},
      {"CastLike", same_shape},
      {"Dropout", same_shape},
      {"Relu", same_shape},
      {"LeakyRelu", same_shape},
      {"PRelu", same_shape},
      {"Sigmoid", same_shape},
      {"HardSigmoid", same_shape},
      {"HardSwish", same_shape},
      {"Tanh", same_shape},
      {"Elu", same_shape},
      {"Selu", same_shape},
      {"Celu", same_shape},
      {"Gelu", same_shape},
      {"Softplus", same_shape},
      {"Softsign", same_shape},
      {"Mish", same_shape},
      {"Erf", same_shape},
      {"Exp", same_shape},
      {"Log", same_shape},
      {"Abs", same_shape},
      {"Neg", same_shape},
      {"Sqrt", same_shape},
      {"Reciprocal", same_shape},
      {"Floor", same_shape},
      {"Ceil", same_shape},
      {"Round", same_shape},
      {"Clip", same_shape},
      {"LRN", same_shape},
      {"Softmax", same_shape},
      {"LogSoftmax", same_shape},
      {"InstanceNormalization", same_shape},
      {"LpNormalization", same_shape},
      {"MeanVarianceNormalization", same_shape},
      {"QuantizeLinear", same_shape},
      {"DequantizeLinear", same_shape},
      {"BatchNormalization", first_same_shape},
      {"LayerNormalization", first_same_shape},
      {"GroupNormalization", first_same_shape},
      // Broadcasting.
      {"Add", broadcast},
      {"Sub", broadcast},
      {"Mul", broadcast},
      {"Div", broadcast},
      {"Pow", broadcast},
      {"Max", broadcast},
      {"Min", broadcast},
      {"Sum", broadcast},
      {"Mean", broadcast},
      {"Where", broadcast},
      // Windows.
      {"Conv", conv},
      {"ConvInteger", conv},
      {"QLinearConv", qlinear_conv},
      {"MaxPool", pool},
      {"AveragePool", pool},
      {"LpPool", pool},
      {"GlobalAveragePool", global_pool},
      {"GlobalMaxPool", global_pool},
      {"GlobalLpPool", global_pool},
      // Layout.
      {"Flatten", flatten},
      {"Reshape", reshape},
      {"Transpose", transpose},
      {"Concat", concat},
      {"Split", split},
      {"Squeeze", squeeze},
      {"Unsqueeze", unsqueeze},
      {"Pad", pad},
      {"Resize", resize},
      {"Upsample", resize},
      {"Slice", slice},
      {"Expand", expand},
      {"Tile", tile},
      {"DepthToSpace", depth_space},
      {"SpaceToDepth", depth_space},
      // Shape values and constants.
      {"Shape", shape},
      {"Gather", gather},
      {"Constant", constant},
      {"ConstantOfShape", constant_of_shape},
      // Reductions and matrix products.
      {"ReduceMean", reduce},
      {"ReduceSum", reduce},
      {"ReduceMax", reduce},
      {"ReduceMin", reduce},
      {"ReduceProd", reduce},
      {"ReduceL1", reduce},
      {"ReduceL2", reduce},
      {"Gemm", gemm},
      {"MatMul", matmul},
  };
  const auto it = rules.find(op_type);
  return it == rules.end() ? nullptr : it->second;
}

}  // namespace conv::import::onnx_import
