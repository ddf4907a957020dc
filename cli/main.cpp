// autotune: tune convolutions and store the winners (tune), explain one problem's candidates
// (explain), list problems as descriptors (layers), work with perf database files (db: show, merge,
// export, import, check). Exit codes: 0 ok, 2 bad arguments or descriptor, 1 any other error.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>

#include "conv/algorithm.hpp"
#include "options.hpp"
#include "peak.hpp"
#include "quoted.hpp"
#include "report.hpp"

namespace conv::cli {

namespace {

int run_explain(const Common& c, const TuneArgs& t, const MiopenArgs& miopen) {
  // As tune: each distinct problem once, and --shard's share of them.
  const Shard shard = parse_shard(t.shard);
  size_t duplicates = 0;
  const auto problems = select_shard(collect_problems(t, miopen), shard, &duplicates);
  if (duplicates > 0)
    std::cerr << "autotune: " << duplicates << " repeated problem(s) explained once\n";
  if (shard.count > 1)
    std::cerr << "autotune: shard " << shard.index << "/" << shard.count << ": " << problems.size()
              << " problem(s)\n";
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
  // What best_forward would run today, for comparison with what is measured now.
  std::vector<conv::PerfDb> layers;
  try {
    layers = read_layers(c.db_path());
  } catch (const conv::Error& e) {
    std::cerr << "autotune: warning: " << e.what() << "; stored winners not shown\n";
  }
  nlohmann::json all = nlohmann::json::array();
  std::vector<std::string> failed;
  for (const auto& p : problems) {
    for (const auto& d : devices) {
      conv::TuneResult r;
      try {
        r = conv::tune(p, t.options(c, d));
      } catch (const conv::Error& e) {
        // As in tune: one layer that cannot be measured must not cost the others.
        const std::string name = p.name.empty() ? p.key() : p.name;
        std::cerr << "autotune: " << name << ": " << e.what() << "\n";
        failed.push_back(name);
        if (c.json) all.push_back(conv::cli::failure_json(p, e.what(), d.name()));
        continue;
      }
      const double dev_peak = d.kind == conv::Device::Kind::cpu ? peak : 0;
      std::optional<conv::PerfWinner> stored;
      std::string stored_in;
      for (const auto& db : layers) {
        if ((stored = db.lookup(r.fingerprint, p.key()))) {
          stored_in = db.path();
          break;
        }
      }
      if (c.json) {
        all.push_back(conv::cli::to_json(r, dev_peak));
        if (stored)
          all.back()["stored_winner"] = {{"algo", stored->algo_id},
                                         {"config", stored->config},
                                         {"min_ms", stored->min_ms},
                                         {"perfdb", stored_in}};
      } else {
        conv::cli::print_explain(std::cout, r, dev_peak);
        if (stored)
          std::cout << "stored winner (one-shot): " << stored->algo_id << " " << stored->config
                    << " in " << stored_in << "\n";
        std::cout << "\n";
      }
    }
  }
  if (c.json)
    std::cout << all.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  if (!failed.empty()) {
    std::cerr << "autotune: " << failed.size() << " layer(s) could not be explained:";
    for (const auto& n : failed) std::cerr << " " << n;
    std::cerr << "\n";
  }
  return failed.empty() ? 0 : 1;
}

// `autotune --version`: the project version (CMake's project(VERSION)), the ISA the CPU kernels
// use here and the oneDNN the vendor baseline runs.
std::string version_text() {
  std::ostringstream s;
  s << "autotune (convtune) " << conv::version() << "\n";
  s << "cpu kernels: ";
  try {
    s << conv::to_string(conv::cpu_isa());
    if (const char* cap = std::getenv("CONVTUNE_MAX_ISA"); cap && *cap)
      s << " (capped by CONVTUNE_MAX_ISA=" << cap << ")";
  } catch (const conv::Error& e) {
    s << "unknown (" << e.what() << ")";
  }
  s << "\n";
  // cpu.onednn's version is "<ours>+onednn.<major>.<minor>.<patch>".
  if (const conv::Algorithm* a = conv::find_algorithm("cpu.onednn")) {
    const std::string v = a->version();
    const size_t at = v.find("onednn.");
    if (at != std::string::npos) s << "oneDNN: " << v.substr(at + 7) << "\n";
  }
  return s.str();
}

}  // namespace

}  // namespace conv::cli

using namespace conv::cli;

int main(int argc, char** argv) {
  CLI::App app{"autotune: measure convtune's convolution algorithms and keep the winners",
               "autotune"};
  app.require_subcommand(1);
  // Answered before the subcommand is looked for (below); registered for --help.
  app.set_version_flag("--version", std::function<std::string()>(version_text),
                       "print the version, CPU ISA and oneDNN version, and exit");
  Common common_tune, common_explain, common_show, common_db_show, common_verify;
  TuneArgs tune_args, explain_args, verify_args;
  TuneArgs layers_args;

  CLI::App* tune = app.add_subcommand(
      "tune", "measure every candidate for each problem, store all timings and the winners");
  common_tune.add_to(tune, true);
  tune_args.add_to(tune);
  tune->add_flag("--force", tune_args.force, "re-measure problems already in the perf database");

  CLI::App* explain = app.add_subcommand(
      "explain",
      "every registered algorithm for a problem: applicable or why not, each config's "
      "time, GFLOP/s, % of peak, workspace, error; the winner marked");
  common_explain.add_to(explain, true);  // --db: where the stored winner shown is looked up
  explain_args.add_to(explain);

  CLI::App* layers = app.add_subcommand(
      "layers",
      "print the problems given as a benchdnn batch file, one named descriptor per line, in "
      "this order: descriptors, --batch files, --model files, the MIOpenDriver line");
  layers_args.add_sources_to(layers);

  CLI::App* verify = app.add_subcommand(
      "verify",
      "run each stored winner as a caller does and compare with its stored time; one over 1.25x "
      "is marked and measured again by the next tune");
  common_verify.add_to(verify, true);
  verify_args.add_sources_to(verify);

  bool all_devices = false, db_all_devices = false;
  CLI::App* show = app.add_subcommand("show", "the winners stored for this device (= db show)");
  common_show.add_to(show, true);
  show->add_flag("--all-devices", all_devices, "every device's winners, not only this one's");

  CLI::App* db = app.add_subcommand("db", "work with perf database files");
  db->require_subcommand(1);
  CLI::App* db_show = db->add_subcommand(
      "show",
      "stored winners of the user and system databases: layer, path, winner, time, "
      "measurement quality, date, source file");
  common_db_show.add_to(db_show, true);
  db_show->add_flag("--all-devices", db_all_devices, "every device's winners");
  std::vector<std::string> merge_sources, import_files, check_files;
  std::string merge_into, import_into, export_path;
  bool export_csv = false, export_json = false;
  CLI::App* db_merge = db->add_subcommand(
      "merge", "copy every row of SRC files into DST (per key the newest measurement wins)");
  db_merge->add_option("SRC", merge_sources, "perf database files")->required();
  db_merge->add_option("--into", merge_into, "the perf database to merge into (created)")
      ->required();
  CLI::App* db_export =
      db->add_subcommand("export", "print a perf database as JSON (re-importable) or CSV");
  db_export->add_option("DB", export_path, "perf database file")->required();
  auto* json_flag = db_export->add_flag("--json", export_json, "JSON (the default)");
  db_export->add_flag("--csv", export_csv, "CSV: one line per measured candidate")
      ->excludes(json_flag);
  CLI::App* db_import =
      db->add_subcommand("import", "write JSON files made by db export into a perf database");
  db_import->add_option("FILE", import_files, "JSON export files")->required();
  db_import->add_option("--into", import_into, "the perf database to write (created)")->required();
  CLI::App* db_check =
      db->add_subcommand("check", "verify perf database files: schema, integrity, counts");
  db_check->add_option("DB", check_files, "perf database files")->required();

  // A MIOpenDriver command line after the subcommand is picked out before CLI11 parses the rest.
  MiopenArgs miopen;
  std::vector<std::string> args(argv + 1, argv + argc);
  // CLI11 answers a misspelt subcommand with "A subcommand is required", naming nothing.
  auto unknown_subcommand = [&](const CLI::App& parent, size_t at) {
    const std::string word = args.size() > at ? args[at] : "";
    if (word == "-h" || word == "--help") return false;
    std::string names;
    bool known = false;
    for (const CLI::App* sub : parent.get_subcommands({})) {
      names += (names.empty() ? "" : ", ") + sub->get_name();
      known = known || sub->get_name() == word;
    }
    if (known) return false;
    std::cerr << "autotune: " << (at > 0 ? parent.get_name() + ": " : "")
              << (word.empty() ? std::string("a subcommand is required")
                               : "unknown subcommand \"" + word + "\"")
              << " (one of: " << names << ")\n";
    return true;
  };
  if (!args.empty() && args[0] == "--version") {
    std::cout << version_text() << std::flush;
    return std::cout ? 0 : 1;
  }
  if (unknown_subcommand(app, 0) || (args[0] == "db" && unknown_subcommand(*db, 1))) return 2;
  for (CLI::App* sub : {tune, explain, layers, verify}) {
    if (args.empty() || args[0] != sub->get_name()) continue;
    // Before the MIOpenDriver tokens are picked out: MIOpenDriver has a --mode (conv, trans).
    std::vector<std::string> dropped;
    args = drop_benchdnn_run_options(args, 1, &dropped);
    if (!dropped.empty()) {
      std::string words;
      for (const std::string& d : dropped) words += (words.empty() ? "" : " ") + d;
      std::cerr << "autotune: note: benchdnn's " << conv::escaped(words)
                << " ignored: autotune checks every candidate against a reference and times it\n";
    }
    args = miopen.extract(args, 1, *sub);
  }
  // CLI11 reads "--db=" as "--db" followed by the next argument, which would then be taken as
  // the value (a descriptor as the database path): an empty inline value is an error here.
  for (const std::string& a : args)
    if (a.size() > 3 && a.compare(0, 2, "--") == 0 && a.back() == '=' &&
        a.find('=') == a.size() - 1) {
      std::cerr << "autotune: " << a.substr(0, a.size() - 1) << ": empty value\n";
      return 2;
    }
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments reversed

  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11's own message (app.exit's format), shortened: it echoes the offending value whole.
    std::cerr << conv::shorten_message(e.what()) << "\nRun with --help for more information.\n";
    return 2;
  }
  const auto run = [&]() -> int {
    if (miopen.any() && !*tune && !*explain && !*layers && !*verify)
      throw UsageError("MIOpenDriver flags only apply to tune, explain, layers and verify");
    if (*tune) return common_tune.warn_threads(), run_tune(common_tune, tune_args, miopen);
    if (*explain)
      return common_explain.warn_threads(), run_explain(common_explain, explain_args, miopen);
    if (*layers) return run_layers(layers_args, miopen);
    if (*verify) return run_verify(common_verify, verify_args, miopen);
    if (*show) return run_db_show(common_show, all_devices);
    if (*db_show) return run_db_show(common_db_show, db_all_devices);
    if (*db_merge) return run_db_merge(merge_sources, merge_into);
    if (*db_export) return run_db_export(export_path, export_csv);
    if (*db_import) return run_db_import(import_files, import_into);
    return run_db_check(check_files);
  };
  try {
    const int rc = run();
    // `db export DB > backup.json` on a full disk had left an empty backup and exited 0.
    errno = 0;
    if (!std::cout.flush() || std::fflush(stdout) != 0 || std::ferror(stdout))
      throw std::runtime_error(std::string("writing the output (stdout) failed") +
                               (errno ? std::string(": ") + std::strerror(errno) : ""));
    return rc;
  } catch (const UsageError& e) {
    std::cerr << "autotune: " << conv::shorten_message(e.what()) << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "autotune: error: " << conv::shorten_message(e.what()) << "\n";
    return 1;
  }
}
