// Shared test helpers: the layers/*.txt problems, a seeded random problem generator, and one
// "run this algorithm and compare with the float64 reference" routine.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "buffer.hpp"
#include "conv/algorithm.hpp"
#include "conv/problem.hpp"
#include "conv/tuner.hpp"

namespace convtest {

/// Directory of layers/ (env CONVTUNE_LAYERS overrides the configured path).
std::string layers_dir();
/// The problems of one layers file, e.g. "vgg16.txt"; batch capped at `max_batch`.
std::vector<conv::ConvProblem> layer_problems(const std::string& file, int64_t max_batch = 1);
/// Every problem of every layers/*.txt file, batch capped at `max_batch`.
std::vector<conv::ConvProblem> all_layer_problems(int64_t max_batch = 1);

/// Ranges for the random problem generator (inclusive).
struct RandomSpec {
  int64_t max_n = 4;
  int64_t max_hw = 40;
  int64_t max_channels = 40;
  int64_t max_kernel = 11;
  int64_t max_stride = 4;
  int64_t max_dilation = 3;
  int64_t max_pad = 4;
  bool groups = true;          ///< also grouped and depthwise problems
  bool square_kernel = false;  ///< R == S only
  bool only_3x3_s1 = false;    ///< R = S = 3, stride 1, dilation 1 (Winograd)
};
/// `count` valid problems from a fixed seed (the same list on every run and machine).
std::vector<conv::ConvProblem> random_problems(int count, uint64_t seed, const RandomSpec& spec);

/// Test data distributions (fresh, seeded; never all zeros). Those without a bias pass a null
/// bias, so the |bias| term cannot hide an error (issue: honest error bounds).
enum class Data {
  uniform,   ///< x, w, bias uniform in [-1, 1)
  positive,  ///< x, w, bias uniform in [0, 1): no cancellation, sums grow with C*R*S
  no_bias,   ///< x, w uniform in [-1, 1), bias null
  mixed,     ///< x: 1e-3 * uniform, 2% of entries 1e3 * uniform (1e6 apart); w uniform; no bias
  sparse,    ///< x: 90% zeros, the rest uniform; w uniform; no bias
  constant,  ///< x all 0.75; w uniform; no bias
};
const char* to_string(Data d);
/// Every distribution, uniform first.
std::vector<Data> all_data();

struct CheckResult {
  double max_error = 0;      ///< normalized: relative to the algorithm's error scale per output
  double max_rel_error = 0;  ///< relative to |bias| + sum|x*w| per output
  double l2_error = 0;       ///< ||y - y_ref||_2 / ||y_ref||_2 over all outputs
  double bound = 0;          ///< the algorithm's declared bound
  int64_t nonfinite = 0;     ///< outputs left NaN (poisoned before the run) or Inf
  std::string where;         ///< description of the worst output
  bool ok() const { return nonfinite == 0 && max_error <= bound; }
};

/// One problem with fresh random data (seeded; `data` picks the distribution, uniform in [-1, 1)
/// with a bias by default) and its float64 reference, computed once and checked against any
/// number of algorithms and configs.
class ReferenceCase {
 public:
  explicit ReferenceCase(const conv::ConvProblem& p, uint64_t seed = 1, Data data = Data::uniform);
  ~ReferenceCase();
  ReferenceCase(const ReferenceCase&) = delete;
  ReferenceCase& operator=(const ReferenceCase&) = delete;

  const conv::ConvProblem& problem() const { return p_; }
  const float* x() const;
  const float* w() const;
  const float* bias() const;  ///< null for the distributions without a bias
  /// ForwardArgs of this case's x, w and bias writing to `y`, with `ws` as the workspace.
  conv::ForwardArgs args(float* y, conv::AlignedBuffer& ws, int threads = 1) const;

  /// Runs `algo` with `config` (output poisoned with NaN first) and compares with the reference
  /// under the algorithm's contract (conv::error_scale, error_bound). With `packed`, the weights
  /// go through pack_weights() and forward() gets no `w`. `threads` 0 = OpenMP default.
  CheckResult check(const conv::Algorithm& algo, const std::string& config, bool packed = false,
                    int threads = 0);
  /// Compares an output computed elsewhere (N*K*OH*OW floats) with the reference, normalized by
  /// `scale` (null: |bias| + sum|x*w|, the exact-order algorithms' scale).
  CheckResult compare(const float* y, double bound, const double* scale = nullptr) const;
  /// Compares an output computed elsewhere with the reference under `algo`'s contract for
  /// `config` (its error scale and bound).
  CheckResult compare(const float* y, const conv::Algorithm& algo, const std::string& config) const;
  /// |bias| + sum|x*w| per output.
  const double* abs_sum() const;
  /// The float64 reference output.
  const double* y_ref() const;

 private:
  struct Tensors;
  conv::ConvProblem p_;
  Tensors* d_;
};

/// Calls fn(algo, config, packed) for every CPU candidate of the registry applicable to `p`: each
/// config one-shot, and packed too where the algorithm packs weights. Returns the call count.
int for_each_cpu_candidate(
    const conv::ConvProblem& p,
    const std::function<void(const conv::Algorithm&, const std::string&, bool)>& fn);

/// Convenience: one ReferenceCase, one check.
CheckResult check_against_reference(const conv::Algorithm& algo, const conv::ConvProblem& p,
                                    const std::string& config, bool packed = false,
                                    uint64_t seed = 1);

/// Catch2 description of a failed check: problem descriptor, algorithm, config, error, bound.
std::string describe(const conv::ConvProblem& p, const conv::Algorithm& algo,
                     const std::string& config, const CheckResult& r);

/// An environment variable set for one scope (unset at its end).
struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const std::string& value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
};

/// A shell command's exit code and its stdout and stderr together.
struct CommandResult {
  int code = -1;
  std::string out;
};
CommandResult run_command(const std::string& command);

/// Starts `argv` (argv[0] a path) directly, no shell, its stdout and stderr into the file `log`,
/// with SIGINT at its default as a terminal's foreground job has it (also when the test runs in
/// the background). Returns the child's pid (-1 when it could not be started).
int spawn_logged(const std::vector<std::string>& argv, const std::string& log);

/// The quickest tune that still measures every candidate: one round, one run, 2 threads (what
/// is stored or re-measured is under test, not the times).
conv::TuneOptions quick_tune();

}  // namespace convtest
