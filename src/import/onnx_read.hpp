// Reading an .onnx file into a ModelProto within the import limits (limits.hpp).
#pragma once

#include <onnx/onnx_pb.h>

#include "importers.hpp"

namespace conv::import::onnx_import {

/// The file as a ModelProto. Fails (naming the file) when it is over the size limit, when parsing
/// it would take more memory than the limit allows (estimated before parsing), and when it is not
/// a model: garbage, truncated, no ir_version, no graph or no nodes.
onnx::ModelProto read_model(const Source& src);

}  // namespace conv::import::onnx_import
