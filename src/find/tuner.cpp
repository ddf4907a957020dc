// The tuner's results and what outlives a tune: the records a result stores, whether a stored
// winner still stands, and storing a result in the perf database. tune() itself: tuning.cpp.
#include "conv/tuner.hpp"

#include <algorithm>
#include <sstream>

namespace conv {

double CandidateResult::gflops(const ConvProblem& p) const {
  const double ms = min_ms > 0 ? min_ms : median_ms;  // the estimate the choice is made on
  return ms > 0 ? p.flops() / (ms * 1e6) : 0;
}

const CandidateResult* TuneResult::find(const std::string& algo_id) const {
  const CandidateResult* best = nullptr;
  for (const auto& c : candidates)
    if (c.algo_id == algo_id && c.status == CandidateStatus::ok &&
        (!best || c.min_ms < best->min_ms))
      best = &c;
  return best;
}

std::vector<PerfCandidate> TuneResult::to_records() const {
  std::vector<PerfCandidate> out;
  for (const auto& c : candidates) {
    PerfCandidate r;
    static_cast<Measurement&>(r) = c;
    if (const Algorithm* a = find_algorithm(c.algo_id)) r.algo_version = a->version();
    out.push_back(r);
  }
  return out;
}

std::string unknown_algo_pattern_part(const std::string& pattern) {
  std::stringstream ss(pattern);
  for (std::string part; std::getline(ss, part, ',');) {
    const auto& all = all_algorithms();
    if (!part.empty() && std::none_of(all.begin(), all.end(), [&](const Algorithm* a) {
          return a->id().find(part) != std::string::npos;
        }))
      return part;
  }
  return "";
}

std::vector<std::string> stale_algorithms(const std::vector<PerfCandidate>& stored) {
  std::vector<std::string> stale;
  for (const auto& c : stored) {
    const Algorithm* a = find_algorithm(c.algo_id);
    if (a && c.algo_version != a->version() &&
        std::find(stale.begin(), stale.end(), c.algo_id) == stale.end())
      stale.push_back(c.algo_id);
  }
  return stale;
}

std::string why_stored_winner_stale(const ConvProblem& p, Device::Kind kind, const PerfWinner& w,
                                    const std::vector<PerfCandidate>& stored) {
  const Algorithm* a = find_algorithm(w.algo_id);
  bool runnable = a && a->device() == kind && a->applicable(p).ok;
  if (runnable) {
    const auto configs = a->configs(p);
    runnable = std::find(configs.begin(), configs.end(), w.config) != configs.end();
  }
  if (!runnable)
    return "its winner " + w.algo_id + " " + w.config +
           " is no applicable algorithm and config of this build";
  // A stored winner means every candidate of the build that stored it was measured; one this
  // build adds (a new algorithm or config) could be faster.
  for (const Algorithm* b : registry()) {
    if (b->device() != kind || !b->applicable(p).ok) continue;
    for (const auto& c : b->configs(p)) {
      auto same = [&](const PerfCandidate& s) { return s.algo_id == b->id() && s.config == c; };
      if (std::none_of(stored.begin(), stored.end(), same))
        return std::string(b->id()) + " " + c + " was never measured (new in this build)";
    }
  }
  const auto stale = stale_algorithms(stored);
  if (stale.empty()) return "";
  std::string names;
  for (const auto& s : stale) names += (names.empty() ? "" : ", ") + s;
  return "measured with another version of " + names;
}

void store_result(PerfDb& db, const TuneResult& r) {
  auto winner = [&](int i, bool packed) -> std::optional<PerfWinner> {
    if (i < 0) return std::nullopt;
    const auto& c = r.candidates[i];
    PerfWinner w;
    w.algo_id = c.algo_id;
    w.config = c.config;
    w.median_ms = packed && c.packed_median_ms >= 0 ? c.packed_median_ms : c.median_ms;
    w.min_ms = packed ? c.plan_ms() : c.min_ms;
    // A packed median with only a one-shot minimum beside it (a stored record of another build)
    // would make a row that contradicts itself; the estimate is at most the median.
    if (w.min_ms > w.median_ms && w.median_ms >= 0) w.min_ms = w.median_ms;
    w.quality = packed && c.packed_quality.rounds > 0 ? c.packed_quality : c.quality;
    w.quality.noisy = packed ? r.packed_noisy : r.noisy;
    w.version = version();
    w.name = r.problem.name;
    return w;
  };
  std::optional<PerfWinner> one, packed;
  if (r.complete) one = winner(r.winner, false), packed = winner(r.packed_winner, true);
  auto fresh = r.to_records();  // minus what came from the database, already stored
  for (size_t i = r.candidates.size(); i-- > 0;)
    if (r.candidates[i].from_perfdb) fresh.erase(fresh.begin() + static_cast<ptrdiff_t>(i));
  db.store(r.fingerprint, r.problem.key(), fresh, one ? &*one : nullptr,
           packed ? &*packed : nullptr);
}

}  // namespace conv
