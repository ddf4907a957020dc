// Shapes: lazy, iterative inference over the producers of the tensors a Conv reads.
#include "onnx_shapes.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include "quoted.hpp"

namespace conv::import::onnx_import {

namespace {

/// Bytes per element of the fixed-size types whose values inference reads; 0 for others.
size_t elem_bytes(int32_t type) {
  switch (type) {
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::UINT32:
      return 4;
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::UINT64:
    case onnx::TensorProto::DOUBLE:
      return 8;
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::BOOL:
      return 1;
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::UINT16:
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16:
      return 2;
    default:
      return 0;
  }
}

template <typename T>
double load(const std::string& raw, size_t i) {
  T v;
  std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
  return static_cast<double>(v);
}

/// Element i of little-endian raw_data of `type`; NaN for the 16-bit float types, whose values
/// inference never needs.
double raw_value(int32_t type, const std::string& raw, size_t i) {
  switch (type) {
    case onnx::TensorProto::FLOAT:
      return load<float>(raw, i);
    case onnx::TensorProto::DOUBLE:
      return load<double>(raw, i);
    case onnx::TensorProto::INT64:
      return load<int64_t>(raw, i);
    case onnx::TensorProto::UINT64:
      return load<uint64_t>(raw, i);
    case onnx::TensorProto::INT32:
      return load<int32_t>(raw, i);
    case onnx::TensorProto::UINT32:
      return load<uint32_t>(raw, i);
    case onnx::TensorProto::INT16:
      return load<int16_t>(raw, i);
    case onnx::TensorProto::UINT16:
      return load<uint16_t>(raw, i);
    case onnx::TensorProto::INT8:
      return load<int8_t>(raw, i);
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::BOOL:
      return load<uint8_t>(raw, i);
    default:
      return std::numeric_limits<double>::quiet_NaN();
  }
}

/// What a ValueInfoProto declares: its rank and dims (out-of-range values as unknown), or
/// unranked.
TensorInfo declared_info(const onnx::ValueInfoProto& vi) {
  TensorInfo info;
  if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) return info;
  info.ranked = true;
  for (const auto& d : vi.type().tensor_type().shape().dim())
    info.dims.push_back(d.has_dim_value() && d.dim_value() >= 0 && d.dim_value() <= kMaxValue
                            ? Dim{d.dim_value(), ""}
                            : Dim{-1, d.dim_param()});
  return info;
}

}  // namespace

bool TensorInfo::complete() const {
  return ranked && std::all_of(dims.begin(), dims.end(), [](const Dim& d) { return d.known(); });
}

std::string shape_string(const TensorInfo& t) {
  std::string s = "[";
  for (size_t i = 0; i < t.dims.size(); ++i) {
    const Dim& d = t.dims[i];
    s += (i ? ", " : "") + (d.known()          ? std::to_string(d.value)
                            : !d.param.empty() ? escaped(d.param)
                                               : std::string("?"));
  }
  return s + "]";
}

const std::vector<double>* OpIo::values(size_t i, const char* role) {
  const TensorInfo* t = input(i);
  if (t && t->has_value) return &t->value;
  if (why.empty())
    why = "its input " + std::string(role) +
          (i < static_cast<size_t>(at.node.input_size())
               ? " " + quoted(at.node.input(static_cast<int>(i)))
               : "") +
          " is not a constant the importer can read (computed at run time?)";
  return nullptr;
}

TensorInfo tensor_info(const onnx::TensorProto& t,
                       const std::function<void(const std::string&)>& fail) {
  TensorInfo info;
  info.ranked = true;
  uint64_t n = 1;
  for (int i = 0; i < t.dims_size(); ++i) {
    const int64_t d = t.dims(i);
    if (d < 0 || d > kMaxValue)
      fail("dims[" + std::to_string(i) + "] = " + std::to_string(d) + " is out of range [0, 2^31]");
    info.dims.push_back({d, ""});
    n = d == 0 || n == 0 ? 0 : std::min<uint64_t>(n * static_cast<uint64_t>(d), uint64_t{1} << 62);
  }
  if (t.data_location() == onnx::TensorProto::EXTERNAL) return info;  // data in another file
  const int32_t type = t.data_type();
  const size_t bytes = elem_bytes(type);
  if (t.has_raw_data()) {
    if (bytes && t.raw_data().size() != n * bytes)
      fail(std::to_string(t.raw_data().size()) + " bytes of raw_data for " + std::to_string(n) +
           " elements of " + std::to_string(bytes) + " bytes");
  } else {
    // The typed field each type is stored in (onnx.proto); its length must be the element count.
    const auto check = [&](int have, const char* field) {
      if (have != 0 && static_cast<uint64_t>(have) != n)
        fail(std::to_string(have) + " values in " + field + " for " + std::to_string(n) +
             " elements");
      return have != 0;
    };
    switch (type) {
      case onnx::TensorProto::FLOAT:
        check(t.float_data_size(), "float_data");
        break;
      case onnx::TensorProto::DOUBLE:
        check(t.double_data_size(), "double_data");
        break;
      case onnx::TensorProto::INT64:
        check(t.int64_data_size(), "int64_data");
        break;
      case onnx::TensorProto::UINT32:
      case onnx::TensorProto::UINT64:
        check(t.uint64_data_size(), "uint64_data");
        break;
      default:
        if (bytes) check(t.int32_data_size(), "int32_data");
    }
  }
  if (!bytes || n > TensorInfo::kMaxValues) return info;
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    if (t.has_raw_data())
      v[i] = raw_value(type, t.raw_data(), i);
    else if (type == onnx::TensorProto::FLOAT && t.float_data_size())
      v[i] = t.float_data(i);
    else if (type == onnx::TensorProto::DOUBLE && t.double_data_size())
      v[i] = t.double_data(i);
    else if (type == onnx::TensorProto::INT64 && t.int64_data_size())
      v[i] = static_cast<double>(t.int64_data(i));
    else if ((type == onnx::TensorProto::UINT32 || type == onnx::TensorProto::UINT64) &&
             t.uint64_data_size())
      v[i] = static_cast<double>(t.uint64_data(i));
    else if (t.int32_data_size() && type != onnx::TensorProto::FLOAT16 &&
             type != onnx::TensorProto::BFLOAT16)
      v[i] = t.int32_data(i);
    else
      return info;  // no data (n == 0 aside) or a 16-bit float type
  }
  info.has_value = true;
  info.value = std::move(v);
  return info;
}

Shapes::Shapes(const Source& src, const onnx::GraphProto& graph, int64_t opset)
    : src_(src), graph_(graph), opset_(opset) {
  for (const auto& t : graph.initializer()) {
    const std::string where = "initializer " + quoted(t.name()) + ": ";
    known_[t.name()] = tensor_info(t, [&](const std::string& what) { src.fail(where + what); });
    if (t.data_type() != onnx::TensorProto::UNDEFINED) elem_types_.emplace(t.name(), t.data_type());
  }
  for (const auto& in : graph.input()) {
    if (known_.count(in.name())) continue;  // an initializer: its data says what it is
    graph_inputs_.insert(in.name());
    if (TensorInfo info = declared_info(in); info.ranked) known_[in.name()] = std::move(info);
    if (in.type().has_tensor_type() && in.type().tensor_type().elem_type() != 0)
      elem_types_.emplace(in.name(), in.type().tensor_type().elem_type());
  }
  for (const auto* vis : {&graph.value_info(), &graph.output()})
    for (const auto& vi : *vis) {
      declared_.emplace(vi.name(), &vi);
      if (vi.type().has_tensor_type() && vi.type().tensor_type().elem_type() != 0)
        elem_types_.emplace(vi.name(), vi.type().tensor_type().elem_type());
    }
  for (const auto& node : graph.node())
    for (const auto& out : node.output())
      if (!out.empty()) producers_.emplace(out, &node);
}

int32_t Shapes::elem_type(const std::string& tensor) const {
  const auto it = elem_types_.find(tensor);
  return it == elem_types_.end() ? 0 : it->second;
}

const TensorInfo* Shapes::find(const std::string& tensor) const {
  resolve(tensor);
  const auto it = known_.find(tensor);
  return it == known_.end() || !it->second.ranked ? nullptr : &it->second;
}

void Shapes::resolve(const std::string& tensor) const {
  // Depth-first post-order over producers, with the path on an explicit stack (a chain of a
  // million nodes must not recurse a million deep) and each input edge looked at once.
  // check_graph has refused cycles; `why_` holds the nodes already inferred.
  const auto pending = [&](const std::string& t) -> const onnx::NodeProto* {
    if (t.empty() || known_.count(t)) return nullptr;
    const auto p = producers_.find(t);
    return p == producers_.end() || why_.count(p->second) ? nullptr : p->second;
  };
  std::vector<std::pair<const onnx::NodeProto*, int>> path;  // node, next input to look at
  if (const auto* p = pending(tensor)) path.emplace_back(p, 0);
  while (!path.empty()) {
    auto& [node, next] = path.back();
    const onnx::NodeProto* child = nullptr;
    while (!child && next < node->input_size()) child = pending(node->input(next++));
    if (child) {
      path.emplace_back(child, 0);
      continue;
    }
    infer(*node);
    path.pop_back();
  }
}

void Shapes::infer(const onnx::NodeProto& node) const {
  const NodeRef at(src_, node);
  OpIo io{at, opset_, {}, std::vector<TensorInfo>(static_cast<size_t>(node.output_size())), ""};
  for (const auto& in : node.input()) {
    const auto it = in.empty() ? known_.end() : known_.find(in);
    io.in.push_back(it == known_.end() || !it->second.ranked ? nullptr : &it->second);
  }
  const bool onnx_domain = node.domain().empty() || node.domain() == "ai.onnx";
  const Rule rule = onnx_domain ? rule_for(node.op_type()) : nullptr;
  if (rule)
    rule(io);
  else
    io.why = onnx_domain ? "an operator the importer's shape inference does not cover"
                         : "an operator of domain " + quoted(node.domain()) +
                               " (a custom op or a model-local function)";
  why_[&node] = io.why;
  for (int i = 0; i < node.output_size(); ++i) {
    const std::string& out = node.output(i);
    if (out.empty() || known_.count(out)) continue;
    TensorInfo& info = io.out[static_cast<size_t>(i)];
    if (!info.ranked) {  // the file may still declare it (value_info written by the exporter)
      const auto d = declared_.find(out);
      if (d != declared_.end()) info = declared_info(*d->second);
    }
    known_[out] = std::move(info);
  }
}

Shapes::Origin Shapes::unknown_origin(const std::string& tensor, bool any_dim) const {
  const auto unknown = [&](const std::string& t) {
    const TensorInfo* s = find(t);
    return !s || (any_dim && !s->complete());
  };
  std::unordered_set<std::string> seen;
  std::vector<std::string> todo{tensor};
  Origin r;
  while (!todo.empty()) {
    const std::string t = todo.back();
    todo.pop_back();
    if (!seen.insert(t).second) continue;
    if (graph_inputs_.count(t)) return {t, nullptr, ""};  // only unknown tensors get here
    const auto p = producers_.find(t);
    if (p == producers_.end()) continue;
    bool unknown_input = false;
    for (int i = p->second->input_size() - 1; i >= 0; --i) {
      const std::string& in = p->second->input(i);
      if (in.empty() || !unknown(in)) continue;
      unknown_input = true;
      todo.push_back(in);
    }
    if (!unknown_input && !r.node) {
      r.node = p->second;
      const auto w = why_.find(p->second);
      r.why = w == why_.end() ? "" : w->second;
    }
  }
  return r;
}

std::string Shapes::input_behind(const std::string& tensor, const std::string& dim_param) const {
  std::string same_param, incomplete;
  for (const auto& vi : graph_.input()) {
    if (!graph_inputs_.count(vi.name())) continue;
    if (vi.name() == tensor) return tensor;
    const auto& t = vi.type().tensor_type();
    if (!t.has_shape()) {
      if (incomplete.empty()) incomplete = vi.name();
      continue;
    }
    for (const auto& d : t.shape().dim()) {
      if (!dim_param.empty() && d.dim_param() == dim_param && same_param.empty())
        same_param = vi.name();
      if (!d.has_dim_value() && incomplete.empty()) incomplete = vi.name();
    }
  }
  return !same_param.empty() ? same_param : incomplete;
}

}  // namespace conv::import::onnx_import
