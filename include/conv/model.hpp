// conv::import_model: the convolutions of a network file (ONNX or Caffe prototxt) as problems.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "conv/problem.hpp"

namespace conv {

/// Shapes for a model's inputs, by input name: NCHW dims, e.g. {"data", {1, 3, 224, 224}}.
/// Needed where the file leaves a dimension symbolic (ONNX dim_param) or gives no shape; a
/// given shape replaces the file's.
using InputShapes = std::map<std::string, std::vector<int64_t>>;

/// Parses the CLI form `NAME=1x3x224x224` (dims separated by `x`, each in [1, 2^31]). Throws
/// conv::Error `--input "<text>": ...` for a missing `=`, an empty name or a bad dimension.
std::pair<std::string, std::vector<int64_t>> parse_input_shape(std::string_view text);

/// The model formats import_model reads.
enum class ModelFormat {
  onnx,            ///< ONNX ModelProto, binary protobuf (.onnx)
  caffe_prototxt,  ///< Caffe NetParameter in protobuf text format (deploy.prototxt)
};

/// The format of a model file: by extension (.onnx; .prototxt, .pbtxt), else by content (a
/// protobuf text file is printable text). Throws conv::Error `model "<path>": cannot open ...`.
ModelFormat model_format(const std::string& path);

/// Every 2-D convolution of the network in `path`, in graph order, as problems named
/// "<file stem>:<layer or node name>" (an unnamed ONNX node is named after its first output).
/// Batch and spatial sizes come from the model's input shapes (or `inputs`).
///
/// - ONNX (read with the onnx library's protobuf classes; shapes by the importer's own checked
///   inference over the producers of each Conv's inputs, docs/model-import.md lists the ops):
///   `Conv` nodes with `pads` ([top, left, bottom, right]), `auto_pad` (SAME_UPPER, SAME_LOWER:
///   the odd pad at the end or the start; VALID), `strides`, `dilations`, `group`. 1-D and 3-D
///   convolutions and `ConvTranspose` are refused.
/// - Caffe prototxt (parsed with protobuf's TextFormat into a subset of caffe.proto): shapes are
///   propagated through Input / input_dim / input_shape, Convolution, Pooling (Caffe's ceil
///   rounding and clipping), ReLU, LRN, Dropout, BatchNorm, Scale, Split, Concat, Eltwise,
///   InnerProduct, Softmax.
///
/// Throws conv::Error `model "<path>": <node or layer>: <field>: <what>` for an unreadable or
/// malformed file, one over the size limit (CONVTUNE_IMPORT_MAX_FILE_MB, default 2048) or whose
/// parse would take more memory than CONVTUNE_IMPORT_MAX_MEMORY_MB (default 128 MiB + 4 x its
/// size; estimated before parsing), a Conv input whose shape cannot be inferred (naming the node
/// inference stopped at), an unsupported node or layer type, a symbolic or missing input shape not
/// given in `inputs`, an input named in `inputs` that the model does not have, and a
/// convolution that is not a valid problem.
std::vector<ConvProblem> import_model(const std::string& path, const InputShapes& inputs = {});

}  // namespace conv
