// Shape rules of the Caffe layer types the prototxt importer understands (caffe_layers.cpp); the
// parsing and the walk over the net are in caffe.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "caffe.pb.h"
#include "importers.hpp"

namespace conv::import::caffe_layers {

/// A blob's dimensions, outermost first: N x C x H x W for images, N x num_output after
/// InnerProduct. Every dimension is in [1, kMaxDim].
using Shape = std::vector<int64_t>;

/// Largest blob dimension and layer size accepted; bounds every later sum and product.
constexpr int64_t kMaxDim = int64_t{1} << 31;

/// "1x3x224x224".
std::string to_string(const Shape& s);

/// One layer of the net, for error messages: `model "<path>": layer "<name>" (<type>): ...`.
struct Layer {
  const Source& src;
  const caffe::LayerParameter& param;
  int index;                                ///< position in the file's layer list, 0-based
  const std::vector<std::string>& skipped;  ///< parser warnings about skipped unknown fields

  /// `layer "<name>" (<type>)`, or `layer #<index>` parts where the file leaves them empty.
  std::string label() const;
  /// The problem name part: the layer name, or "layer<index>" for an unnamed layer.
  std::string name() const;
  /// conv::Error `model "<path>": <label>: <field>: <what>`.
  [[noreturn]] void fail(const std::string& field, const std::string& what) const;
  /// fail() for a required field that is absent; adds the first skipped unknown field of
  /// `message_type` (e.g. "caffe.ConvolutionParameter"), which is often a misspelling of it.
  [[noreturn]] void missing(const std::string& field, const std::string& message_type,
                            const std::string& hint) const;
};

/// A Convolution layer on the 4-D bottom `x`: the validated problem named "<net>:<layer>".
/// The output is N x K x OH x OW with OH = (H + 2 pad_h - (dilation_h (kernel_h - 1) + 1)) /
/// stride_h + 1 (floor). Throws for a missing num_output or kernel, values out of [1, 2^31]
/// (pad: [0, 2^31]), conflicting forms (kernel_size with kernel_h), a group that does not divide
/// both channel counts, an axis other than the channels, and an output smaller than 1.
ConvProblem convolution(const Layer& l, const std::string& bottom, const Shape& x);

/// Convolution's output shape for a problem from convolution().
Shape convolution_output(const ConvProblem& p);

/// A Pooling layer (MAX, AVE, STOCHASTIC: same shape rule) on the 4-D bottom `x`, with Caffe's
/// rounding: OH = ceil((H + 2 pad - kernel) / stride) + 1 (floor with round_mode: FLOOR), less
/// one when padding is set and the last window would start in the bottom padding
/// ((OH - 1) stride >= H + pad). global_pooling uses kernel = H x W. Field rules as Caffe's
/// PoolingLayer::LayerSetUp: kernel_h / kernel_w, pad_h / pad_w and stride_h / stride_w only in
/// pairs (one alone is refused, not defaulted), kernel_size wins over a lone kernel_h or
/// kernel_w. Throws for a missing kernel, kernel with global_pooling, pad >= kernel, padding with
/// STOCHASTIC pooling, a kernel larger than the padded input.
Shape pooling(const Layer& l, const std::string& bottom, const Shape& x);

/// Concat of `xs` (same rank, equal dims but along the axis; axis 1 default, or the legacy
/// concat_dim). Throws for mismatched shapes, a bad axis, or a result over 2^31.
Shape concat(const Layer& l, const std::vector<std::string>& bottoms, const std::vector<Shape>& xs);

/// Eltwise of `xs`: all shapes must be equal (at least two bottoms); coeff count as Caffe.
Shape eltwise(const Layer& l, const std::vector<std::string>& bottoms,
              const std::vector<Shape>& xs);

/// InnerProduct: the dims before inner_product_param.axis (default 1), then num_output.
Shape inner_product(const Layer& l, const Shape& x);

}  // namespace conv::import::caffe_layers
