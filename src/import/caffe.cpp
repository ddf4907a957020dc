// Placeholder: the Caffe prototxt importer (being written).
#include "importers.hpp"
namespace conv::import {
std::vector<ConvProblem> import_caffe_prototxt(const Source& src, const InputShapes&) { src.fail("Caffe import not implemented yet"); }
}
