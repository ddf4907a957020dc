// ONNX models built in C++ for the importer tests (opset 13, IR 8): four published networks and a
// one-Conv model to break in targeted ways, plus a temporary folder to write them to.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

namespace onnx_models {

/// How weights enter the graph. Initializers carry zero-filled raw_data of the right size (valid
/// ONNX, but VGG-16 would be 550 MB), so the big networks default to weights as graph inputs with
/// declared shapes.
enum class Weights { graph_inputs, initializers };

struct Options {
  bool symbolic_batch = false;  ///< batch dim of "input" is dim_param "N" instead of 1
  Weights weights = Weights::graph_inputs;
};

/// The networks, input "input" (Nx3xHxW float), from the published architectures.
onnx::ModelProto alexnet(const Options& o = {});       ///< Caffe bvlc_alexnet, 227, groups 2
onnx::ModelProto vgg16(const Options& o = {});         ///< configuration D, 224
onnx::ModelProto resnet50(const Options& o = {});      ///< v1.5 (stride on the 3x3), 224
onnx::ModelProto mobilenet_v2(const Options& o = {});  ///< width 1.0, 224

/// One Conv node "conv" (X = graph input "x" of `x_dims`, W = initializer "w" of `w_dims` with
/// zero data, output "y") of op type `op`, no attributes; tests add or break what they need.
onnx::ModelProto single_conv(const std::vector<int64_t>& x_dims, const std::vector<int64_t>& w_dims,
                             const std::string& op = "Conv");

/// Adds (or replaces) an INTS / INT / STRING attribute on `node`.
void set_attr(onnx::NodeProto& node, const std::string& name, const std::vector<int64_t>& ints);
void set_attr(onnx::NodeProto& node, const std::string& name, int64_t i);
void set_attr(onnx::NodeProto& node, const std::string& name, const std::string& s);

/// Writes the four networks above to <dir>/alexnet.onnx, vgg16.onnx, resnet50.onnx and
/// mobilenet_v2.onnx, creating `dir` and its parents when missing; returns the paths written.
/// Throws std::runtime_error naming the path it cannot create or write.
std::vector<std::string> write_networks(const std::string& dir, const Options& o = {});

/// A fresh temporary folder (mkdtemp), removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  const std::string& path() const { return dir_; }
  TempDir& operator=(const TempDir&) = delete;
  /// Writes `bytes` to <dir>/<file> and returns its path.
  std::string write(const std::string& file, const std::string& bytes) const;
  /// Serializes `model` (SerializeToString) to <dir>/<file> and returns its path.
  std::string write(const std::string& file, const onnx::ModelProto& model) const;

 private:
  std::string dir_;
};

}  // namespace onnx_models
