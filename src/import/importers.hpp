// The per-format importers behind conv::import_model, and what they share.
#pragma once

#include <string>
#include <vector>

#include "conv/model.hpp"

namespace conv::import {

/// Where errors point: `model "<path>"`, and the network name used to name problems.
struct Source {
  std::string path;  ///< as given by the caller
  std::string net;   ///< file stem, e.g. "alexnet"
  /// conv::Error `model "<path>": <what>`.
  [[noreturn]] void fail(const std::string& what) const;
};

std::vector<ConvProblem> import_onnx(const Source& src, const InputShapes& inputs);
std::vector<ConvProblem> import_caffe_prototxt(const Source& src, const InputShapes& inputs);

/// Validates `p` (named net:layer, control characters in it replaced by '_' so that its descriptor
/// reads back) and returns it; a validate() error becomes
/// `model "<path>": <where>: <validate message>`.
ConvProblem checked(const Source& src, const std::string& where, ConvProblem p);

}  // namespace conv::import
