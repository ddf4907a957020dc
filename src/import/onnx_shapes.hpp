// Shape inference for the tensors a Conv reads: convtune's own, checked and lazy. It replaces
// ONNX's (onnx::shape_inference), which crashed, hung or wrote past heap buffers on crafted
// files: only the producers of a requested tensor are inferred, every attribute and constant is
// range-checked before arithmetic, subgraphs and functions are never entered (their outputs are
// unknown), and the work is linear in the nodes visited. docs/model-import.md lists the ops.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "onnx_node.hpp"

namespace conv::import::onnx_import {

/// One dimension: a number in [0, 2^31], a symbol (dim_param) or unknown.
struct Dim {
  int64_t value = -1;  ///< >= 0 when known
  std::string param;   ///< the symbol when value < 0, or ""
  bool known() const { return value >= 0; }
};

/// What inference knows of a tensor: its rank and dims, and for small constants (shapes, axes,
/// scales: at most kMaxValues elements) the values, row-major.
struct TensorInfo {
  static constexpr size_t kMaxValues = 1024;
  bool ranked = false;
  std::vector<Dim> dims;
  bool has_value = false;
  std::vector<double> value;  ///< exact for integers up to 2^53
  int rank() const { return static_cast<int>(dims.size()); }
  /// All dims known numbers.
  bool complete() const;
};

/// "[1, 3, N, ?]": dim values, dim_params, "?" for unknown dims.
std::string shape_string(const TensorInfo& t);

/// One node being inferred: its inputs as far as known (nullptr for an omitted input or one of
/// unknown rank), the outputs the rule fills in, and why they stay unknown when it cannot.
struct OpIo {
  const NodeRef& at;
  int64_t opset;  ///< of the default domain
  std::vector<const TensorInfo*> in;
  std::vector<TensorInfo> out;
  std::string why;  ///< set by a rule that leaves its outputs unknown

  const TensorInfo* input(size_t i) const { return i < in.size() ? in[i] : nullptr; }
  /// Input `i`'s values; nullptr (and `why` set) when they are not constant.
  const std::vector<double>* values(size_t i, const char* role);
};

/// The shape rule of an op of the default ONNX domain; nullptr when the importer has none.
using Rule = void (*)(OpIo&);
Rule rule_for(const std::string& op_type);

/// Tensor info by name, inferred on demand: initializers and graph inputs as declared, a node's
/// outputs by its rule (falling back to the file's value_info when it has none). Non-owning view
/// of `graph`; fails (conv::Error naming the node) on a node whose inputs contradict its rule.
class Shapes {
 public:
  Shapes(const Source& src, const onnx::GraphProto& graph, int64_t opset);
  /// The info of `tensor`, or nullptr when its rank is unknown.
  const TensorInfo* find(const std::string& tensor) const;
  /// The graph input (not an initializer) that a missing or symbolic dimension of `tensor` comes
  /// from: `tensor` itself when it is one, else an input with the same dim_param, else the first
  /// input whose shape is incomplete, else "".
  std::string input_behind(const std::string& tensor, const std::string& dim_param) const;
  /// The element type of `tensor` (an onnx::TensorProto::DataType) as declared; 0 when unknown.
  int32_t elem_type(const std::string& tensor) const;

  /// Where the missing shape (find() == nullptr) of `tensor` comes from.
  struct Origin {
    std::string input;                      ///< a graph input without a shape it depends on
    const onnx::NodeProto* node = nullptr;  ///< else the node inference stopped at
    std::string why;                        ///< and why it stopped there
  };
  /// Walks back from `tensor` through the producers of tensors without a shape (`any_dim`: or
  /// with a dimension that is not a number): the first graph input (not an initializer) found
  /// that way (--input can give its shape), else the first node whose inputs all have such
  /// shapes but whose outputs could not be inferred; both empty when nothing produces `tensor`.
  Origin unknown_origin(const std::string& tensor, bool any_dim) const;

 private:
  void infer(const onnx::NodeProto& node) const;
  void resolve(const std::string& tensor) const;

  const Source& src_;
  const onnx::GraphProto& graph_;
  int64_t opset_;
  std::unordered_set<std::string> graph_inputs_;  // not initializers
  std::unordered_map<std::string, int32_t> elem_types_;
  std::unordered_map<std::string, const onnx::NodeProto*> producers_;
  std::unordered_map<std::string, const onnx::ValueInfoProto*> declared_;  // value_info, outputs
  mutable std::unordered_map<std::string, TensorInfo> known_;
  mutable std::unordered_map<const onnx::NodeProto*, std::string> why_;  // inferred nodes
};

/// The info of a TensorProto (an initializer or a Constant's value): dims, and the values when
/// it is small and numeric. Fails via `fail` when its data does not match its dims (raw_data of
/// the wrong size, a typed field of the wrong length): the class of file that made ONNX 1.12
/// write past a buffer.
TensorInfo tensor_info(const onnx::TensorProto& t,
                       const std::function<void(const std::string&)>& fail);

}  // namespace conv::import::onnx_import
