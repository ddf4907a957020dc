// What the autotune subcommands share: argument groups, problem collection, usage errors, and
// the subcommands themselves (main.cpp parses and dispatches).
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "conv/conv.hpp"
#include "conv/perfdb.hpp"
#include "conv/tuner.hpp"

namespace conv::cli {

// Argument errors found after CLI11's own parsing (bad descriptors, bad values): exit code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// CLI11's Range answers "1.5" or "" with "not in range", which 1.5 is not.
inline CLI::Validator integer_text() {
  return CLI::Validator(
      [](std::string& v) {
        const size_t digits = v.find_first_not_of("0123456789", v.size() > 1 && v[0] == '-');
        return !v.empty() && v != "-" && digits == std::string::npos
                   ? std::string()
                   : "expected an integer, got \"" + v + "\"";
      },
      "INT");
}

// A MIOpenDriver conv command line found among the arguments (`autotune explain conv -n 1 -c 64
// ... -F 1 -t 1`): main() picks its tokens out before CLI11 parses the rest.
struct MiopenArgs {
  std::vector<std::string> args;
  bool any() const { return !args.empty(); }
  conv::ConvProblem problem() const { return conv::parse_miopen_flags(args); }
  /// Moves every MIOpenDriver token of argv[first..] (the sub-command word and the flags with
  /// their values, wherever they stand among the options of `sub`) into `args`; returns the
  /// rest, for CLI11. The values of `sub`'s own options are never taken.
  std::vector<std::string> extract(const std::vector<std::string>& argv, size_t first,
                                   const CLI::App& sub) {
    std::vector<std::string> rest(argv.begin(), argv.begin() + static_cast<long>(first));
    size_t words = 0;            // the program name and sub-command, kept in their order
    bool after_program = false;  // the token after the program name is its sub-command
    for (size_t i = first; i < argv.size(); ++i) {
      const std::string& a = argv[i];
      if (a == "--") {  // everything after it is CLI11's
        rest.insert(rest.end(), argv.begin() + static_cast<long>(i), argv.end());
        break;
      }
      bool own = false;  // an option of `sub` that takes a value (not a flag)
      if (a.rfind("--", 0) == 0)
        for (const CLI::Option* o : sub.get_options())
          own = own || (o->get_type_size() != 0 && o->check_lname(a.substr(2)));
      bool value_follows = false;
      // Whatever follows the program name is the driver's sub-command (`MIOpenDriver pool`
      // is then refused as such, not read as a descriptor).
      if (after_program && !a.empty() && a[0] != '-') {
        args.insert(args.begin() + static_cast<long>(words++), a);
        after_program = false;
        continue;
      }
      after_program = false;
      if (own || !conv::is_miopen_arg(a, &value_follows)) {
        rest.push_back(a);
        if (own && i + 1 < argv.size()) rest.push_back(argv[++i]);
        continue;
      }
      if (a[0] != '-') {  // the program name and sub-command word (conv, ...) lead the line
        args.insert(args.begin() + static_cast<long>(words++), a);
        const std::string program = "MIOpenDriver";  // its name ends the path
        after_program = a.size() >= program.size() &&
                        a.compare(a.size() - program.size(), program.size(), program) == 0;
        continue;
      }
      args.push_back(a);
      if (value_follows && i + 1 < argv.size()) args.push_back(argv[++i]);
    }
    return rest;
  }
};

/// benchdnn's run-control options in a pasted benchdnn command line (`--conv --mode=P
/// mb1ic3ih227oc96kh11sh4`): `--conv` (the driver) and `--mode=` with a benchdnn mode (letters
/// of C, P, F, L, I, R, B, any case: `--mode=conv` and `--mode=trans` are MIOpenDriver's and
/// stay), and a leading program name whose last path component is `benchdnn`. They choose how
/// benchdnn runs a problem, not which convolution it is: they are dropped from argv[first..],
/// and `dropped` lists them for the note main() prints. Everything after `--` stays.
inline std::vector<std::string> drop_benchdnn_run_options(const std::vector<std::string>& argv,
                                                          size_t first,
                                                          std::vector<std::string>* dropped) {
  auto is_mode = [](const std::string& a) {
    if (a.rfind("--mode=", 0) != 0 || a.size() == 7 || a.size() > 10) return false;
    return a.find_first_not_of("CPFLIRBcpflirb", 7) == std::string::npos;
  };
  auto is_program = [](const std::string& a) {
    const size_t slash = a.rfind('/');
    return a.substr(slash == std::string::npos ? 0 : slash + 1) == "benchdnn";
  };
  std::vector<std::string> rest(argv.begin(), argv.begin() + static_cast<long>(first));
  for (size_t i = first; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--") {
      rest.insert(rest.end(), argv.begin() + static_cast<long>(i), argv.end());
      break;
    }
    if (a == "--conv" || is_mode(a) || (i == first && is_program(a)))
      dropped->push_back(a);
    else
      rest.push_back(a);
  }
  return rest;
}

struct Common {
  int threads = 0;
  std::string db;
  std::string device = "cpu";
  std::string timing = "cold";
  bool json = false;
  void add_to(CLI::App* app, bool with_db) {
    app->add_option("--threads", threads,
                    "CPU threads (0 = the OpenMP default: OMP_NUM_THREADS, else one per CPU the "
                    "process may run on)")
        ->capture_default_str()
        ->check(integer_text())
        ->check(CLI::Range(0, conv::kMaxThreads));
    if (with_db)
      app->add_option("--db", db,
                      "perf database path (default: $CONVTUNE_PERFDB, else "
                      "$XDG_CACHE_HOME/convtune/perfdb.sqlite, else ~/.cache/convtune/...)")
          ->check([](const std::string& v) { return v.empty() ? "empty path" : ""; });
    app->add_option("--device", device, "cpu or cuda:N (explain: also all, every device)")
        ->capture_default_str();
    app->add_option("--timing", timing,
                    "how runs are timed, and so which winners apply: cold (evicted from the "
                    "caches before each run, as a layer in a network), warm (the cores' L1 and L2 "
                    "swept before each run: the data in the last-level cache) or hot (back to "
                    "back)")
        ->capture_default_str()
        ->check(CLI::IsMember({"cold", "hot", "warm"}));
    app->add_flag("--json", json, "print JSON instead of tables");
  }
  std::string db_path() const { return db.empty() ? conv::PerfDb::default_path() : db; }
  conv::Timing timing_mode() const { return conv::parse_timing(timing); }
  // More OpenMP threads than processors only oversubscribe the cores (every barrier then waits
  // for a descheduled thread): allowed, as a user may mean it, but said.
  void warn_threads() const {
    const int procs = static_cast<int>(std::thread::hardware_concurrency());
    const int resolved = conv::resolve_threads(threads);  // 0: OMP_NUM_THREADS or the default
    if (resolved > procs)
      std::cerr << "autotune: --threads " << threads << (threads ? "" : " (the OpenMP default)")
                << " means " << resolved << " threads, more than the " << procs
                << " processors of this machine; timings will include oversubscription\n";
  }
};

struct TuneArgs {
  std::vector<std::string> descriptors, batches, models, inputs;
  std::string algo, shard;
  bool force = false;
  double budget_s = 120, batch_ms = 1;
  int rounds = 3, max_rounds = 20;
  double workspace_mib = -1;
  // Where problems come from: descriptors, batch files, models, MIOpenDriver flags.
  void add_sources_to(CLI::App* app) {
    app->add_option("DESCRIPTOR", descriptors,
                    "benchdnn conv descriptors, e.g. mb1ic3ih227oc96kh11sh4n\"conv1\"");
    // One value per occurrence (repeat the option for more), so a descriptor after it is not
    // taken for a second file.
    app->add_option("--batch", batches, "benchdnn-style file of descriptors (# comments)")
        ->check(CLI::ExistingFile)
        ->allow_extra_args(false);
    app->add_option("--model", models,
                    "every convolution of a network: ONNX (.onnx) or Caffe deploy prototxt")
        ->allow_extra_args(false);
    app->add_option("--input", inputs,
                    "shape of a model input, NAME=NxCxHxW (e.g. data=1x3x224x224); needed when "
                    "the model leaves it symbolic, replaces the model's otherwise")
        ->allow_extra_args(false);
    app->footer(
        "MIOpenDriver conv command lines are accepted too, as pasted from logs: e.g. autotune " +
        app->get_name() +
        " ./bin/MIOpenDriver conv -n 1 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -l 1 "
        "-j 1 -F 1 -t 1 (forward fp32 NCHW only; long forms such as --batchsize too). benchdnn's "
        "--conv and --mode=P are ignored, with a note.");
  }
  void add_to(CLI::App* app) {
    add_sources_to(app);
    // Empty would otherwise mean no filter and answer from a stored winner, which an --algo
    // run never does.
    app->add_option("--algo", algo,
                    "only algorithms whose id contains one of these comma-separated substrings "
                    "(default: every algorithm)")
        ->check([](const std::string& v) {
          return v.empty() ? "\"\" names no algorithm (comma-separated parts of ids)" : "";
        });
    app->add_option("--budget", budget_s, "time budget per problem, seconds")
        ->capture_default_str()
        ->check(CLI::Range(0.001, 1e6) & finite());
    app->add_option("--rounds", rounds, "interleaved timing rounds per candidate, at least")
        ->capture_default_str()
        ->check(integer_text())
        ->check(CLI::Range(1, 100000));
    app->add_option("--max-rounds", max_rounds,
                    "timing rounds per candidate at most, while rounds are disturbed by other "
                    "processes or disagree")
        ->capture_default_str()
        ->check(integer_text())
        ->check(CLI::Range(1, 100000));
    app->add_option("--batch-ms", batch_ms,
                    "a round repeats a candidate's run until it lasts this many milliseconds "
                    "(at most 1000 runs, and never past --budget)")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1e6) & finite());
    app->add_option("--workspace-limit", workspace_mib,
                    "largest workspace a candidate may use, MiB (default: no limit)")
        ->check(CLI::Range(0.0, 1e12) & finite());
    app->add_option("--shard", shard,
                    "tune only shard I of N of the distinct problems (\"I/N\", 0 <= I < N), or "
                    "\"auto\": from a Slurm job array (SLURM_ARRAY_TASK_ID, "
                    "SLURM_ARRAY_TASK_COUNT, SLURM_ARRAY_TASK_MIN) or a Kubernetes Indexed Job "
                    "(JOB_COMPLETION_INDEX, "
                    "CONVTUNE_SHARD_COUNT); default: every problem")
        ->check([](const std::string& v) {
          return v.empty() ? "expected I/N with 0 <= I < N, or auto, got \"\"" : "";
        });
  }
  // CLI11's Range lets NaN through.
  static CLI::Validator finite() {
    return CLI::Validator(
        [](std::string& v) {
          try {
            return std::isfinite(std::stod(v)) ? std::string() : "not a finite number: " + v;
          } catch (const std::exception&) {
            return "not a number: " + v;
          }
        },
        "FINITE");
  }
  // A pattern part that names no registered algorithm is a typo, not an empty search.
  void check_algo_pattern() const {
    if (std::string part = conv::unknown_algo_pattern_part(algo); !part.empty())
      throw UsageError("--algo: \"" + part + "\" matches no registered algorithm");
    if (!algo.empty() && algo.find_first_not_of(',') == std::string::npos)
      throw UsageError("--algo: \"" + algo +
                       "\" names no algorithm (comma-separated parts of ids)");
  }
  conv::TuneOptions options(const Common& c, const conv::Device& d) const {
    check_algo_pattern();
    if (max_rounds < rounds)
      throw UsageError("--max-rounds: " + std::to_string(max_rounds) + " is below --rounds " +
                       std::to_string(rounds));
    conv::TuneOptions o;
    o.device = d;
    o.threads = c.threads;
    o.timing = c.timing_mode();
    o.algo_pattern = algo;
    o.budget_ms = budget_s * 1000;
    o.min_rounds = rounds;
    o.max_rounds = max_rounds;
    o.batch_ms = batch_ms;
    if (workspace_mib >= 0) o.workspace_limit = static_cast<size_t>(workspace_mib * 1048576.0);
    return o;
  }
};

/// Every problem named by descriptors, batch files, models and a MIOpenDriver command line, in
/// that order. Throws UsageError for a bad descriptor, file, model, --input or flag, and when
/// none is given.
std::vector<conv::ConvProblem> collect_problems(const TuneArgs& t, const MiopenArgs& miopen);

/// Which problems this process tunes: shard `index` of `count`.
struct Shard {
  size_t index = 0, count = 1;
};

/// Parses --shard: "I/N", or "auto" from the scheduler's environment (Slurm job arrays:
/// SLURM_ARRAY_TASK_ID minus SLURM_ARRAY_TASK_MIN, of SLURM_ARRAY_TASK_COUNT; Kubernetes
/// Indexed Jobs: JOB_COMPLETION_INDEX of CONVTUNE_SHARD_COUNT). "" = everything. Throws
/// UsageError naming --shard or the variable.
Shard parse_shard(const std::string& text);

/// The distinct problems (by key, first occurrence kept) whose position among them is
/// shard.index modulo shard.count: every problem belongs to exactly one shard, whatever the
/// machine. `duplicates` counts the repeated problems dropped.
std::vector<conv::ConvProblem> select_shard(const std::vector<conv::ConvProblem>& problems,
                                            const Shard& shard, size_t* duplicates);

/// "cpu" or "cuda:N"; throws UsageError otherwise.
conv::Device parse_device(const std::string& text);

/// The perf databases best_forward reads, opened read-only: the user's (when it exists), then
/// the system ones (unreadable ones are skipped with a warning).
std::vector<conv::PerfDb> read_layers(const std::string& user);

int run_tune(const Common& c, const TuneArgs& t, const MiopenArgs& miopen);
int run_layers(const TuneArgs& t, const MiopenArgs& miopen);
int run_verify(const Common& c, const TuneArgs& t, const MiopenArgs& miopen);
int run_db_show(const Common& c, bool all_devices);
int run_db_merge(const std::vector<std::string>& sources, const std::string& into);
int run_db_export(const std::string& path, bool as_csv);
int run_db_import(const std::vector<std::string>& files, const std::string& into);
int run_db_check(const std::vector<std::string>& paths);

}  // namespace conv::cli
