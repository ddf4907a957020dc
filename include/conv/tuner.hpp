// conv::tune: measure every applicable candidate on one problem, check it, pick the winner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "conv/algorithm.hpp"
#include "conv/device.hpp"
#include "conv/perfdb.hpp"
#include "conv/problem.hpp"

namespace conv {

/// Cumulative load counters of this process and machine; the tuner compares two reads taken
/// around a timed batch. -1 = not available on this system.
struct LoadSignals {
  /// Total time this process's threads were runnable but waited for a CPU, ms (Linux
  /// /proc/self/task/*/schedstat, the scheduler's run_delay).
  double run_delay_ms = -1;
  /// Time the hypervisor gave other guests on this machine's CPUs, ms (/proc/stat "steal").
  double steal_ms = -1;
  /// Involuntary context switches of this process (getrusage ru_nivcsw).
  long involuntary_switches = -1;
  /// Not a counter: runnable threads machine-wide per online CPU at the time of reading
  /// (/proc/loadavg). Above 1, something is waiting for a CPU.
  double crowding = -1;
};

/// Where the tuner's times and load signals come from. The default (null in TuneOptions) times
/// on the device (steady clock on the CPU, events on a GPU) and reads Linux's scheduler
/// statistics; tests pass scripted ones, and a setup with its own profiler can too.
class MeasureEnv {
 public:
  virtual ~MeasureEnv() = default;
  /// Milliseconds one call of `run` takes; `label` names the candidate ("<algo> <config>", with
  /// " packed" appended for the Plan path). Must call `run` exactly once.
  virtual double time_ms(const std::function<void()>& run, std::string_view label) = 0;
  virtual LoadSignals load() = 0;
  virtual double now_ms() = 0;        ///< a steady clock, ms, for the time budget
  virtual void pause(double ms) = 0;  ///< sleep (step aside for a competing load)
};

/// How the tuner times candidates on a machine that other processes share (Chen & Revels,
/// "Robust benchmarking in noisy environments", 2016: noise only adds time, so the minimum of
/// undisturbed runs is the estimate; TVM's min_repeat_ms; cuDNN find's repeated trials):
/// after a checked run, every candidate is timed in interleaved rounds (the order rotates each
/// round, so a load burst hits them alike); a round is a batch of runs lasting batch_ms whose
/// fastest run is the round's sample, and is "clean" when no thread of this process waited for
/// a CPU (beyond 2% of the batch) and the hypervisor stole nothing meanwhile. A candidate's
/// time is its fastest clean round; it is settled after min_rounds rounds once its two fastest
/// clean rounds agree within 5%, or when that time is over 1.5x another candidate's fastest (it
/// cannot win); while any candidate still in is unsettled, all of them run more rounds (so
/// contenders are compared over the same stretch of time), up to max_rounds or the budget, and
/// a candidate whose last round was disturbed sleeps 20 ms first. A candidate with no clean
/// round is flagged noisy (MeasureQuality), and so is a winner that a noisy candidate could
/// have beaten, judging by the candidate's lower bound (its rounds minus the time its threads
/// waited for a CPU).
/// The first comma-separated part of an algorithm pattern (TuneOptions::algo_pattern) that is
/// part of no registered algorithm id, CONVTUNE_DISABLE'd ones included, or "" when there is
/// none. tune() throws conv::Error naming it.
std::string unknown_algo_pattern_part(const std::string& pattern);

struct TuneOptions {
  Device device = Device::cpu();
  int threads = 0;      ///< 0 = OpenMP default
  int min_rounds = 3;   ///< timing rounds per candidate, at least (>= 1)
  int max_rounds = 20;  ///< at most (>= min_rounds), while rounds are disturbed or disagree
  /// A round repeats a candidate's run until it lasts this long (finite, >= 0).
  double batch_ms = 1;
  /// Per-problem time budget (>= 0; infinity: none); remaining candidates are skipped (0:
  /// nothing new is measured, the winner is chosen among `measured`).
  double budget_ms = 120000;
  std::string algo_pattern;  ///< only algorithms whose id contains one of these
                             ///< comma-separated substrings ("" = all)
  size_t workspace_limit = std::numeric_limits<size_t>::max();  ///< bytes
  bool check = true;  ///< compare outputs against a trusted result
  /// Candidates already measured on this problem and device (PerfDb::candidates()): those whose
  /// measurement is final (status "rejected", or "ok" with a median_ms >= 0 and not noisy, made
  /// by the algorithm's current version) are not measured again but take part in choosing the
  /// winner; the others ("failed", "skipped", noisy, without a time, another version) are
  /// measured again.
  std::vector<PerfCandidate> measured;
  /// Problems up to this many FLOPs are checked against the float64 reference, larger ones
  /// against cpu.im2col_gemm.
  double reference_max_flops = 2e9;
  /// How runs are timed (conv::Timing, device.hpp): cold (default: the run's tensors, weights and
  /// workspace evicted from the caches before each timed run, untimed; CPU only so far) or hot
  /// (back to back). Part of the result's fingerprint, so each mode has its own winners.
  Timing timing = Timing::cold;
  uint64_t seed = 0x5eed;           ///< random input data seed
  std::shared_ptr<MeasureEnv> env;  ///< null = the real timer and load signals
};

/// One candidate's measurement in this run: the stored fields (Measurement, perfdb.hpp; times
/// in milliseconds, the packed times with weights packed once as a Plan does, max_error over
/// the one-shot and packed outputs) and what only the run knows.
struct CandidateResult : Measurement {
  int runs = 0;                   ///< timed calls, one-shot
  MeasureQuality packed_quality;  ///< of the packed time, when measured in this run
  /// Per-output relative error max |y - y_ref| / (|bias| + sum|x*w|); -1 when not checked.
  double max_rel_error = -1;
  double error_bound = 0;    ///< the algorithm's bound on max_error
  bool from_perfdb = false;  ///< taken from TuneOptions::measured, not measured in this run
  double gflops(const ConvProblem& p) const;  ///< direct-convolution FLOPs / min_ms (the estimate)
  /// The time on the Plan path: packed_min_ms when packable, else min_ms.
  double plan_ms() const { return packed_min_ms >= 0 ? packed_min_ms : min_ms; }
};

/// An algorithm that was not measured at all, with the reason (inapplicable, filtered, ...).
struct RejectedAlgorithm {
  std::string algo_id;
  std::string reason;
};

struct TuneResult {
  ConvProblem problem;
  std::string fingerprint;
  std::vector<CandidateResult> candidates;        ///< in registry/config order
  std::vector<RejectedAlgorithm> not_applicable;  ///< algorithms that were not candidates
  int winner = -1;         ///< index into candidates of the fastest ok one-shot time, -1 = none
  int packed_winner = -1;  ///< fastest ok time on the Plan path (packed time where it exists)
  /// Some ok candidate that could have beaten the winner is noisy (no clean round): the
  /// decision may be wrong, and `autotune tune` without --force measures it again.
  bool noisy = false, packed_noisy = false;
  std::string reference;  ///< "float64 reference" or the trusted algorithm's id
  /// Every candidate of the whole registry has a final status ("ok" or "rejected"): nothing was
  /// filtered out (--algo, CONVTUNE_DISABLE), skipped (workspace limit, time budget) or failed.
  /// Only then do the winners stand for "fastest of all", and store_result() stores them.
  bool complete = false;
  double elapsed_ms = 0;

  const CandidateResult* find(const std::string& algo_id) const;  ///< best ok config of algo
  std::vector<PerfCandidate> to_records() const;
};

/// What tune() reports while it works: after each candidate's check, then after each timing
/// round. Times in ms since tune() started; `left_ms` is an estimate of what is left of both
/// phases (the checks still to run at the mean check time so far, then min_rounds rounds of
/// every candidate that passed, one batch of TuneOptions::batch_ms or one run each; in the
/// timing phase, the rounds still expected at the last round's length), within the budget.
struct TuneEvent {
  enum class Phase { check, time };
  Phase phase = Phase::check;
  size_t done = 0;   ///< check: candidates checked; time: rounds done
  size_t total = 0;  ///< check: all candidates; time: TuneOptions::max_rounds (at most)
  const CandidateResult* candidate = nullptr;  ///< check: the one just checked; time: null
  size_t racing = 0;                           ///< time: (candidate, path) items still in the race
  size_t confirmed = 0;                        ///< time: of those, with two clean rounds that agree
  double elapsed_ms = 0, left_ms = 0;
};

/// Progress callback. It may throw to abandon the tune (Ctrl-C in the CLI, KeyboardInterrupt in
/// Python): the exception propagates out of tune() and nothing has been stored.
using TuneProgress = std::function<void(const TuneEvent&)>;

/// Measures every applicable (algorithm, config) of the registry on `p` with fresh random data
/// (uniform in [-1, 1]): one run checked against the trusted result, then the interleaved
/// timing rounds described at TuneOptions. Candidates that throw are "failed", those above
/// their error bound "rejected"; neither can win. `progress` is called after each candidate's
/// check and after each timing round (TuneEvent). Throws conv::Error when `p` is invalid, when an
/// option is out of its range (named as "budget_ms (TuneOptions::budget_ms): ...", likewise
/// batch_ms, min_rounds, max_rounds, algo), and ("problem: ...") before allocating anything when
/// its host tensors and their float64 reference would take more than 3/4 of the machine's physical
/// memory.
TuneResult tune(const ConvProblem& p, const TuneOptions& options = {},
                const TuneProgress& progress = {});

/// The algorithms among `stored` (PerfDb::candidates() of one problem) whose measurements were
/// made by another version than the registered one (Algorithm::version; unregistered algorithms
/// are ignored), each named once. A stored winner stands only while this is empty; `tune` with
/// these measurements in TuneOptions::measured measures exactly those algorithms again.
std::vector<std::string> stale_algorithms(const std::vector<PerfCandidate>& stored);

/// Why a winner stored for `p` on a device of `kind` no longer stands ("" when it does): it is
/// no applicable algorithm and config of this build (a database from elsewhere may name
/// anything), an applicable algorithm and config of this build (CONVTUNE_DISABLE respected) has
/// no measurement in `stored` (its problem's candidates; e.g. an algorithm added since), or
/// `stored` holds measurements of another version (stale_algorithms). Shared by best_forward and
/// `autotune tune`.
std::string why_stored_winner_stale(const ConvProblem& p, Device::Kind kind, const PerfWinner& w,
                                    const std::vector<PerfCandidate>& stored);

/// Stores a tune result in `db`: the candidates measured in this run, and the winners only when
/// the result is complete (a subset never becomes or replaces the stored winner).
void store_result(PerfDb& db, const TuneResult& r);

}  // namespace conv
