// One ONNX Conv node -> one ConvProblem: shapes of X and W, attributes, auto_pad arithmetic.
// Every attribute is type- and range-checked before it is used in arithmetic.
#include <algorithm>
#include <tuple>
#include <unordered_set>
#include <utility>

#include "onnx_conv.hpp"
#include "quoted.hpp"

namespace conv::import::onnx_import {

namespace {

[[noreturn]] void unsupported(const NodeRef& at, const std::string& what, int rank) {
  at.fail("not supported: " + std::to_string(rank - 2) + "-D convolution (" + what + " has " +
          std::to_string(rank) + " dims); only 2-D Conv (NCHW) is imported");
}

/// Refuses 1-D and 3-D convolutions (by W rank, X rank or kernel_shape length) and other ranks.
void check_rank(const NodeRef& at, const std::string& role, const std::string& tensor,
                const TensorInfo* shape) {
  if (!shape || shape->rank() == 4) return;
  const int rank = shape->rank();
  const std::string what = "input " + role + " " + quoted(tensor);
  if (rank == 3 || rank == 5) unsupported(at, what, rank);
  at.fail(what + ": expected 4 dims, got " + std::to_string(rank));
}

/// ": the importer cannot infer it (produced by node "p" (FooBar): <why>)" for a tensor whose
/// shape stops at `origin.node`.
std::string not_inferred(const NodeRef& at, const Shapes::Origin& origin,
                         const std::string& tensor) {
  const NodeRef stop(at.src, *origin.node);
  const auto& outs = origin.node->output();
  const bool produces = std::find(outs.begin(), outs.end(), tensor) != outs.end();
  return ": the importer cannot infer it (" +
         std::string(produces ? "produced by" : "it stopped at") + " node " + quoted(stop.name) +
         " (" + escaped(origin.node->op_type()) + ")" +
         (origin.why.empty() ? "" : ": " + origin.why) + ")";
}

/// A dimension of `tensor` as a number in [1, 2^31], or failure naming what is wrong with it.
int64_t dim_value(const NodeRef& at, const Shapes& shapes, const std::string& role,
                  const std::string& tensor, const TensorInfo& shape, int i) {
  const Dim& d = shape.dims[static_cast<size_t>(i)];
  const std::string what =
      "input " + role + " " + quoted(tensor) + ": dimension " + std::to_string(i);
  if (d.known()) {
    if (d.value < 1 || d.value > kMaxValue)
      at.fail(what + " = " + std::to_string(d.value) + " is out of range [1, 2^31]");
    return d.value;
  }
  const std::string& param = d.param;
  if (param.empty()) {
    const Shapes::Origin origin = shapes.unknown_origin(tensor, true);
    if (origin.input.empty() && origin.node)
      at.fail(what + " is unknown" + not_inferred(at, origin, tensor));
  }
  const std::string input = shapes.input_behind(tensor, param);
  std::string msg = what + (param.empty() ? " is unknown" : " is symbolic (" + quoted(param) + ")");
  if (!input.empty() && input != tensor) msg += ", from graph input " + quoted(input);
  at.fail(msg + "; pass the input shape with --input " + (input.empty() ? "NAME" : input) +
          "=NxCxHxW");
}

/// SAME_UPPER / SAME_LOWER: the total pad that makes the output ceil(in / stride) long, split
/// evenly with the odd one at the end (UPPER) or the start (LOWER). Inputs are <= 2^31, so no
/// overflow. Returns {begin, end}.
std::pair<int64_t, int64_t> same_pads(int64_t in, int64_t k, int64_t stride, int64_t dil,
                                      bool upper) {
  const int64_t out = (in + stride - 1) / stride;
  const int64_t total = std::max<int64_t>(0, (out - 1) * stride + (k - 1) * dil + 1 - in);
  const int64_t small = total / 2, big = total - small;
  return upper ? std::pair{small, big} : std::pair{big, small};
}

}  // namespace

void check_conv_ranks(const NodeRef& at, const Shapes& shapes) {
  const auto& node = at.node;
  if (node.input_size() > 1 && !node.input(1).empty())
    check_rank(at, "W", node.input(1), shapes.find(node.input(1)));
  if (node.input_size() > 0 && !node.input(0).empty())
    check_rank(at, "X", node.input(0), shapes.find(node.input(0)));
  if (const onnx::AttributeProto* k = find_attr(node, "kernel_shape"))
    if (k->ints_size() == 1 || k->ints_size() == 3)
      unsupported(at, "attribute \"kernel_shape\"", k->ints_size() + 2);
}

void check_elem_types(const NodeRef& at, const Shapes& shapes) {
  const auto& node = at.node;
  for (int i = 0; i < std::min(node.input_size(), 3); ++i) {
    const std::string& t = node.input(i);
    const int32_t type = t.empty() ? 0 : shapes.elem_type(t);
    if (type == onnx::TensorProto::UNDEFINED || type == onnx::TensorProto::FLOAT) continue;
    const std::string type_name = onnx::TensorProto_DataType_IsValid(type)
                                      ? onnx::TensorProto_DataType_Name(type)
                                      : "#" + std::to_string(type);
    at.fail(std::string("input ") + "XWB"[i] + " " + quoted(t) + ": element type " + type_name +
            ": only FLOAT (fp32) models are supported");
  }
}

ConvProblem conv_problem(const NodeRef& at, const Shapes& shapes) {
  const auto& node = at.node;
  if (node.input_size() < 1 || node.input(0).empty()) at.fail("input X: missing");
  if (node.input_size() < 2 || node.input(1).empty()) at.fail("input W (weights): missing");
  check_elem_types(at, shapes);
  check_conv_ranks(at, shapes);
  const std::string &x = node.input(0), &w = node.input(1);

  const std::string auto_pad = auto_pad_attr(at);
  const auto kernel = ints_attr(at, "kernel_shape", 2, 1, {});
  const auto strides = ints_attr(at, "strides", 2, 1, {1, 1});
  const auto dilations = ints_attr(at, "dilations", 2, 1, {1, 1});
  const auto pads = ints_attr(at, "pads", 4, 0, {0, 0, 0, 0});
  const int64_t group = int_attr(at, "group", 1, 1);
  const bool explicit_pads = std::any_of(node.attribute().begin(), node.attribute().end(),
                                         [](const auto& a) { return a.name() == "pads"; });
  if (explicit_pads && auto_pad != "NOTSET")
    at.fail("attribute \"pads\": given together with auto_pad \"" + auto_pad +
            "\" (ONNX allows one or the other)");

  const TensorInfo* ws = shapes.find(w);
  if (!ws)
    at.fail("input W " + quoted(w) +
            ": shape unknown (not an initializer, nor a tensor with a declared or inferred shape)");
  std::vector<int64_t> wd(4);
  for (int i = 0; i < 4; ++i) wd[i] = dim_value(at, shapes, "W", w, *ws, i);
  if (!kernel.empty() && (kernel[0] != wd[2] || kernel[1] != wd[3]))
    at.fail("attribute \"kernel_shape\": " + list(kernel) + " disagrees with the weights " +
            quoted(w) + " of shape " + list(wd));

  const TensorInfo* xs = shapes.find(x);
  if (!xs) {
    const Shapes::Origin origin = shapes.unknown_origin(x, false);
    const std::string what = "input X " + quoted(x) + ": shape unknown";
    if (!origin.input.empty())
      at.fail(what + (origin.input != x ? " (from graph input " + quoted(origin.input) + ")" : "") +
              "; pass the input shape with --input " + origin.input + "=NxCxHxW");
    if (!origin.node)
      at.fail(what + ": no node produces it and it is not a graph input or initializer");
    at.fail(what + not_inferred(at, origin, x));
  }
  std::vector<int64_t> xd(4);
  for (int i = 0; i < 4; ++i) xd[i] = dim_value(at, shapes, "X", x, *xs, i);

  if (xd[1] % group != 0)
    at.fail("attribute \"group\": " + std::to_string(group) + " does not divide the " +
            std::to_string(xd[1]) + " input channels of " + quoted(x));
  if (wd[0] % group != 0)
    at.fail("attribute \"group\": " + std::to_string(group) + " does not divide the " +
            std::to_string(wd[0]) + " output channels of the weights " + quoted(w));
  if (xd[1] / group != wd[1])
    at.fail("input W " + quoted(w) + ": " + std::to_string(wd[1]) +
            " input channels per group, but X has " + std::to_string(xd[1]) + " channels in " +
            std::to_string(group) + " group(s)");

  // The bias is not part of the problem, but one that does not fit the weights means the model
  // is not what its shapes say.
  if (node.input_size() > 2 && !node.input(2).empty())
    if (const TensorInfo* bs = shapes.find(node.input(2)))
      if (bs->rank() != 1 || (bs->dims[0].known() && bs->dims[0].value != wd[0]))
        at.fail("input B " + quoted(node.input(2)) + ": expected shape [" + std::to_string(wd[0]) +
                "] (one bias per output channel of the weights)");

  ConvProblem p;
  p.N = xd[0], p.C = xd[1], p.H = xd[2], p.W = xd[3];
  p.K = wd[0], p.R = wd[2], p.S = wd[3];
  p.stride_h = strides[0], p.stride_w = strides[1];
  p.dilation_h = dilations[0], p.dilation_w = dilations[1];
  p.groups = group;
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    const bool upper = auto_pad == "SAME_UPPER";
    std::tie(p.pad_top, p.pad_bottom) = same_pads(p.H, p.R, p.stride_h, p.dilation_h, upper);
    std::tie(p.pad_left, p.pad_right) = same_pads(p.W, p.S, p.stride_w, p.dilation_w, upper);
  } else if (auto_pad == "NOTSET") {  // [x1_begin, x2_begin, x1_end, x2_end]
    p.pad_top = pads[0], p.pad_left = pads[1], p.pad_bottom = pads[2], p.pad_right = pads[3];
  }
  try {
    p.validate();  // the error names the field: the node and its attributes set them
  } catch (const Error& e) {
    at.fail(e.what());
  }
  return checked(at.src, at.name, p);
}

}  // namespace conv::import::onnx_import
