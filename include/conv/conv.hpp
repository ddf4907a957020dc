// convtune's entry points: best_forward (find + run the fastest correct kernel), forward (run one
// named algorithm) and Plan (choose once, run many times with pre-packed weights).
#pragma once

#include <cstddef>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "conv/algorithm.hpp"
#include "conv/device.hpp"
#include "conv/error.hpp"
#include "conv/perfdb.hpp"
#include "conv/problem.hpp"

namespace conv {

/// What best_forward does when the perf database has no winner for the problem.
enum class FindMode {
  tune,       ///< measure every candidate now and store the results (default)
  heuristic,  ///< pick by a cheap rule, store nothing
  db_only     ///< throw conv::Error on a miss
};
/// Parses "tune", "heuristic", "db_only"; throws conv::Error naming "find_mode".
FindMode parse_find_mode(const std::string& text);

/// Where a choice came from: the perf database, a tune now, the heuristic rule, or the caller
/// (Plan::create with an algorithm id: no choice was made).
enum class ChoiceSource { perfdb, tuned, heuristic, named };
const char* to_string(ChoiceSource s);

struct ForwardOptions {
  Device device = Device::cpu();
  int threads = 0;  ///< 0 = OpenMP default; part of the fingerprint
  /// Default tune; the environment variable CONVTUNE_FIND_MODE overrides whatever is set here.
  FindMode find_mode = FindMode::tune;
  /// Empty = PerfDb::default_path() ($CONVTUNE_PERFDB, else $XDG_CACHE_HOME/convtune/...).
  std::string perfdb_path;
  /// Candidates needing more workspace bytes than this are never chosen.
  size_t workspace_limit = std::numeric_limits<size_t>::max();
  /// Caller-owned workspace; null = the library allocates one (reused across calls per thread).
  void* workspace = nullptr;
  size_t workspace_size = 0;  ///< bytes at `workspace`
  void* stream = nullptr;     ///< cudaStream_t for CUDA devices
  /// Which measurements choose (conv::Timing): cold (default), for a layer called among others
  /// as in a network, or hot, for a layer called back to back. Part of the fingerprint: winners
  /// tuned one way are never used for the other.
  Timing timing = Timing::cold;
};

/// What best_forward ran and where the choice came from.
struct ForwardResult {
  std::string algo_id;
  std::string config;
  ChoiceSource source = ChoiceSource::tuned;
  std::string perfdb_path;  ///< the perf database file the winner came from (source perfdb)
};

/// Runs the fastest correct algorithm for `p` on options.device: the in-process cache, then the
/// perf database (keyed by the device fingerprint and p.key()), then the find mode. Tensors as
/// in ConvProblem (NCHW x, KCRS w, K bias or null, NCHW y). Throws conv::Error for an invalid
/// problem, null tensors, a db_only miss, or when no candidate fits workspace_limit. An
/// unreadable perf database is reported on stderr once and tuning happens in memory.
ForwardResult best_forward(const ConvProblem& p, const float* x, const float* w, const float* bias,
                           float* y, const ForwardOptions& options = {});

/// Runs one named algorithm and config. `workspace` must hold the algorithm's
/// workspace_bytes(p, config). Throws conv::Error for an unknown algo_id, an inapplicable problem
/// (with the algorithm's reason), an unknown config, a short workspace or null tensors.
void forward(const std::string& algo_id, const std::string& config, const ConvProblem& p,
             const float* x, const float* w, const float* bias, float* y, void* workspace,
             size_t workspace_size, int threads = 0);

/// Chooses once for one problem, then runs it repeatedly without any lookup. pack_weights()
/// transforms the weights once (Winograd/FFT transforms, oneDNN's blocked reorder); execute()
/// then uses them. The Plan path has its own winner in the perf database (ExecPath::packed),
/// chosen by the time with packed weights.
class Plan {
 public:
  /// Chooses the algorithm as best_forward would, for the packed path. Throws as best_forward.
  static Plan create(const ConvProblem& p, const ForwardOptions& options = {});
  /// A plan for one named algorithm and config (validated now).
  static Plan create(const ConvProblem& p, const std::string& algo_id, const std::string& config,
                     const ForwardOptions& options = {});

  Plan(Plan&&) noexcept;
  Plan& operator=(Plan&&) noexcept;
  ~Plan();

  /// Transforms and keeps the weights (K x C/g x R x S); later execute() calls may pass a null
  /// `w`. For algorithms that do not pack, the Plan keeps a copy (w_bytes() more bytes), so with
  /// every algorithm later changes to `w` do not change what execute() computes without a `w`.
  /// Throws conv::Error for a null `w`.
  void pack_weights(const float* w);
  /// Whether execute() may be called with a null `w`.
  bool has_packed_weights() const;

  /// Runs the chosen algorithm; `w` may be null after pack_weights(), which then uses the packed
  /// (or kept) weights. A non-null `w` is always the one used, read as in a one-shot call (the
  /// Plan's workspace covers that), so passing new weights never returns results for the packed
  /// ones. Throws conv::Error for null x or y. Every member throws conv::Error on a moved-from
  /// Plan. Thread-safe: calls of execute() and pack_weights() on one Plan from several threads
  /// run one at a time (they share its workspace); a Plan per thread runs them in parallel.
  void execute(const float* x, const float* w, const float* bias, float* y);

  const ConvProblem& problem() const;
  const ForwardResult& choice() const;
  size_t workspace_bytes() const;

  struct Impl;  ///< opaque

 private:
  Impl& impl() const;
  explicit Plan(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// One stored winner run as a caller runs it (verify()). Times in ms.
struct Verification {
  ConvProblem problem;
  ExecPath path = ExecPath::oneshot;
  std::string algo_id, config;
  double stored_ms = -1;    ///< the stored estimate (min_ms; the median for rows without one)
  double observed_ms = -1;  ///< the same estimate now, through best_forward or a Plan
  bool noisy = false;       ///< no clean round: observed_ms is only an upper bound
  /// observed_ms over 1.25x stored_ms on clean rounds: the winner's measurement was flagged noisy
  /// in the perf database, so the next tune (without force) measures it again.
  bool marked = false;
  std::string error;  ///< why it could not run; "" when it ran
};

/// For each problem, the winners stored in options.perfdb_path (the default path when empty) for
/// options' device, threads and timing, one-shot and Plan path, each run as a caller runs it
/// (best_forward in db_only mode; a Plan with packed weights) and timed as the tuner times
/// candidates (interleaved rounds, the fastest clean round, the data evicted before each run
/// under Timing::cold). A winner observed more than 1.25x its stored time is marked (see
/// Verification::marked) unless the database is read-only. Problems without a stored winner are
/// left out. CPU only so far. Throws conv::Error for an invalid problem, another device, or a
/// perf database that cannot be opened.
std::vector<Verification> verify(const std::vector<ConvProblem>& problems,
                                 const ForwardOptions& options = {});

}  // namespace conv
