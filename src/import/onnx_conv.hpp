// One ONNX Conv node -> one ConvProblem, with the checks the importer makes on Conv nodes.
#pragma once

#include "onnx_shapes.hpp"

namespace conv::import::onnx_import {

/// Refuses a Conv whose known shapes or kernel_shape make it 1-D or 3-D ("not supported"), or
/// whose X or W has another rank than 4. Unknown shapes pass.
void check_conv_ranks(const NodeRef& at, const Shapes& shapes);

/// Refuses a Conv whose X, W or B has a known element type other than FLOAT, naming the input and
/// the type.
void check_elem_types(const NodeRef& at, const Shapes& shapes);

/// The problem of one 2-D `Conv` node (default domain), named "<net>:<node>" and validated.
/// Fails naming the node and the input or attribute for a 1-D/3-D convolution ("not supported"),
/// a missing input, an element type other than FLOAT (unknown passes), unknown or symbolic shapes
/// (suggesting --input NAME=NxCxHxW when a graph input's shape is what is missing, else naming
/// the node inference stopped at and why), and bad `kernel_shape`, `strides`, `dilations`,
/// `pads`, `auto_pad` or `group`.
ConvProblem conv_problem(const NodeRef& at, const Shapes& shapes);

}  // namespace conv::import::onnx_import
