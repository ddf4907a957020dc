// The ONNX importer: read a ModelProto, apply --input shapes, run ONNX shape inference, and turn
// every 2-D Conv node into a ConvProblem (onnx_conv.cpp), in graph order.
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <unordered_map>
#include <vector>

#include "onnx_conv.hpp"
#include "quoted.hpp"

namespace conv::import {

namespace {

using onnx_import::NodeRef;

/// The file as a ModelProto; refuses what is not one (garbage, truncated, no graph).
onnx::ModelProto read_model(const Source& src) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(src.path, ec);
  if (ec) src.fail("cannot read: " + ec.message());
  if (size == 0) src.fail("empty file, not an ONNX model");
  if (size > static_cast<uintmax_t>(INT_MAX))
    src.fail("larger than 2 GiB, protobuf's limit (ONNX external data is not supported)");
  std::ifstream in(src.path, std::ios::binary);
  std::string bytes(static_cast<size_t>(size), '\0');
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size)))
    src.fail("cannot read " + std::to_string(size) + " bytes");
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes))
    src.fail("not an ONNX model: protobuf parsing of ModelProto failed (garbage or truncated)");
  if (model.ir_version() <= 0) src.fail("not an ONNX model: ModelProto.ir_version is missing");
  if (!model.has_graph() || model.graph().node_size() == 0)
    src.fail("not an ONNX model: ModelProto.graph is missing or has no nodes");
  const bool has_onnx_opset =
      std::any_of(model.opset_import().begin(), model.opset_import().end(),
                  [](const auto& o) { return o.domain().empty() || o.domain() == "ai.onnx"; });
  if (!has_onnx_opset) src.fail("ModelProto.opset_import: no version for the default ONNX domain");
  return model;
}

bool is_initializer(const onnx::GraphProto& graph, const std::string& name) {
  return std::any_of(graph.initializer().begin(), graph.initializer().end(),
                     [&](const auto& t) { return t.name() == name; });
}

/// The graph's inputs that are not initializers, quoted, at most 8 (weights given as graph inputs
/// would make the list long).
std::string input_names(const onnx::GraphProto& graph) {
  std::string names;
  int n = 0;
  for (const auto& in : graph.input()) {
    if (is_initializer(graph, in.name())) continue;
    if (n++ < 8) names += (names.empty() ? "" : ", ") + conv::quoted(in.name());
  }
  return n > 8 ? names + ", ... (" + std::to_string(n - 8) + " more)" : names;
}

/// Replaces the shapes of the graph inputs named in `inputs`. When a shape changes, the file's
/// value_info and output shapes may be stale, so they are dropped and shape inference redoes them.
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

/// Refuses graph-level conflicts that ONNX shape inference would only report as a bare
/// ShapeInferenceError: a Conv without X or W, and an initializer that is also a graph input
/// whose dims or element type differ from the input's declared ones.
void check_graph(const Source& src, const onnx::GraphProto& graph) {
  // ONNX graphs are single-assignment: with two producers of one tensor, which shape a Conv
  // reads would be the importer's guess.
  std::unordered_map<std::string, std::string> producer;  // tensor -> what gives it
  for (const auto& in : graph.input()) producer.emplace(in.name(), "a graph input");
  for (const auto& t : graph.initializer()) producer.emplace(t.name(), "an initializer");
  for (const auto& node : graph.node()) {
    const NodeRef at(src, node);
    for (const auto& out : node.output())
      if (!out.empty())
        if (const auto [it, fresh] =
                producer.emplace(out, "written by node " + conv::quoted(at.name));
            !fresh)
          at.fail("output " + conv::quoted(out) + ": also " + it->second +
                  " (a tensor has one producer)");
  }
  // A cycle would leave its tensors "produced by no node" in the messages after inference.
  // An empty name is an omitted optional input or output, not a tensor.
  std::unordered_map<std::string, size_t> made_by;
  for (int n = 0; n < graph.node_size(); ++n)
    for (const auto& out : graph.node(n).output())
      if (!out.empty()) made_by.emplace(out, static_cast<size_t>(n));
  std::vector<std::vector<size_t>> consumers(static_cast<size_t>(graph.node_size()));
  for (int n = 0; n < graph.node_size(); ++n)
    for (const auto& in : graph.node(n).input())
      if (const auto it = made_by.find(in); !in.empty() && it != made_by.end())
        consumers[it->second].push_back(static_cast<size_t>(n));
  if (const std::vector<size_t> cycle = find_cycle(consumers); !cycle.empty()) {
    std::string names;
    for (const size_t n : cycle) names += conv::quoted(NodeRef(src, graph.node(n)).name) + " -> ";
    NodeRef(src, graph.node(cycle[0]))
        .fail("the graph has a cycle (" + names +
              conv::quoted(NodeRef(src, graph.node(cycle[0])).name) +
              "); an ONNX graph is acyclic");
  }
  for (const auto& node : graph.node()) {
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
    onnx::TensorShapeProto dims;
    for (const int64_t d : init.dims()) dims.add_dim()->set_dim_value(d);
    src.fail(where + "declared shape " + onnx_import::shape_string(declared.shape()) +
             " differs from its initializer's dims " + onnx_import::shape_string(dims) +
             " (ONNX shape inference refuses the conflict)");
  }
}

/// The attribute values onnx 1.12's shape inference divides by or indexes with unchecked, on any
/// node (strides 0 divide by zero; a blocksize of 2^32 squares to zero in DepthToSpace).
/// Nodes of other domains have no ONNX inference and are skipped. In a function body a value may
/// be a reference to the calling node's attribute (ref_attr_name), which onnx fills in unchecked:
/// refused there for these attributes.
void check_inferred_attributes(const NodeRef& at) {
  if (!at.node.domain().empty() && at.node.domain() != "ai.onnx") return;
  for (const auto& a : at.node.attribute())
    for (const char* name : {"strides", "dilations", "kernel_shape", "blocksize"})
      if (a.name() == name && !a.ref_attr_name().empty())
        at.fail("attribute " + conv::quoted(name) + ": a reference to the calling node's " +
                conv::quoted(a.ref_attr_name()) +
                ", which the importer cannot check before ONNX's shape inference divides by it");
  for (const char* name : {"strides", "dilations", "kernel_shape"})
    onnx_import::ints_attr(at, name, 0, 1, {});
  if (onnx_import::is_onnx_op(at.node, "DepthToSpace") ||
      onnx_import::is_onnx_op(at.node, "SpaceToDepth"))
    onnx_import::int_attr(at, "blocksize", 1, 1);
}

/// Calls fn on every node of the graphs held in `node`'s attributes (If, Loop, Scan bodies),
/// at any depth.
template <typename Fn>
void for_each_nested_node(const onnx::NodeProto& node, const Fn& fn) {
  for (const auto& a : node.attribute()) {
    std::vector<const onnx::GraphProto*> graphs;
    if (a.has_g()) graphs.push_back(&a.g());
    for (const auto& g : a.graphs()) graphs.push_back(&g);
    for (const auto* g : graphs)
      for (const auto& inner : g->node()) {
        fn(inner);
        for_each_nested_node(inner, fn);
      }
  }
}

/// Shape inference runs into subgraphs and model-local function bodies too: their nodes get the
/// same checks, and a function that calls itself (directly or through others) is refused, which
/// onnx would follow until the stack overflowed.
void check_nested(const Source& src, const onnx::ModelProto& model) {
  for (const auto& node : model.graph().node())
    for_each_nested_node(
        node, [&](const onnx::NodeProto& n) { check_inferred_attributes(NodeRef(src, n)); });
  std::unordered_map<std::string, size_t> functions;
  for (int f = 0; f < model.functions_size(); ++f)
    functions.emplace(model.functions(f).domain() + "::" + model.functions(f).name(),
                      static_cast<size_t>(f));
  std::vector<std::vector<size_t>> calls(static_cast<size_t>(model.functions_size()));
  for (int f = 0; f < model.functions_size(); ++f) {
    const auto call = [&](const onnx::NodeProto& n) {
      check_inferred_attributes(NodeRef(src, n));
      if (const auto it = functions.find(n.domain() + "::" + n.op_type()); it != functions.end())
        calls[f].push_back(it->second);
    };
    for (const auto& n : model.functions(f).node()) {
      call(n);
      for_each_nested_node(n, call);
    }
  }
  if (const std::vector<size_t> cycle = find_cycle(calls); !cycle.empty()) {
    const auto& first = model.functions(static_cast<int>(cycle[0]));
    std::string names;
    for (const size_t f : cycle)
      names += conv::quoted(model.functions(static_cast<int>(f)).name()) + " -> ";
    src.fail("function " + conv::quoted(first.name()) + " (domain " + conv::quoted(first.domain()) +
             "): calls itself (" + names + conv::quoted(first.name()) +
             "); ONNX functions cannot recurse");
  }
}

/// Makes the graph safe for ONNX shape inference, which divides by strides and indexes X's dims
/// with W's kernel dims unchecked (onnx 1.12 convPoolShapeInference): strides, dilations and
/// kernel sizes must be >= 1 on every node, Conv ranks must be 2-D where already known, and a
/// convolution without kernel_shape gets one from its statically known W so that onnx compares
/// its length with X's rank. ConvTranspose is refused here too (not supported).
void prepare_for_inference(const Source& src, onnx::GraphProto& graph) {
  const onnx_import::Shapes declared(graph);
  for (auto& node : *graph.mutable_node()) {
    if (!node.domain().empty() && node.domain() != "ai.onnx") continue;
    const NodeRef at(src, node);
    if (node.op_type() == "ConvTranspose")
      at.fail("not supported: ConvTranspose (transposed convolution); only Conv is imported");
    check_inferred_attributes(at);
    if (node.op_type() == "Conv") {
      onnx_import::check_elem_types(at, declared);
      onnx_import::check_conv_ranks(at, declared);
    }
    const int w = node.op_type() == "QLinearConv"                               ? 3
                  : node.op_type() == "Conv" || node.op_type() == "ConvInteger" ? 1
                                                                                : -1;
    if (w < 0 || node.input_size() <= w) continue;
    const bool has_kernel_shape =
        std::any_of(node.attribute().begin(), node.attribute().end(),
                    [](const auto& a) { return a.name() == "kernel_shape"; });
    const onnx::TensorShapeProto* ws = declared.find(node.input(w));
    if (has_kernel_shape || !ws || ws->dim_size() < 3) continue;
    onnx::AttributeProto kernel;
    kernel.set_name("kernel_shape");
    kernel.set_type(onnx::AttributeProto::INTS);
    for (int i = 2; i < ws->dim_size(); ++i) {
      if (!ws->dim(i).has_dim_value()) break;
      const int64_t d = ws->dim(i).dim_value();
      // Named as W's, not as the kernel_shape attribute the file does not have.
      if (d < 1 || d > onnx_import::kMaxValue)
        at.fail("input W " + conv::quoted(node.input(w)) + ": dimension " + std::to_string(i) +
                " is " + std::to_string(d) + ", out of range [1, 2^31]");
      kernel.add_ints(d);
    }
    if (kernel.ints_size() == ws->dim_size() - 2) *node.add_attribute() = kernel;
  }
}

void infer_shapes(const Source& src, onnx::ModelProto& model) {
  // error_mode 0: a node onnx cannot infer leaves its outputs unknown instead of throwing; the
  // importer then names the Conv input it cannot size.
  const onnx::ShapeInferenceOptions options(/*check_type=*/false, /*error_mode=*/0);
  try {
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    src.fail(std::string("ONNX shape inference failed: ") + e.what());
  }
}

}  // namespace

std::vector<ConvProblem> import_onnx(const Source& src, const InputShapes& inputs) {
  onnx::ModelProto model = read_model(src);
  apply_inputs(src, *model.mutable_graph(), inputs);
  check_graph(src, model.graph());
  prepare_for_inference(src, *model.mutable_graph());
  check_nested(src, model);
  infer_shapes(src, model);
  const onnx_import::Shapes shapes(model.graph());
  std::vector<ConvProblem> problems;
  for (const auto& node : model.graph().node())
    if (onnx_import::is_onnx_op(node, "Conv"))
      problems.push_back(onnx_import::conv_problem(NodeRef(src, node), shapes));
  return problems;
}

}  // namespace conv::import
