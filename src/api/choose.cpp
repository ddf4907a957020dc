#include "choose.hpp"

#include <array>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <string_view>
#include <tuple>
#include <vector>

#include "conv/tuner.hpp"
#include "problem_fields.hpp"
#include "quoted.hpp"

namespace conv {

namespace {

// Everything a cached choice depends on besides the problem: device, threads, workspace limit,
// path, timing, and the find mode and perf database as the options give them (else a heuristic
// choice could answer a later call that asks to tune into another database, and a choice from one
// database a db_only call on another); the environment's overrides and default path are read on a
// miss only. Found without allocating: the path is compared as a string_view.
template <class Text>
using Key = std::tuple<ProblemFields, std::array<uint64_t, 6>, Text>;
using CacheKey = Key<std::string>;

Key<std::string_view> cache_key(const ConvProblem& p, const ForwardOptions& o, int threads,
                                ExecPath path) {
  return {problem_fields(p),
          {static_cast<uint64_t>(o.device.kind) << 32 | static_cast<uint64_t>(o.device.index),
           static_cast<uint64_t>(threads), o.workspace_limit, static_cast<uint64_t>(path),
           static_cast<uint64_t>(o.find_mode), static_cast<uint64_t>(o.timing)},
          o.perfdb_path};
}

struct WinnerCache {
  std::mutex mutex;
  std::map<CacheKey, Choice, std::less<>> map;
};

WinnerCache& winner_cache() {
  static WinnerCache cache;
  return cache;
}

// A stored choice is usable when its algorithm is still registered and enabled, applies, knows
// the config and fits the workspace limit.
bool usable(const ConvProblem& p, const std::string& algo_id, const std::string& config,
            Device::Kind kind, size_t limit, Choice* out) {
  for (const Algorithm* a : registry()) {
    if (a->id() != algo_id || a->device() != kind || !a->applicable(p).ok) continue;
    for (const auto& c : a->configs(p)) {
      if (c != config) continue;
      const size_t ws = a->workspace_bytes(p, c);
      if (ws > limit) return false;
      out->algo = a;
      out->config = c;
      out->workspace_bytes = ws;
      return true;
    }
  }
  return false;
}

// Why no algorithm could be chosen for `key`: every one for the device disabled, or none correct
// within the workspace limit (`what`: "runs" or "computes it correctly").
[[noreturn]] void no_algorithm(const std::string& key, const ForwardOptions& o, const char* what) {
  const auto enabled = registry();
  if (std::none_of(enabled.begin(), enabled.end(),
                   [&](const Algorithm* a) { return a->device() == o.device.kind; }))
    throw Error("CONVTUNE_DISABLE: every algorithm for " + o.device.name() +
                " is disabled, so none runs " + key);
  if (o.workspace_limit == std::numeric_limits<size_t>::max())
    throw Error(std::string("problem: no algorithm ") + what + " " + key);
  throw Error("workspace_limit: no algorithm " + std::string(what) + " " + key + " within " +
              std::to_string(o.workspace_limit) + " bytes of workspace");
}

// A cheap rule for find mode "heuristic": the vendor library when it applies, else direct.
Choice heuristic_choice(const ConvProblem& p, const ForwardOptions& o) {
  const char* order[] = {"cpu.onednn", "cpu.direct", "cpu.im2col_gemm"};
  if (o.device.kind == Device::Kind::cpu) {
    for (const char* id : order) {
      const Algorithm* a = find_algorithm(id);
      Choice c;
      if (a && usable(p, id, a->configs(p).front(), o.device.kind, o.workspace_limit, &c)) return c;
    }
  }
  for (const Algorithm* a : registry()) {
    Choice c;
    if (a->device() == o.device.kind && a->applicable(p).ok &&
        usable(p, std::string(a->id()), a->configs(p).front(), o.device.kind, o.workspace_limit,
               &c))
      return c;
  }
  no_algorithm(p.key(), o, "runs");
}

// One line per kind of trouble (and per file) per process, not one per call.
void warn_once(const std::string& kind, const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mutex);
  if (said.insert(kind).second) std::cerr << "convtune: warning: " << message << "\n";
}

// The perf databases to read, user's first: in tune mode the user's is opened for writing when
// it can be (a read-only file still serves lookups), then every readable system database.
std::vector<PerfDb> open_layers(const std::string& user_path, FindMode mode) {
  std::vector<PerfDb> layers;
  const bool exists = PerfDb::file_exists(user_path);
  try {
    // Only tuning creates the file; for the other modes a missing file is simply a miss.
    if (mode == FindMode::tune) {
      try {
        layers.push_back(PerfDb::open(user_path, false));
      } catch (const Error& e) {
        if (!exists) throw;
        layers.push_back(PerfDb::open(user_path, true));
        warn_once("read-only:" + user_path,
                  "perf database " + user_path + " is read-only: it serves lookups, and what " +
                      "is tuned on a miss stays in memory (" + e.what() + ")");
      }
    } else if (exists) {
      layers.push_back(PerfDb::open(user_path, true));
    }
  } catch (const Error& e) {
    if (mode == FindMode::db_only)
      throw Error(std::string("find_mode db_only: the perf database cannot be read: ") + e.what());
    warn_once("user:" + user_path,
              std::string(e.what()) + "; choosing without the user perf database");
  }
  for (const std::string& path : system_perfdb_paths()) {
    try {
      layers.push_back(PerfDb::open(path, true));
    } catch (const Error& e) {
      warn_once("system:" + path, std::string(e.what()) + "; this system perf database is skipped");
    }
  }
  return layers;
}

}  // namespace

Choice named_choice(const ConvProblem& p, const std::string& algo_id, const std::string& config,
                    const Device& device) {
  const Algorithm* a = find_algorithm(algo_id);
  if (!a) throw Error("algo_id: unknown algorithm " + conv::quoted(algo_id));
  if (a->device() != device.kind)
    throw Error("algo_id: " + algo_id + " does not run on " + device.name());
  Applicability ok = a->applicable(p);
  if (!ok.ok)
    throw Error("algo_id: " + algo_id + " is not applicable to " + p.key() + ": " + ok.reason);
  bool known = false;
  for (const auto& c : a->configs(p)) known = known || c == config;
  if (!known)
    throw Error("config: " + algo_id + " has no config " + conv::quoted(config) + " for " +
                p.key());
  Choice c;
  c.algo = a;
  c.config = config;
  c.source = ChoiceSource::named;
  c.workspace_bytes = a->workspace_bytes(p, config);
  return c;
}

// A value no enumerator names (a cast in the caller) is refused, not taken for the default; checked
// before the environment and the winner cache can answer.
void check_find_mode(const ForwardOptions& o) {
  if (o.find_mode != FindMode::tune && o.find_mode != FindMode::heuristic &&
      o.find_mode != FindMode::db_only)
    throw Error("find_mode (ForwardOptions::find_mode): expected tune, heuristic or db_only, got " +
                std::to_string(static_cast<int>(o.find_mode)));
}

FindMode effective_find_mode(const ForwardOptions& o) {
  // Empty means unset, as for CONVTUNE_MAX_ISA and CONVTUNE_PERFDB.
  if (const char* env = std::getenv("CONVTUNE_FIND_MODE"); env && *env) {
    try {
      return parse_find_mode(env);
    } catch (const Error& e) {
      throw Error(std::string("CONVTUNE_FIND_MODE: ") + e.what());
    }
  }
  return o.find_mode;
}

Choice choose(const ConvProblem& p, const ForwardOptions& o, ExecPath path) {
  check_find_mode(o);
  const int threads = resolve_threads(o.threads);
  const Key<std::string_view> key = cache_key(p, o, threads, path);
  WinnerCache& cache = winner_cache();
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.map.find(key);
    if (it != cache.map.end()) return it->second;
  }

  const FindMode mode = effective_find_mode(o);
  const std::string db_path = o.perfdb_path.empty() ? PerfDb::default_path() : o.perfdb_path;
  const std::string fingerprint = o.device.fingerprint(threads, o.timing);
  const std::string pkey = p.key();
  std::vector<PerfDb> layers = open_layers(db_path, mode);
  const bool have_user = !layers.empty() && layers.front().path() == db_path;

  Choice choice;
  bool found = false;
  for (const PerfDb& db : layers) {
    const auto w = db.lookup(fingerprint, pkey, path);
    if (!w) continue;
    const auto stored = db.candidates(fingerprint, pkey);
    // A winner this build cannot run, or chosen among out-of-date measurements: measure again.
    if (!why_stored_winner_stale(p, o.device.kind, *w, stored).empty()) continue;
    found = usable(p, w->algo_id, w->config, o.device.kind, o.workspace_limit, &choice);
    // The stored winner may not fit this call's workspace limit: a stored winner means every
    // candidate was measured, so the fastest stored one that fits is this limit's winner
    // (candidates() is ordered by time).
    for (size_t i = 0; !found && i < stored.size(); ++i)
      found =
          stored[i].status == CandidateStatus::ok &&
          usable(p, stored[i].algo_id, stored[i].config, o.device.kind, o.workspace_limit, &choice);
    if (found) {
      choice.source = ChoiceSource::perfdb;
      choice.perfdb_path = db.path();
      break;
    }
  }
  if (!found) {
    if (mode == FindMode::db_only)
      throw Error("find_mode db_only: no current perf database entry for " + pkey + " on " +
                  fingerprint + " in " + db_path +
                  " or the system perf databases (stale rows and rows that fail validation count "
                  "as none; `autotune db check` names the latter)");
    if (mode == FindMode::heuristic) {
      choice = heuristic_choice(p, o);
      choice.source = ChoiceSource::heuristic;
    } else {
      TuneOptions t;
      t.device = o.device;
      t.threads = threads;
      t.timing = o.timing;
      t.workspace_limit = o.workspace_limit;
      // Measure only what the user's database lacks or holds out of date.
      if (have_user) t.measured = layers.front().candidates(fingerprint, pkey);
      TuneResult r = tune(p, t);
      const int i = path == ExecPath::packed ? r.packed_winner : r.winner;
      if (i < 0) no_algorithm(pkey, o, "computes correctly");
      if (have_user && !layers.front().read_only()) {
        try {
          store_result(layers.front(), r);
        } catch (const Error& e) {
          warn_once("store:" + db_path,
                    std::string(e.what()) + "; the tuning result is kept in memory only");
        }
      }
      const auto& c = r.candidates[i];
      if (!usable(p, c.algo_id, c.config, o.device.kind, o.workspace_limit, &choice))
        throw Error("workspace_limit: the tuned winner " + c.algo_id + " " + c.config + " for " +
                    pkey + " does not fit " + std::to_string(o.workspace_limit) +
                    " bytes of workspace");
      choice.source = ChoiceSource::tuned;
    }
  }
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.map.emplace(CacheKey{std::get<0>(key), std::get<1>(key), std::string(std::get<2>(key))},
                    choice);
  return choice;
}

void clear_winner_cache() {
  WinnerCache& cache = winner_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.map.clear();
}

}  // namespace conv
