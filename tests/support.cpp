#include "support.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <sstream>
#include <vector>

#include "buffer.hpp"
#include "reference/reference.hpp"

namespace convtest {

std::string layers_dir() {
  if (const char* env = std::getenv("CONVTUNE_LAYERS")) return env;
  return CONVTUNE_LAYERS_DIR;
}

std::vector<conv::ConvProblem> layer_problems(const std::string& file, int64_t max_batch) {
  auto problems = conv::read_batch_file(layers_dir() + "/" + file);
  for (auto& p : problems) p.N = std::min(p.N, max_batch);
  return problems;
}

std::vector<conv::ConvProblem> all_layer_problems(int64_t max_batch) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(layers_dir()))
    if (e.path().extension() == ".txt") files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  std::vector<conv::ConvProblem> all;
  for (const auto& f : files) {
    auto ps = layer_problems(f, max_batch);
    all.insert(all.end(), ps.begin(), ps.end());
  }
  return all;
}

std::vector<conv::ConvProblem> random_problems(int count, uint64_t seed, const RandomSpec& spec) {
  std::mt19937_64 rng(seed);
  auto uni = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  std::vector<conv::ConvProblem> out;
  while (static_cast<int>(out.size()) < count) {
    conv::ConvProblem p;
    p.N = uni(1, spec.max_n);
    if (spec.only_3x3_s1) {
      p.R = p.S = 3;
    } else {
      // Mix square kernels, Nx1, 1xN and independent sizes.
      const int64_t a = uni(1, spec.max_kernel), b = uni(1, spec.max_kernel);
      const int64_t shape = spec.square_kernel ? 0 : uni(0, 5);
      p.R = shape == 4 ? 1 : a;
      p.S = shape < 3 ? a : shape == 3 ? 1 : shape == 4 ? a : b;
      p.stride_h = uni(1, spec.max_stride);
      p.stride_w = uni(0, 2) == 0 ? uni(1, spec.max_stride) : p.stride_h;
      p.dilation_h = uni(0, 3) == 0 ? uni(1, spec.max_dilation) : 1;
      p.dilation_w = uni(0, 3) == 0 ? uni(1, spec.max_dilation) : p.dilation_h;
    }
    int64_t g = 1;
    if (spec.groups) {
      int64_t kind = uni(0, 5);
      if (kind == 0) g = uni(2, 4);
      if (kind == 1) g = -1;  // depthwise
    }
    if (g == -1) {
      p.C = p.K = p.groups = uni(1, spec.max_channels);
    } else {
      p.groups = g;
      p.C = g * uni(1, std::max<int64_t>(1, spec.max_channels / g));
      p.K = g * uni(1, std::max<int64_t>(1, spec.max_channels / g));
    }
    p.pad_top = uni(0, spec.max_pad);
    p.pad_bottom = uni(0, 2) == 0 ? uni(0, spec.max_pad) : p.pad_top;
    p.pad_left = uni(0, spec.max_pad);
    p.pad_right = uni(0, 2) == 0 ? uni(0, spec.max_pad) : p.pad_left;
    const int64_t ext_h = (p.R - 1) * p.dilation_h + 1, ext_w = (p.S - 1) * p.dilation_w + 1;
    const int64_t min_h = std::max<int64_t>(1, ext_h - p.pad_top - p.pad_bottom);
    const int64_t min_w = std::max<int64_t>(1, ext_w - p.pad_left - p.pad_right);
    p.H = uni(min_h, std::max(min_h, spec.max_hw));
    p.W = uni(min_w, std::max(min_w, spec.max_hw));
    try {
      p.validate();
    } catch (const conv::Error&) {
      continue;
    }
    std::ostringstream name;
    name << "random#" << out.size();
    p.name = name.str();
    out.push_back(p);
  }
  return out;
}

CheckResult check_against_reference(const conv::Algorithm& algo, const conv::ConvProblem& p,
                                    const std::string& config, bool packed, uint64_t seed) {
  const int threads = omp_get_max_threads();
  conv::AlignedBuffer x(p.x_bytes()), w(p.w_bytes()), b(p.K * 4), y(p.y_bytes());
  conv::fill_uniform(x.floats(), p.x_elems(), seed);
  conv::fill_uniform(w.floats(), p.w_elems(), seed + 1);
  conv::fill_uniform(b.floats(), p.K, seed + 2);
  conv::poison_nan(y.floats(), p.y_elems());

  conv::AlignedBuffer ws(algo.workspace_bytes(p, config));
  conv::ForwardArgs args;
  args.x = x.floats();
  args.w = w.floats();
  args.bias = b.floats();
  args.y = y.floats();
  args.workspace = ws.data();
  args.workspace_size = ws.size();
  args.threads = threads;
  conv::AlignedBuffer pw;
  if (packed) {
    pw.reserve(algo.packed_weights_bytes(p, config));
    algo.pack_weights(p, config, w.floats(), pw.data(), threads);
    args.packed_weights = pw.data();
    args.w = nullptr;
  }
  algo.forward(p, config, args);

  std::vector<double> yref(p.y_elems()), abs(p.y_elems());
  conv::ref::forward(p, x.floats(), w.floats(), b.floats(), yref.data(), abs.data(), threads);
  auto cmp = conv::ref::compare(p.y_elems(), y.floats(), yref.data(), abs.data());
  CheckResult r;
  r.max_error = cmp.max_error;
  r.nonfinite = cmp.nonfinite;
  r.bound = algo.error_bound(p, config);
  if (cmp.worst_index >= 0) {
    std::ostringstream s;
    s << "output #" << cmp.worst_index << " = " << y.floats()[cmp.worst_index] << ", reference "
      << yref[cmp.worst_index] << ", sum|x*w| " << abs[cmp.worst_index];
    r.where = s.str();
  }
  return r;
}

}  // namespace convtest
