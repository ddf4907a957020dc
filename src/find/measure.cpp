// Interleaved rounds, the clean-minimum estimate, confirmation and pruning (see measure.hpp).
#include "measure.hpp"

#include <algorithm>
#include <limits>

namespace conv::measure {

namespace {

// A wait for a CPU shorter than this share of a batch (plus a wake-up's worth) is ordinary
// scheduling on a quiet machine, not a competing load.
constexpr double kRunDelayShare = 0.02;
constexpr double kRunDelaySlackMs = 0.02;

double median_of_sorted(const std::vector<double>& v) {
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void summarise(Stats& s, const Policy& policy) {
  std::vector<double> clean;
  for (size_t i = 0; i < s.samples.size(); ++i)
    if (s.clean[i]) clean.push_back(s.samples[i]);
  std::sort(clean.begin(), clean.end());
  std::vector<double> all = s.samples;
  std::sort(all.begin(), all.end());
  const std::vector<double>& basis = clean.empty() ? all : clean;
  s.clean_rounds = static_cast<int>(clean.size());
  s.min_ms = basis.front();
  s.median_ms = median_of_sorted(basis);
  s.max_ms = all.back();
  s.spread = clean.size() >= 2 ? (s.median_ms - s.min_ms) / s.min_ms : -1;
  s.confirmed = clean.size() >= 2 && clean[1] <= clean[0] * (1 + policy.confirm);
  s.lower_ms = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < s.samples.size(); ++i) {
    const double wait = s.wait_ms[i] >= 0 ? s.wait_ms[i] : s.clean[i] ? 0 : s.samples[i];
    s.lower_ms = std::min(s.lower_ms, std::max(0.0, s.samples[i] - wait));
  }
  if (s.confirmed) s.lower_ms = std::max(s.lower_ms, s.min_ms);
}

void run_batch(const Item& item, Stats& s, MeasureEnv& env, const Policy& policy, double deadline) {
  if (item.prepare) item.prepare();
  // After a disturbed round, step aside first: sleeping lets OpenMP workers that spin at a
  // barrier fall asleep and the competing process run, so this process's threads wake together
  // as the ones the scheduler owes time, which is when a run can be clean.
  if (policy.backoff_ms > 0 && !s.clean.empty() && !s.clean.back()) env.pause(policy.backoff_ms);
  const LoadSignals before = env.load();
  const double t0 = env.now_ms();
  double timed = 0, fastest = std::numeric_limits<double>::infinity();
  int runs = 0;
  do {
    if (item.before_run) item.before_run();
    const double t = env.time_ms(item.run, item.label);
    timed += t;
    fastest = std::min(fastest, t);
    ++runs;
  } while (timed < policy.batch_ms && runs < policy.max_batch_runs && env.now_ms() < deadline);
  const double wall = std::max(timed, env.now_ms() - t0);
  const LoadSignals after = env.load();
  s.samples.push_back(fastest);
  s.clean.push_back(!disturbed(before, after, wall));
  // The wait is only known when run_delay is and the hypervisor took nothing.
  const bool known = before.run_delay_ms >= 0 && after.run_delay_ms >= 0 &&
                     !(before.steal_ms >= 0 && after.steal_ms > before.steal_ms);
  s.wait_ms.push_back(known ? after.run_delay_ms - before.run_delay_ms : -1);
  s.runs += runs;
}

// Out of every race it competes in: its confirmed time is above `prune` times the fastest
// round (clean or not, so an upper bound of the true time) of some other item there. Only a
// confirmed time counts: one clean round may still have been slowed by what the signals miss.
bool can_prune(size_t i, const std::vector<Item>& items, const std::vector<Stats>& stats,
               const Policy& policy) {
  const Stats& s = stats[i];
  if (!s.confirmed || static_cast<int>(s.samples.size()) < policy.min_rounds) return false;
  for (unsigned race = 1; race != 0 && race <= items[i].races; race <<= 1) {
    if (!(items[i].races & race)) continue;
    bool beaten = false;
    for (size_t j = 0; j < items.size() && !beaten; ++j) {
      if (j == i || !(items[j].races & race) || stats[j].samples.empty()) continue;
      const double fastest = *std::min_element(stats[j].samples.begin(), stats[j].samples.end());
      beaten = s.min_ms > policy.prune * fastest;
    }
    if (!beaten) return false;
  }
  return true;
}

RoundReport report(int done, const std::vector<size_t>& active, const std::vector<Stats>& stats,
                   MeasureEnv& env, const Policy& policy, double round_start, double deadline) {
  RoundReport r;
  r.round = done;
  r.active = active.size();
  for (size_t i : active) {
    r.confirmed += stats[i].confirmed && !stats[i].pruned;
    r.remaining += !stats[i].pruned;
  }
  const double now = env.now_ms();
  r.round_ms = now - round_start;
  bool settled = done >= policy.min_rounds;
  for (const Stats& s : stats) settled = settled && (s.pruned || s.confirmed);
  int left = settled || r.remaining == 0 ? 0 : std::max(policy.min_rounds - done, 1);
  left = std::min(left, std::max(1, policy.max_rounds) - done);
  r.left_ms = std::max(0, left) * r.round_ms * r.remaining / std::max<size_t>(1, r.active);
  r.left_ms = std::min(r.left_ms, std::max(0.0, deadline - now));
  return r;
}

}  // namespace

bool disturbed(const LoadSignals& a, const LoadSignals& b, double wall_ms) {
  if (a.steal_ms >= 0 && b.steal_ms > a.steal_ms) return true;
  const bool known_switches = a.involuntary_switches >= 0 && b.involuntary_switches >= 0;
  const bool preempted = known_switches && b.involuntary_switches > a.involuntary_switches;
  if (a.run_delay_ms >= 0 && b.run_delay_ms >= 0) {
    if (b.run_delay_ms - a.run_delay_ms <= kRunDelayShare * wall_ms + kRunDelaySlackMs)
      return false;
    const bool crowded = a.crowding < 0 || b.crowding < 0 || std::max(a.crowding, b.crowding) > 1;
    return crowded || preempted;
  }
  return preempted;
}

std::vector<Stats> run_rounds(const std::vector<Item>& items, MeasureEnv& env, const Policy& policy,
                              const RoundCallback& on_round) {
  std::vector<Stats> stats(items.size());
  const double deadline = env.now_ms() + policy.budget_ms;
  for (int round = 0; round < std::max(1, policy.max_rounds); ++round) {
    // Every item that can still win runs in every round until all of them are confirmed, so
    // the contenders' rounds cover the same stretch of time (the machine's speed drifts too).
    std::vector<size_t> active;
    bool settled = round >= policy.min_rounds;
    for (size_t i = 0; i < items.size(); ++i) {
      if (stats[i].pruned) continue;
      active.push_back(i);
      settled = settled && stats[i].confirmed;
    }
    if (active.empty() || settled) break;
    if (round > 0 && env.now_ms() >= deadline) break;
    const double round_start = env.now_ms();
    const size_t start = static_cast<size_t>(round) % active.size();
    for (size_t k = 0; k < active.size(); ++k) {
      if (round > 0 && env.now_ms() >= deadline) break;
      const size_t i = active[(start + k) % active.size()];
      run_batch(items[i], stats[i], env, policy, deadline);
    }
    for (size_t i : active)
      if (!stats[i].samples.empty()) summarise(stats[i], policy);
    for (size_t i : active) stats[i].pruned = can_prune(i, items, stats, policy);
    if (on_round) on_round(report(round + 1, active, stats, env, policy, round_start, deadline));
  }
  return stats;
}

}  // namespace conv::measure
