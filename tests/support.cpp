#include "support.hpp"

#include <fcntl.h>
#include <omp.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <sstream>
#include <stdexcept>
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

struct ReferenceCase::Tensors {
  conv::AlignedBuffer x, w, b, y;
  std::vector<double> yref, abs;
  bool has_bias = true;
  // The last error scale computed, by "algorithm config": checks of one config one-shot, packed
  // and at several thread counts share it.
  std::string scale_key;
  std::vector<double> scale;
};

const char* to_string(Data d) {
  switch (d) {
    case Data::uniform:
      return "uniform";
    case Data::positive:
      return "positive";
    case Data::no_bias:
      return "no bias";
    case Data::mixed:
      return "mixed magnitudes";
    case Data::sparse:
      return "sparse";
    default:
      return "constant";
  }
}

std::vector<Data> all_data() {
  return {Data::uniform, Data::positive, Data::no_bias, Data::mixed, Data::sparse, Data::constant};
}

namespace {

// Reshapes uniform [-1, 1) values `v` in place into distribution `d`; `u` is a second,
// independent uniform stream of the same length for the choices.
void shape(Data d, float* v, const float* u, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    switch (d) {
      case Data::positive:
        v[i] = 0.5f * (v[i] + 1.0f);
        break;
      case Data::mixed:
        v[i] *= u[i] > 0.96f ? 1e3f : 1e-3f;
        break;
      case Data::sparse:
        if (u[i] < 0.8f) v[i] = 0.0f;
        break;
      case Data::constant:
        v[i] = 0.75f;
        break;
      default:
        break;
    }
  }
}

}  // namespace

ReferenceCase::ReferenceCase(const conv::ConvProblem& p, uint64_t seed, Data data)
    : p_(p), d_(new Tensors) {
  p_.validate();
  d_->x.reserve(p.x_bytes());
  d_->w.reserve(p.w_bytes());
  d_->b.reserve(p.K * 4);
  d_->y.reserve(p.y_bytes());
  conv::fill_uniform(d_->x.floats(), p.x_elems(), seed);
  conv::fill_uniform(d_->w.floats(), p.w_elems(), seed + 1);
  conv::fill_uniform(d_->b.floats(), p.K, seed + 2);
  {
    std::vector<float> u(static_cast<size_t>(p.x_elems()));
    conv::fill_uniform(u.data(), p.x_elems(), seed + 3);
    shape(data, d_->x.floats(), u.data(), p.x_elems());
  }
  if (data == Data::positive) {
    shape(data, d_->w.floats(), d_->w.floats(), p.w_elems());
    shape(data, d_->b.floats(), d_->b.floats(), p.K);
  }
  d_->has_bias = data == Data::uniform || data == Data::positive;
  d_->yref.resize(p.y_elems());
  d_->abs.resize(p.y_elems());
  conv::ref::forward(p, x(), w(), bias(), d_->yref.data(), d_->abs.data(), omp_get_max_threads());
}

ReferenceCase::~ReferenceCase() {
  delete d_;
}
const float* ReferenceCase::x() const {
  return d_->x.floats();
}
const float* ReferenceCase::w() const {
  return d_->w.floats();
}
const float* ReferenceCase::bias() const {
  return d_->has_bias ? d_->b.floats() : nullptr;
}
const double* ReferenceCase::abs_sum() const {
  return d_->abs.data();
}
const double* ReferenceCase::y_ref() const {
  return d_->yref.data();
}

CheckResult ReferenceCase::compare(const float* y, double bound, const double* scale) const {
  const auto rel = conv::ref::compare(p_.y_elems(), y, d_->yref.data(), d_->abs.data());
  const auto cmp = scale ? conv::ref::compare(p_.y_elems(), y, d_->yref.data(), scale) : rel;
  CheckResult r;
  r.max_error = cmp.max_error;
  r.max_rel_error = rel.max_error;
  r.nonfinite = cmp.nonfinite;
  r.bound = bound;
  double diff = 0, norm = 0;
  for (int64_t o = 0; o < p_.y_elems(); ++o) {
    const double e = y[o] - d_->yref[o];
    diff += e * e, norm += d_->yref[o] * d_->yref[o];
  }
  r.l2_error = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
  if (cmp.worst_index >= 0) {
    std::ostringstream s;
    s << "output #" << cmp.worst_index << " = " << y[cmp.worst_index] << ", reference "
      << d_->yref[cmp.worst_index] << ", sum|x*w| " << d_->abs[cmp.worst_index];
    if (scale) s << ", error scale " << scale[cmp.worst_index];
    r.where = s.str();
  }
  return r;
}

conv::ForwardArgs ReferenceCase::args(float* y, conv::AlignedBuffer& ws, int threads) const {
  conv::ForwardArgs a;
  a.x = x();
  a.w = w();
  a.bias = bias();
  a.y = y;
  a.workspace = ws.data();
  a.workspace_size = ws.size();
  a.threads = threads;
  return a;
}

CheckResult ReferenceCase::check(const conv::Algorithm& algo, const std::string& config,
                                 bool packed, int threads) {
  threads = threads > 0 ? threads : omp_get_max_threads();
  conv::poison_nan(d_->y.floats(), p_.y_elems());
  conv::AlignedBuffer ws(algo.workspace_bytes(p_, config));
  // Workspace contents are undefined on entry: NaN, so that a kernel reading a part it has not
  // written in this call (a view row another thread has not copied yet, an unzeroed tail)
  // leaves NaN in the output instead of the zeros a fresh allocation often holds.
  conv::poison_nan(static_cast<float*>(ws.data()), static_cast<int64_t>(ws.size() / sizeof(float)));
  conv::ForwardArgs args = this->args(d_->y.floats(), ws, threads);
  conv::AlignedBuffer pw;
  if (packed) {
    pw.reserve(algo.packed_weights_bytes(p_, config));
    algo.pack_weights(p_, config, w(), pw.data(), threads);
    args.packed_weights = pw.data();
    args.w = nullptr;
  }
  algo.forward(p_, config, args);
  return compare(d_->y.floats(), algo, config);
}

CheckResult ReferenceCase::compare(const float* y, const conv::Algorithm& algo,
                                   const std::string& config) const {
  const std::string key = std::string(algo.id()) + " " + config;
  if (d_->scale_key != key) {
    d_->scale =
        conv::error_scale(algo, p_, config, x(), w(), d_->abs.data(), omp_get_max_threads());
    d_->scale_key = key;
  }
  return compare(y, algo.error_bound(p_, config), d_->scale.data());
}

int for_each_cpu_candidate(
    const conv::ConvProblem& p,
    const std::function<void(const conv::Algorithm&, const std::string&, bool)>& fn) {
  int calls = 0;
  for (const conv::Algorithm* algo : conv::registry()) {
    if (algo->device() != conv::Device::Kind::cpu || !algo->applicable(p).ok) continue;
    for (const std::string& config : algo->configs(p))
      for (bool packed : {false, true}) {
        if (packed && algo->packed_weights_bytes(p, config) == 0) continue;
        fn(*algo, config, packed);
        ++calls;
      }
  }
  return calls;
}

CheckResult check_against_reference(const conv::Algorithm& algo, const conv::ConvProblem& p,
                                    const std::string& config, bool packed, uint64_t seed) {
  ReferenceCase c(p, seed);
  return c.check(algo, config, packed);
}

std::string describe(const conv::ConvProblem& p, const conv::Algorithm& algo,
                     const std::string& config, const CheckResult& r) {
  std::ostringstream s;
  s << algo.id() << " config " << config << " on " << p.key() << " (" << p.name << "): max error "
    << r.max_error << " (bound " << r.bound << "; per-output relative " << r.max_rel_error << "), "
    << r.nonfinite << " non-finite outputs; worst " << r.where;
  return s.str();
}

ScopedEnv::ScopedEnv(const char* n, const std::string& value) : name(n) {
  ::setenv(n, value.c_str(), 1);
}
ScopedEnv::~ScopedEnv() {
  ::unsetenv(name.c_str());
}

CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed: " + command);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

conv::TuneOptions quick_tune() {
  conv::TuneOptions t;
  t.min_rounds = 1;
  t.max_rounds = 1;
  t.batch_ms = 0;
  t.threads = 2;
  return t;
}

int spawn_logged(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> text = args;
  std::vector<char*> argv;
  for (auto& a : text) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&files, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t sigint;
  sigemptyset(&sigint);
  sigaddset(&sigint, SIGINT);
  posix_spawnattr_setsigdefault(&attr, &sigint);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, argv[0], &files, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attr);
  return spawned == 0 ? pid : -1;
}

}  // namespace convtest
