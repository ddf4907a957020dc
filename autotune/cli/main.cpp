// autotune: tune convolutions and store the winners (tune), explain one problem's candidates
// (explain), list the stored winners (show). Exit codes: 0 ok, 2 bad arguments or descriptor,
// 1 any other error.
#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "../peak.hpp"
#include "conv/conv.hpp"
#include "conv/tuner.hpp"
#include "report.hpp"

namespace {

using conv::cli::LayerOutcome;

// Argument errors found after CLI11's own parsing (bad descriptors, bad values): exit code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// MIOpenDriver-style flags: -n -c -H -W -k -y -x -p -q -u -v -l -j -g.
struct MiopenFlags {
  std::map<char, std::string> values;
  void add_to(CLI::App* app) {
    const std::pair<char, const char*> flags[] = {
        {'n', "batch size"},     {'c', "input channels"},  {'H', "input height"},
        {'W', "input width"},    {'k', "output channels"}, {'y', "filter height"},
        {'x', "filter width"},   {'p', "padding height"},  {'q', "padding width"},
        {'u', "stride height"},  {'v', "stride width"},    {'l', "dilation height"},
        {'j', "dilation width"}, {'g', "groups"}};
    for (const auto& [flag, what] : flags)
      app->add_option(std::string("-") + flag, values[flag],
                      std::string("MIOpenDriver-style: ") + what)
          ->group("MIOpenDriver-style problem");
  }
  bool any() const {
    for (const auto& [f, v] : values)
      if (!v.empty()) return true;
    return false;
  }
  conv::ConvProblem problem() const {
    std::vector<std::string> args;
    for (const auto& [f, v] : values)
      if (!v.empty()) args.insert(args.end(), {std::string("-") + f, v});
    return conv::parse_miopen_flags(args);
  }
};

std::vector<conv::ConvProblem> collect_problems(const std::vector<std::string>& descriptors,
                                                const std::vector<std::string>& batches,
                                                const MiopenFlags& miopen) {
  std::vector<conv::ConvProblem> problems;
  try {
    for (const auto& d : descriptors) problems.push_back(conv::parse_descriptor(d));
    for (const auto& b : batches) {
      auto ps = conv::read_batch_file(b);
      problems.insert(problems.end(), ps.begin(), ps.end());
    }
    if (miopen.any()) problems.push_back(miopen.problem());
  } catch (const conv::Error& e) {
    throw UsageError(e.what());
  }
  if (problems.empty())
    throw UsageError("no problem given: pass a DESCRIPTOR, --batch FILE or MIOpen-style flags");
  return problems;
}

conv::Device parse_device(const std::string& text) {
  try {
    return conv::Device::parse(text);
  } catch (const conv::Error& e) {
    throw UsageError(e.what());
  }
}

struct Common {
  int threads = 0;
  std::string db;
  std::string device = "cpu";
  bool json = false;
  void add_to(CLI::App* app, bool with_db) {
    app->add_option("--threads", threads, "CPU threads (0 = all)")->check(CLI::Range(0, 1024));
    if (with_db)
      app->add_option("--db", db,
                      "perf database path (default: $CONVTUNE_PERFDB, else "
                      "$XDG_CACHE_HOME/convtune/perfdb.sqlite, else ~/.cache/convtune/...)")
          ->check([](const std::string& v) { return v.empty() ? "--db: empty path" : ""; });
    app->add_option("--device", device, "cpu or cuda:N");
    app->add_flag("--json", json, "print JSON instead of tables");
  }
  std::string db_path() const { return db.empty() ? conv::PerfDb::default_path() : db; }
  // More OpenMP threads than processors only oversubscribe the cores (every barrier then waits
  // for a descheduled thread): allowed, as a user may mean it, but said.
  void warn_threads() const {
    const int procs = static_cast<int>(std::thread::hardware_concurrency());
    if (threads > procs)
      std::cerr << "autotune: --threads " << threads << " exceeds the " << procs
                << " processors of this machine; timings will include oversubscription\n";
  }
};

struct TuneArgs {
  std::vector<std::string> descriptors, batches;
  std::string algo;
  bool force = false;
  double budget_s = 120, batch_ms = 1;
  int rounds = 3, max_rounds = 20;
  double workspace_mib = -1;
  void add_to(CLI::App* app) {
    app->add_option("DESCRIPTOR", descriptors,
                    "benchdnn conv descriptors, e.g. mb1ic3ih227oc96kh11sh4n\"conv1\"");
    app->add_option("--batch", batches, "benchdnn-style file of descriptors (# comments)")
        ->check(CLI::ExistingFile);
    app->add_option("--algo", algo,
                    "only algorithms whose id contains one of these comma-separated substrings");
    app->add_option("--budget", budget_s, "time budget per problem, seconds")
        ->check(CLI::Range(0.001, 1e6));
    app->add_option("--rounds", rounds, "interleaved timing rounds per candidate, at least")
        ->check(CLI::Range(1, 100000));
    app->add_option("--max-rounds", max_rounds,
                    "timing rounds per candidate at most, while rounds are disturbed by other "
                    "processes or disagree")
        ->check(CLI::Range(1, 100000));
    app->add_option("--batch-ms", batch_ms,
                    "a round repeats a candidate's run until it lasts this many milliseconds")
        ->check(CLI::Range(0.0, 1e6));
    app->add_option("--workspace-limit", workspace_mib,
                    "largest workspace a candidate may use, MiB")
        ->check(CLI::Range(0.0, 1e12));
  }
  // A pattern that names no registered algorithm is a typo, not an empty search.
  void check_algo_pattern() const {
    if (algo.empty()) return;
    std::stringstream ss(algo);
    for (std::string part; std::getline(ss, part, ',');)
      for (const conv::Algorithm* a : conv::registry())
        if (!part.empty() && a->id().find(part) != std::string_view::npos) return;
    throw UsageError("--algo: \"" + algo + "\" matches no registered algorithm");
  }
  conv::TuneOptions options(const Common& c, const conv::Device& d) const {
    check_algo_pattern();
    conv::TuneOptions o;
    o.device = d;
    o.threads = c.threads;
    o.algo_pattern = algo;
    o.budget_ms = budget_s * 1000;
    o.min_rounds = rounds;
    o.max_rounds = std::max(rounds, max_rounds);
    o.batch_ms = batch_ms;
    if (workspace_mib >= 0) o.workspace_limit = static_cast<size_t>(workspace_mib * 1048576.0);
    return o;
  }
};

LayerOutcome outcome_from_tune(const conv::TuneResult& r) {
  LayerOutcome o;
  o.problem = r.problem;
  o.fingerprint = r.fingerprint;
  o.source = "tuned";
  o.candidates = r.to_records();
  o.tuned = r;
  return o;
}

int run_tune(const Common& c, const TuneArgs& t, const MiopenFlags& miopen) {
  auto problems = collect_problems(t.descriptors, t.batches, miopen);
  const conv::Device device = parse_device(c.device);
  const conv::TuneOptions options = t.options(c, device);
  const std::string fingerprint = device.fingerprint(c.threads);
  conv::PerfDb db = conv::PerfDb::open(c.db_path());

  std::vector<LayerOutcome> layers;
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  size_t measured = 0, no_winner = 0, subsets = 0;
  for (size_t i = 0; i < problems.size(); ++i) {
    const auto& p = problems[i];
    const std::string name = p.name.empty() ? p.key() : p.name;
    if (!t.force) {
      auto w = db.lookup(fingerprint, p.key(), conv::ExecPath::oneshot);
      if (w && w->quality.noisy) {
        std::cerr << "[" << i + 1 << "/" << problems.size() << "] " << name
                  << ": the stored winner was measured under load (noisy): measuring again\n";
      } else if (w && t.algo.empty()) {
        LayerOutcome o;
        o.problem = p;
        o.fingerprint = fingerprint;
        o.source = "perfdb";
        o.winner = w;
        o.packed_winner = db.lookup(fingerprint, p.key(), conv::ExecPath::packed);
        o.candidates = db.candidates(fingerprint, p.key());
        layers.push_back(o);
        std::cerr << "[" << i + 1 << "/" << problems.size() << "] " << name
                  << ": stored in the perf database, not re-measured (use --force to re-tune)\n";
        continue;
      }
    }
    std::cerr << "[" << i + 1 << "/" << problems.size() << "] " << name << ": tuning ("
              << p.flops() / 1e9 << " GFLOP)..." << std::flush;
    // Without --force, what the database already measured is not measured again: only the
    // missing candidates run, and the winner is chosen among all of them.
    conv::TuneOptions o = options;
    if (!t.force) o.measured = db.candidates(fingerprint, p.key());
    auto r = conv::tune(p, o, [&](size_t j, size_t n, const conv::CandidateResult&) {
      if ((j + 1) % 4 == 0 || j + 1 == n) std::cerr << " " << j + 1 << "/" << n << std::flush;
    });
    ++measured;
    conv::store_result(db, r);
    layers.push_back(outcome_from_tune(r));
    if (r.winner < 0) {
      ++no_winner;
    } else if (r.complete) {
      // The winners as stored, with the date the database gave them.
      layers.back().winner = db.lookup(fingerprint, p.key(), conv::ExecPath::oneshot);
      layers.back().packed_winner = db.lookup(fingerprint, p.key(), conv::ExecPath::packed);
    } else {
      ++subsets;
      const auto& w = r.candidates[r.winner];
      layers.back().source = "subset";
      conv::PerfWinner shown;
      shown.algo_id = w.algo_id, shown.config = w.config;
      shown.median_ms = w.median_ms, shown.min_ms = w.min_ms;
      shown.quality = w.quality;
      shown.quality.noisy = r.noisy;
      layers.back().winner = shown;
      std::cerr << " (a subset of the candidates: its winner is shown, not stored)";
    }
    const double per = elapsed() / measured;
    std::cerr << " done; elapsed " << static_cast<int>(elapsed()) << " s, ETA about "
              << static_cast<int>(per * (problems.size() - i - 1)) << " s\n";
  }
  if (c.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& l : layers) j.push_back(conv::cli::to_json(l));
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << "device: " << fingerprint << "\nperf database: " << db.path() << "\n\n";
    conv::cli::print_tune_table(std::cout, layers);
    size_t stored = layers.size() - measured;
    std::cout << "\n"
              << measured << " layer(s) tuned now, " << stored
              << " read from the perf database without measuring.\n";
    if (subsets > 0)
      std::cout << subsets
                << " layer(s) measured on a subset of the candidates (--algo, CONVTUNE_DISABLE, "
                   "workspace limit, budget or a failure): their winners are not stored.\n";
  }
  if (no_winner > 0) {
    std::cerr << "autotune: " << no_winner << " layer(s) ended with no correct candidate\n";
    return 1;
  }
  return 0;
}

int run_explain(const Common& c, const TuneArgs& t, const MiopenFlags& miopen) {
  auto problems = collect_problems(t.descriptors, t.batches, miopen);
  std::vector<conv::Device> devices;
  if (c.device == "all") {
    devices.push_back(conv::Device::cpu());
    try {
      conv::Device::cuda(0).fingerprint(c.threads);
      devices.push_back(conv::Device::cuda(0));
    } catch (const conv::Error& e) {
      std::cerr << "cuda:0 not available: " << e.what() << "\n";
    }
  } else {
    devices.push_back(parse_device(c.device));
  }
  const double peak = conv::measure_fma_peak_gflops(c.threads);
  nlohmann::json all = nlohmann::json::array();
  for (const auto& p : problems) {
    for (const auto& d : devices) {
      auto r = conv::tune(p, t.options(c, d));
      const double dev_peak = d.kind == conv::Device::Kind::cpu ? peak : 0;
      if (c.json) {
        all.push_back(conv::cli::to_json(r, dev_peak));
      } else {
        conv::cli::print_explain(std::cout, r, dev_peak);
        std::cout << "\n";
      }
    }
  }
  if (c.json)
    std::cout << all.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return 0;
}

int run_show(const Common& c) {
  const conv::Device device = parse_device(c.device);
  const std::string fingerprint = device.fingerprint(c.threads);
  const std::string path = c.db_path();
  // Nothing tuned yet is an empty answer, not an error.
  const bool exists = std::filesystem::exists(path);
  std::vector<conv::PerfDb::Entry> entries;
  if (exists) entries = conv::PerfDb::open(path, true).winners(fingerprint);
  if (c.json) {
    nlohmann::json j = {{"fingerprint", fingerprint}, {"perfdb", path}};
    j["winners"] = nlohmann::json::array();
    for (const auto& e : entries) j["winners"].push_back(conv::cli::to_json(e));
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }
  std::cout << "device: " << fingerprint << "\nperf database: " << path
            << (exists ? "" : " (does not exist yet)") << "\n\n";
  if (entries.empty()) {
    std::cout << "nothing stored: no winners stored for this device\n";
    return 0;
  }
  char line[700];
  std::snprintf(line, sizeof line, "%-64s %-8s %-28s %13s  %-26s %-20s %s\n", "key", "path",
                "winner", "median ms", "measurement", "date", "version");
  std::cout << line;
  for (const auto& e : entries) {
    std::snprintf(line, sizeof line, "%-64s %-8s %-28s %10.3f ms  %-26s %-20s v%s\n", e.key.c_str(),
                  conv::to_string(e.path), (e.winner.algo_id + " " + e.winner.config).c_str(),
                  e.winner.median_ms, conv::cli::quality_text(e.winner.quality).c_str(),
                  e.winner.date.c_str(), e.winner.version.c_str());
    std::cout << line;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"autotune: measure convtune's convolution algorithms and keep the winners"};
  app.require_subcommand(1);
  Common common_tune, common_explain, common_show;
  TuneArgs tune_args, explain_args;
  MiopenFlags miopen_tune, miopen_explain;

  CLI::App* tune = app.add_subcommand(
      "tune", "measure every candidate for each problem, store all timings and the winners");
  common_tune.add_to(tune, true);
  tune_args.add_to(tune);
  tune->add_flag("--force", tune_args.force, "re-measure problems already in the perf database");
  miopen_tune.add_to(tune);

  CLI::App* explain = app.add_subcommand(
      "explain",
      "every registered algorithm for a problem: applicable or why not, each config's "
      "time, GFLOP/s, % of peak, workspace, error; the winner marked");
  common_explain.add_to(explain, false);
  explain_args.add_to(explain);
  miopen_explain.add_to(explain);

  CLI::App* show = app.add_subcommand("show", "the winners stored for this device");
  common_show.add_to(show, true);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  try {
    if (*tune) return common_tune.warn_threads(), run_tune(common_tune, tune_args, miopen_tune);
    if (*explain)
      return common_explain.warn_threads(),
             run_explain(common_explain, explain_args, miopen_explain);
    return run_show(common_show);
  } catch (const UsageError& e) {
    std::cerr << "autotune: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "autotune: error: " << e.what() << "\n";
    return 1;
  }
}
