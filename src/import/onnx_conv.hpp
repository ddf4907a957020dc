// Pieces of the ONNX importer shared by onnx.cpp (file, inputs, shape inference) and
// onnx_conv.cpp (one Conv node -> one ConvProblem).
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <unordered_map>
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

/// The ints of attribute `name`, or `fallback` when the node lacks it. Fails (naming node and
/// attribute) unless it is an INTS attribute with `len` values (any count when len == 0), each in
/// [lo, 2^31]. Checked before any arithmetic, so absurd values never overflow.
std::vector<int64_t> ints_attr(const NodeRef& at, const char* name, size_t len, int64_t lo,
                               std::vector<int64_t> fallback);

/// The int of attribute `name`, or `fallback` when the node lacks it. Fails (naming node and
/// attribute) unless it is an INT attribute in [lo, 2^31].
int64_t int_attr(const NodeRef& at, const char* name, int64_t lo, int64_t fallback);

/// Tensor shapes by name after shape inference: initializer dims first, then the declared or
/// inferred types of graph inputs, value_info and graph outputs. Non-owning view of `graph`.
class Shapes {
 public:
  explicit Shapes(const onnx::GraphProto& graph);
  /// The shape of `tensor`, or nullptr when its rank is unknown.
  const onnx::TensorShapeProto* find(const std::string& tensor) const;
  /// The graph input (not an initializer) that a missing or symbolic dimension of `tensor` comes
  /// from: `tensor` itself when it is one, else an input with the same dim_param, else the first
  /// input whose shape is incomplete, else "".
  std::string input_behind(const std::string& tensor, const std::string& dim_param) const;
  /// The element type of `tensor` (an onnx::TensorProto::DataType): the initializer's data_type,
  /// else the declared or inferred elem_type; 0 (UNDEFINED) when unknown.
  int32_t elem_type(const std::string& tensor) const;

  /// Where the missing shape (find() == nullptr) of `tensor` comes from.
  struct Origin {
    std::string input;                      ///< a graph input without a shape it depends on
    const onnx::NodeProto* node = nullptr;  ///< else the node onnx could not infer
  };
  /// Walks back from `tensor` through the producers of tensors without a shape (`any_dim`: or
  /// with a dimension that is not a number): the first graph input (not an initializer) found
  /// that way (--input can give its shape), else the first node whose inputs all have such
  /// shapes but whose outputs onnx could not infer (unknown op, an opset without inference, a
  /// shape computed at run time); both empty when nothing produces `tensor`.
  Origin unknown_origin(const std::string& tensor, bool any_dim) const;

 private:
  const onnx::GraphProto& graph_;
  std::unordered_map<std::string, onnx::TensorShapeProto> initializers_;
  std::unordered_map<std::string, const onnx::TensorShapeProto*> declared_;
  std::unordered_map<std::string, int32_t> elem_types_;
  std::unordered_map<std::string, const onnx::NodeProto*> producers_;
};

/// "[1, 3, N, ?]": dim values, dim_params, "?" for unknown dims.
std::string shape_string(const onnx::TensorShapeProto& shape);

/// Refuses a Conv whose known shapes or kernel_shape make it 1-D or 3-D ("not supported"), or
/// whose X or W has another rank than 4. Safe before shape inference (unknown shapes pass).
void check_conv_ranks(const NodeRef& at, const Shapes& shapes);

/// Refuses a Conv whose X, W or B has a known element type other than FLOAT, naming the input and
/// the type. Run before shape inference too: a FLOAT16 model whose outputs are declared FLOAT
/// would otherwise fail there with a type conflict.
void check_elem_types(const NodeRef& at, const Shapes& shapes);

/// The problem of one 2-D `Conv` node (default domain), named "<net>:<node>" and validated.
/// Fails naming the node and the input or attribute for a 1-D/3-D convolution ("not supported"),
/// a missing input, an element type other than FLOAT (unknown passes), unknown or symbolic shapes
/// (suggesting --input NAME=NxCxHxW when a graph input's shape is what is missing, else naming
/// the node shape inference stopped at), and bad `kernel_shape`, `strides`, `dilations`, `pads`,
/// `auto_pad` or `group`.
ConvProblem conv_problem(const NodeRef& at, const Shapes& shapes);

}  // namespace conv::import::onnx_import
