// The ONNX importer: read a ModelProto (onnx_read.cpp), apply --input shapes, check the graph, and
// turn every 2-D Conv node into a ConvProblem (onnx_conv.cpp) in graph order, with shapes from the
// importer's own inference (onnx_shapes.cpp). ONNX's shape inference is not run: on crafted files
// it crashed, hung and wrote past heap buffers.
#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "onnx_conv.hpp"
#include "onnx_read.hpp"
#include "quoted.hpp"

namespace conv::import {

namespace {

using onnx_import::NodeRef;

/// The graph's inputs that are not initializers, quoted, at most 8 (weights given as graph inputs
/// would make the list long).
std::string input_names(const onnx::GraphProto& graph) {
  std::unordered_set<std::string> initializers;
  for (const auto& t : graph.initializer()) initializers.insert(t.name());
  std::string names;
  int n = 0;
  for (const auto& in : graph.input()) {
    if (initializers.count(in.name())) continue;
    if (n++ < 8) names += (names.empty() ? "" : ", ") + conv::quoted(in.name());
  }
  return n > 8 ? names + ", ... (" + std::to_string(n - 8) + " more)" : names;
}

/// Replaces the shapes of the graph inputs named in `inputs`. When a shape changes, the file's
/// value_info and output shapes may be stale, so they are dropped and inference redoes them.
void apply_inputs(const Source& src, onnx::GraphProto& graph, const InputShapes& inputs) {
  bool changed = false;
  for (const auto& [name, dims] : inputs) {
    const std::string where = "--input " + conv::quoted(name) + ": ";
    onnx::ValueInfoProto* vi = nullptr;
    for (auto& in : *graph.mutable_input())
      if (in.name() == name) vi = &in;
    if (!vi)
      src.fail(where + "the model has no such input (its inputs: " + input_names(graph) + ")");
    for (size_t i = 0; i < dims.size(); ++i)
      if (dims[i] < 1 || dims[i] > onnx_import::kMaxValue)
        src.fail(where + "dimension " + std::to_string(i) + " = " + std::to_string(dims[i]) +
                 " is out of range [1, 2^31]");
    if (dims.size() != 4)
      for (const auto& node : graph.node())
        if (onnx_import::is_onnx_op(node, "Conv") && node.input_size() > 0 && node.input(0) == name)
          src.fail(where + std::to_string(dims.size()) + " dims given, but node \"" +
                   NodeRef(src, node).name + "\" (Conv) reads it as X and needs 4 (NxCxHxW)");
    onnx::TypeProto* type = vi->mutable_type();
    if (type->value_case() != onnx::TypeProto::kTensorType &&
        type->value_case() != onnx::TypeProto::VALUE_NOT_SET)
      src.fail(where + "the model's input is not a tensor");
    onnx::TypeProto::Tensor* tensor = type->mutable_tensor_type();
    if (tensor->elem_type() == onnx::TensorProto::UNDEFINED)
      tensor->set_elem_type(onnx::TensorProto::FLOAT);
    onnx::TensorShapeProto shape;
    for (const int64_t d : dims) shape.add_dim()->set_dim_value(d);
    if (!tensor->has_shape() || tensor->shape().SerializeAsString() != shape.SerializeAsString())
      changed = true;
    *tensor->mutable_shape() = shape;
  }
  if (!changed) return;
  graph.clear_value_info();
  for (auto& out : *graph.mutable_output())
    if (out.type().has_tensor_type()) out.mutable_type()->mutable_tensor_type()->clear_shape();
}

/// A cycle of the graph whose vertex v has edges to uses[v], in the direction of the edges, or
/// empty when it is acyclic. Iterative (Kahn's algorithm), so a chain of a million
/// nodes does not recurse a million deep.
std::vector<size_t> find_cycle(const std::vector<std::vector<size_t>>& uses) {
  std::vector<size_t> pending(uses.size(), 0);
  for (const auto& to : uses)
    for (const size_t v : to) ++pending[v];
  std::vector<size_t> ready;
  for (size_t v = 0; v < uses.size(); ++v)
    if (pending[v] == 0) ready.push_back(v);
  while (!ready.empty()) {
    const size_t v = ready.back();
    ready.pop_back();
    for (const size_t u : uses[v])
      if (--pending[u] == 0) ready.push_back(u);
  }
  // Every vertex left has an incoming edge from another one left (`from`): walking those edges
  // backwards from any of them repeats a vertex within uses.size() steps, closing a cycle.
  std::vector<size_t> from(uses.size(), SIZE_MAX);
  for (size_t v = 0; v < uses.size(); ++v)
    for (const size_t u : uses[v])
      if (pending[v] > 0 && pending[u] > 0) from[u] = v;
  const auto start = std::find_if(pending.begin(), pending.end(), [](size_t n) { return n > 0; });
  if (start == pending.end()) return {};
  std::vector<size_t> walk;
  std::vector<size_t> seen_at(uses.size(), SIZE_MAX);
  for (size_t v = static_cast<size_t>(start - pending.begin()); seen_at[v] == SIZE_MAX;
       v = from[v]) {
    seen_at[v] = walk.size();
    walk.push_back(v);
  }
  const size_t repeat = from[walk.back()];
  std::vector<size_t> cycle(walk.begin() + static_cast<std::ptrdiff_t>(seen_at[repeat]),
                            walk.end());
  std::reverse(cycle.begin(), cycle.end());  // in the direction of the edges
  return cycle;
}

/// Refuses graph-level conflicts: two producers of one tensor, a cycle, a Conv without X or W or
/// with a repeated attribute, ConvTranspose, and an initializer that is also a graph input whose
/// dims or element type differ from the input's declared ones.
void check_graph(const Source& src, const onnx::GraphProto& graph) {
  // ONNX graphs are single-assignment: with two producers of one tensor, which shape a Conv
  // reads would be the importer's guess. Keys view the graph's own strings.
  constexpr int64_t kInput = -1, kInitializer = -2;
  std::unordered_map<std::string_view, int64_t> producer;  // node index, or kInput/kInitializer
  const auto what = [&](int64_t p) {
    return p == kInput ? std::string("a graph input")
           : p == kInitializer
               ? std::string("an initializer")
               : "written by node " +
                     conv::quoted(NodeRef(src, graph.node(static_cast<int>(p))).name);
  };
  for (const auto& in : graph.input()) producer.emplace(in.name(), kInput);
  for (const auto& t : graph.initializer()) producer.emplace(t.name(), kInitializer);
  for (int n = 0; n < graph.node_size(); ++n)
    for (const auto& out : graph.node(n).output())
      if (!out.empty())
        if (const auto [it, fresh] = producer.emplace(out, n); !fresh)
          NodeRef(src, graph.node(n))
              .fail("output " + conv::quoted(out) + ": also " + what(it->second) +
                    " (a tensor has one producer)");
  // As ONNX's checker: every input is given by something (an If's condition, say, left undefined
  // would make the importer report its outputs as produced by no node). An empty name is an
  // omitted optional input or output, not a tensor.
  // A cycle would leave its tensors "produced by no node" in the messages after inference.
  std::vector<std::vector<size_t>> consumers(static_cast<size_t>(graph.node_size()));
  for (int n = 0; n < graph.node_size(); ++n)
    for (const auto& in : graph.node(n).input()) {
      if (in.empty()) continue;
      const auto it = producer.find(in);
      if (it == producer.end())
        NodeRef(src, graph.node(n))
            .fail("input " + conv::quoted(in) + ": no node, graph input or initializer gives it");
      if (it->second >= 0)
        consumers[static_cast<size_t>(it->second)].push_back(static_cast<size_t>(n));
    }
  if (const std::vector<size_t> cycle = find_cycle(consumers); !cycle.empty()) {
    std::string names;
    for (const size_t n : cycle) names += conv::quoted(NodeRef(src, graph.node(n)).name) + " -> ";
    NodeRef(src, graph.node(cycle[0]))
        .fail("the graph has a cycle (" + names +
              conv::quoted(NodeRef(src, graph.node(cycle[0])).name) +
              "); an ONNX graph is acyclic");
  }
  for (const auto& node : graph.node()) {
    if (onnx_import::is_onnx_op(node, "ConvTranspose"))
      NodeRef(src, node).fail(
          "not supported: ConvTranspose (transposed convolution); only Conv is imported");
    if (!onnx_import::is_onnx_op(node, "Conv")) continue;
    const NodeRef at(src, node);
    if (node.input_size() < 2)
      at.fail(std::string("input W: missing (") +
              (node.input_size() == 0 ? "the node has no inputs; " : "") + "Conv needs X and W)");
    if (node.input_size() > 3)
      at.fail(std::to_string(node.input_size()) + " inputs: Conv takes X, W and an optional B");
    if (node.input(0).empty()) at.fail("input X: missing");
    if (node.input(1).empty()) at.fail("input W: missing");
    std::unordered_map<std::string, int> seen;
    for (const auto& a : node.attribute())
      if (++seen[a.name()] == 2) at.fail("attribute " + conv::quoted(a.name()) + ": given twice");
  }
  std::unordered_map<std::string, const onnx::TensorProto*> initializers;
  for (const auto& t : graph.initializer()) initializers.emplace(t.name(), &t);
  for (const auto& in : graph.input()) {
    const auto it = initializers.find(in.name());
    if (it == initializers.end() || !in.type().has_tensor_type()) continue;
    const onnx::TensorProto& init = *it->second;
    const auto& declared = in.type().tensor_type();
    const std::string where = "graph input " + conv::quoted(in.name()) + ": ";
    if (declared.elem_type() != onnx::TensorProto::UNDEFINED &&
        init.data_type() != onnx::TensorProto::UNDEFINED &&
        declared.elem_type() != init.data_type())
      src.fail(
          where + "declared element type " + onnx::TensorProto_DataType_Name(declared.elem_type()) +
          " differs from its initializer's " + onnx::TensorProto_DataType_Name(init.data_type()));
    if (!declared.has_shape()) continue;
    bool same = declared.shape().dim_size() == init.dims_size();
    for (int i = 0; same && i < init.dims_size(); ++i)
      same = !declared.shape().dim(i).has_dim_value() ||
             declared.shape().dim(i).dim_value() == init.dims(i);
    if (same) continue;
    std::string text = "[";
    for (const auto& d : declared.shape().dim())
      text += (text.size() > 1 ? ", " : "") + (d.has_dim_value()   ? std::to_string(d.dim_value())
                                               : d.has_dim_param() ? conv::escaped(d.dim_param())
                                                                   : std::string("?"));
    src.fail(where + "declared shape " + text + "] differs from its initializer's dims " +
             onnx_import::list({init.dims().begin(), init.dims().end()}));
  }
}

/// The default domain's opset version (ModelProto.opset_import); some ops moved attributes to
/// inputs between versions.
int64_t onnx_opset(const Source& src, const onnx::ModelProto& model) {
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
  src.fail("ModelProto.opset_import: no version for the default ONNX domain");
}

}  // namespace

std::vector<ConvProblem> import_onnx(const Source& src, const InputShapes& inputs) {
  onnx::ModelProto model = onnx_import::read_model(src);
  const int64_t opset = onnx_opset(src, model);
  apply_inputs(src, *model.mutable_graph(), inputs);
  check_graph(src, model.graph());
  const onnx_import::Shapes shapes(src, model.graph(), opset);
  std::vector<ConvProblem> problems;
  for (const auto& node : model.graph().node())
    if (onnx_import::is_onnx_op(node, "Conv"))
      problems.push_back(onnx_import::conv_problem(NodeRef(src, node), shapes));
  return problems;
}

}  // namespace conv::import
