// autotune tune: for each problem, use the stored winner when it stands (user database first,
// then the system ones), else measure what is missing, store it, and print the table.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "conv/algorithm.hpp"
#include "interrupt.hpp"
#include "options.hpp"
#include "report.hpp"

namespace conv::cli {

namespace {

LayerOutcome outcome_from_tune(const conv::TuneResult& r) {
  LayerOutcome o;
  o.problem = r.problem;
  o.fingerprint = r.fingerprint;
  o.source = "tuned";
  o.candidates = r.to_records();
  o.tuned = r;
  return o;
}

// The user's database for writing; a file that exists but cannot be written still serves
// lookups, and the user hears so before anything is measured.
conv::PerfDb open_user(const std::string& path) {
  try {
    return conv::PerfDb::open(path);
  } catch (const conv::Error& e) {
    if (!conv::PerfDb::file_exists(path)) throw;
    conv::PerfDb db = conv::PerfDb::open(path, true);
    std::cerr << "autotune: " << e.what()
              << "\nautotune: using it read-only: stored winners are used, what is measured now "
                 "is not stored (pass --db with a writable file to keep it)\n";
    return db;
  }
}

std::vector<conv::PerfDb> open_system() {
  std::vector<conv::PerfDb> dbs;
  for (const std::string& path : conv::system_perfdb_paths()) {
    try {
      dbs.push_back(conv::PerfDb::open(path, true));
    } catch (const conv::Error& e) {
      std::cerr << "autotune: warning: " << e.what() << "; this system perf database is skipped\n";
    }
  }
  return dbs;
}

std::string why_not_current(const conv::ConvProblem& p, conv::Device::Kind kind,
                            const std::optional<conv::PerfWinner>& one,
                            const std::optional<conv::PerfWinner>& packed,
                            const std::vector<conv::PerfCandidate>& stored) {
  const auto enabled = conv::registry();
  for (const auto* w : {&one, &packed})
    if (*w) {
      if (std::string why = conv::why_stored_winner_stale(p, kind, **w, stored); !why.empty())
        return why;
      // Shown as this run's winner, it would be one the user has just turned off.
      if (std::none_of(enabled.begin(), enabled.end(),
                       [&](const conv::Algorithm* a) { return a->id() == (*w)->algo_id; }))
        return "its winner " + (*w)->algo_id + " is disabled by CONVTUNE_DISABLE";
    }
  if (one && one->quality.noisy) return "the one-shot winner was measured under load (noisy)";
  if (packed && packed->quality.noisy) return "the Plan winner was measured under load (noisy)";
  return "";
}

// The progress of one layer's tune on stderr, on the line its name began: the checks every
// fourth candidate, then each timing round, with the time left for the layer after the checks.
class LayerProgress {
 public:
  void operator()(const conv::TuneEvent& e) {
    InterruptGuard::throw_if_requested();
    if (e.phase == conv::TuneEvent::Phase::check) {
      if (e.done % 4 == 0 || e.done == e.total) std::cerr << " " << e.done << "/" << e.total;
      if (e.done == e.total)
        std::cerr << " checked (about " << seconds(e.left_ms) << " s of timing); timing rounds";
    } else {
      std::cerr << " " << e.done;
    }
    std::cerr << std::flush;
  }

  static long seconds(double ms) { return std::lround(std::ceil(ms / 1000)); }
};

}  // namespace

int run_tune(const Common& c, const TuneArgs& t, const MiopenArgs& miopen) {
  const Shard shard = parse_shard(t.shard);
  size_t duplicates = 0;
  const auto problems = select_shard(collect_problems(t, miopen), shard, &duplicates);
  const conv::Device device = parse_device(c.device);
  const conv::TuneOptions options = t.options(c, device);
  const std::string fingerprint = device.fingerprint(c.threads, c.timing_mode());
  conv::PerfDb db = open_user(c.db_path());
  const std::vector<conv::PerfDb> system = open_system();
  if (duplicates > 0)
    std::cerr << "autotune: " << duplicates << " repeated problem(s) tuned once\n";
  if (shard.count > 1)
    std::cerr << "autotune: shard " << shard.index << "/" << shard.count << ": " << problems.size()
              << " problem(s)\n";

  std::vector<LayerOutcome> layers;
  const InterruptGuard interrupt;
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  size_t measured = 0, no_winner = 0, subsets = 0;
  std::vector<std::string> failed;
  // --json: each layer that could not be tuned, after the outcomes of the layers before it.
  std::vector<std::pair<size_t, nlohmann::json>> failures;
  // Ctrl-C: one line of what was kept, exit status 130 as a shell gives it.
  const auto interrupted = [&](size_t i, const std::string& abandoned) {
    std::cerr << (abandoned.empty() ? "" : "\n") << "autotune: interrupted: " << measured
              << " layer(s) tuned" << (db.read_only() ? "" : " and stored in " + db.path()) << ", "
              << layers.size() - measured << " read from the perf databases, "
              << (abandoned.empty() ? "" : abandoned + " abandoned (nothing of it stored), ")
              << problems.size() - i - !abandoned.empty()
              << " not started; the same command goes on from there\n";
    return 130;
  };
  for (size_t i = 0; i < problems.size(); ++i) {
    const auto& p = problems[i];
    const std::string name = p.name.empty() ? p.key() : p.name;
    if (InterruptGuard::requested()) return interrupted(i, "");
    const std::string progress =
        "[" + std::to_string(i + 1) + "/" + std::to_string(problems.size()) + "] " + name + ": ";
    // A stored winner answers only an unrestricted tune: with --algo or --workspace-limit the
    // candidates are measured (what is stored and current is reused) and the subset's winner
    // shown.
    if (!t.force && t.algo.empty() && t.workspace_mib < 0) {
      // The first database holding a winner decides: the user's, then the system ones.
      const conv::PerfDb* from = nullptr;
      std::optional<conv::PerfWinner> one, packed;
      std::vector<conv::PerfCandidate> stored;
      std::vector<const conv::PerfDb*> order = {&db};
      for (const auto& s : system) order.push_back(&s);
      for (const conv::PerfDb* d : order) {
        one = d->lookup(fingerprint, p.key(), conv::ExecPath::oneshot);
        if (!one) continue;
        from = d;
        packed = d->lookup(fingerprint, p.key(), conv::ExecPath::packed);
        stored = d->candidates(fingerprint, p.key());
        break;
      }
      if (from) {
        const std::string why = why_not_current(p, device.kind, one, packed, stored);
        if (why.empty()) {
          LayerOutcome o;
          o.problem = p;
          o.fingerprint = fingerprint;
          o.source = "perfdb";
          o.perfdb_path = from->path();
          o.winner = one;
          o.packed_winner = packed;
          o.candidates = stored;
          layers.push_back(o);
          std::cerr << progress << "stored in " << from->path()
                    << ", not re-measured (use --force to re-tune)\n";
          continue;
        }
        std::cerr << progress << "the stored winner in " << from->path() << " is out of date ("
                  << why << "): measuring again\n";
      }
    }
    std::cerr << progress << "tuning (" << p.flops() / 1e9 << " GFLOP)..." << std::flush;
    // Without --force, what the user's database already measured (current, clean) is not
    // measured again: only the missing candidates run, and the winner is chosen among all.
    conv::TuneOptions o = options;
    if (!t.force) {
      o.measured = db.candidates(fingerprint, p.key());
      // Nothing of our own yet: what a system database measured still counts where current.
      for (size_t k = 0; o.measured.empty() && k < system.size(); ++k)
        o.measured = system[k].candidates(fingerprint, p.key());
      // The table's speed-up divides the vendor baseline's time by the winner's, so the baseline
      // is measured in this run too: a stored time may come from another hour of a shared
      // machine (seed conv_s4: `cpu.onednn` 0.524 ms stored against 0.38-0.44 measured later).
      o.measured.erase(
          std::remove_if(o.measured.begin(), o.measured.end(),
                         [](const conv::PerfCandidate& c) { return is_vendor(c.algo_id); }),
          o.measured.end());
    }
    conv::TuneResult r;
    try {
      r = conv::tune(p, o, LayerProgress{});
    } catch (const Interrupted&) {
      return interrupted(i, name);
    } catch (const conv::Error& e) {
      // One layer that cannot be measured (e.g. its tensors do not fit in memory) must not cost
      // the batch the others.
      std::cerr << " failed: " << e.what() << "\n";
      failed.push_back(name);
      failures.emplace_back(layers.size(), conv::cli::failure_json(p, e.what(), device.name()));
      continue;
    }
    ++measured;
    const bool nothing_new =
        !r.candidates.empty() && std::all_of(r.candidates.begin(), r.candidates.end(),
                                             [](const auto& x) { return x.from_perfdb; });
    if (nothing_new) std::cerr << " (nothing needed measuring: chosen from the stored ones)";
    if (!db.read_only()) conv::store_result(db, r);
    layers.push_back(outcome_from_tune(r));
    if (r.winner < 0) {
      ++no_winner;
      std::cerr << " (" << why_no_winner(r) << ")";
    } else if (r.complete && !db.read_only()) {
      // The winners as stored, with the date the database gave them.
      layers.back().winner = db.lookup(fingerprint, p.key(), conv::ExecPath::oneshot);
      layers.back().packed_winner = db.lookup(fingerprint, p.key(), conv::ExecPath::packed);
    } else {
      const auto& w = r.candidates[r.winner];
      if (!r.complete) {
        ++subsets;
        layers.back().source = "subset";
        std::cerr << " (a subset of the candidates: its winner is shown, not stored)";
      } else {
        layers.back().source = "memory";
      }
      conv::PerfWinner shown;
      shown.algo_id = w.algo_id, shown.config = w.config;
      shown.median_ms = w.median_ms, shown.min_ms = w.min_ms;
      shown.quality = w.quality;
      shown.quality.noisy = r.noisy;
      layers.back().winner = shown;
    }
    const double per = elapsed() / measured;
    std::cerr << " done; elapsed " << static_cast<int>(elapsed()) << " s, ETA about "
              << static_cast<int>(per * (problems.size() - i - 1)) << " s\n";
  }
  if (c.json) {
    nlohmann::json j = nlohmann::json::array();
    auto failure = failures.begin();
    for (size_t i = 0; i <= layers.size(); ++i) {
      for (; failure != failures.end() && failure->first == i; ++failure)
        j.push_back(failure->second);
      if (i < layers.size()) j.push_back(conv::cli::to_json(layers[i]));
    }
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << "device: " << fingerprint << "\nperf database: " << db.path()
              << (db.read_only() ? " (read-only)" : "") << "\n";
    for (const auto& s : system) std::cout << "system perf database: " << s.path() << "\n";
    std::cout << "\n";
    conv::cli::print_tune_table(std::cout, layers);
    size_t stored = layers.size() - measured;
    std::cout << "\n"
              << measured << " layer(s) tuned now, " << stored
              << " read from the perf databases without measuring.\n";
    if (subsets > 0)
      std::cout << subsets
                << " layer(s) measured on a subset of the candidates (--algo, CONVTUNE_DISABLE, "
                   "workspace limit, budget or a failure): their winners are not stored.\n";
  }
  if (!failed.empty()) {
    std::cerr << "autotune: " << failed.size() << " layer(s) could not be tuned:";
    for (const auto& n : failed) std::cerr << " " << n;
    std::cerr << "\n";
  }
  if (no_winner > 0)
    std::cerr << "autotune: " << no_winner << " layer(s) ended with no correct candidate\n";
  return no_winner > 0 || !failed.empty() ? 1 : 0;
}

}  // namespace conv::cli
