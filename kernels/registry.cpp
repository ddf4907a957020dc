// THE list of algorithms (oneDNN's implementation list): most specialised first. Adding an
// algorithm is one new file, one line here and one line in CMakeLists.txt; tests, the tuner and
// the CLI iterate this table at run time.
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <sstream>

#include "conv/algorithm.hpp"
#include "kernels.hpp"

namespace conv {

static const std::vector<const Algorithm*>& table() {
  static const std::vector<const Algorithm*> algorithms = {
      &kernels::cpu_depthwise(),
      &kernels::cpu_winograd(),
      &kernels::cpu_fft(),
      &kernels::cpu_direct(),
      &kernels::cpu_im2col_gemm(),
      &kernels::cpu_onednn(),
#ifdef CONVTUNE_HAVE_CUDA
      &kernels::cuda_direct(),
      &kernels::cuda_im2col_gemm(),
      &kernels::cuda_cudnn_implicit_gemm(),
      &kernels::cuda_cudnn_implicit_precomp_gemm(),
      &kernels::cuda_cudnn_gemm(),
      &kernels::cuda_cudnn_direct(),
      &kernels::cuda_cudnn_fft(),
      &kernels::cuda_cudnn_fft_tiling(),
      &kernels::cuda_cudnn_winograd(),
      &kernels::cuda_cudnn_winograd_nonfused(),
#endif
  };
  return algorithms;
}

const std::vector<const Algorithm*>& all_algorithms() {
  return table();
}

std::vector<const Algorithm*> registry() {
  std::vector<std::string> disabled;
  if (const char* env = std::getenv("CONVTUNE_DISABLE")) {
    std::stringstream ss(env);
    for (std::string id; std::getline(ss, id, ',');)
      if (!id.empty()) disabled.push_back(id);
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
