// conv::PerfDb: round trips, isolation, ordering, merge, refusal of files that are not perfdbs,
// schema versions and migrations, read-only use, and several processes (concurrent or killed)
// writing one file.
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "conv/perfdb.hpp"
#include "conv/problem.hpp"
#include "schema.hpp"

namespace fs = std::filesystem;
using conv::ExecPath;
using conv::PerfCandidate;
using conv::PerfDb;
using conv::PerfWinner;

namespace {

// A fresh directory under the system temp dir, removed (permissions restored first) at scope end.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    std::random_device rd;
    path_ = fs::temp_directory_path() / ("convtune-perfdb-test-" + std::to_string(getpid()) + "-" +
                                         std::to_string(counter++) + "-" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    for (auto it = fs::recursive_directory_iterator(path_, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec))
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

// Direct SQLite access, to build and inspect files the way another program (or another version
// of convtune) would.
class RawDb {
 public:
  explicit RawDb(const std::string& path, int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) {
    if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK)
      throw std::runtime_error("sqlite3_open_v2 " + path + ": " + sqlite3_errmsg(db_));
    sqlite3_busy_timeout(db_, 30000);
  }
  ~RawDb() { sqlite3_close_v2(db_); }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;
  void exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "?";
      sqlite3_free(err);
      throw std::runtime_error(sql + ": " + msg);
    }
  }
  // The first column of every result row, as text.
  std::vector<std::string> column(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK)
      throw std::runtime_error(sql + ": " + sqlite3_errmsg(db_));
    std::vector<std::string> out;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      const auto* t = sqlite3_column_text(s, 0);
      out.push_back(t ? reinterpret_cast<const char*>(t) : "NULL");
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) throw std::runtime_error(sql + ": " + sqlite3_errmsg(db_));
    return out;
  }
  std::string value(const std::string& sql) {
    auto c = column(sql);
    return c.empty() ? "" : c[0];
  }
  sqlite3* get() const { return db_; }

 private:
  sqlite3* db_ = nullptr;
};

PerfCandidate candidate(const std::string& algo, const std::string& config, double median_ms,
                        const std::string& status = "ok") {
  PerfCandidate c;
  c.algo_id = algo;
  c.config = config;
  c.status = conv::parse_candidate_status(status).value();
  c.median_ms = median_ms;
  c.min_ms = median_ms >= 0 ? 0.9 * median_ms : -1;
  c.max_ms = median_ms >= 0 ? 1.3 * median_ms : -1;
  c.packed_median_ms = median_ms >= 0 ? 0.8 * median_ms : -1;
  c.packed_min_ms = median_ms >= 0 ? 0.7 * median_ms : -1;
  c.max_error = median_ms >= 0 ? 1.5e-7 : -1;
  if (median_ms >= 0) c.quality = {5, 4, 0.0125, status == "ok" && median_ms > 2};
  c.workspace_bytes = 4096;
  c.message = status == "ok" ? "" : "error 3e-2 above bound 1e-4";
  return c;
}

PerfWinner winner(const std::string& algo, const std::string& config, double ms,
                  const std::string& date = "", const std::string& version = "") {
  PerfWinner w;
  w.algo_id = algo;
  w.config = config;
  w.median_ms = ms;
  w.min_ms = 0.96875 * ms;
  w.quality = {7, 6, 0.03125, ms > 2};
  w.date = date;
  w.version = version;
  return w;
}

// Runs `body` in a forked child and returns its exit status (0 = success). The child never
// returns into Catch2; any exception becomes exit status 99 with the message on stderr.
int in_child(const std::function<int()>& body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    int rc = 98;
    try {
      rc = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child %d: %s\n", getpid(), e.what());
      rc = 99;
    }
    std::fflush(nullptr);
    _exit(rc);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static_assert(!std::is_copy_constructible_v<PerfDb> && !std::is_copy_assignable_v<PerfDb>);
static_assert(std::is_nothrow_move_constructible_v<PerfDb> &&
              std::is_nothrow_move_assignable_v<PerfDb>);

const std::string kFp = "cpu: Test CPU @ 3.0GHz | avx2 fma | 8 threads";
const std::string kFp2 = "cpu: Test CPU @ 3.0GHz | avx2 fma | 4 threads";

// Problem keys as ConvProblem::key() writes them: store() refuses any other key text, and
// merge(), rows() and integrity_check() report it as a row convtune never writes.
std::string problem_key(int64_t i) {
  return conv::parse_descriptor("mb1ic" + std::to_string(i) + "ih8oc4kh3").key();
}

// The key of a test's row called `name`: distinct names, distinct keys (44 bits of FNV-1a as
// the channel counts of a 1x1 kernel, whose weights stay within validate()'s 2^48 bytes).
std::string K(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const unsigned char c : name) h = (h ^ c) * 0x100000001b3ULL;
  const int64_t ic = static_cast<int64_t>(h & 0x3fffff) + 1;
  const int64_t oc = static_cast<int64_t>((h >> 22) & 0x3fffff) + 1;
  return conv::parse_descriptor("mb1ic" + std::to_string(ic) + "ih8oc" + std::to_string(oc) + "kh1")
      .key();
}

const std::regex kIsoDate(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)");

void require_same(const PerfCandidate& a, const PerfCandidate& b) {
  CHECK(a.algo_id == b.algo_id);
  CHECK(a.config == b.config);
  CHECK(a.status == b.status);
  CHECK(a.median_ms == b.median_ms);
  CHECK(a.min_ms == b.min_ms);
  CHECK(a.max_ms == b.max_ms);
  CHECK(a.packed_median_ms == b.packed_median_ms);
  CHECK(a.packed_min_ms == b.packed_min_ms);
  CHECK(a.max_error == b.max_error);
  CHECK(a.workspace_bytes == b.workspace_bytes);
  CHECK(a.message == b.message);
  CHECK(a.quality.rounds == b.quality.rounds);
  CHECK(a.quality.clean_rounds == b.quality.clean_rounds);
  CHECK(a.quality.spread == b.quality.spread);
  CHECK(a.quality.noisy == b.quality.noisy);
}

void require_same(const PerfWinner& a, const PerfWinner& b) {
  CHECK(a.algo_id == b.algo_id);
  CHECK(a.config == b.config);
  CHECK(a.median_ms == b.median_ms);
  CHECK(a.min_ms == b.min_ms);
  CHECK(a.quality.rounds == b.quality.rounds);
  CHECK(a.quality.clean_rounds == b.quality.clean_rounds);
  CHECK(a.quality.spread == b.quality.spread);
  CHECK(a.quality.noisy == b.quality.noisy);
}

// Requires that `fn` throws conv::Error whose message contains every one of `parts`.
void require_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    FAIL("no conv::Error thrown; expected one containing \"" << parts.front() << "\"");
  } catch (const conv::Error& e) {
    INFO(e.what());
    for (const auto& p : parts) CHECK(std::string(e.what()).find(p) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("perfdb: store and lookup round-trip every field, for both execution paths") {
  TempDir dir;
  const std::string path = dir.file("sub/dir/perfdb.sqlite");  // parent dirs do not exist yet
  auto db = PerfDb::open(path);
  CHECK(db.path() == path);
  CHECK_FALSE(db.read_only());
  CHECK(fs::exists(path));

  std::vector<PerfCandidate> cands = {
      candidate("cpu.im2col_gemm", "default", 1.25),
      candidate("cpu.winograd", "m4", 0.75),
      candidate("cpu.fft", "tile16", 2.5, "rejected"),
      candidate("cpu.direct", "oc8ow6", -1, "skipped"),
  };
  cands[3].message = "budget exhausted";
  cands[3].workspace_bytes = 0;
  cands[1].workspace_bytes = 123456789012.0;  // above 2^32: no truncation to 32 bits
  const PerfWinner one = winner("cpu.winograd", "m4", 0.75, "2024-03-01T10:00:00Z", "0.0.9");
  PerfWinner packed = winner("cpu.im2col_gemm", "default", 2.5);
  packed.quality.spread = -1;  // unknown
  cands[0].quality = {20, 0, -1, true};
  db.store(kFp, K("g1mb1ic64ih56oc64oh56kh3ph1"), cands, &one, &packed);

  auto got1 = db.lookup(kFp, K("g1mb1ic64ih56oc64oh56kh3ph1"), ExecPath::oneshot);
  REQUIRE(got1);
  CHECK(got1->algo_id == "cpu.winograd");
  CHECK(got1->config == "m4");
  CHECK(got1->median_ms == 0.75);
  CHECK(got1->date == "2024-03-01T10:00:00Z");  // a given date and version are kept
  CHECK(got1->version == "0.0.9");
  require_same(*got1, one);

  auto got2 = db.lookup(kFp, K("g1mb1ic64ih56oc64oh56kh3ph1"), ExecPath::packed);
  REQUIRE(got2);
  CHECK(got2->algo_id == "cpu.im2col_gemm");
  CHECK(got2->config == "default");
  require_same(*got2, packed);
  CHECK(std::regex_match(got2->date, kIsoDate));  // empty date = now
  CHECK_FALSE(got2->version.empty());             // empty version = this build's

  // Reopened (a new connection), every candidate field comes back exactly.
  db = PerfDb::open(path, true);
  auto back = db.candidates(kFp, K("g1mb1ic64ih56oc64oh56kh3ph1"));
  REQUIRE(back.size() == 4);
  const int order[] = {1, 0, 2, 3};  // by one-shot median, unmeasured last
  for (int i = 0; i < 4; ++i) {
    INFO("candidate " << i);
    require_same(back[i], cands[order[i]]);
    CHECK(std::regex_match(back[i].date, kIsoDate));
  }
  CHECK(std::string(conv::to_string(ExecPath::oneshot)) == "oneshot");
  CHECK(std::string(conv::to_string(ExecPath::packed)) == "packed");
  CHECK(PerfDb::schema_version() == conv::perfdb_detail::migrations().back().version);
}

TEST_CASE("perfdb: lookups are exact on fingerprint, key and path") {
  TempDir dir;
  auto db = PerfDb::open(dir.file("perfdb.sqlite"));
  const PerfWinner w = winner("cpu.direct", "oc8ow6", 3.0);
  db.store(kFp, K("key1"), {candidate("cpu.direct", "oc8ow6", 3.0)}, &w, nullptr);

  CHECK(db.lookup(kFp, K("key1")));
  CHECK_FALSE(db.lookup(kFp2, K("key1")));                   // another device
  CHECK_FALSE(db.lookup(kFp + " ", K("key1")));              // no normalisation or prefix match
  CHECK_FALSE(db.lookup(kFp.substr(0, 10), K("key1")));      // no prefix match
  CHECK_FALSE(db.lookup(kFp, K("key10")));                   // another problem
  CHECK_FALSE(db.lookup(kFp, K("key")));                     //
  CHECK_FALSE(db.lookup(kFp, K("key1"), ExecPath::packed));  // the other path was never stored
  CHECK(db.winners(kFp2).empty());
  CHECK(db.candidates(kFp2, K("key1")).empty());
  CHECK(db.candidates(kFp, K("key10")).empty());

  // A second device's winner for the same key does not disturb the first.
  const PerfWinner w2 = winner("cpu.onednn", "default", 1.0);
  db.store(kFp2, K("key1"), {}, &w2, &w2);
  CHECK(db.lookup(kFp, K("key1"))->algo_id == "cpu.direct");
  CHECK(db.lookup(kFp2, K("key1"))->algo_id == "cpu.onednn");
  CHECK(db.winners(kFp).size() == 1);
  CHECK(db.winners(kFp2).size() == 2);
}

TEST_CASE("perfdb: storing again replaces the winner and re-measured candidates only") {
  TempDir dir;
  auto db = PerfDb::open(dir.file("perfdb.sqlite"));
  const PerfWinner a = winner("cpu.direct", "oc8ow6", 3.0);
  const PerfWinner p = winner("cpu.direct", "oc4ow12", 2.0);
  db.store(kFp, K("k"),
           {candidate("cpu.direct", "oc8ow6", 3.0), candidate("cpu.fft", "tile16", 5.0)}, &a, &p);

  const PerfWinner b = winner("cpu.winograd", "m2", 1.0);
  db.store(kFp, K("k"),
           {candidate("cpu.direct", "oc8ow6", 4.0), candidate("cpu.winograd", "m2", 1.0)}, &b,
           nullptr);  // no packed winner: the stored one stays

  CHECK(db.lookup(kFp, K("k"))->algo_id == "cpu.winograd");
  CHECK(db.lookup(kFp, K("k"))->median_ms == 1.0);
  CHECK(db.lookup(kFp, K("k"), ExecPath::packed)->config == "oc4ow12");
  auto c = db.candidates(kFp, K("k"));
  REQUIRE(c.size() == 3);
  CHECK(c[0].algo_id == "cpu.winograd");
  CHECK(c[1].algo_id == "cpu.direct");
  CHECK(c[1].median_ms == 4.0);  // re-measured value replaced the old one
  CHECK(c[2].algo_id == "cpu.fft");
  CHECK(db.winners(kFp).size() == 2);
}

TEST_CASE("perfdb: candidates() orders by one-shot median, unmeasured last, ties by id") {
  TempDir dir;
  auto db = PerfDb::open(dir.file("perfdb.sqlite"));
  db.store(kFp, K("k"),
           {candidate("z.algo", "c", -1, "failed"), candidate("b.algo", "c2", 2.0),
            candidate("b.algo", "c1", 2.0), candidate("a.algo", "c", 7.5),
            candidate("a.algo", "d", 0.125), candidate("c.algo", "c", -1, "skipped")},
           nullptr, nullptr);
  std::vector<std::string> got;
  for (const auto& c : db.candidates(kFp, K("k"))) got.push_back(c.algo_id + "/" + c.config);
  CHECK(got == std::vector<std::string>{"a.algo/d", "b.algo/c1", "b.algo/c2", "a.algo/c",
                                        "c.algo/c", "z.algo/c"});
  CHECK_FALSE(db.lookup(kFp, K("k")));  // candidates alone store no winner
}

TEST_CASE("perfdb: winners() lists every key and path of one fingerprint, ordered") {
  TempDir dir;
  auto db = PerfDb::open(dir.file("perfdb.sqlite"));
  const std::string k1 = problem_key(1), k2 = problem_key(2), k3 = problem_key(3);
  REQUIRE((k1 < k2 && k2 < k3));
  for (const std::string& key : {k2, k1, k3}) {
    const PerfWinner w = winner("cpu.direct", key, 1.0);
    db.store(kFp, key, {}, &w, key == k3 ? nullptr : &w);
    db.store(kFp2, K(key + "_other"), {}, &w, nullptr);
  }
  auto list = db.winners(kFp);
  REQUIRE(list.size() == 5);
  std::vector<std::string> got;
  for (const auto& e : list) {
    got.push_back(e.key + ":" + conv::to_string(e.path));
    CHECK(e.winner.config == e.key);
  }
  CHECK(got == std::vector<std::string>{k1 + ":oneshot", k1 + ":packed", k2 + ":oneshot",
                                        k2 + ":packed", k3 + ":oneshot"});
  CHECK(db.winners("no such device").empty());
}

TEST_CASE("perfdb: merge copies another perfdb's rows, the newer date winning") {
  TempDir dir;
  const std::string kShared = problem_key(1), kANewer = problem_key(2), kOnlyA = problem_key(3),
                    kOnlyB = problem_key(4);
  auto a = PerfDb::open(dir.file("a.sqlite"));
  auto b = PerfDb::open(dir.file("b.sqlite"));
  const PerfWinner old_w = winner("cpu.direct", "x", 5.0, "2024-01-01T00:00:00Z");
  const PerfWinner new_w = winner("cpu.winograd", "m4", 1.0, "2024-06-01T00:00:00Z");
  auto cand = [](const std::string& algo, double ms, const std::string& date) {
    PerfCandidate c = candidate(algo, "c", ms);
    c.date = date;
    return c;
  };
  // shared: a has the older winner, b the newer. a_newer: a has the newer one.
  a.store(kFp, kShared, {cand("cpu.direct", 5.0, "2024-01-01T00:00:00Z")}, &old_w, nullptr);
  b.store(kFp, kShared, {cand("cpu.direct", 4.0, "2024-06-01T00:00:00Z")}, &new_w, &new_w);
  a.store(kFp, kANewer, {}, &new_w, nullptr);
  b.store(kFp, kANewer, {}, &old_w, nullptr);
  a.store(kFp, kOnlyA, {}, &old_w, nullptr);
  b.store(kFp2, kOnlyB, {cand("cpu.fft", 2.0, "2024-02-01T00:00:00Z")}, &old_w, nullptr);

  // Changed: shared oneshot + packed (new), shared candidate, only_b winner + candidate.
  CHECK(a.merge(b.path()) == 5);
  CHECK(a.lookup(kFp, kShared)->algo_id == "cpu.winograd");
  CHECK(a.lookup(kFp, kShared, ExecPath::packed)->algo_id == "cpu.winograd");
  CHECK(a.candidates(kFp, kShared).at(0).median_ms == 4.0);
  CHECK(a.lookup(kFp, kANewer)->algo_id == "cpu.winograd");  // kept: a's is newer
  CHECK(a.lookup(kFp, kOnlyA)->algo_id == "cpu.direct");
  CHECK(a.lookup(kFp2, kOnlyB)->algo_id == "cpu.direct");
  CHECK(a.candidates(kFp2, kOnlyB).size() == 1);
  CHECK(b.lookup(kFp, kOnlyA) == std::nullopt);  // the source is not modified

  CHECK(a.merge(b.path()) == 0);  // idempotent
  CHECK(a.merge(a.path()) == 0);  // itself: nothing newer

  require_error([&] { a.merge(dir.file("missing.sqlite")); }, {"no such file"});
  write_bytes(dir.file("text.txt"), "hello\n");
  require_error([&] { a.merge(dir.file("text.txt")); }, {"not a convtune perf database"});
  auto ro = PerfDb::open(a.path(), true);
  require_error([&] { ro.merge(b.path()); }, {"read-only"});
}

TEST_CASE("perfdb: a new file is a WAL database marked with convtune's application_id") {
  TempDir dir;
  const std::string path = dir.file("new.sqlite");
  { auto db = PerfDb::open(path); }
  RawDb raw(path);
  CHECK(raw.value("PRAGMA application_id") == std::to_string(conv::perfdb_detail::kApplicationId));
  CHECK(raw.value("PRAGMA user_version") == std::to_string(PerfDb::schema_version()));
  CHECK(raw.value("PRAGMA journal_mode") == "wal");
  CHECK(raw.value("SELECT value FROM meta WHERE name = 'format'") == "convtune perf database");
  CHECK(raw.column("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name") ==
        std::vector<std::string>{"candidates", "meta", "winners"});
}

TEST_CASE("perfdb: an empty (0-byte) file is a new, empty database") {
  TempDir dir;
  const std::string path = dir.file("empty.sqlite");
  write_bytes(path, "");
  {
    auto ro = PerfDb::open(path, true);  // nothing to read, nothing written
    CHECK_FALSE(ro.lookup(kFp, K("k")));
    CHECK(ro.winners(kFp).empty());
    CHECK(ro.candidates(kFp, K("k")).empty());
    const PerfWinner w = winner("cpu.direct", "c", 1.0);
    require_error([&] { ro.store(kFp, K("k"), {}, &w, nullptr); }, {"read-only"});
  }
  CHECK(fs::file_size(path) == 0);
  auto db = PerfDb::open(path);
  const PerfWinner w = winner("cpu.direct", "c", 1.0);
  db.store(kFp, K("k"), {}, &w, nullptr);
  CHECK(db.lookup(kFp, K("k")));
}

TEST_CASE("perfdb: files that are not convtune perf databases are refused clearly") {
  TempDir dir;
  // The C library stops at a NUL: "a.sqlite\0junk" had opened a.sqlite.
  CHECK_THROWS_WITH(PerfDb::open(dir.file("a.sqlite") + std::string("\0junk", 5)),
                    Catch::Contains("path: contains a NUL byte at"));
  CHECK_FALSE(fs::exists(dir.file("a.sqlite")));
  // Kernel interface files read as size 0, which SQLite takes for an empty database.
  for (const char* proc : {"/proc/self/status", "/proc/cpuinfo"})
    CHECK_THROWS_WITH(PerfDb::open(proc, true), Catch::Contains("a kernel interface file"));
  // Symbolic links to nothing: the message names the link (it had blamed the directory's
  // permissions, or said "File exists").
  fs::create_symlink("/nonexistent-convtune/file.sqlite", dir.file("d.sqlite"));
  CHECK_THROWS_WITH(
      PerfDb::open(dir.file("d.sqlite")),
      Catch::Contains("d.sqlite is a symbolic link to /nonexistent-convtune/file.sqlite, "
                      "which does not exist"));
  fs::create_symlink("/nonexistent-convtune/dir", dir.file("ddir"));
  CHECK_THROWS_WITH(
      PerfDb::open(dir.file("ddir") + "/x.sqlite"),
      Catch::Contains("ddir is a symbolic link to /nonexistent-convtune/dir, which does "
                      "not exist"));
  std::mt19937 rng(7);
  auto random_bytes = [&](size_t n) {
    std::string s(n, '\0');
    for (auto& ch : s) ch = static_cast<char>(rng());
    return s;
  };

  // A valid perfdb of several pages, closed cleanly (WAL checkpointed into the main file), to
  // cut short.
  const std::string good = dir.file("good.sqlite");
  {
    auto db = PerfDb::open(good);
    std::vector<PerfCandidate> cands;
    for (int i = 0; i < 40; ++i) cands.push_back(candidate("cpu.algo" + std::to_string(i), "c", i));
    for (int k = 0; k < 40; ++k) {
      const PerfWinner w = winner("cpu.algo1", "c", 1.0);
      db.store(kFp, K("key" + std::to_string(k)), cands, &w, &w);
    }
  }
  const std::string good_bytes = read_bytes(good);
  REQUIRE(good_bytes.size() > 16 * 4096);

  std::vector<std::pair<std::string, std::string>> files = {
      {"random_small", random_bytes(100)},
      {"random_page", random_bytes(4096)},
      {"random_large", random_bytes(200000)},
      {"text", "fingerprint,key,algo\ncpu,g1mb1ic3,cpu.direct\n"},
      {"sqlite_header_then_garbage", "SQLite format 3" + std::string(1, '\0') + random_bytes(8000)},
      {"truncated_to_header", good_bytes.substr(0, 100)},
      {"truncated_to_first_page", good_bytes.substr(0, 4096)},
      {"truncated_to_half", good_bytes.substr(0, good_bytes.size() / 2)},
      {"truncated_mid_page", good_bytes.substr(0, good_bytes.size() - 5000)},
  };
  for (const auto& [name, bytes] : files) {
    const std::string path = dir.file(name);
    write_bytes(path, bytes);
    for (const bool read_only : {true, false}) {
      INFO(name << (read_only ? " (read-only open)" : " (writer open)"));
      require_error([&] { PerfDb::open(path, read_only); },
                    {"perfdb: " + path + ": not a convtune perf database ("});
      CHECK(read_bytes(path) == bytes);  // a refused file is left untouched
    }
  }

  // Damage inside pages that no query of open() reads: PRAGMA integrity_check finds it at open.
  std::string holed = good_bytes;
  std::fill(holed.begin() + 5 * 4096, holed.begin() + 9 * 4096, '\0');
  std::string scribbled = good_bytes;
  for (int i = 0; i < 8; ++i) scribbled[19 * 4096 + i] = "\x07garbage"[i];  // page 20's header
  for (const auto& [name, bytes] :
       {std::make_pair("zeroed_pages", holed), std::make_pair("scribbled_page", scribbled)}) {
    const std::string path = dir.file(name);
    write_bytes(path, bytes);
    for (const bool read_only : {true, false}) {
      INFO(name << (read_only ? " (read-only open)" : " (writer open)"));
      require_error(
          [&] { PerfDb::open(path, read_only); },
          {"perfdb: " + path + ": not a convtune perf database (damaged: integrity_check"});
      CHECK(read_bytes(path) == bytes);
    }
  }

  // Another application's SQLite file, with its own tables (and one that also uses
  // application_id), is refused and not converted to WAL.
  const std::string foreign = dir.file("foreign.sqlite");
  {
    RawDb raw(foreign);
    raw.exec(
        "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users VALUES(1,'x')");
  }
  const std::string foreign2 = dir.file("foreign2.sqlite");
  {
    RawDb raw(foreign2);
    raw.exec("PRAGMA application_id = 1234; PRAGMA user_version = 3; CREATE TABLE winners(x)");
  }
  for (const bool read_only : {true, false}) {
    require_error([&] { PerfDb::open(foreign, read_only); },
                  {"perfdb: " + foreign + ": not a convtune perf database (", "users"});
    require_error([&] { PerfDb::open(foreign2, read_only); },
                  {"not a convtune perf database (", "application_id 0x000004d2"});
  }
  CHECK(RawDb(foreign).value("PRAGMA journal_mode") == "delete");
  CHECK(RawDb(foreign).value("SELECT name FROM users") == "x");

  // Our application_id but not our tables (edited by hand): refused, not "repaired".
  const std::string gutted = dir.file("gutted.sqlite");
  { PerfDb::open(gutted); }
  RawDb(gutted).exec("DROP TABLE candidates");
  require_error([&] { PerfDb::open(gutted); },
                {"not a convtune perf database (", "without table candidates"});

  // A directory where the file should be.
  require_error([&] { PerfDb::open(dir.path().string()); }, {"is a directory"});
}

TEST_CASE("perfdb: a file of a newer schema version is refused, with both versions named") {
  TempDir dir;
  const std::string path = dir.file("newer.sqlite");
  {
    auto db = PerfDb::open(path);
    const PerfWinner w = winner("cpu.direct", "c", 1.0);
    db.store(kFp, K("k"), {}, &w, nullptr);
  }
  RawDb(path).exec("PRAGMA user_version = 99");
  const std::string msg = "written by a newer convtune (schema 99, this build reads up to " +
                          std::to_string(PerfDb::schema_version()) + ")";
  require_error([&] { PerfDb::open(path); }, {"perfdb: " + path + ": ", msg});
  require_error([&] { PerfDb::open(path, true); }, {msg});
  CHECK(RawDb(path).value("PRAGMA user_version") == "99");  // not touched
}

TEST_CASE("perfdb: migrations run in order, once, all or nothing") {
  using conv::perfdb_detail::migrate;
  using conv::perfdb_detail::Migration;
  TempDir dir;
  const auto& real = conv::perfdb_detail::migrations();
  REQUIRE(real.size() == static_cast<size_t>(PerfDb::schema_version()));
  for (size_t i = 0; i < real.size(); ++i) CHECK(real[i].version == static_cast<int>(i) + 1);

  // A current file with data, migrated by a (simulated) later build with one more step.
  const std::string path = dir.file("v1.sqlite");
  {
    auto db = PerfDb::open(path);
    const PerfWinner w = winner("cpu.direct", "c", 1.0);
    db.store(kFp, K("k"), {candidate("cpu.direct", "c", 1.0)}, &w, nullptr);
  }
  std::vector<Migration> later = real;
  const int next = PerfDb::schema_version() + 1;
  later.push_back({next, "test: winners.note",
                   "ALTER TABLE winners ADD COLUMN note TEXT NOT NULL DEFAULT 'migrated'"});
  {
    RawDb raw(path);
    CHECK(migrate(raw.get(), path, later) == PerfDb::schema_version());
    CHECK(raw.value("PRAGMA user_version") == std::to_string(next));
    CHECK(raw.value("SELECT note FROM winners") == "migrated");
    CHECK(raw.value("SELECT algo FROM winners") == "cpu.direct");  // data kept
    CHECK(migrate(raw.get(), path, later) == next);                // a second run does nothing
  }
  // This build cannot read what the later build wrote.
  require_error([&] { PerfDb::open(path, true); }, {"written by a newer convtune"});

  // A failing step leaves the file exactly at its old version: the step's first statement,
  // which succeeded, is rolled back too.
  const std::string path2 = dir.file("v1b.sqlite");
  { PerfDb::open(path2); }
  std::vector<Migration> broken = real;
  broken.push_back({next, "test: broken step", "CREATE TABLE extra(x); CREATE TABLE winners(x);"});
  {
    RawDb raw(path2);
    require_error([&] { migrate(raw.get(), path2, broken); },
                  {"migration to schema " + std::to_string(next), "test: broken step",
                   "file left at schema " + std::to_string(PerfDb::schema_version())});
    CHECK(raw.value("PRAGMA user_version") == std::to_string(PerfDb::schema_version()));
    CHECK(raw.value("SELECT count(*) FROM sqlite_master WHERE name = 'extra'") == "0");
  }
  auto db2 = PerfDb::open(path2);  // still a good current perfdb
  CHECK(db2.winners(kFp).empty());

  // A file marked as ours at schema 0 (older than anything readable): a reader cannot migrate,
  // a writer brings it forward.
  const std::string path0 = dir.file("v0.sqlite");
  RawDb(path0).exec("PRAGMA application_id = " +
                    std::to_string(conv::perfdb_detail::kApplicationId));
  require_error([&] { PerfDb::open(path0, true); },
                {"schema 0 is older than this build reads", "without read_only"});
  {
    auto db = PerfDb::open(path0);
    const PerfWinner w = winner("cpu.direct", "c", 1.0);
    db.store(kFp, K("k"), {}, &w, nullptr);
  }
  CHECK(RawDb(path0).value("PRAGMA user_version") == std::to_string(PerfDb::schema_version()));
  CHECK(PerfDb::open(path0, true).lookup(kFp, K("k")));
}

TEST_CASE("perfdb: schema-1 files (no measurement quality) stay readable, mergeable, migratable") {
  using conv::perfdb_detail::migrate;
  TempDir dir;
  const std::string v1 = dir.file("v1.sqlite");
  {
    RawDb raw(v1);
    raw.exec("PRAGMA journal_mode = WAL");
    migrate(raw.get(), v1, {conv::perfdb_detail::migrations().front()});
    raw.exec("INSERT INTO winners VALUES ('" + kFp + "', '" + problem_key(1) +
             "', 'oneshot', 'cpu.direct', 'c', 1.5, '2024-01-01T00:00:00Z', '0.1.0');"
             "INSERT INTO candidates VALUES ('" +
             kFp + "', '" + problem_key(1) +
             "', 'cpu.direct', 'c', 'ok', 1.5, 1.25, 2.0, NULL, 1e-7, 0, '', "
             "'2024-01-01T00:00:00Z', '0.1.0')");
  }
  REQUIRE(RawDb(v1).value("PRAGMA user_version") == "1");
  // Measured before timing modes, the rows were timed hot: migration 4 (and merge, reading an
  // older file) puts that in their fingerprint; a reader of the old file sees them as they are.
  const std::string hot = kFp + "|timing=hot";
  auto check_v1_rows = [](const PerfDb& db, const std::string& fp) {
    const auto w = db.lookup(fp, problem_key(1));
    REQUIRE(w);
    CHECK(w->algo_id == "cpu.direct");
    CHECK(w->median_ms == 1.5);
    CHECK(w->min_ms == -1);         // not recorded by schema 1
    CHECK(w->quality.rounds == 0);  // unknown
    CHECK_FALSE(w->quality.noisy);  // not flagged: unknown is not noisy
    const auto c = db.candidates(fp, problem_key(1));
    REQUIRE(c.size() == 1);
    CHECK(c[0].min_ms == 1.25);
    CHECK(c[0].packed_min_ms == -1);
    CHECK(c[0].quality.rounds == 0);
    CHECK(c[0].quality.spread == -1);
  };
  // A reader cannot migrate: it reads schema 1 as it is, and leaves the file alone.
  check_v1_rows(PerfDb::open(v1, true), kFp);
  CHECK(RawDb(v1).value("PRAGMA user_version") == "1");
  // A current database merges it.
  {
    auto dst = PerfDb::open(dir.file("dst.sqlite"));
    CHECK(dst.merge(v1) == 2);
    check_v1_rows(dst, hot);
    CHECK_FALSE(dst.lookup(kFp, problem_key(1)));
  }
  // A writer migrates it to the current schema, keeping every row.
  {
    auto db = PerfDb::open(v1);
    check_v1_rows(db, hot);
    const PerfWinner w = winner("cpu.fft", "t16", 3.0);
    db.store(kFp, problem_key(2), {candidate("cpu.fft", "t16", 3.0)}, &w, nullptr);
    const auto back = db.lookup(kFp, problem_key(2));
    REQUIRE(back);
    require_same(*back, w);
  }
  CHECK(RawDb(v1).value("PRAGMA user_version") == std::to_string(PerfDb::schema_version()));
}

// Files that declare themselves convtune perf databases (application_id, user_version, our
// tables) but carry something SQLite would run while we read them: each is refused at open,
// before any query or check could run it.
TEST_CASE("perfdb: hostile files posing as perf databases are refused before anything runs") {
  TempDir dir;
  const auto& steps = conv::perfdb_detail::migrations();
  // Our schema with `edit` applied to the first migration's SQL, plus `extra` statements.
  auto craft = [&](const std::string& name, const std::string& from, const std::string& to,
                   const std::string& extra) {
    const std::string path = dir.file(name);
    RawDb raw(path);
    std::string v1 = steps[0].sql;
    if (!from.empty()) {
      const size_t at = v1.find(from);
      REQUIRE(at != std::string::npos);
      v1.replace(at, from.size(), to);
    }
    raw.exec(v1);
    for (size_t i = 1; i < steps.size(); ++i) raw.exec(steps[i].sql);
    raw.exec(extra);
    raw.exec("PRAGMA application_id = " + std::to_string(conv::perfdb_detail::kApplicationId) +
             "; PRAGMA user_version = " + std::to_string(PerfDb::schema_version()));
    return path;
  };
  const std::string winners_end =
      "version     TEXT NOT NULL,\n  PRIMARY KEY (fingerprint, key, path)";
  struct Case {
    std::string file, from, to, extra, expect;
  };
  const Case cases[] = {
      {"trigger.sqlite", "", "",
       "CREATE TRIGGER forever AFTER INSERT ON winners BEGIN SELECT 1; END;",
       "unexpected trigger \"forever\""},
      {"check.sqlite", winners_end,
       "version TEXT NOT NULL CHECK (length(randomblob(100000000)) > 0),\n"
       "  PRIMARY KEY (fingerprint, key, path)",
       "", "table winners not as convtune creates it"},
      {"generated.sqlite", winners_end,
       "version TEXT NOT NULL, huge TEXT GENERATED ALWAYS AS (printf('%.*c', 400000000, 'x')),\n"
       "  PRIMARY KEY (fingerprint, key, path)",
       "", "table winners not as convtune creates it"},
      {"view.sqlite", "", "", "CREATE VIEW everything AS SELECT * FROM winners;",
       "unexpected view \"everything\""},
      {"table.sqlite", "", "", "CREATE TABLE extra(x);", "unexpected table \"extra\""},
      {"index.sqlite", "", "", "CREATE INDEX by_algo ON candidates(algo);",
       "unexpected index \"by_algo\""},
  };
  auto dst = PerfDb::open(dir.file("dst.sqlite"));
  for (const Case& c : cases) {
    INFO(c.file);
    const std::string path = craft(c.file, c.from, c.to, c.extra);
    for (const bool read_only : {true, false})
      require_error([&] { PerfDb::open(path, read_only); },
                    {"perfdb: " + path + ": not a convtune perf database (", c.expect});
    require_error([&] { dst.merge(path); }, {path, c.expect});
  }
  CHECK(dst.winners(kFp).empty());

  // Our schema exactly, but a value far longer than any we write (which no query can read
  // past: SQLITE_TOOBIG): refused at open, as a file that is no perf database of ours, so that
  // the callers that skip unusable system databases skip it, instead of every later lookup
  // failing with an SQL statement in its message.
  for (const std::string table : {"winners", "candidates"}) {
    INFO(table);
    const std::string big = craft("big_" + table + ".sqlite", "", "", "");
    {
      RawDb raw(big);
      raw.exec(table == "winners"
                   ? "INSERT INTO winners (fingerprint, key, path, algo, config, median_ms, date, "
                     "version) VALUES ('" +
                         kFp +
                         "', 'k', 'oneshot', 'a', 'c', 1.0, '2024-01-01T00:00:00Z', "
                         "printf('%.*c', 70000, 'v'))"
                   : "INSERT INTO candidates (fingerprint, key, algo, config, status, date, "
                     "version) VALUES ('" +
                         kFp + "', 'k', 'a', 'c', 'failed', '2024-01-01T00:00:00Z', " +
                         "printf('%.*c', 1000000, 'v'))");
    }
    for (const bool read_only : {true, false})
      require_error([&] { PerfDb::open(big, read_only); },
                    {"perfdb: " + big + ": not a convtune perf database (" + table +
                     " holds a value longer than 64 KiB"});
    require_error([&] { dst.merge(big); }, {big, "longer than 64 KiB"});
  }
  CHECK(dst.winners(kFp).empty());  // nothing half-merged
}

TEST_CASE("perfdb: read-only opens look up but never write") {
  TempDir dir;
  const std::string path = dir.file("ro.sqlite");
  const PerfWinner w = winner("cpu.direct", "c", 1.0);
  { PerfDb::open(path).store(kFp, K("k"), {candidate("cpu.direct", "c", 1.0)}, &w, nullptr); }
  const std::string before = read_bytes(path);
  fs::permissions(path, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);

  auto db = PerfDb::open(path, true);
  CHECK(db.read_only());
  CHECK(db.lookup(kFp, K("k"))->algo_id == "cpu.direct");
  CHECK(db.candidates(kFp, K("k")).size() == 1);
  require_error([&] { db.store(kFp, K("k2"), {}, &w, nullptr); },
                {"perfdb: " + path + ": store: the database was opened read-only"});
  CHECK_FALSE(db.lookup(kFp, K("k2")));
  CHECK(read_bytes(path) == before);

  require_error([&] { PerfDb::open(dir.file("missing.sqlite"), true); },
                {"cannot open read-only: no such file"});
  CHECK_FALSE(fs::exists(dir.file("missing.sqlite")));
}

TEST_CASE("perfdb: file permissions (checked as an unprivileged user)") {
  // Root ignores file modes, so the checks run in a child that drops to "nobody" when root.
  TempDir dir;
  // URI-special characters: the read-only-directory fallback opens the file through a URI.
  const std::string path = dir.file("perm db?mode=rw#1%20.sqlite");
  const PerfWinner w = winner("cpu.direct", "c", 1.0);
  { PerfDb::open(path).store(kFp, K("k"), {}, &w, nullptr); }
  const auto r = fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read;
  const auto rx = r | fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec;
  fs::permissions(path, r);

  auto as_user = [&](const std::function<int()>& body) {
    return in_child([&] {
      if (geteuid() == 0) {
        const passwd* nobody = getpwnam("nobody");
        const uid_t uid = nobody ? nobody->pw_uid : 65534;
        const gid_t gid = nobody ? nobody->pw_gid : 65534;
        if (setgid(gid) != 0 || setuid(uid) != 0) return 90;
      }
      return body();
    });
  };
  auto checks = [&] {
    auto db = PerfDb::open(path, true);
    if (!db.lookup(kFp, K("k"))) return 1;
    try {
      PerfDb::open(path);  // writer open of a file we may not write
      return 2;
    } catch (const conv::Error& e) {
      if (std::string(e.what()).find("perfdb: " + path + ":") != 0) return 3;
    }
    return 0;
  };
  // Read-only file in a writable directory: the reader creates the WAL side files.
  fs::permissions(dir.path(), fs::perms::all);
  CHECK(as_user(checks) == 0);
  fs::remove(path + "-wal");
  fs::remove(path + "-shm");
  // Read-only file in a read-only directory: no side files can be created.
  fs::permissions(dir.path(), rx);
  CHECK(as_user(checks) == 0);
  // A writable file in a read-only directory: a writer cannot create the WAL side files.
  fs::permissions(path, fs::perms::all);
  CHECK(as_user(checks) == 0);
  fs::permissions(dir.path(), fs::perms::owner_all, fs::perm_options::add);
  // A writer cannot create a database in a read-only directory.
  const std::string sub = dir.file("ro_dir");
  fs::create_directories(sub);
  fs::permissions(sub, rx);
  CHECK(as_user([&] {
          try {
            PerfDb::open(sub + "/x/perfdb.sqlite");
            return 1;
          } catch (const conv::Error& e) {
            return std::string(e.what()).find("cannot create directory") != std::string::npos ? 0
                                                                                              : 2;
          }
        }) == 0);
}

TEST_CASE("perfdb: relative paths \"file:...\" and \":memory:\" are file names") {
  // Not a URI, nor SQLite's in-memory database, which had lost every stored result.
  TempDir dir;
  const fs::path cwd = fs::current_path();
  fs::current_path(dir.path());
  try {
    const PerfWinner w = winner("cpu.direct", "c", 1.0);
    for (const std::string name : {"file:odd?mode=ro.sqlite", ":memory:"}) {
      INFO(name);
      PerfDb::open(name).store(kFp, K("k"), {}, &w, nullptr);
      CHECK(fs::exists(dir.path() / name));
      CHECK(PerfDb::open(name, true).lookup(kFp, K("k")));
    }
  } catch (...) {
    fs::current_path(cwd);
    throw;
  }
  fs::current_path(cwd);
}

TEST_CASE("perfdb: bad arguments and moved-from objects throw conv::Error") {
  TempDir dir;
  auto db = PerfDb::open(dir.file("args.sqlite"));
  const PerfWinner w = winner("cpu.direct", "c", 1.0);
  const PerfWinner nameless = winner("", "c", 1.0);
  require_error([&] { db.store("", "k", {}, &w, nullptr); }, {"fingerprint"});
  require_error([&] { db.store(kFp, "", {}, &w, nullptr); }, {"key"});
  // What the readers would refuse is not written (it was, and then check, merge and export
  // refused the file): a key that is no problem's canonical key, an "ok" candidate without a
  // time, times out of order, a control character in the fingerprint.
  PerfCandidate untimed = candidate("cpu.direct", "c", 1.0), unordered = untimed;
  untimed.median_ms = -1;
  unordered.min_ms = 2.0;
  PerfWinner slow_min = w;
  slow_min.min_ms = 2 * w.median_ms + 1;
  require_error([&] { db.store(kFp, "k", {}, &w, nullptr); },
                {"PerfDb::store: key: not the key of a problem"});
  require_error([&] { db.store(kFp, "mb1ic3ih8oc4kh3", {}, &w, nullptr); },
                {"PerfDb::store: key: not the canonical key"});
  require_error([&] { db.store(kFp, K("k"), {untimed}, &w, nullptr); },
                {"PerfDb::store: candidates[0].median_ms: an ok candidate has a time"});
  require_error([&] { db.store(kFp, K("k"), {unordered}, &w, nullptr); },
                {"PerfDb::store: candidates[0]: expected min_ms <= median_ms <= max_ms"});
  require_error([&] { db.store(kFp, K("k"), {}, nullptr, &slow_min); },
                {"PerfDb::store: packed_winner.min_ms"});
  require_error([&] { db.store("cpu|\n|x", K("k"), {}, &w, nullptr); },
                {"PerfDb::store: fingerprint: control character"});
  CHECK_FALSE(db.lookup(kFp, K("k")));
  CHECK(db.candidates(kFp, K("k")).empty());
  require_error(
      [&] {
        db.store(kFp, K("k"), {candidate("x", "c", 1), candidate("", "c", 1)}, &w, nullptr);
      },
      {"candidates[1].algo_id"});
  require_error([&] { db.store(kFp, K("k"), {}, nullptr, &nameless); }, {"packed_winner.algo_id"});
  CHECK(db.winners(kFp).empty());  // nothing half-stored
  require_error([] { PerfDb::open(""); }, {"path"});

  PerfDb moved = std::move(db);
  moved.store(kFp, K("k"), {}, &w, nullptr);
  CHECK(moved.lookup(kFp, K("k")));
  require_error([&] { db.lookup(kFp, K("k")); }, {"moved"});  // NOLINT(bugprone-use-after-move)
}

TEST_CASE("perfdb: default_path follows CONVTUNE_PERFDB, XDG_CACHE_HOME, HOME") {
  struct Saved {
    std::string name;
    bool set;
    std::string value;
  };
  std::vector<Saved> saved;
  for (const char* n : {"CONVTUNE_PERFDB", "XDG_CACHE_HOME", "HOME"}) {
    const char* v = std::getenv(n);
    saved.push_back({n, v != nullptr, v ? v : ""});
  }
  setenv("CONVTUNE_PERFDB", "/x/my.sqlite", 1);
  setenv("XDG_CACHE_HOME", "/cache", 1);
  setenv("HOME", "/home/u", 1);
  CHECK(PerfDb::default_path() == "/x/my.sqlite");
  setenv("CONVTUNE_PERFDB", "", 1);
  CHECK(PerfDb::default_path() == "/cache/convtune/perfdb.sqlite");
  setenv("XDG_CACHE_HOME", "relative/cache", 1);  // invalid per the XDG spec: ignored
  CHECK(PerfDb::default_path() == "/home/u/.cache/convtune/perfdb.sqlite");
  unsetenv("XDG_CACHE_HOME");
  CHECK(PerfDb::default_path() == "/home/u/.cache/convtune/perfdb.sqlite");
  unsetenv("HOME");
  unsetenv("CONVTUNE_PERFDB");
  require_error([] { PerfDb::default_path(); }, {"CONVTUNE_PERFDB"});
  for (const auto& s : saved)
    s.set ? setenv(s.name.c_str(), s.value.c_str(), 1) : unsetenv(s.name.c_str());
}

TEST_CASE("perfdb: processes writing one file at once all succeed and lose nothing") {
  TempDir dir;
  // The file does not exist yet: the writers also race to create it and its schema.
  const std::string path = dir.file("shared/perfdb.sqlite");
  constexpr int kWriters = 4, kKeys = 200, kCands = 3;
  int go[2];
  REQUIRE(pipe(go) == 0);
  std::vector<pid_t> pids;
  for (int wi = 0; wi < kWriters; ++wi) {
    std::fflush(nullptr);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int rc = 0;
      try {
        close(go[1]);
        char c;
        if (read(go[0], &c, 1) != 0) _exit(97);  // wait until the parent closes the pipe
        // Odd writers reopen the file every 10 stores, so opens race with writes too.
        std::optional<PerfDb> db;
        for (int k = 0; k < kKeys; ++k) {
          if (!db || (wi % 2 && k % 10 == 0)) db.emplace(PerfDb::open(path));
          const std::string key = K("w" + std::to_string(wi) + "_k" + std::to_string(k));
          std::vector<PerfCandidate> cands;
          for (int c2 = 0; c2 < kCands; ++c2)
            cands.push_back(candidate("cpu.a" + std::to_string(c2), "c", k + c2));
          const PerfWinner w = winner("cpu.a0", key, k);
          db->store(kFp, key, cands, &w, &w);
          if (k % 50 == 0 && !db->lookup(kFp, key)) rc = 2;  // reads interleave with writes
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "writer %d: %s\n", wi, e.what());
        rc = 1;
      }
      std::fflush(nullptr);
      _exit(rc);
    }
    pids.push_back(pid);
  }
  close(go[0]);
  const auto t0 = std::chrono::steady_clock::now();
  close(go[1]);  // start all writers at once
  for (const pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  WARN(kWriters << " writers x " << kKeys << " stores: " << secs << " s");

  auto db = PerfDb::open(path, true);
  const auto all = db.winners(kFp);
  CHECK(all.size() == static_cast<size_t>(kWriters * kKeys * 2));
  std::set<std::string> keys;
  for (const auto& e : all) keys.insert(e.key);
  for (int wi = 0; wi < kWriters; ++wi)
    for (int k = 0; k < kKeys; ++k) {
      const std::string key = K("w" + std::to_string(wi) + "_k" + std::to_string(k));
      if (!keys.count(key)) FAIL_CHECK("missing " << key);
    }
  CHECK(db.candidates(kFp, K("w3_k199")).size() == static_cast<size_t>(kCands));
  CHECK(RawDb(path).value("PRAGMA integrity_check") == "ok");
}

TEST_CASE("perfdb: a writer killed mid-way leaves every committed row and a sound file") {
  TempDir dir;
  const std::string path = dir.file("killed.sqlite");
  std::set<int> committed_total;
  for (const int kill_after : {20, 75, 150}) {
    INFO("killed after " << kill_after << " reported commits");
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    std::fflush(nullptr);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      close(fds[0]);
      try {
        auto db = PerfDb::open(path);
        std::vector<PerfCandidate> cands;  // big transactions: the kill likely lands inside one
        for (int c = 0; c < 60; ++c)
          cands.push_back(candidate("cpu.a" + std::to_string(c), "c", c));
        for (int i = kill_after * 1000;; ++i) {
          const PerfWinner w = winner("cpu.a0", "c", i);
          db.store(kFp, K("k" + std::to_string(i)), cands, &w, &w);
          if (write(fds[1], &i, sizeof i) != sizeof i) _exit(3);  // reported only once committed
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "writer: %s\n", e.what());
      }
      _exit(1);
    }
    close(fds[1]);
    std::vector<int> reported;
    int i;
    while (reported.size() < static_cast<size_t>(kill_after) &&
           read(fds[0], &i, sizeof i) == sizeof i)
      reported.push_back(i);
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status));
    while (read(fds[0], &i, sizeof i) == sizeof i) reported.push_back(i);
    close(fds[0]);
    REQUIRE(reported.size() >= static_cast<size_t>(kill_after));
    committed_total.insert(reported.begin(), reported.end());

    CHECK(fs::exists(path + "-wal"));  // the kill left the WAL for the next opener to recover
    for (const bool read_only : {true, false}) {
      INFO((read_only ? "read-only" : "writer") << " open after the kill");
      if (!read_only) CHECK(RawDb(path).value("PRAGMA integrity_check") == "ok");
      auto db = PerfDb::open(path, read_only);
      const auto all = db.winners(kFp);
      std::set<std::string> keys;
      for (const auto& e : all) keys.insert(e.key);
      for (const int k : committed_total)
        if (!keys.count(K("k" + std::to_string(k)))) FAIL_CHECK("committed row k" << k << " lost");
      // Each store is atomic: every stored key has both winners and all 60 candidates.
      CHECK(all.size() == 2 * keys.size());
      CHECK(keys.size() <= committed_total.size() + 3);  // at most one in flight per round
      for (const auto& key : keys)
        if (db.candidates(kFp, key).size() != 60) FAIL_CHECK(key << " is partial");
    }
  }
}

TEST_CASE("perfdb: every row this build stores reads back as valid, whatever its message") {
  TempDir dir;
  const std::string path = dir.file("perfdb.sqlite");
  auto db = PerfDb::open(path);
  // A rejected candidate whose output was not finite has an infinite error (ref::compare); a
  // failed one carries an exception's text, which may be long or hold any bytes.
  std::vector<PerfCandidate> cands = {candidate("cpu.fft", "t8", 1.5, "rejected"),
                                      candidate("cpu.direct", "oc4ow24", -1, "failed")};
  cands[0].max_error = std::numeric_limits<double>::infinity();
  cands[1].message = std::string("bad byte \xff, NUL \0 here, ", 24) + std::string(6000, 'm');
  db.store(kFp, problem_key(64), cands, nullptr, nullptr);
  CHECK(db.first_bad_row().empty());
  CHECK(db.integrity_check() == "ok");
  const auto back = db.candidates(kFp, problem_key(64));
  REQUIRE(back.size() == 2);
  CHECK(std::isinf(back[0].max_error));
  CHECK(back[1].message.size() <= 4096);
  CHECK(back[1].message.rfind("bad byte ?, NUL ? here, mmm", 0) == 0);
  CHECK(db.rows().candidates.size() == 2);
  // A layer name with control characters (ConvProblem allows them) is stored printable: the row
  // had read back as one convtune never writes, and its winner was never found.
  PerfWinner named = winner("cpu.fft", "t8", 1.5);
  named.name = "conv\tone\n";
  db.store(kFp, problem_key(64), {}, &named, nullptr);
  REQUIRE(db.lookup(kFp, problem_key(64)));
  CHECK(db.lookup(kFp, problem_key(64))->name == "conv_one_");
  CHECK(db.first_bad_row().empty());
  // Names are checked where problems are made: UTF-8 only.
  conv::ConvProblem p = conv::parse_descriptor("mb1ic3ih8oc4kh3");
  p.name = "caf\xc3\xa9";
  CHECK_NOTHROW(p.validate());
  for (const char* bad : {"\xff", "\xc0\xaf", "\xed\xa0\x80", "a\xe2\x82"}) {
    p.name = bad;
    CHECK_THROWS_WITH(p.validate(), Catch::Contains("ConvProblem.name: must be UTF-8"));
  }
}
