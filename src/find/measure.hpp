// Timing several candidates on a machine that other processes share: interleaved rounds, the
// minimum of undisturbed rounds as the estimate, disturbance detection from the scheduler's own
// accounting, pruning of clear losers, and a per-item quality. Internal to the tuner and its
// tests; the world (clock, device timer, load signals) comes in through conv::MeasureEnv, so
// the decision logic is tested with scripted times and loads.
//
// Method (sources: Chen & Revels, "Robust benchmarking in noisy environments", 2016: for
// deterministic code noise only ever adds time, so the minimum is the robust estimator;
// Kalibera & Jones, ISMM 2013: repeat at the level where the variation is; TVM's
// min_repeat_ms: a timed batch must be long enough for the clock):
//  - Each round runs every unfinished item once, in an order that rotates each round, so a load
//    burst hits all candidates alike rather than whichever was being measured.
//  - An item's round is a batch: the run repeated until the batch lasts batch_ms; the round's
//    sample is the batch's fastest run. The load signals read before and after the batch say
//    whether any of this process's threads waited for a CPU (or the hypervisor stole time)
//    during it: a disturbed round is kept but does not count as clean.
//  - The estimate is the minimum over clean rounds (over all rounds when none is clean). An
//    item is confirmed when its two fastest clean rounds agree within `confirm` (one "clean"
//    round can still be slowed by what the signals do not see: the host's other tenants, a
//    frequency change, caches another process emptied). It is out once its confirmed time is
//    above `prune` times another item's fastest round in every race it is in (it cannot win).
//    The rounds go on, for every item still in, until all of them are confirmed after at least
//    min_rounds rounds, or max_rounds, or the time budget: the contenders are measured over the
//    same stretch of time, as in a head-to-head.
//  - After a disturbed round an item's next round waits backoff_ms first (see Policy).
//  - A lower bound for deciding without clean rounds: a round's fastest run was slowed by at
//    most the time this process's threads waited for a CPU during the batch, so the minimum
//    over rounds of (sample - wait) bounds the true time from below (up to what the signals
//    miss); a confirmed estimate is its own bound.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "conv/tuner.hpp"

namespace conv {
class DeviceOps;
}

namespace conv::measure {

/// Whether a batch that took `wall_ms` was disturbed, judging by the signals read before and
/// after it: any steal; a wait for a CPU above 2% of the batch (plus 20 us) while another
/// thread competed (crowding above 1 at either read, or this process was preempted), since
/// without a competitor a wait is only a sleeping thread's wake-up (OMP_WAIT_POLICY=passive
/// on an idle virtual CPU); or, without run_delay, any involuntary context switch.
bool disturbed(const LoadSignals& before, const LoadSignals& after, double wall_ms);

/// The real world: the device's timer, this process's scheduler statistics and the steady
/// clock. With CONVTUNE_IGNORE_LOAD=1 in the environment the load signals are not read and
/// every round counts as clean (for machines whose /proc says nothing useful, and for runs that
/// must not depend on the load, such as tests of what gets stored).
std::shared_ptr<MeasureEnv> system_env(const DeviceOps& ops, void* stream);

struct Policy {
  int min_rounds = 3;
  int max_rounds = 20;
  double batch_ms = 1;  ///< a round's batch repeats the run until it lasts this long
  int max_batch_runs = 1000;
  double confirm = 0.05;  ///< two clean rounds within 5% confirm the minimum
  double prune = 1.5;     ///< a confirmed time above 1.5x another item's fastest: out
  /// Pause before an item's round when its previous round was disturbed: under competing load it
  /// makes clean rounds far more likely.
  double backoff_ms = 20;
  /// Rounds after the first stop when this is used up, and a batch stops early (after one run).
  double budget_ms = 60000;
};

/// The races (execution paths) an item competes in, as bits.
constexpr unsigned kOneShot = 1, kPlan = 2, kBoth = kOneShot | kPlan;

/// One thing to time: a candidate on one execution path.
struct Item {
  std::string label;              ///< passed to MeasureEnv::time_ms
  std::function<void()> run;      ///< one call; timed
  std::function<void()> prepare;  ///< before each batch, untimed (e.g. re-packing); may be empty
  /// Before each timed run, untimed (Timing::cold: evicting the run's data); may be empty.
  std::function<void()> before_run;
  unsigned races = kOneShot;  ///< the races it competes in
};

/// What the rounds measured for one item. Times in ms.
struct Stats {
  std::vector<double> samples;  ///< per round, the fastest run of its batch
  std::vector<bool> clean;      ///< per round, no disturbance detected
  std::vector<double> wait_ms;  ///< per round, time spent waiting for a CPU (-1 = unknown)
  int runs = 0;                 ///< timed calls in all batches
  double min_ms = -1;     ///< the estimate: fastest clean round (fastest round if none is clean)
  double median_ms = -1;  ///< median of the clean rounds (of all rounds if none is clean)
  double max_ms = -1;     ///< slowest round, clean or not
  int clean_rounds = 0;
  double spread = -1;  ///< (median - min) / min over the clean rounds; -1 with fewer than 2
  /// A lower bound of the true time (see above); 0 when a disturbed round's wait is unknown.
  double lower_ms = -1;
  bool confirmed = false;  ///< two clean rounds agree within Policy::confirm
  bool pruned = false;     ///< stopped early: slower than another item by Policy::prune
  /// No clean round at all: every round was disturbed, so min_ms is only an upper bound.
  bool noisy() const { return clean_rounds == 0; }
};

/// What run_rounds() has done after a round (its progress). Times in ms by MeasureEnv::now_ms.
struct RoundReport {
  int round = 0;         ///< rounds done: 1 after the first
  size_t active = 0;     ///< items that ran in this round
  size_t remaining = 0;  ///< of those, items still in (not pruned)
  size_t confirmed = 0;  ///< of the remaining, confirmed
  double round_ms = 0;   ///< how long this round took
  /// The rounds still to come, estimated: until min_rounds, then one more while an item is
  /// unconfirmed, each as long as this one (scaled by the items left), within the budget.
  double left_ms = 0;
};
using RoundCallback = std::function<void(const RoundReport&)>;

/// Measures `items` in interleaved rounds as described above. Every item gets at least one
/// round, even when the budget is already used up. `on_round`, when set, is called after each
/// round; whatever it throws propagates (how a caller abandons the measurement).
std::vector<Stats> run_rounds(const std::vector<Item>& items, MeasureEnv& env, const Policy& policy,
                              const RoundCallback& on_round = {});

}  // namespace conv::measure
