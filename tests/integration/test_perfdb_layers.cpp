// Shipping perf databases: system databases behind the user's, read-only use, implementation
// versions across upgrades, `autotune db` (merge, export, import, check, show) and sharded
// tuning as Slurm and Kubernetes would run it.
#include <grp.h>
#include <pwd.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "buffer.hpp"
#include "conv/conv.hpp"
#include "conv/perfdb.hpp"
#include "conv/tuner.hpp"
#include "support.hpp"

namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path dir;
  TempDir() {
    static int n = 0;
    dir = fs::temp_directory_path() /
          ("convtune-layers-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    fs::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(dir, fs::perms::all, ec);
    fs::remove_all(dir, ec);
  }
  std::string file(const std::string& name) const { return (dir / name).string(); }
};

using convtest::quick_tune;
using convtest::ScopedEnv;
using Run = convtest::CommandResult;

Run shell(const std::string& cmd) {
  return convtest::run_command(cmd);
}

std::string autotune() {
  return std::string("'") + CONVTUNE_AUTOTUNE_EXE + "' ";
}

const std::string quick = " --rounds 1 --max-rounds 1 --batch-ms 0 --threads 2 ";

// Runs this test executable's hidden "probe" test case in a fresh process (fork, then exec at
// once: libgomp's threads do not survive a fork), as "nobody" when `unprivileged` and this is
// root (root ignores file modes). The probe calls best_forward and checks what it was told.
struct Probe {
  std::string descriptor, user_db, mode = "db_only";
  std::string source;  ///< expected ChoiceSource, or "error" for a conv::Error
  std::string perfdb;  ///< expected perfdb_path ("" = not checked)
  bool unprivileged = false;
};

int run_probe(const Probe& p) {
  // Everything the child needs is built before the fork: only async-signal-safe calls after it.
  std::vector<std::string> env = {"PROBE_DESCRIPTOR=" + p.descriptor, "PROBE_DB=" + p.user_db,
                                  "PROBE_MODE=" + p.mode, "PROBE_SOURCE=" + p.source,
                                  "PROBE_PERFDB=" + p.perfdb};
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  char arg0[] = "test_perfdb_layers", arg1[] = "[.probe]";
  char* argv[] = {arg0, arg1, nullptr};
  const passwd* nobody = ::getpwnam("nobody");
  const uid_t uid = nobody ? nobody->pw_uid : 65534;
  const gid_t gid = nobody ? nobody->pw_gid : 65534;
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    if (p.unprivileged && ::geteuid() == 0) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0) ::_exit(90);
    }
    ::execve("/proc/self/exe", argv, envp.data());
    ::_exit(91);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void sql(const std::string& path, const std::string& statement) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, statement.c_str(), nullptr, nullptr, &err);
  const std::string msg = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  INFO(statement << ": " << msg);
  REQUIRE(rc == SQLITE_OK);
}

void tune_into(const std::string& db_path, const conv::ConvProblem& p) {
  auto db = conv::PerfDb::open(db_path);
  const auto r = conv::tune(p, quick_tune());
  REQUIRE(r.complete);
  conv::store_result(db, r);
}

// Writes `j` to the file `json` and runs `autotune db import` of it into `into`.
Run import_json(const nlohmann::json& j, const std::string& json, const std::string& into) {
  std::ofstream(json) << j.dump();
  return shell(autotune() + "db import '" + json + "' --into '" + into + "'");
}

// best_forward in db_only mode: answers from a database or throws, never tunes.
conv::ForwardResult stored_answer(const conv::ConvProblem& p, const std::string& user_db,
                                  conv::FindMode mode = conv::FindMode::db_only) {
  convtest::ReferenceCase ref(p, 7);
  conv::AlignedBuffer y(p.y_bytes());
  conv::poison_nan(y.floats(), p.y_elems());
  conv::ForwardOptions o;
  o.perfdb_path = user_db;
  o.find_mode = mode;
  o.threads = 2;
  const auto r = conv::best_forward(p, ref.x(), ref.w(), ref.bias(), y.floats(), o);
  const auto check = ref.compare(y.floats(), *conv::find_algorithm(r.algo_id), r.config);
  if (!(check.max_error <= check.bound)) throw std::runtime_error("wrong result");
  return r;
}

const conv::ConvProblem p3x3 = conv::parse_descriptor("mb1ic8ih12oc8kh3ph1n\"three\"");
const conv::ConvProblem p5x5 = conv::parse_descriptor("mb1ic8ih12oc8kh5ph2n\"five\"");

}  // namespace

TEST_CASE("probe: best_forward in a fresh process (run by the tests below)", "[.probe]") {
  const char* desc = std::getenv("PROBE_DESCRIPTOR");
  REQUIRE(desc != nullptr);
  const std::string mode = std::getenv("PROBE_MODE");
  const std::string source = std::getenv("PROBE_SOURCE");
  const std::string perfdb = std::getenv("PROBE_PERFDB");
  const auto p = conv::parse_descriptor(desc);
  const auto m = mode == "tune" ? conv::FindMode::tune : conv::FindMode::db_only;
  if (source == "error") {
    CHECK_THROWS_AS(stored_answer(p, std::getenv("PROBE_DB"), m), conv::Error);
    return;
  }
  const auto r = stored_answer(p, std::getenv("PROBE_DB"), m);
  CHECK(conv::to_string(r.source) == source);
  if (!perfdb.empty()) CHECK(r.perfdb_path == perfdb);
}

TEST_CASE("layers: a system database answers best_forward with no user database") {
  TempDir tmp;
  const std::string system = tmp.file("system.sqlite");
  tune_into(system, p3x3);
  ScopedEnv env("CONVTUNE_SYSTEM_PERFDB", tmp.file("missing.sqlite") + "::" + system);
  const std::string user = tmp.file("user/none.sqlite");
  CHECK(run_probe({conv::to_descriptor(p3x3), user, "db_only", "perfdb", system}) == 0);
  CHECK_FALSE(fs::exists(user));  // looked up, never created
  // Named files come back as named (a missing one is reported when opened), empty entries not.
  const auto paths = conv::system_perfdb_paths();
  CHECK(paths == std::vector<std::string>{tmp.file("missing.sqlite"), system});
}

TEST_CASE("layers: a read-only user database serves lookups, a miss tunes in memory") {
  TempDir tmp;
  const std::string system = tmp.file("system.sqlite"), user = tmp.file("user.sqlite");
  tune_into(system, p3x3);
  tune_into(user, p5x5);
  fs::permissions(user, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  fs::permissions(tmp.dir, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                               fs::perms::group_exec | fs::perms::others_read |
                               fs::perms::others_exec);
  ScopedEnv env("CONVTUNE_SYSTEM_PERFDB", system);
  // Tune mode, as a user who may not write the file: both stored answers, no tuning.
  CHECK(run_probe({conv::to_descriptor(p5x5), user, "tune", "perfdb", user, true}) == 0);
  CHECK(run_probe({conv::to_descriptor(p3x3), user, "tune", "perfdb", system, true}) == 0);
  // A miss tunes in memory (the file cannot take it) and still answers correctly.
  const auto other = conv::parse_descriptor("mb1ic4ih9oc4kh3ph1");
  CHECK(run_probe({conv::to_descriptor(other), user, "tune", "tuned", "", true}) == 0);
  CHECK_FALSE(
      conv::PerfDb::open(user, true).lookup(conv::Device::cpu().fingerprint(2), other.key()));
}

TEST_CASE(
    "versions: an upgrade keeps the winners, a bumped algorithm re-measures only its "
    "problems") {
  TempDir tmp;
  const std::string user = tmp.file("user.sqlite");
  tune_into(user, p3x3);  // cpu.winograd applies
  // Winograd needs stride 1 (it also runs 5x5 kernels, so p5x5 will not do).
  const auto strided = conv::parse_descriptor("mb1ic8ih12oc8kh3sh2ph1n\"strided\"");
  tune_into(user, strided);  // cpu.winograd does not apply
  const std::string fp = conv::Device::cpu().fingerprint(2);
  CHECK(fp.find("convtune") == std::string::npos);
  // Another convtune package version stored them: still used, without tuning.
  sql(user, "UPDATE winners SET version = '0.0.1'; UPDATE candidates SET version = '0.0.1'");
  CHECK(run_probe({conv::to_descriptor(p3x3), user, "db_only", "perfdb", user}) == 0);
  CHECK(run_probe({conv::to_descriptor(strided), user, "db_only", "perfdb", user}) == 0);
  // cpu.winograd's kernels changed since (its stored version differs from the registered one).
  sql(user, "UPDATE candidates SET algo_version = 'old' WHERE algo = 'cpu.winograd'");
  auto db = conv::PerfDb::open(user);
  CHECK(conv::stale_algorithms(db.candidates(fp, p3x3.key())) ==
        std::vector<std::string>{"cpu.winograd"});
  CHECK(conv::stale_algorithms(db.candidates(fp, strided.key())).empty());
  // db_only: the stored winner of the 3x3 problem no longer stands; the strided one does.
  CHECK(run_probe({conv::to_descriptor(p3x3), user, "db_only", "error"}) == 0);
  CHECK(run_probe({conv::to_descriptor(strided), user, "db_only", "perfdb", user}) == 0);
  // A tune without --force measures exactly cpu.winograd again.
  auto o = quick_tune();
  o.measured = db.candidates(fp, p3x3.key());
  const auto r = conv::tune(p3x3, o);
  size_t winograd = 0;
  for (const auto& c : r.candidates) {
    INFO(c.algo_id << " " << c.config);
    CHECK(c.from_perfdb == (c.algo_id != "cpu.winograd"));
    winograd += c.algo_id == "cpu.winograd";
  }
  CHECK(winograd > 0);
  conv::store_result(db, r);
  CHECK(conv::stale_algorithms(db.candidates(fp, p3x3.key())).empty());
}

TEST_CASE("versions: an algorithm added since a winner was stored is measured, the rest reused") {
  TempDir tmp;
  const std::string user = tmp.file("user.sqlite");
  tune_into(user, p3x3);
  const std::string fp = conv::Device::cpu().fingerprint(2);
  auto db = conv::PerfDb::open(user);
  const auto winner = db.lookup(fp, p3x3.key());
  REQUIRE(winner);
  CHECK(conv::why_stored_winner_stale(p3x3, conv::Device::Kind::cpu, *winner,
                                      db.candidates(fp, p3x3.key())) == "");
  // As if the storing build lacked one algorithm that is not the winner: its rows are missing.
  std::string added;
  for (const auto& c : db.candidates(fp, p3x3.key()))
    if (c.algo_id != winner->algo_id) added = c.algo_id;
  REQUIRE_FALSE(added.empty());
  sql(user, "DELETE FROM candidates WHERE algo = '" + added + "'");
  const auto why = conv::why_stored_winner_stale(p3x3, conv::Device::Kind::cpu, *winner,
                                                 db.candidates(fp, p3x3.key()));
  CHECK_THAT(why, Catch::Contains(added) && Catch::Contains("never measured"));
  CHECK(run_probe({conv::to_descriptor(p3x3), user, "db_only", "error"}) == 0);
  auto o = quick_tune();
  o.measured = db.candidates(fp, p3x3.key());
  const auto r = conv::tune(p3x3, o);
  for (const auto& c : r.candidates) {
    INFO(c.algo_id << " " << c.config);
    CHECK(c.from_perfdb == (c.algo_id != added));
  }
  conv::store_result(db, r);
  const auto again = db.lookup(fp, p3x3.key());
  REQUIRE(again);
  CHECK(conv::why_stored_winner_stale(p3x3, conv::Device::Kind::cpu, *again,
                                      db.candidates(fp, p3x3.key())) == "");
}

TEST_CASE("autotune tune: a re-tune measures the vendor baseline again with the rest") {
  // The speed-up it prints compares the winner with cpu.onednn measured in the same run, not
  // with a stored baseline time from another hour of a shared machine.
  TempDir tmp;
  const std::string user = tmp.file("user.sqlite");
  tune_into(user, p3x3);
  sql(user, "UPDATE candidates SET algo_version = 'old' WHERE algo = 'cpu.direct'");
  sql(user, "UPDATE candidates SET median_ms = 1000, min_ms = 1000 WHERE algo = 'cpu.onednn'");
  const Run r = shell("(" + autotune() + "tune '" + conv::to_descriptor(p3x3) + "' --db '" + user +
                      "' --json" + quick + " 2>/dev/null)");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j.size() == 1);
  REQUIRE(j[0]["baseline"].is_object());
  CHECK(j[0]["baseline"]["algo"] == "cpu.onednn");
  CHECK(j[0]["baseline"]["median_ms"].get<double>() < 1000);
  // One estimator (min_ms) for the choice, the JSON and the speed-up: the winner is never shown
  // slower than a candidate it beat, and the ratio compares like with like.
  const double winner_ms = j[0]["winner"]["min_ms"].get<double>();
  for (const auto& c : j[0]["candidates"])
    if (c["status"] == "ok") CHECK(winner_ms <= c["min_ms"].get<double>());
  CHECK(j[0]["speedup"].get<double>() ==
        Approx(j[0]["baseline"]["min_ms"].get<double>() / winner_ms));
  CHECK(j[0]["winner"]["gflops"].get<double>() == Approx(p3x3.flops() / (winner_ms * 1e6)));
  // The other current candidates are still read back, not measured again.
  int reused = 0;
  for (const auto& c :
       conv::PerfDb::open(user).candidates(conv::Device::cpu().fingerprint(2), p3x3.key()))
    reused += c.algo_id != "cpu.direct" && c.algo_id != "cpu.onednn" &&
              c.status == conv::CandidateStatus::ok;
  CHECK(reused > 0);
}

TEST_CASE("autotune db: export and import round-trip every row, check, merge refuses others") {
  TempDir tmp;
  const std::string a = tmp.file("a.sqlite");
  tune_into(a, p3x3);
  tune_into(a, p5x5);
  Run r = shell(autotune() + "db export '" + a + "' > '" + tmp.file("a.json") + "'");
  REQUIRE(r.code == 0);
  r = shell(autotune() + "db import '" + tmp.file("a.json") + "' --into '" + tmp.file("b.sqlite") +
            "'");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto ra = conv::PerfDb::open(a, true).rows();
  const auto rb = conv::PerfDb::open(tmp.file("b.sqlite"), true).rows();
  REQUIRE(ra.winners.size() == rb.winners.size());
  REQUIRE(ra.candidates.size() == rb.candidates.size());
  for (size_t i = 0; i < ra.winners.size(); ++i) {
    CHECK(ra.winners[i].key == rb.winners[i].key);
    CHECK(ra.winners[i].winner.algo_id == rb.winners[i].winner.algo_id);
    CHECK(ra.winners[i].winner.min_ms == rb.winners[i].winner.min_ms);
    CHECK(ra.winners[i].winner.date == rb.winners[i].winner.date);
    CHECK(ra.winners[i].winner.name == rb.winners[i].winner.name);
  }
  for (size_t i = 0; i < ra.candidates.size(); ++i) {
    CHECK(ra.candidates[i].candidate.median_ms == rb.candidates[i].candidate.median_ms);
    CHECK(ra.candidates[i].candidate.algo_version == rb.candidates[i].candidate.algo_version);
    CHECK(ra.candidates[i].candidate.quality.rounds == rb.candidates[i].candidate.quality.rounds);
    CHECK(ra.candidates[i].candidate.workspace_bytes == rb.candidates[i].candidate.workspace_bytes);
  }
  // Byte counts are JSON integers (14784, not 14784.0) for tools that read the export typed.
  {
    std::ifstream in(tmp.file("a.json"));
    const auto j = nlohmann::json::parse(in);
    REQUIRE(j.at("candidates").size() == ra.candidates.size());
    for (const auto& c : j.at("candidates")) CHECK(c.at("workspace_bytes").is_number_unsigned());
  }
  // CSV: a header and one line per candidate.
  r = shell(autotune() + "db export --csv '" + a + "' | wc -l");
  CHECK(std::stoul(r.out) == ra.candidates.size() + 1);

  r = shell(autotune() + "db check '" + a + "' '" + tmp.file("b.sqlite") + "'");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out,
             Catch::Contains("ok: schema " + std::to_string(conv::PerfDb::schema_version())));

  // Not perf databases: check fails naming them; merge and import refuse before writing.
  { std::ofstream(tmp.file("junk.sqlite")) << "not a database at all, just some text here"; }
  r = shell(autotune() + "db check '" + tmp.file("junk.sqlite") + "'");
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains(tmp.file("junk.sqlite") + ": FAILED"));
  r = shell(autotune() + "db merge '" + a + "' '" + tmp.file("junk.sqlite") + "' --into '" +
            tmp.file("c.sqlite") + "'");
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains(tmp.file("junk.sqlite")));
  CHECK_FALSE(fs::exists(tmp.file("c.sqlite")));
  // A hand-edited export: the bad entry and field are named, nothing is written.
  const auto refused = [&](const std::function<void(nlohmann::json&)>& edit,
                           const std::string& why) {
    auto e = nlohmann::json::parse(std::ifstream(tmp.file("a.json")));
    edit(e);
    const Run bad = import_json(e, tmp.file("bad.json"), tmp.file("d.sqlite"));
    INFO(bad.out);
    CHECK(bad.code == 2);
    CHECK_THAT(bad.out, Catch::Contains(why));
    CHECK_FALSE(fs::exists(tmp.file("d.sqlite")));
  };
  refused([](nlohmann::json& e) { e["candidates"][1]["median_ms"] = "fast"; },
          "candidates[1].median_ms: expected a number");
  refused([](nlohmann::json& e) { e["schema"] = -1; }, "schema: expected an integer from 1 to");
  // A nested value is named by its type, not echoed (dumping a deeply nested one overflowed the
  // stack); nesting past 32 is refused while the file is read (the parser's stacks grew with it).
  for (const auto& [depth, says] : std::vector<std::pair<size_t, std::string>>{
           {20, "schema: expected an integer from 1 to"}, {200000, "nested deeper than 32"}}) {
    std::string text = nlohmann::json::parse(std::ifstream(tmp.file("a.json"))).dump();
    const std::string schema = "\"schema\":" + std::to_string(conv::PerfDb::schema_version());
    REQUIRE(text.find(schema) != std::string::npos);
    text.replace(text.find(schema), schema.size(),
                 "\"schema\":" + std::string(depth, '[') + std::string(depth, ']'));
    std::ofstream(tmp.file("deep.json")) << text;
    const Run deep = shell(autotune() + "db import '" + tmp.file("deep.json") + "' --into '" +
                           tmp.file("d.sqlite") + "'");
    INFO(deep.out.substr(0, 400));
    CHECK(deep.code == 2);
    CHECK_THAT(deep.out, Catch::Contains(says));
    if (depth == 20) CHECK_THAT(deep.out, Catch::Contains("got array"));
    CHECK_FALSE(fs::exists(tmp.file("d.sqlite")));
  }
  refused([](nlohmann::json& e) { e["format"] = 5; },
          "format: expected \"convtune perfdb export\"");
  refused([](nlohmann::json& e) { e["format_version"] = "1"; },
          "import: " + tmp.file("bad.json") + ": format_version: expected a number");
  // Above the database's 1e300 every reader refuses the file: one imported row had disabled it.
  refused([](nlohmann::json& e) { e["candidates"][0]["max_ms"] = 1e305; },
          "candidates[0].max_ms: expected a number from 0 to 1e300");
  refused([](nlohmann::json& e) { e["winners"][0]["quality"]["spread"] = 1e301; },
          "winners[0].quality.spread: expected a number from 0 to 1e300");
  // A key twice in one object (JSON parsers keep one silently): refused, at any depth.
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"{", "{\"winners\": [], "}, {"\"config\":", "\"config\": \"x\", \"config\":"}}) {
    std::string text = nlohmann::json::parse(std::ifstream(tmp.file("a.json"))).dump();
    text.replace(text.find(from), from.size(), to);
    std::ofstream(tmp.file("twice.json")) << text;
    const Run twice = shell(autotune() + "db import '" + tmp.file("twice.json") + "' --into '" +
                            tmp.file("d.sqlite") + "'");
    INFO(twice.out);
    CHECK(twice.code == 2);
    CHECK_THAT(twice.out, Catch::Contains("given twice in one object"));
    CHECK_FALSE(fs::exists(tmp.file("d.sqlite")));
  }
  // A winner need not be among the file's candidates: a tune that reuses a system database's
  // measurements stores only those it made itself, the winner perhaps not among them (such a
  // file's export was refused on import).
  {
    auto e = nlohmann::json::parse(std::ifstream(tmp.file("a.json")));
    e["winners"][0]["config"] = "oc4ow24_measured_elsewhere";
    const Run ok = import_json(e, tmp.file("bad.json"), tmp.file("d.sqlite"));
    INFO(ok.out);
    CHECK(ok.code == 0);
    fs::remove(tmp.file("d.sqlite"));
  }
  // Byte counts are whole numbers (an export written as 14784.0 still reads), integers up to the
  // database's 2^63 - 1 (which db check accepts), floats only where exact.
  for (const nlohmann::json& bytes :
       {nlohmann::json(1.5), nlohmann::json(1e30), nlohmann::json(0x1p53), nlohmann::json(-1),
        nlohmann::json(uint64_t{1} << 63), nlohmann::json("14784")})
    refused([&](nlohmann::json& e) { e["candidates"][0]["workspace_bytes"] = bytes; },
            "candidates[0].workspace_bytes: expected a whole number");
  for (const nlohmann::json& bytes : {nlohmann::json(14784.0), nlohmann::json(INT64_MAX)}) {
    auto j = nlohmann::json::parse(std::ifstream(tmp.file("a.json")));
    j["candidates"][0]["workspace_bytes"] = bytes;
    r = import_json(j, tmp.file("bad.json"), tmp.file("d.sqlite"));
    INFO(r.out);
    CHECK(r.code == 0);
    int found = 0;
    for (const auto& row : conv::PerfDb::open(tmp.file("d.sqlite"), true).rows().candidates)
      if (row.key == j["candidates"][0]["key"] &&
          row.fingerprint == j["candidates"][0]["fingerprint"] &&
          row.candidate.algo_id == j["candidates"][0]["algo"] &&
          row.candidate.config == j["candidates"][0]["config"]) {
        CHECK(row.candidate.workspace_bytes == (bytes.is_number_float() ? 14784 : INT64_MAX));
        ++found;
      }
    CHECK(found == 1);
    // What was imported exports and checks as it came.
    r = shell(autotune() + "db check '" + tmp.file("d.sqlite") + "'");
    CHECK(r.code == 0);
    fs::remove(tmp.file("d.sqlite"));
  }
  // Keys that are no problem, or not in canonical form, could never be looked up.
  for (const char* key : {"mb0ic3", "mb1ic3ih16oc8kh3"})
    refused([&](nlohmann::json& e) { e["winners"][0]["key"] = key; }, "winners[0].key: ");
  // Dates that are no calendar time, or in the future (a row dated 9999 would win every later
  // merge as the newest); a control character in a fingerprint; a row whose times contradict.
  refused([](nlohmann::json& e) { e["winners"][0]["date"] = "2026-02-30T12:00:00Z"; },
          "winners[0].date: not a calendar date");
  refused([](nlohmann::json& e) { e["candidates"][0]["date"] = "9999-12-31T00:00:00Z"; },
          "candidates[0].date: in the future");
  refused([](nlohmann::json& e) { e["winners"][0]["fingerprint"] = "cpu|\x01|x"; },
          "winners[0].fingerprint: control character");
  refused(
      [](nlohmann::json& e) {
        e["winners"][0]["min_ms"] = 2 * e["winners"][0]["median_ms"].get<double>() + 1;
      },
      "winners[0]: expected min_ms <= median_ms <= max_ms");
}

TEST_CASE("sharded tuning: Slurm and Kubernetes shards, merged, equal an unsharded run") {
  TempDir tmp;
  const std::string batch = tmp.file("layers.txt");
  {
    std::ofstream f(batch);
    f << "# seven problems, one of them twice\n"
         "mb1ic4ih8oc4kh3ph1n\"a\"\nmb1ic4ih8oc8kh3ph1n\"b\"\nmb1ic8ih8oc4kh1n\"c\"\n"
         "mb1ic4ih9oc4kh5ph2n\"d\"\nmb1ic4ih8oc4kh3sh2ph1n\"e\"\nmb1ic4ih8oc4kh3ph1n\"a2\"\n"
         "mb2ic4ih8oc4kh3ph1n\"f\"\nmb1ic3ih10oc6kh3n\"g\"\n";
  }
  const size_t n = 3;
  std::string cmd;
  for (size_t i = 0; i < n; ++i)  // Slurm array 10-12: the index counts from SLURM_ARRAY_TASK_MIN
    cmd += "SLURM_ARRAY_TASK_ID=" + std::to_string(10 + i) +
           " SLURM_ARRAY_TASK_MIN=10 SLURM_ARRAY_TASK_COUNT=3 " + autotune() + "tune --batch '" +
           batch + "' --shard auto --db '" + tmp.file("slurm" + std::to_string(i) + ".sqlite") +
           "'" + quick + " > /dev/null 2>> '" + tmp.file("shards.log") + "' & ";
  for (size_t i = 0; i < n; ++i)  // a Kubernetes Indexed Job, another machine (1 thread)
    cmd += "JOB_COMPLETION_INDEX=" + std::to_string(i) + " CONVTUNE_SHARD_COUNT=3 " + autotune() +
           "tune --batch '" + batch + "' --shard auto --db '" +
           tmp.file("k8s" + std::to_string(i) + ".sqlite") +
           "' --rounds 1 --max-rounds 1 --batch-ms 0 --threads 1 > /dev/null 2>> '" +
           tmp.file("shards.log") + "' & ";
  Run r = shell(cmd + "wait");
  r.out += shell("cat '" + tmp.file("shards.log") + "'").out;
  INFO(r.out);
  REQUIRE(r.code == 0);
  std::string shards;
  for (size_t i = 0; i < n; ++i)
    shards += " '" + tmp.file("slurm" + std::to_string(i) + ".sqlite") + "' '" +
              tmp.file("k8s" + std::to_string(i) + ".sqlite") + "'";
  r = shell(autotune() + "db merge" + shards + " --into '" + tmp.file("merged.sqlite") + "'");
  INFO(r.out);
  REQUIRE(r.code == 0);

  // Each shard tuned a disjoint part; merged, each device has a winner for exactly the
  // distinct problems of an unsharded run.
  std::set<std::string> expected;
  for (const auto& p : conv::read_batch_file(batch)) expected.insert(p.key());
  CHECK(expected.size() == 7);
  const auto merged = conv::PerfDb::open(tmp.file("merged.sqlite"), true);
  for (const int threads : {2, 1}) {
    std::set<std::string> got;
    for (const auto& e : merged.winners(conv::Device::cpu().fingerprint(threads)))
      if (e.path == conv::ExecPath::oneshot) got.insert(e.key);
    CHECK(got == expected);
  }
  size_t per_shard = 0;
  for (size_t i = 0; i < n; ++i)
    per_shard += conv::PerfDb::open(tmp.file("slurm" + std::to_string(i) + ".sqlite"), true)
                     .winners(conv::Device::cpu().fingerprint(2))
                     .size();
  CHECK(per_shard == 2 * expected.size());  // one-shot + packed, no problem twice

  // Installed as the system database, the merged file answers every problem: nothing tuned.
  r = shell("CONVTUNE_SYSTEM_PERFDB='" + tmp.file("merged.sqlite") + "' " + autotune() +
            "tune --batch '" + batch + "' --db '" + tmp.file("fresh.sqlite") + "'" + quick);
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("0 layer(s) tuned now, 7 read from the perf databases"));
  CHECK_THAT(r.out, Catch::Contains("1 repeated problem(s) tuned once"));

  // show --all-devices: both devices, with headers and layer names.
  r = shell(autotune() + "db show --all-devices --db '" + tmp.file("merged.sqlite") + "'");
  INFO(r.out);
  CHECK_THAT(r.out, Catch::Contains("threads=1|timing=cold:"));
  CHECK_THAT(r.out, Catch::Contains("threads=2|timing=cold:"));
  CHECK_THAT(r.out, Catch::Contains("layer"));
  CHECK_THAT(r.out, Catch::Contains("measurement"));

  // Bad shard specifications name the flag or the variable; an empty one is not "no shard".
  for (const char* bad : {"3/3", "''"}) {
    r = shell(autotune() + "tune --batch '" + batch + "' --shard " + bad + " --db '" +
              tmp.file("x.sqlite") + "'");
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("--shard"));
  }
  r = shell("JOB_COMPLETION_INDEX=1 " + autotune() + "tune --batch '" + batch +
            "' --shard auto --db '" + tmp.file("x.sqlite") + "'");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("CONVTUNE_SHARD_COUNT"));
}

TEST_CASE("autotune tune on a read-only database says so first and uses what is stored") {
  TempDir tmp;
  const std::string user = tmp.file("user.sqlite");
  tune_into(user, p3x3);
  fs::permissions(user, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  const std::string cmd = autotune() + "tune '" + conv::to_descriptor(p3x3) +
                          "' 'mb1ic4ih9oc4kh3ph1' --db '" + user + "'" + quick;
  // As "nobody" when root (root ignores file modes): setpriv from util-linux.
  const std::string as_user = ::geteuid() == 0 ? "setpriv --reuid=nobody --regid=nogroup "
                                                 "--clear-groups "
                                               : "";
  const Run r = shell(as_user + cmd);
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(r.out.find("read-only") < r.out.find("tuning"));
  CHECK_THAT(r.out, Catch::Contains("not stored: read-only"));
  CHECK_THAT(r.out, Catch::Contains("1 layer(s) tuned now, 1 read"));
}

TEST_CASE("autotune db and shards refuse what would lose or corrupt rows") {
  TempDir tmp;
  const std::string a = tmp.file("a.sqlite");
  tune_into(a, p3x3);
  // A source with a value too long to read, after a good one: the merge is all or nothing.
  const std::string big = tmp.file("big.sqlite");
  tune_into(big, p5x5);
  sql(big,
      "UPDATE candidates SET message = printf('%.*c', 200000, 'x') WHERE algo = "
      "(SELECT algo FROM candidates LIMIT 1)");
  Run r = shell(autotune() + "db merge '" + a + "' '" + big + "' --into '" + tmp.file("m.sqlite") +
                "'");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains(big + ": not a convtune perf database (candidates holds a "
                                          "value longer than 64 KiB"));
  CHECK_FALSE(fs::exists(tmp.file("m.sqlite")));  // refused at open, before it was created
  // A malformed date would win (or lose) every later merge: refused, nothing merged.
  const std::string odd = tmp.file("odd.sqlite");
  tune_into(odd, p5x5);
  sql(odd, "UPDATE winners SET date = 'zzzz'");
  r = shell(autotune() + "db merge '" + odd + "' --into '" + tmp.file("m.sqlite") + "'");
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("malformed date"));
  CHECK(conv::PerfDb::open(tmp.file("m.sqlite"), true).rows().winners.empty());
  sql(odd, "UPDATE winners SET date = '9999-12-31T00:00:00Z'");
  r = shell(autotune() + "db merge '" + odd + "' --into '" + tmp.file("m.sqlite") + "'");
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("date: in the future: 9999-12-31T00:00:00Z"));
  CHECK(conv::PerfDb::open(tmp.file("m.sqlite"), true).rows().winners.empty());
  // Not a regular file: refused before SQLite creates a journal next to it.
  r = shell(autotune() + "db merge '" + a + "' --into /dev/null");
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("/dev/null: not a regular file"));

  // An export with one row twice: refused, naming both entries.
  r = shell(autotune() + "db export '" + a + "' > '" + tmp.file("a.json") + "'");
  auto j = nlohmann::json::parse(std::ifstream(tmp.file("a.json")));
  j["winners"].push_back(j["winners"][0]);
  r = import_json(j, tmp.file("dup.json"), tmp.file("d.sqlite"));
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("the same row as entry 0"));
  // A name with a control character, which no descriptor can carry: refused, naming it.
  j["winners"].erase(j["winners"].size() - 1);
  j["winners"][0]["name"] = "a\nb";
  r = import_json(j, tmp.file("ctl.json"), tmp.file("d.sqlite"));
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("winners[0].name: control character"));
  j["winners"][0]["name"] = "ok";
  j["winners"][0]["algo"] = std::string("cpu.direct\0x", 12);
  r = import_json(j, tmp.file("nul.json"), tmp.file("d.sqlite"));
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("winners[0].algo: holds a NUL character"));

  // A stored winner this build cannot run (edited by hand, or from another build): re-tuned.
  sql(a, "UPDATE winners SET algo = 'cpu.nonesuch'");
  r = shell(autotune() + "tune '" + conv::to_descriptor(p3x3) + "' --db '" + a + "'" + quick);
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("is no applicable algorithm and config of this build"));
  CHECK_THAT(r.out, Catch::Contains("1 layer(s) tuned now"));

  // Slurm arrays with a step or a list would leave shards untuned.
  r = shell(
      "SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=6 "
      "SLURM_ARRAY_TASK_STEP=2 SLURM_ARRAY_TASK_COUNT=4 " +
      autotune() + "tune '" + conv::to_descriptor(p3x3) + "' --shard auto --db '" + a + "'");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("not a contiguous range"));
}

TEST_CASE("perfdb: rows with values no convtune writes are skipped, reported and never merged") {
  TempDir tmp;
  const std::string good = tmp.file("good.sqlite");
  tune_into(good, p3x3);
  const std::string fp = conv::Device::cpu().fingerprint();
  // Each edit makes one column of one row something only another program (or an attacker) writes.
  const std::vector<std::pair<std::string, std::string>> edits = {
      {"UPDATE winners SET median_ms = -5", "median_ms: expected a number from 0 to 1e300"},
      {"UPDATE winners SET median_ms = 9e999", "median_ms: expected a number from 0 to 1e300"},
      {"UPDATE winners SET median_ms = 1e301", "median_ms: expected a number from 0 to 1e300"},
      {"UPDATE winners SET median_ms = 'x'", "median_ms: expected a number from 0 to 1e300"},
      {"UPDATE winners SET algo = x'00ff00'", "algo: expected a string"},
      {"UPDATE winners SET name = CAST(x'ff61' AS TEXT)", "name: not UTF-8 text"},
      {"UPDATE winners SET rounds = 2, clean_rounds = 3", "clean_rounds <= rounds"},
      {"UPDATE candidates SET status = 'weird'", "status: expected ok, rejected, failed"},
      {"UPDATE candidates SET workspace_bytes = -1", "workspace_bytes: expected an integer"},
      {"UPDATE candidates SET workspace_bytes = 1.5", "workspace_bytes: expected an integer"},
      {"UPDATE candidates SET message = printf('%.*c', 5000, 'm')", "message: longer than 4096"},
      {"UPDATE candidates SET date = '2026-13'", "date: malformed date"},
      // What `autotune db import` refuses too. An "ok" row without a time had been reused by the
      // tuner as a -1 ms measurement and stored as a -1 ms winner.
      {"UPDATE candidates SET status = 'ok', median_ms = NULL",
       "median_ms: expected a time for a candidate with status ok"},
      {"UPDATE candidates SET status = 'ok', median_ms = 1, min_ms = 2",
       "expected min_ms <= median_ms <= max_ms"},
      {"UPDATE candidates SET median_ms = 3, max_ms = 2", "expected min_ms <= median_ms <= max_ms"},
      {"UPDATE winners SET min_ms = 2 * median_ms + 1",
       "min_ms, median_ms: expected min_ms <= median_ms"},
      {"UPDATE winners SET name = 'a' || char(27) || '[2Jb'", "name: control character"},
      {"UPDATE winners SET key = 'mb1ic64ih56oc64kh3ph1'", "key: not the canonical key"},
      {"UPDATE winners SET key = replace(key, 'mb1', 'mb99999999999')", "key: descriptor"}};
  for (const auto& [edit, why] : edits) {
    INFO(edit);
    const std::string bad = tmp.file("bad.sqlite"), into = tmp.file("into.sqlite");
    fs::remove(bad), fs::remove(into);
    fs::copy_file(good, bad);
    sql(bad, edit);
    // db check names the row and column; merge refuses the whole file and writes nothing.
    Run r = shell(autotune() + "db check '" + bad + "'");
    CHECK(r.code == 1);
    CHECK_THAT(r.out, Catch::Contains(why));
    r = shell(autotune() + "db merge '" + good + "' '" + bad + "' --into '" + into + "'");
    CHECK(r.code == 1);
    CHECK_THAT(r.out, Catch::Contains(why) && Catch::Contains("nothing merged"));
    CHECK(conv::PerfDb::open(into, true).rows().winners.empty());
    // Reading: rows() (export, show, Python's read_perfdb) says which; lookups skip the row.
    const auto db = conv::PerfDb::open(bad, true);
    CHECK_THROWS_WITH(db.rows(), Catch::Contains(why));
    const bool winner_edit = edit.find("winners") != std::string::npos;
    CHECK(db.lookup(fp, p3x3.key(), conv::ExecPath::oneshot).has_value() == !winner_edit);
    // (Each edit changed every row of its table.) winners() lists a fingerprint's rows whatever
    // their key text, which lookups match exactly.
    if (edit.find("SET key") == std::string::npos) CHECK(db.winners(fp).empty() == winner_edit);
    CHECK(db.candidates(fp, p3x3.key()).empty() == !winner_edit);
  }
}

TEST_CASE("perfdb: rows that break the schema's primary key or path check are refused at open") {
  TempDir tmp;
  const std::string good = tmp.file("good.sqlite");
  tune_into(good, p3x3);
  // SQLite skips CHECK constraints when asked to, and quick_check neither sees them on a
  // read-only connection nor sees two rows under one primary key: each such file had been read
  // as a second one-shot winner of the same problem.
  const std::string path_edit =
      "PRAGMA ignore_check_constraints = 1; INSERT INTO winners SELECT fingerprint, key, "
      "'PACKED', algo, config, median_ms, date, version, min_ms, rounds, clean_rounds, spread, "
      "noisy, name FROM winners WHERE path = 'oneshot'";
  const std::string key_edit =
      "PRAGMA writable_schema = ON; UPDATE sqlite_master SET sql = replace(sql, 'PRIMARY KEY "
      "(fingerprint, key, path)', 'PRIMARY KEY (fingerprint, key, path, algo)') WHERE name = "
      "'winners'";
  const std::string key_restore =
      "PRAGMA writable_schema = ON; UPDATE sqlite_master SET sql = replace(sql, 'PRIMARY KEY "
      "(fingerprint, key, path, algo)', 'PRIMARY KEY (fingerprint, key, path)') WHERE name = "
      "'winners'";
  const std::string bad_path = tmp.file("path.sqlite"), bad_key = tmp.file("key.sqlite");
  fs::copy_file(good, bad_path);
  sql(bad_path, path_edit);
  fs::copy_file(good, bad_key);
  sql(bad_key, key_edit);
  sql(bad_key,
      "INSERT INTO winners SELECT fingerprint, key, path, 'cpu.other', config, median_ms, date, "
      "version, min_ms, rounds, clean_rounds, spread, noisy, name FROM winners WHERE path = "
      "'oneshot'");
  sql(bad_key, key_restore);
  // A writer's integrity_check sees the CHECK constraint itself; a reader's does not, and the
  // path query names the row.
  const auto refusal = [](const std::string& file, bool read_only) {
    try {
      conv::PerfDb::open(file, read_only);
    } catch (const conv::Error& e) {
      return std::string(e.what());
    }
    return std::string("opened");
  };
  for (const bool read_only : {true, false}) {
    INFO((read_only ? "read-only" : "writer"));
    CHECK_THAT(refusal(bad_path, read_only),
               Catch::Contains("not a convtune perf database (damaged: ") &&
                   (Catch::Contains("path: expected oneshot or packed") ||
                    Catch::Contains("CHECK constraint failed in winners")));
    CHECK_THAT(refusal(bad_key, read_only),
               Catch::Contains("not a convtune perf database (damaged: ") &&
                   Catch::Contains("not in PRIMARY KEY order for winners"));
  }
  for (const std::string& file : {bad_path, bad_key}) {
    const Run r =
        shell(autotune() + "db merge '" + file + "' --into '" + tmp.file("m.sqlite") + "'");
    INFO(r.out);
    CHECK(r.code == 1);
    CHECK_THAT(r.out, Catch::Contains("damaged") && Catch::Contains("winners"));
    CHECK_FALSE(fs::exists(tmp.file("m.sqlite")));
  }
  // An error measured on a non-finite output is +infinity: exported as "inf" (JSON has no such
  // number, and null would read back as "not checked"), it imports as it was.
  sql(good, "UPDATE candidates SET status = 'rejected', max_error = 9e999");
  Run r = shell(autotune() + "db export '" + good + "' > '" + tmp.file("inf.json") + "'");
  REQUIRE(r.code == 0);
  r = shell(autotune() + "db import '" + tmp.file("inf.json") + "' --into '" +
            tmp.file("inf.sqlite") + "'");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto rows = conv::PerfDb::open(tmp.file("inf.sqlite"), true).rows();
  REQUIRE_FALSE(rows.candidates.empty());
  for (const auto& c : rows.candidates) CHECK(std::isinf(c.candidate.max_error));
}

TEST_CASE("autotune verify: a winner slower than stored is marked, and tune measures it again") {
  TempDir tmp;
  const std::string user = tmp.file("user.sqlite");
  tune_into(user, p3x3);  // quick_tune: 2 threads, cold timing
  const std::string fp = conv::Device::cpu().fingerprint(2);
  const std::string desc = conv::to_descriptor(p3x3);
  // As stored: every winner within 1.25x (the suite ignores the load, so rounds are clean).
  Run r = shell(autotune() + "verify '" + desc + "' --threads 2 --db '" + user + "' --json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  auto j = nlohmann::json::parse(r.out);
  REQUIRE(j.size() == 2);  // one-shot and Plan path
  for (const auto& e : j) {
    CHECK(e["observed_ms"].get<double>() > 0);
    CHECK(e["stored_ms"].get<double>() > 0);
  }
  // A stored time no call can match: the winner is marked (its candidate row flagged noisy)...
  // (The Plan path's winner may be marked too when the machine is busy: the suite ignores load.)
  sql(user, "UPDATE winners SET min_ms = 1e-9, median_ms = 1e-9 WHERE path = 'oneshot'");
  r = shell(autotune() + "verify '" + desc + "' --threads 2 --db '" + user + "' --json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  j = nlohmann::json::parse(r.out);
  REQUIRE(j.size() == 2);
  CHECK(j[0]["path"] == "oneshot");
  CHECK(j[0]["marked"] == true);
  auto db = conv::PerfDb::open(user);
  const auto w = db.lookup(fp, p3x3.key());
  REQUIRE(w);
  std::set<std::string> flagged;
  for (const auto& c : db.candidates(fp, p3x3.key()))
    if (c.quality.noisy && c.message.find("verify: observed") != std::string::npos)
      flagged.insert(c.algo_id + " " + c.config);
  CHECK(flagged.count(w->algo_id + " " + w->config) == 1);
  // ...and the next tune without --force measures exactly the marked candidates again.
  auto o = quick_tune();
  o.measured = db.candidates(fp, p3x3.key());
  const auto again = conv::tune(p3x3, o);
  for (const auto& c : again.candidates) {
    if (c.status != conv::CandidateStatus::ok) continue;
    INFO(c.algo_id << " " << c.config);
    CHECK(c.from_perfdb == (flagged.count(c.algo_id + " " + c.config) == 0));
  }
}
