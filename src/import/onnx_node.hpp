// One ONNX node as the importer's errors name it, and its attributes read with range checks.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

#include "importers.hpp"

namespace conv::import::onnx_import {

/// Largest size, stride, pad or dimension accepted from a file: 2^31 (as parse_input_shape).
constexpr int64_t kMaxValue = int64_t{1} << 31;

/// A node as errors name it: `node "<name>" (<op_type>)`; an unnamed node is named after its
/// first output (as the problems are).
struct NodeRef {
  const Source& src;
  const onnx::NodeProto& node;
  std::string name;  ///< node name, or its first output when unnamed

  NodeRef(const Source& s, const onnx::NodeProto& n);
  /// conv::Error `model "<path>": node "<name>" (<op>): <what>`.
  [[noreturn]] void fail(const std::string& what) const;
};

/// True for an op of the default ONNX domain ("" or "ai.onnx") named `op`.
bool is_onnx_op(const onnx::NodeProto& node, const char* op);

/// The attribute `name` of `node`, or nullptr.
const onnx::AttributeProto* find_attr(const onnx::NodeProto& node, const char* name);

/// The attribute's type; files written by old exporters may leave `type` unset (UNDEFINED), in
/// which case the populated field says what it is.
onnx::AttributeProto::AttributeType type_of(const onnx::AttributeProto& a);

/// The ints of attribute `name`, or `fallback` when the node lacks it. Fails (naming node and
/// attribute) unless it is an INTS attribute with `len` values (any count when len == 0), each in
/// [lo, 2^31]. Checked before any arithmetic, so absurd values never overflow.
std::vector<int64_t> ints_attr(const NodeRef& at, const char* name, size_t len, int64_t lo,
                               std::vector<int64_t> fallback);

/// The int of attribute `name`, or `fallback` when the node lacks it. Fails (naming node and
/// attribute) unless it is an INT attribute in [lo, 2^31].
int64_t int_attr(const NodeRef& at, const char* name, int64_t lo, int64_t fallback);

/// NOTSET, VALID, SAME_UPPER or SAME_LOWER (default NOTSET), else failure naming the attribute.
std::string auto_pad_attr(const NodeRef& at);

/// "[1, 2, 3]".
std::string list(const std::vector<int64_t>& v);

}  // namespace conv::import::onnx_import
