// THE list of algorithms (oneDNN's implementation list): most specialised first. Adding an
// algorithm is one new file, one line here and one line in CMakeLists.txt; tests, the tuner and
// the CLI iterate this table at run time.
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <sstream>

#include "conv/algorithm.hpp"
#include "device_ops.hpp"
#include "kernels.hpp"

namespace conv {

static const std::vector<const Algorithm*>& table() {
  // clang-format off
  static const std::vector<const Algorithm*> algorithms = {
      &kernels::cpu_depthwise(),
      &kernels::cpu_winograd(),
      &kernels::cpu_fft(),
      &kernels::cpu_pointwise(),
      &kernels::cpu_direct(),
      &kernels::cpu_direct_kvec(),
      &kernels::cpu_im2col_gemm(),
      &kernels::cpu_onednn(),
      // The CUDA rows follow, from the plugin libconvtune_cuda.so when it is present and loads
      // (src/device/device_ops.cpp): kernels/cuda/plugin.cpp lists them, in this order: cuda.winograd,
      // cuda.fft, cuda.implicit_gemm, cuda.direct, cuda.im2col_gemm, cuda.cudnn.*.
  };
  // clang-format on
  static const std::vector<const Algorithm*> with_cuda = [] {
    std::vector<const Algorithm*> all = algorithms;
    if (const CudaPlugin* plugin = cuda_plugin())
      all.insert(all.end(), plugin->algorithms, plugin->algorithms + plugin->algorithm_count);
    return all;
  }();
  return with_cuda;
}

const std::vector<const Algorithm*>& all_algorithms() {
  return table();
}

std::vector<const Algorithm*> registry() {
  std::vector<std::string> disabled;
  if (const char* env = std::getenv("CONVTUNE_DISABLE")) {
    std::stringstream ss(env);
    for (std::string id; std::getline(ss, id, ',');) {
      // "cpu.fft, cpu.direct": the spaces around an id are not part of it.
      const size_t b = id.find_first_not_of(" \t"), e = id.find_last_not_of(" \t");
      if (b != std::string::npos) disabled.push_back(id.substr(b, e - b + 1));
    }
  }
  for (const auto& d : disabled) {
    if (find_algorithm(d)) continue;
    static std::once_flag warned;  // a typo is worth one line, not one per lookup
    std::call_once(warned, [&] {
      std::string known;
      for (const Algorithm* a : table())
        known += (known.empty() ? "" : ", ") + std::string(a->id());
      std::cerr << "convtune: CONVTUNE_DISABLE names \"" << d
                << "\", which is no algorithm (known: " << known << ")\n";
    });
  }
  std::vector<const Algorithm*> out;
  for (const Algorithm* a : table()) {
    bool off = false;
    for (const auto& d : disabled) off = off || a->id() == d;
    if (!off) out.push_back(a);
  }
  return out;
}

const Algorithm* find_algorithm(std::string_view id) {
  for (const Algorithm* a : table())
    if (a->id() == id) return a;
  return nullptr;
}

}  // namespace conv
