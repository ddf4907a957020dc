// conv::tune: measure every applicable candidate on one problem, check it, pick the winner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "conv/algorithm.hpp"
#include "conv/device.hpp"
#include "conv/perfdb.hpp"
#include "conv/problem.hpp"

namespace conv {

struct TuneOptions {
  Device device = Device::cpu();
  int threads = 0;          ///< 0 = OpenMP default
  int min_runs = 5;         ///< timed runs per candidate, at least
  double min_time_ms = 50;  ///< and at least this much timed time per candidate
  int warmup_runs = 1;
  double budget_ms = 120000;  ///< per-problem time budget; remaining candidates are skipped
  std::string algo_pattern;   ///< only algorithms whose id contains one of these
                              ///< comma-separated substrings ("" = all)
  size_t workspace_limit = std::numeric_limits<size_t>::max();  ///< bytes
  bool check = true;  ///< compare outputs against a trusted result
  /// Candidates already measured on this problem and device (PerfDb::candidates()): those whose
  /// status is final ("ok" or "rejected") are not measured again but take part in choosing the
  /// winner; the others ("failed", "skipped") are measured again.
  std::vector<PerfCandidate> measured;
  /// Problems up to this many FLOPs are checked against the float64 reference, larger ones
  /// against cpu.im2col_gemm.
  double reference_max_flops = 2e9;
  uint64_t seed = 0x5eed;  ///< random input data seed
};

/// One candidate's measurement. Times in milliseconds; status as in PerfCandidate.
struct CandidateResult {
  std::string algo_id, config;
  std::string status = "ok";
  std::string message;
  double median_ms = -1, min_ms = -1, max_ms = -1;
  double packed_median_ms = -1;  ///< with weights packed once (Plan); -1 when not packable
  int runs = 0;
  size_t workspace_bytes = 0;
  /// Normalized error max |y - y_ref| / s_o with the algorithm's error scale s_o (the contract
  /// of Algorithm::error_bound), one-shot and packed; -1 when not checked.
  double max_error = -1;
  /// Per-output relative error max |y - y_ref| / (|bias| + sum|x*w|); -1 when not checked.
  double max_rel_error = -1;
  double error_bound = 0;    ///< the algorithm's bound on max_error
  bool from_perfdb = false;  ///< taken from TuneOptions::measured, not measured in this run
  double gflops(const ConvProblem& p) const;  ///< direct-convolution FLOPs / median time
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
  std::string reference;   ///< "float64 reference" or the trusted algorithm's id
  /// Every candidate of the whole registry has a final status ("ok" or "rejected"): nothing was
  /// filtered out (--algo, CONVTUNE_DISABLE), skipped (workspace limit, time budget) or failed.
  /// Only then do the winners stand for "fastest of all", and store_result() stores them.
  bool complete = false;
  double elapsed_ms = 0;

  const CandidateResult* find(const std::string& algo_id) const;  ///< best ok config of algo
  std::vector<PerfCandidate> to_records() const;
};

/// Progress callback: (candidate index, candidate count, the result just measured).
using TuneProgress = std::function<void(size_t, size_t, const CandidateResult&)>;

/// Measures every applicable (algorithm, config) of the registry on `p` with fresh random data
/// (uniform in [-1, 1]), warm-up then at least min_runs runs and min_time_ms, and checks each
/// output against the trusted result. Candidates that throw are "failed", those above their
/// error bound "rejected"; neither can win. Throws conv::Error when `p` is invalid.
TuneResult tune(const ConvProblem& p, const TuneOptions& options = {},
                const TuneProgress& progress = {});

/// Stores a tune result in `db`: the candidates measured in this run, and the winners only when
/// the result is complete (a subset never becomes or replaces the stored winner).
void store_result(PerfDb& db, const TuneResult& r);

}  // namespace conv
