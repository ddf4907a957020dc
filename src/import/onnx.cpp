// Placeholder: the ONNX importer (being written).
#include "importers.hpp"
namespace conv::import {
std::vector<ConvProblem> import_onnx(const Source& src, const InputShapes&) { src.fail("ONNX import not implemented yet"); }
}
