// Writes the test suite's ONNX networks (tests/onnx_models.cpp) to a folder, so that
// `autotune tune --model` can be tried on real ONNX files: alexnet.onnx, vgg16.onnx,
// resnet50.onnx, mobilenet_v2.onnx (input "input", 1x3xHxW; --symbolic-batch makes the batch a
// dim_param "N", which then needs --input input=Nx3xHxW). DIR is created when missing.
#include <exception>
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
  try {
    for (const std::string& path : onnx_models::write_networks(dir, o)) std::cout << path << "\n";
  } catch (const std::exception& e) {
    std::cerr << "make_onnx_models: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
