// autotune db: show, merge, export, import and check perf database files.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <vector>

#include "db_import.hpp"
#include "options.hpp"
#include "perf_rows.hpp"
#include "quoted.hpp"
#include "report.hpp"

namespace conv::cli {

namespace {

using Json = nlohmann::json;

// Unknown numbers (-1 in the C++ structs) are null in the text form; +infinity (a max_error
// measured on a non-finite output, the one infinite value a database holds) is "inf", which JSON
// has no number for.
Json number(double v) {
  return std::isinf(v) ? Json("inf") : v >= 0 ? Json(v) : Json(nullptr);
}

Json export_json(const conv::PerfDb& db) {
  const auto rows = db.rows();
  Json j = {{"format", "convtune perfdb export"},
            {"format_version", 1},
            {"schema", db.file_schema_version()},
            {"winners", Json::array()},
            {"candidates", Json::array()}};
  for (const auto& r : rows.winners) {
    const auto& w = r.winner;
    j["winners"].push_back({{"fingerprint", r.fingerprint},
                            {"key", r.key},
                            {"path", conv::to_string(r.path)},
                            {"name", w.name},
                            {"algo", w.algo_id},
                            {"config", w.config},
                            {"median_ms", w.median_ms},
                            {"min_ms", number(w.min_ms)},
                            {"quality", to_json(w.quality)},
                            {"date", w.date},
                            {"version", w.version}});
  }
  for (const auto& r : rows.candidates) {
    const auto& c = r.candidate;
    j["candidates"].push_back({{"fingerprint", r.fingerprint},
                               {"key", r.key},
                               {"algo", c.algo_id},
                               {"config", c.config},
                               {"algo_version", c.algo_version},
                               {"status", to_string(c.status)},
                               {"median_ms", number(c.median_ms)},
                               {"min_ms", number(c.min_ms)},
                               {"max_ms", number(c.max_ms)},
                               {"packed_median_ms", number(c.packed_median_ms)},
                               {"packed_min_ms", number(c.packed_min_ms)},
                               {"max_error", number(c.max_error)},
                               {"workspace_bytes", c.workspace_bytes},
                               {"message", c.message},
                               {"quality", to_json(c.quality)},
                               {"date", c.date},
                               {"version", r.version}});
  }
  return j;
}

// RFC 4180: quote a field with a comma, quote or line break; double the quotes.
std::string csv(const std::string& v) {
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string out = "\"";
  for (const char ch : v) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

std::string csv(double v) {
  if (v < 0) return "";
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

// One line per measured candidate, with the paths it is the stored winner of.
void export_csv(const conv::PerfDb& db, std::ostream& out) {
  const auto rows = db.rows();
  std::map<std::tuple<std::string, std::string, std::string, std::string>, std::string> won;
  for (const auto& r : rows.winners) {
    auto& w = won[{r.fingerprint, r.key, r.winner.algo_id, r.winner.config}];
    w += (w.empty() ? "" : ";") + std::string(conv::to_string(r.path));
  }
  out << "fingerprint,key,algo,config,algo_version,status,winner_of,median_ms,min_ms,max_ms,"
         "packed_median_ms,packed_min_ms,max_error,workspace_bytes,rounds,clean_rounds,spread,"
         "noisy,message,date,version\n";
  for (const auto& r : rows.candidates) {
    const auto& c = r.candidate;
    const auto it = won.find({r.fingerprint, r.key, c.algo_id, c.config});
    out << csv(r.fingerprint) << "," << csv(r.key) << "," << csv(c.algo_id) << "," << csv(c.config)
        << "," << csv(c.algo_version) << "," << csv(to_string(c.status)) << ","
        << (it == won.end() ? "" : it->second) << "," << csv(c.median_ms) << "," << csv(c.min_ms)
        << "," << csv(c.max_ms) << "," << csv(c.packed_median_ms) << "," << csv(c.packed_min_ms)
        << "," << csv(c.max_error) << "," << c.workspace_bytes << "," << c.quality.rounds << ","
        << c.quality.clean_rounds << "," << csv(c.quality.spread) << ","
        << (c.quality.noisy ? 1 : 0) << "," << csv(c.message) << "," << csv(c.date) << ","
        << csv(r.version) << "\n";
  }
}

// Text from a database file is untrusted: control characters (terminal escapes) become '?'.
std::string printable(std::string s) {
  for (char& ch : s)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = '?';
  return s;
}

}  // namespace

std::vector<conv::PerfDb> read_layers(const std::string& user) {
  std::vector<conv::PerfDb> dbs;
  if (conv::PerfDb::file_exists(user)) dbs.push_back(conv::PerfDb::open(user, true));
  for (const auto& p : conv::system_perfdb_paths()) {
    try {
      dbs.push_back(conv::PerfDb::open(p, true));
    } catch (const conv::Error& e) {
      std::cerr << "autotune: warning: " << e.what() << "; this system perf database is skipped\n";
    }
  }
  return dbs;
}

int run_db_show(const Common& c, bool all_devices) {
  const conv::Device device = parse_device(c.device);
  const std::string fingerprint = device.fingerprint(c.threads, c.timing_mode());
  const std::string user = c.db_path();
  const auto dbs = read_layers(user);
  struct Row {
    std::string source;
    conv::PerfDb::WinnerRow w;
  };
  std::vector<Row> rows;
  for (const auto& db : dbs)
    for (auto& w : db.rows().winners)
      if (all_devices || w.fingerprint == fingerprint)
        rows.push_back({db.path() == user ? "user" : db.path(), std::move(w)});
  if (c.json) {
    Json j = {{"fingerprint", fingerprint}, {"perfdb", user}, {"winners", Json::array()}};
    j["system_perfdb"] = Json::array();
    for (const auto& db : dbs)
      if (db.path() != user) j["system_perfdb"].push_back(db.path());
    for (const auto& r : rows) {
      Json e = to_json(conv::PerfDb::Entry{r.w.key, r.w.path, r.w.winner});
      e["fingerprint"] = r.w.fingerprint;
      e["source"] = r.source;
      j["winners"].push_back(e);
    }
    std::cout << j.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
    return 0;
  }
  std::cout << "device: " << (all_devices ? "all" : fingerprint) << "\nperf database: " << user
            << (conv::PerfDb::file_exists(user) ? "" : " (does not exist yet)") << "\n";
  for (const auto& db : dbs)
    if (db.path() != user) std::cout << "system perf database: " << db.path() << "\n";
  std::cout << "\n";
  if (rows.empty()) {
    std::cout << "nothing stored: no winners stored for "
              << (all_devices ? "any device" : "this device") << "\n";
    return 0;
  }
  std::string device_shown;
  for (const auto& r : rows) {
    if (r.w.fingerprint != device_shown) {
      if (all_devices) std::cout << "device " << printable(r.w.fingerprint) << ":\n";
      char head[512];
      std::snprintf(head, sizeof head, "%-26s %-8s %-30s %10s  %-28s %-20s %s\n", "layer", "path",
                    "winner", "min ms", "measurement", "date", "source");
      std::cout << head;
      device_shown = r.w.fingerprint;
    }
    const auto& w = r.w.winner;
    char line[1024];
    std::snprintf(line, sizeof line, "%-26s %-8s %-30s %10.3f  %-28s %-20s %s\n",
                  printable(w.name.empty() ? r.w.key : w.name).c_str(), conv::to_string(r.w.path),
                  printable(w.algo_id + " " + w.config).c_str(),
                  w.min_ms > 0 ? w.min_ms : w.median_ms,  // the estimate; old rows: the median
                  quality_text(w.quality, true).c_str(), printable(w.date).c_str(),
                  r.source.c_str());
    std::cout << line;
    if (!w.name.empty()) std::cout << "  " << printable(r.w.key) << "\n";
  }
  return 0;
}

int run_db_merge(const std::vector<std::string>& sources, const std::string& into) {
  if (into.empty()) throw UsageError("--into: empty path");
  // Every source is opened (and so checked) before the destination is created.
  for (const auto& s : sources) conv::PerfDb::open(s, true);
  conv::PerfDb dst = conv::PerfDb::open(into);
  const auto counts = dst.merge(sources);  // all or nothing
  for (size_t i = 0; i < sources.size(); ++i)
    std::cout << sources[i] << ": " << counts[i] << " row(s) merged into " << into << "\n";
  return 0;
}

int run_db_export(const std::string& path, bool as_csv) {
  if (!conv::PerfDb::file_exists(path))
    throw conv::Error("perfdb: " + path + ": cannot open read-only: no such file");
  const conv::PerfDb db = conv::PerfDb::open(path, true);
  if (as_csv)
    export_csv(db, std::cout);
  else
    std::cout << export_json(db).dump(1, ' ', false, Json::error_handler_t::replace) << "\n";
  return 0;
}

int run_db_import(const std::vector<std::string>& files, const std::string& into) {
  if (into.empty()) throw UsageError("--into: empty path");
  // Every file is read and checked first; then all rows go in as one transaction.
  conv::PerfDb::Rows all;
  for (const auto& f : files) {
    auto rows = import_json(f);
    all.winners.insert(all.winners.end(), rows.winners.begin(), rows.winners.end());
    all.candidates.insert(all.candidates.end(), rows.candidates.begin(), rows.candidates.end());
  }
  conv::PerfDb dst = conv::PerfDb::open(into);
  std::cout << dst.import_rows(all) << " row(s) of " << files.size() << " file(s) imported into "
            << into << "\n";
  return 0;
}

int run_db_check(const std::vector<std::string>& paths) {
  int bad = 0;
  for (const auto& path : paths) {
    try {
      if (!conv::PerfDb::file_exists(path))
        throw conv::Error("perfdb: " + path + ": cannot open read-only: no such file");
      const conv::PerfDb db = conv::PerfDb::open(path, true);
      std::error_code ec;
      if (std::filesystem::file_size(path, ec) == 0 && !ec) {
        std::cout << path << ": ok: empty (no perf database yet; a writer creates one)\n";
        continue;
      }
      const std::string integrity = db.integrity_check();
      if (integrity != "ok") throw conv::Error("perfdb: " + path + ": damaged: " + integrity);
      const auto rows = db.rows();
      std::set<std::string> devices;
      for (const auto& w : rows.winners) devices.insert(w.fingerprint);
      for (const auto& c : rows.candidates) devices.insert(c.fingerprint);
      std::cout << path << ": ok: schema " << db.file_schema_version() << " (this build writes "
                << conv::PerfDb::schema_version() << "), " << rows.winners.size() << " winner(s), "
                << rows.candidates.size() << " candidate(s), " << devices.size() << " device(s)\n";
    } catch (const conv::Error& e) {
      std::cout << path << ": FAILED: " << e.what() << "\n";
      ++bad;
    }
  }
  return bad ? 1 : 0;
}

}  // namespace conv::cli
