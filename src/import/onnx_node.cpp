// NodeRef and the checked attribute readers shared by the ONNX importer's files.
#include "onnx_node.hpp"

#include "quoted.hpp"

namespace conv::import::onnx_import {

namespace {

std::string type_name(onnx::AttributeProto::AttributeType t) {
  return onnx::AttributeProto::AttributeType_IsValid(t)
             ? onnx::AttributeProto::AttributeType_Name(t)
             : "#" + std::to_string(t);
}

}  // namespace

NodeRef::NodeRef(const Source& s, const onnx::NodeProto& n) : src(s), node(n) {
  name = !n.name().empty() ? n.name() : n.output_size() > 0 ? n.output(0) : "(unnamed)";
}

void NodeRef::fail(const std::string& what) const {
  src.fail("node " + quoted(name) + " (" + escaped(node.op_type()) + "): " + what);
}

bool is_onnx_op(const onnx::NodeProto& node, const char* op) {
  return node.op_type() == op && (node.domain().empty() || node.domain() == "ai.onnx");
}

const onnx::AttributeProto* find_attr(const onnx::NodeProto& node, const char* name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

onnx::AttributeProto::AttributeType type_of(const onnx::AttributeProto& a) {
  if (a.type() != onnx::AttributeProto::UNDEFINED) return a.type();
  if (a.ints_size() > 0) return onnx::AttributeProto::INTS;
  if (a.floats_size() > 0) return onnx::AttributeProto::FLOATS;
  if (a.has_i()) return onnx::AttributeProto::INT;
  if (a.has_f()) return onnx::AttributeProto::FLOAT;
  if (a.has_s()) return onnx::AttributeProto::STRING;
  if (a.has_t()) return onnx::AttributeProto::TENSOR;
  return onnx::AttributeProto::UNDEFINED;
}

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::vector<int64_t> ints_attr(const NodeRef& at, const char* name, size_t len, int64_t lo,
                               std::vector<int64_t> fallback) {
  const onnx::AttributeProto* a = find_attr(at.node, name);
  if (!a) return fallback;
  const std::string where = "attribute " + quoted(name) + ": ";
  if (type_of(*a) != onnx::AttributeProto::INTS)
    at.fail(where + "expected INTS, got " + type_name(type_of(*a)));
  const std::vector<int64_t> v(a->ints().begin(), a->ints().end());
  if (len && v.size() != len)
    at.fail(where + "expected " + std::to_string(len) + " values, got " + std::to_string(v.size()) +
            (v.size() <= 16 ? " " + list(v) : ""));
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] < lo || v[i] > kMaxValue)
      at.fail(where + "value " + std::to_string(v[i]) + " at index " + std::to_string(i) +
              " is out of range [" + std::to_string(lo) + ", 2^31]");
  return v;
}

int64_t int_attr(const NodeRef& at, const char* name, int64_t lo, int64_t fallback) {
  const onnx::AttributeProto* a = find_attr(at.node, name);
  if (!a) return fallback;
  const std::string where = "attribute " + quoted(name) + ": ";
  if (type_of(*a) != onnx::AttributeProto::INT)
    at.fail(where + "expected an INT, got " + type_name(type_of(*a)));
  if (a->i() < lo || a->i() > kMaxValue)
    at.fail(where + std::to_string(a->i()) + " is out of range [" + std::to_string(lo) + ", 2^31]");
  return a->i();
}

std::string auto_pad_attr(const NodeRef& at) {
  const onnx::AttributeProto* a = find_attr(at.node, "auto_pad");
  if (!a) return "NOTSET";
  if (type_of(*a) != onnx::AttributeProto::STRING)
    at.fail("attribute \"auto_pad\": expected a STRING, got " + type_name(type_of(*a)));
  const std::string& s = a->s();
  if (s != "NOTSET" && s != "VALID" && s != "SAME_UPPER" && s != "SAME_LOWER")
    at.fail("attribute \"auto_pad\": " + quoted(s) +
            " is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER");
  return s;
}

}  // namespace conv::import::onnx_import
