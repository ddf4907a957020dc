// What the autotune CLI prints: the per-layer table, explain's per-candidate table, JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "conv/perfdb.hpp"
#include "conv/tuner.hpp"

namespace conv::cli {

/// One layer's outcome in `autotune tune`: measured now, or read back from the perf database.
struct LayerOutcome {
  ConvProblem problem;
  std::string fingerprint;
  /// "tuned", "perfdb" (read from perfdb_path), "subset" (measured on a subset, not stored) or
  /// "memory" (tuned, not stored: the database is read-only)
  std::string source;
  std::string perfdb_path;
  std::optional<PerfWinner> winner, packed_winner;
  std::vector<PerfCandidate> candidates;  ///< all measured candidates (now or stored)
  std::optional<TuneResult> tuned;        ///< when measured in this run
};

/// A measurement's quality in a few words: "5/5 clean, spread 1.2%", "noisy: 0/20 clean", "-"
/// when unknown (stored before perfdb schema 2). A noisy quality with clean rounds is a
/// candidate whose Plan path was noisy, or a winner a noisy candidate might have beaten.
std::string quality_text(const MeasureQuality& q, bool winner = false);
/// {rounds, clean_rounds, spread (null when unknown), noisy}; also the export format's.
nlohmann::json to_json(const MeasureQuality& q);

/// Whether `algo_id` is a vendor baseline: cpu.onednn, or a cuDNN algorithm (cuda.cudnn.*).
bool is_vendor(const std::string& algo_id);
/// The vendor baseline measured in the same run: cpu.onednn on the CPU, the fastest cuDNN
/// algorithm on a GPU.
const PerfCandidate* baseline(const LayerOutcome& o);
std::string baseline_name(const LayerOutcome& o);

/// `autotune tune`'s table: per layer the winner, its median ms, GFLOP/s, the baseline's median
/// ms in the same run and the speed-up over it (baseline ms / winner ms).
void print_tune_table(std::ostream& out, const std::vector<LayerOutcome>& layers);

/// `autotune explain`'s table: every registered algorithm, applicable or why not, each config's
/// median ms (one-shot and packed), GFLOP/s, % of `peak_gflops`, workspace MiB, max error and
/// bound, status; the winner marked with '*'.
void print_explain(std::ostream& out, const TuneResult& r, double peak_gflops);

/// Why a tune result has no winner (r.winner < 0), for `autotune tune`'s progress line: no
/// candidate at all; every candidate skipped, with each reason and its count (out of the time
/// budget, over --workspace-limit, a workspace over the machine's memory); or how many were
/// rejected, failed and skipped. E.g. "no candidate ran: 14 skipped, 14 out of the time budget
/// (--budget: time budget of 1 ms for this problem used up); `autotune explain` says which".
std::string why_no_winner(const TuneResult& r);

nlohmann::json to_json(const LayerOutcome& o);
nlohmann::json to_json(const TuneResult& r, double peak_gflops);
nlohmann::json to_json(const PerfDb::Entry& e);
/// A layer that could not be tuned or explained at all on `device` ("cpu", "cuda:0"; its
/// tensors do not fit in memory, ...): name, problem, key, gflop, device and the error, in place
/// of its entry in --json output.
nlohmann::json failure_json(const ConvProblem& p, const std::string& error,
                            const std::string& device);

}  // namespace conv::cli
