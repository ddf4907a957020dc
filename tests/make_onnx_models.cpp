// Writes the test suite's ONNX networks (tests/onnx_models.cpp) to a folder, so that
// `autotune tune --model` can be tried on real ONNX files: alexnet.onnx, vgg16.onnx,
// resnet50.onnx, mobilenet_v2.onnx (input "input", 1x3xHxW; --symbolic-batch makes the batch a
// dim_param "N", which then needs --input input=Nx3xHxW).
#include <fstream>
#include <iostream>
#include <string>

#include "onnx_models.hpp"

int main(int argc, char** argv) {
  std::string dir;
  onnx_models::Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--symbolic-batch")
      o.symbolic_batch = true;
    else if (dir.empty() && !a.empty() && a[0] != '-')
      dir = a;
    else
      dir.clear(), i = argc;
  }
  if (dir.empty()) {
    std::cerr << "usage: make_onnx_models [--symbolic-batch] DIR\n";
    return 2;
  }
  const std::pair<const char*, onnx::ModelProto> models[] = {
      {"alexnet.onnx", onnx_models::alexnet(o)},
      {"vgg16.onnx", onnx_models::vgg16(o)},
      {"resnet50.onnx", onnx_models::resnet50(o)},
      {"mobilenet_v2.onnx", onnx_models::mobilenet_v2(o)}};
  for (const auto& [file, model] : models) {
    const std::string path = dir + "/" + file;
    std::ofstream out(path, std::ios::binary);
    if (!out || !model.SerializeToOstream(&out)) {
      std::cerr << "make_onnx_models: cannot write " << path << "\n";
      return 1;
    }
    std::cout << path << "\n";
  }
  return 0;
}
