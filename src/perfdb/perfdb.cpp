// conv::PerfDb: open (classify, migrate), lookup, store, list and merge the SQLite perf database.
// The schema and its migrations live in schema.cpp, the SQLite call wrappers in sqlite_stmt.cpp.
#include "conv/perfdb.hpp"

#include <linux/magic.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <set>
#include <system_error>
#include <tuple>

#include "iso_date.hpp"
#include "perf_rows.hpp"
#include "quoted.hpp"
#include "schema.hpp"
#include "sqlite_stmt.hpp"

#ifndef CONVTUNE_VERSION
#define CONVTUNE_VERSION "unknown"
#endif

namespace conv {

using namespace perfdb_detail;

namespace {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The build links SQLite with URI filenames on, so a plain path starting with "file:" would be
// parsed as a URI, and ":memory:" is SQLite's in-memory database (whose results would be reported
// stored and then lost); "./" keeps each a path.
std::string sqlite_filename(const std::string& path) {
  return path.rfind("file:", 0) == 0 || path == ":memory:" ? "./" + path : path;
}

// "file:/abs/path?immutable=1" with the path percent-encoded as RFC 3986 (and SQLite) require.
std::string immutable_uri(const std::string& path) {
  const std::string abs = std::filesystem::absolute(path).string();
  std::string uri = "file:";
  for (const unsigned char ch : abs) {
    if (std::isalnum(ch) || std::strchr("/-._~", ch)) {
      uri += static_cast<char>(ch);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", ch);
      uri += hex;
    }
  }
  return uri + "?immutable=1";
}

// Longer than any key, id, message or date we store; rows above it are refused (SQLITE_TOOBIG).
constexpr int kMaxValueBytes = 64 * 1024;

// The first of `path` and its parent directories that is a symbolic link to nothing, with its
// target, as " (PATH is a symbolic link to TARGET, which does not exist)"; "" if none is. Such a
// link makes SQLite and create_directories() report causes that are not the case.
std::string dangling_link(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (fs::path p = path; !p.empty() && p != p.root_path(); p = p.parent_path()) {
    if (fs::is_symlink(fs::symlink_status(p, ec)) && !fs::exists(p, ec))
      return " (" + p.string() + " is a symbolic link to " + fs::read_symlink(p, ec).string() +
             ", which does not exist)";
    if (p.parent_path() == p) break;
  }
  return "";
}

sqlite3* open_connection(const std::string& path, const std::string& filename, int flags,
                         const char* mode) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(filename.c_str(), &raw, flags | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    const std::string msg = raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    sqlite3_close_v2(raw);
    std::string why = dangling_link(path);
    if (why.empty() && (flags & SQLITE_OPEN_CREATE))
      why = " (a writer needs write access to the directory)";
    throw Error("perfdb: " + path + ": cannot open " + mode + ": " + msg + why);
  }
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, kBusyTimeoutMs);
  // A perfdb from another machine is untrusted input (SQLite's "defense against dark arts"):
  // no schema edits, no SQL functions or virtual tables run from the schema, no triggers or
  // views, and no value or statement larger than any a perfdb of ours holds.
  sqlite3_db_config(raw, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_db_config(raw, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
  sqlite3_db_config(raw, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, nullptr);
  sqlite3_db_config(raw, SQLITE_DBCONFIG_ENABLE_VIEW, 0, nullptr);
  sqlite3_limit(raw, SQLITE_LIMIT_LENGTH, kMaxValueBytes);
  sqlite3_limit(raw, SQLITE_LIMIT_SQL_LENGTH, 100000);
  sqlite3_limit(raw, SQLITE_LIMIT_ATTACHED, 0);
  return raw;
}

// WAL lets readers run while one process writes and keeps committed data safe when a writer is
// killed mid-transaction. The mode is stored in the file, so this is a no-op after the first open.
// A VFS without shared memory answers with the old mode instead; the rollback journal it keeps
// is still transactional, so that is not an error.
void use_wal(sqlite3* db, const std::string& path) {
  with_retry(db, path, [&] { Stmt(db, path, "PRAGMA journal_mode = WAL").run(); });
  // In WAL mode NORMAL only risks the last transactions on power loss, never corruption, and a
  // killed process loses nothing committed; FULL would add an fsync to every store.
  exec(db, path, "PRAGMA synchronous = NORMAL");
}

// PRAGMA integrity_check reads every page, so a damaged file is refused at open rather than by
// whichever later query touches the bad page; so is one with an oversized value. Not quick_check:
// it does not see two rows under one primary key (a file edited through writable_schema), which
// every reader then took for two winners of one problem.
// best_forward opens the file once per new problem, so each file version (device, inode, size,
// modification time) is checked once per process. `has_tables`: the schema that check_compatible
// accepted has the winners and candidates tables.
void check_file_once(sqlite3* db, const std::string& path, bool has_tables) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return;  // the SQLite open succeeded; nothing to learn here
  static std::mutex mutex;
  static std::set<std::tuple<dev_t, ino_t, off_t, time_t, long>> checked;
  const auto id =
      std::make_tuple(st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (checked.count(id)) return;
  }
  with_retry(db, path, [&] {
    Stmt s(db, path, "PRAGMA integrity_check(1)");
    std::string r = s.step() ? s.text(0) : "no result";
    if (r == "ok") return;
    std::replace(r.begin(), r.end(), '\n', ' ');
    fail_not_perfdb(path, "damaged: integrity_check says \"" + r + "\"");
  });
  // The schema's CHECK on winners.path, which SQLite's checks skip on a read-only connection; a row
  // under another path would read as a second one-shot winner.
  with_retry(db, path, [&] {
    if (!has_tables) return;
    Stmt s(db, path, "SELECT key FROM winners WHERE path NOT IN ('oneshot', 'packed') LIMIT 1");
    if (s.step())
      fail_not_perfdb(path, "damaged: winners row " + quoted_head(s.text(0)) +
                                ": path: expected oneshot or packed");
  });
  // A value over kMaxValueBytes stops every query that reads its row (SQLITE_TOOBIG) rather
  // than being skipped as a bad row, so such a file is refused now, where the callers that
  // read system databases skip a file they cannot open.
  with_retry(db, path, [&] {
    if (!has_tables) return;
    for (const char* table : {"winners", "candidates"}) {
      const std::string sql = std::string("SELECT * FROM ") + table;
      Stmt s(db, path, sql.c_str());
      try {
        while (s.step()) {
        }
      } catch (const SqliteError& e) {
        if ((e.code & 0xff) != SQLITE_TOOBIG) throw;
        fail_not_perfdb(path, std::string(table) + " holds a value longer than " +
                                  std::to_string(kMaxValueBytes / 1024) +
                                  " KiB, which no convtune writes");
      }
    }
  });
  std::lock_guard<std::mutex> lock(mutex);
  checked.insert(id);
}

// The errors of a connection that may not create or write the file or its -wal/-shm files.
bool access_denied(const SqliteError& e) {
  const int primary = e.code & 0xff;
  return primary == SQLITE_READONLY || primary == SQLITE_CANTOPEN || primary == SQLITE_PERM;
}

[[noreturn]] void fail_not_writable(const std::string& path, const SqliteError& e) {
  throw Error("perfdb: " + path + ": not writable (" + e.detail +
              "); a writer needs write access to the file, its -wal and -shm files and its "
              "directory; open it read-only for lookups");
}

// The columns schemas 2 and 3 added, or their defaults when reading an older file (which a
// reader cannot migrate): estimate, rounds, clean rounds, spread, noisy, then the winner's layer
// name or the candidate's algorithm version.
std::string winner_added_columns(int version) {
  return std::string(version >= 2 ? "min_ms, rounds, clean_rounds, spread, noisy"
                                  : "NULL, 0, 0, NULL, 0") +
         (version >= 3 ? ", name" : ", ''");
}
std::string candidate_added_columns(int version) {
  return std::string(version >= 2 ? "packed_min_ms, rounds, clean_rounds, spread, noisy"
                                  : "NULL, 0, 0, NULL, 0") +
         (version >= 3 ? ", algo_version" : ", ''");
}

// Untrusted input: a file from elsewhere may hold any numbers.
MeasureQuality quality_from(const Stmt& s, int col) {
  MeasureQuality q;
  q.rounds = static_cast<int>(std::clamp<int64_t>(s.integer(col), 0, 1 << 30));
  q.clean_rounds = static_cast<int>(std::clamp<int64_t>(s.integer(col + 1), 0, q.rounds));
  const double spread = s.real_opt(col + 2);
  q.spread = spread >= 0 ? spread : -1;
  q.noisy = s.integer(col + 3) != 0;
  return q;
}

void bind_quality(Stmt& s, int i, const MeasureQuality& q) {
  s.bind_int(i, q.rounds).bind_int(i + 1, q.clean_rounds).bind_opt(i + 2, q.spread);
  s.bind_int(i + 3, q.noisy ? 1 : 0);
}

// Untrusted input: values no convtune writes (text where a number belongs, negative or infinite
// times, a status or date of another program, bytes that are not UTF-8 as Python decodes them)
// would otherwise read as 0 ms winners or break the Python strings. These return "" for a good
// row, else "<column>: expected ...", the wording of `autotune db import`.
std::string bad_text(const Stmt& s, int col, const char* name, bool non_empty) {
  if (s.type(col) != SQLITE_TEXT) return std::string(name) + ": expected a string";
  const std::string t = s.text(col);
  if (non_empty && t.empty()) return std::string(name) + ": must not be empty";
  if (t.size() > 4096) return std::string(name) + ": longer than 4096 characters";
  if (utf8_error(t) != std::string::npos || t.find('\0') != std::string::npos)
    return std::string(name) + ": not UTF-8 text";
  return "";
}

// The rules of perf_rows.hpp on a column (NULL times are unknown).
std::string bad_label(const Stmt& s, int col, const char* name, bool non_empty) {
  if (std::string bad = bad_text(s, col, name, non_empty); !bad.empty()) return bad;
  const std::string why = perf_rows::label_problem(s.text(col));
  return why.empty() ? why : std::string(name) + ": " + why;
}

std::string bad_key(const Stmt& s, int col) {
  if (std::string bad = bad_text(s, col, "key", true); !bad.empty()) return bad;
  const std::string why = perf_rows::key_problem(s.text(col));
  return why.empty() ? why : "key: " + why;
}

std::string bad_order(const Stmt& s, int min_col, int median_col, int max_col) {
  if (perf_rows::times_ordered(s.real_opt(min_col), s.real_opt(median_col),
                               max_col < 0 ? -1 : s.real_opt(max_col)))
    return "";
  return max_col < 0 ? "min_ms, median_ms: expected min_ms <= median_ms"
                     : "min_ms, median_ms, max_ms: expected min_ms <= median_ms <= max_ms";
}

// `infinite`: an error measured on a non-finite output is +infinity (ref::compare).
std::string bad_number(const Stmt& s, int col, const char* name, bool nullable,
                       bool infinite = false) {
  const int t = s.type(col);
  if (t == SQLITE_NULL && nullable) return "";
  const double d = s.real(col);
  if ((t != SQLITE_INTEGER && t != SQLITE_FLOAT) ||
      !(d >= 0 && (d <= perf_rows::kMaxNumber || (infinite && std::isinf(d)))))
    return std::string(name) + (infinite ? ": expected a number from 0 to 1e300, or infinity"
                                         : ": expected a number from 0 to 1e300");
  return "";
}

// A byte count: an integer >= 0 (SQLite keeps the whole numbers this build writes as integers).
std::string bad_count(const Stmt& s, int col, const char* name) {
  if (s.type(col) != SQLITE_INTEGER || s.integer(col) < 0)
    return std::string(name) + ": expected an integer >= 0";
  return "";
}

// A candidate's message as stored: UTF-8 (other bytes as '?') of at most 4096 bytes, so that
// every row this build writes passes bad_candidate() (an exception's text may hold anything).
std::string storable_message(const std::string& m) {
  std::string out;
  for (size_t i = 0; i < m.size();) {
    const int n = utf8_length(m, i);
    if (out.size() + std::max(n, 1) > 4096) break;
    if (n == 0 || m[i] == '\0') {
      out += '?';
      ++i;
    } else {
      out.append(m, i, n);
      i += n;
    }
  }
  return out;
}

std::string bad_date(const Stmt& s, int col) {
  if (std::string bad = bad_text(s, col, "date", true); !bad.empty()) return bad;
  const std::string why = date_problem(s.text(col));
  return why.empty() ? "" : "date: " + why;
}

std::string bad_quality(const Stmt& s, int col) {
  if (s.type(col) != SQLITE_INTEGER || s.type(col + 1) != SQLITE_INTEGER || s.integer(col) < 0 ||
      s.integer(col) > 1000000000 || s.integer(col + 1) < 0 || s.integer(col + 1) > s.integer(col))
    return "rounds, clean_rounds: expected integers with 0 <= clean_rounds <= rounds";
  if (std::string bad = bad_number(s, col + 2, "spread", true); !bad.empty()) return bad;
  if (s.type(col + 3) != SQLITE_INTEGER || (s.integer(col + 3) != 0 && s.integer(col + 3) != 1))
    return "noisy: expected 0 or 1";
  return "";
}

// The first problem of a row in winner_from's columns, or "".
std::string bad_winner(const Stmt& s, int col) {
  for (std::string bad :
       {bad_text(s, col, "algo", true), bad_text(s, col + 1, "config", false),
        bad_number(s, col + 2, "median_ms", false), bad_date(s, col + 3),
        bad_text(s, col + 4, "version", false), bad_number(s, col + 5, "min_ms", true),
        bad_quality(s, col + 6), bad_label(s, col + 10, "name", false)})
    if (!bad.empty()) return bad;
  return bad_order(s, col + 5, col + 2, -1);
}

// Columns: algo, config, median_ms, date, version, then winner_added_columns().
PerfWinner winner_from(const Stmt& s, int col) {
  PerfWinner w;
  w.algo_id = s.text(col);
  w.config = s.text(col + 1);
  w.median_ms = s.real(col + 2);
  w.date = s.text(col + 3);
  w.version = s.text(col + 4);
  w.min_ms = s.real_opt(col + 5);
  w.quality = quality_from(s, col + 6);
  w.name = s.text(col + 10);
  return w;
}

// Columns: algo, config, status, median_ms, min_ms, max_ms, packed_median_ms, max_error,
// workspace_bytes, message, date, version (not kept here), then candidate_added_columns().
std::string candidate_columns(int version) {
  return "algo, config, status, median_ms, min_ms, max_ms, packed_median_ms, max_error, "
         "workspace_bytes, message, date, version, " +
         candidate_added_columns(version);
}

// The first problem of a row in candidate_from's columns, or "".
std::string bad_candidate(const Stmt& s, int col) {
  const std::string status = s.type(col + 2) == SQLITE_TEXT ? s.text(col + 2) : "";
  if (!parse_candidate_status(status)) return std::string("status: ") + perf_rows::kStatusRule;
  for (std::string bad :
       {bad_text(s, col, "algo", true), bad_text(s, col + 1, "config", false),
        bad_number(s, col + 3, "median_ms", true), bad_number(s, col + 4, "min_ms", true),
        bad_number(s, col + 5, "max_ms", true), bad_number(s, col + 6, "packed_median_ms", true),
        bad_number(s, col + 7, "max_error", true, true), bad_count(s, col + 8, "workspace_bytes"),
        bad_text(s, col + 9, "message", false), bad_date(s, col + 10),
        bad_text(s, col + 11, "version", false), bad_number(s, col + 12, "packed_min_ms", true),
        bad_quality(s, col + 13), bad_text(s, col + 17, "algo_version", false)})
    if (!bad.empty()) return bad;
  // The tuner reuses an "ok" row's times instead of measuring: without one it has none.
  if (status == "ok" && s.type(col + 3) == SQLITE_NULL)
    return "median_ms: expected a time for a candidate with status ok";
  return bad_order(s, col + 4, col + 3, col + 5);
}

PerfCandidate candidate_from(const Stmt& s, int col) {
  PerfCandidate r;
  r.algo_id = s.text(col);
  r.config = s.text(col + 1);
  // Rows whose status is not one of these were refused before (bad_candidate).
  r.status = parse_candidate_status(s.text(col + 2)).value_or(CandidateStatus::failed);
  r.median_ms = s.real_opt(col + 3);
  r.min_ms = s.real_opt(col + 4);
  r.max_ms = s.real_opt(col + 5);
  r.packed_median_ms = s.real_opt(col + 6);
  r.max_error = s.real_opt(col + 7);
  r.workspace_bytes = static_cast<uint64_t>(s.integer(col + 8));
  r.message = s.text(col + 9);
  r.date = s.text(col + 10);
  r.packed_min_ms = s.real_opt(col + 12);
  r.quality = quality_from(s, col + 13);
  r.algo_version = s.text(col + 17);
  return r;
}

}  // namespace

const char* to_string(ExecPath p) {
  switch (p) {
    case ExecPath::oneshot:
      return "oneshot";
    case ExecPath::packed:
      return "packed";
  }
  return "unknown";
}

// Converts to the sqlite3* that every SQLite call here takes.
struct PerfDb::Connection {
  sqlite3* db;
  operator sqlite3*() const { return db; }
};

const char* to_string(CandidateStatus s) {
  switch (s) {
    case CandidateStatus::ok:
      return "ok";
    case CandidateStatus::rejected:
      return "rejected";
    case CandidateStatus::failed:
      return "failed";
    case CandidateStatus::skipped:
      return "skipped";
  }
  return "unknown";
}

std::optional<CandidateStatus> parse_candidate_status(std::string_view text) {
  for (CandidateStatus s : {CandidateStatus::ok, CandidateStatus::rejected, CandidateStatus::failed,
                            CandidateStatus::skipped})
    if (text == to_string(s)) return s;
  return std::nullopt;
}

void PerfDb::ConnectionCloser::operator()(Connection* c) const noexcept {
  sqlite3_close_v2(c->db);
  delete c;
}

PerfDb::PerfDb(PerfDb&&) noexcept = default;
PerfDb& PerfDb::operator=(PerfDb&&) noexcept = default;
PerfDb::~PerfDb() = default;

bool PerfDb::file_exists(const std::string& path) {
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec);
  return exists || (ec && ec != std::errc::no_such_file_or_directory);
}

int PerfDb::schema_version() {
  return migrations().back().version;
}

std::string PerfDb::default_path() {
  if (std::string p = env("CONVTUNE_PERFDB"); !p.empty()) return p;
  // The XDG base directory spec says relative values are invalid and must be ignored.
  if (std::string x = env("XDG_CACHE_HOME"); !x.empty() && x[0] == '/')
    return x + "/convtune/perfdb.sqlite";
  if (std::string h = env("HOME"); !h.empty()) return h + "/.cache/convtune/perfdb.sqlite";
  throw Error(
      "PerfDb::default_path: none of CONVTUNE_PERFDB, XDG_CACHE_HOME, HOME is set; "
      "pass a perfdb path");
}

PerfDb::Connection& PerfDb::conn() const {
  if (!db_) throw Error("perfdb: " + path_ + ": used after it was moved from");
  return *db_;
}

PerfDb PerfDb::open(const std::string& path, bool read_only) {
  namespace fs = std::filesystem;
  if (path.empty()) throw Error("PerfDb::open: path: must not be empty");
  // The C library would stop at the first NUL and open another file than the one named.
  if (const size_t nul = path.find('\0'); nul != std::string::npos)
    throw Error("perfdb: " + conv::quoted(path) + ": path: contains a NUL byte at " +
                std::to_string(nul));
  PerfDb db;
  db.path_ = path;
  db.read_only_ = read_only;

  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    throw Error("perfdb: " + path + ": cannot open: " + ec.message());
  if (fs::is_directory(st)) throw Error("perfdb: " + path + ": is a directory");
  // A device or pipe is no place for a database and its -wal, -shm or -journal files.
  if (fs::exists(st) && !fs::is_regular_file(st))
    throw Error("perfdb: " + path + ": not a regular file");
  // Files of /proc and /sys report size 0, which SQLite reads as an empty database.
  if (struct statfs fs_info; fs::exists(st) && statfs(path.c_str(), &fs_info) == 0 &&
                             (fs_info.f_type == PROC_SUPER_MAGIC || fs_info.f_type == SYSFS_MAGIC))
    throw Error("perfdb: " + path + ": a kernel interface file (/proc, /sys), not a database");
  if (read_only) {
    if (!fs::exists(st)) throw Error("perfdb: " + path + ": cannot open read-only: no such file");
    db.db_.reset(new Connection{
        open_connection(path, sqlite_filename(path), SQLITE_OPEN_READONLY, "read-only")});
  } else {
    const fs::path parent = fs::path(path).parent_path();
    if (!parent.empty() && !fs::create_directories(parent, ec) && ec)
      throw Error("perfdb: " + path + ": cannot create directory " + parent.string() + ": " +
                  ec.message() + dangling_link(parent));
    db.db_.reset(new Connection{open_connection(
        path, sqlite_filename(path), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, "for writing")});
    // SQLITE_OPEN_READWRITE silently falls back to read-only when permissions forbid writing.
    if (sqlite3_db_readonly(db.db_->db, "main") == 1)
      throw Error("perfdb: " + path +
                  ": not writable (check its permissions); open it read-only for lookups");
  }
  sqlite3* c = db.db_->db;

  FileInfo info;
  try {
    info = with_retry(c, path, [&] { return inspect(c, path); });
  } catch (const SqliteError& e) {
    // A reader of a WAL file needs to create the -shm/-wal files next to it, which fails in a
    // read-only directory. Without a -wal file every committed row is in the main file, and no
    // writer can be active (it could not create -wal either), so reading it as immutable is exact.
    if (!access_denied(e)) throw;
    if (!read_only) fail_not_writable(path, e);
    if (fs::exists(path + "-wal", ec)) throw;
    db.db_.reset(new Connection{open_connection(
        path, immutable_uri(path), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, "read-only")});
    c = db.db_->db;
    info = with_retry(c, path, [&] { return inspect(c, path); });
  }
  check_compatible(info, path, migrations());
  if (info.kind != FileInfo::empty) check_file_once(c, path, info.version >= 1);

  if (read_only) {
    if (info.kind == FileInfo::empty) {
      // Nothing to read; an in-memory database with the schema answers every query with "none".
      db.db_.reset(
          new Connection{open_connection(path, ":memory:", SQLITE_OPEN_READWRITE, "in memory")});
      migrate(db.db_->db, path, migrations());
      db.version_ = schema_version();
      return db;
    }
    if (info.version < kOldestReadableVersion)
      throw Error("perfdb: " + path + ": schema " + std::to_string(info.version) +
                  " is older than this build reads without migrating (oldest " +
                  std::to_string(kOldestReadableVersion) +
                  "); open it once without read_only to migrate it");
  } else {
    try {
      use_wal(c, path);
      if (info.kind == FileInfo::empty || info.version < schema_version()) {
        migrate(c, path, migrations());
        info = with_retry(c, path, [&] { return inspect(c, path); });
      }
      // Take the write lock once (and roll back): a file that opens for writing but cannot be
      // written (a read-only -shm or -wal beside it) is refused now, not at the first store()
      // after minutes of measuring.
      with_retry(c, path, [&] { WriteTxn probe(c, path); });
    } catch (const SqliteError& e) {
      if (!access_denied(e)) throw;
      fail_not_writable(path, e);
    }
  }
  db.version_ = info.version;
  return db;
}

std::optional<PerfWinner> PerfDb::lookup(const std::string& fingerprint, const std::string& key,
                                         ExecPath p) const {
  sqlite3* c = conn();
  return with_retry(c, path_, [&]() -> std::optional<PerfWinner> {
    const std::string sql = "SELECT algo, config, median_ms, date, version, " +
                            winner_added_columns(version_) +
                            " FROM winners WHERE fingerprint = ?1 AND key = ?2 AND path = ?3";
    Stmt s(c, path_, sql.c_str());
    s.bind(1, fingerprint).bind(2, key).bind(3, std::string(to_string(p)));
    // A row no convtune wrote is no winner: the problem is tuned again.
    if (!s.step() || !bad_winner(s, 0).empty()) return std::nullopt;
    return winner_from(s, 0);
  });
}

void PerfDb::store(const std::string& fingerprint, const std::string& key,
                   const std::vector<PerfCandidate>& candidates, const PerfWinner* oneshot_winner,
                   const PerfWinner* packed_winner) {
  if (fingerprint.empty()) throw Error("PerfDb::store: fingerprint: must not be empty");
  if (key.empty()) throw Error("PerfDb::store: key: must not be empty");
  for (size_t i = 0; i < candidates.size(); ++i)
    if (candidates[i].algo_id.empty())
      throw Error("PerfDb::store: candidates[" + std::to_string(i) +
                  "].algo_id: must not be empty");
  if (oneshot_winner && oneshot_winner->algo_id.empty())
    throw Error("PerfDb::store: oneshot_winner.algo_id: must not be empty");
  if (packed_winner && packed_winner->algo_id.empty())
    throw Error("PerfDb::store: packed_winner.algo_id: must not be empty");
  // What the readers refuse (bad_candidate, bad_winner, first_bad_row) is not written: a row
  // stored here would otherwise be skipped by lookups and make check, merge and export refuse
  // the whole file.
  const auto fail = [](const std::string& field, const std::string& what) {
    throw Error("PerfDb::store: " + field + ": " + what);
  };
  if (std::string why = perf_rows::label_problem(fingerprint); !why.empty())
    fail("fingerprint", why);
  if (std::string why = perf_rows::key_problem(key); !why.empty())
    fail("key", why == perf_rows::kNotCanonicalKey ? why : "not the key of a problem: " + why);
  const auto time_ok = [](double ms) { return ms < 0 || std::isfinite(ms); };  // -1: unknown
  for (size_t i = 0; i < candidates.size(); ++i) {
    const PerfCandidate& r = candidates[i];
    const std::string at = "candidates[" + std::to_string(i) + "]";
    if (r.status == CandidateStatus::ok && !(r.median_ms >= 0))
      fail(at + ".median_ms", "an ok candidate has a time");
    for (const double ms : {r.median_ms, r.min_ms, r.max_ms, r.packed_median_ms, r.packed_min_ms})
      if (!time_ok(ms)) fail(at, "times must be finite (-1: not measured)");
    if (!perf_rows::times_ordered(r.min_ms, r.median_ms, r.max_ms))
      fail(at, "expected min_ms <= median_ms <= max_ms");
  }
  for (const PerfWinner* w : {oneshot_winner, packed_winner}) {
    if (!w) continue;
    const std::string at = w == oneshot_winner ? "oneshot_winner" : "packed_winner";
    if (!(w->median_ms >= 0) || !std::isfinite(w->median_ms))
      fail(at + ".median_ms", "expected a finite time >= 0");
    if (!time_ok(w->min_ms) || !perf_rows::times_ordered(w->min_ms, w->median_ms))
      fail(at + ".min_ms", "expected -1 (unknown) or a time <= median_ms");
  }
  sqlite3* c = conn();
  if (read_only_) throw Error("perfdb: " + path_ + ": store: the database was opened read-only");

  const std::string now = utc_now();
  with_retry(c, path_, [&] {
    WriteTxn txn(c, path_);
    Stmt ins(c, path_,
             "INSERT OR REPLACE INTO candidates (fingerprint, key, algo, config, status, "
             "median_ms, min_ms, max_ms, packed_median_ms, max_error, workspace_bytes, message, "
             "date, version, packed_min_ms, rounds, clean_rounds, spread, noisy, algo_version) "
             "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, "
             "?18, ?19, ?20)");
    for (const PerfCandidate& r : candidates) {
      ins.bind(1, fingerprint)
          .bind(2, key)
          .bind(3, r.algo_id)
          .bind(4, r.config)
          .bind(5, std::string(to_string(r.status)));
      ins.bind_opt(6, r.median_ms).bind_opt(7, r.min_ms).bind_opt(8, r.max_ms);
      ins.bind_opt(9, r.packed_median_ms).bind_opt(10, r.max_error);
      ins.bind_int(11, static_cast<int64_t>(r.workspace_bytes))
          .bind(12, storable_message(r.message));
      ins.bind(13, r.date.empty() ? now : r.date).bind(14, std::string(CONVTUNE_VERSION));
      ins.bind_opt(15, r.packed_min_ms);
      bind_quality(ins, 16, r.quality);
      ins.bind(20, r.algo_version);
      ins.run();
      ins.reset();
    }
    Stmt win(
        c, path_,
        "INSERT OR REPLACE INTO winners (fingerprint, key, path, algo, config, median_ms, "
        "date, version, min_ms, rounds, clean_rounds, spread, noisy, name) VALUES (?1, ?2, ?3, "
        "?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)");
    for (const ExecPath p : {ExecPath::oneshot, ExecPath::packed}) {
      const PerfWinner* w = p == ExecPath::oneshot ? oneshot_winner : packed_winner;
      if (!w) continue;
      win.bind(1, fingerprint).bind(2, key).bind(3, std::string(to_string(p)));
      win.bind(4, w->algo_id).bind(5, w->config).bind(6, w->median_ms);
      win.bind(7, w->date.empty() ? now : w->date);
      win.bind(8, w->version.empty() ? std::string(CONVTUNE_VERSION) : w->version);
      win.bind_opt(9, w->min_ms);
      bind_quality(win, 10, w->quality);
      // ConvProblem allows control characters in names; stored, they would end a line of
      // `show` or of a batch file.
      win.bind(14, underscore_controls(w->name));
      win.run();
      win.reset();
    }
    txn.commit();
  });
}

std::vector<PerfDb::Entry> PerfDb::winners(const std::string& fingerprint) const {
  sqlite3* c = conn();
  return with_retry(c, path_, [&] {
    std::vector<Entry> out;
    const std::string sql = "SELECT key, path, algo, config, median_ms, date, version, " +
                            winner_added_columns(version_) +
                            " FROM winners WHERE fingerprint = ?1 ORDER BY key, path";
    Stmt s(c, path_, sql.c_str());
    s.bind(1, fingerprint);
    while (s.step())
      if (bad_winner(s, 2).empty())
        out.push_back({s.text(0), s.text(1) == "packed" ? ExecPath::packed : ExecPath::oneshot,
                       winner_from(s, 2)});
    return out;
  });
}

std::vector<PerfCandidate> PerfDb::candidates(const std::string& fingerprint,
                                              const std::string& key) const {
  sqlite3* c = conn();
  return with_retry(c, path_, [&] {
    std::vector<PerfCandidate> out;
    const std::string sql = "SELECT " + candidate_columns(version_) +
                            " FROM candidates WHERE fingerprint = ?1 AND key = ?2 "
                            "ORDER BY min_ms IS NULL, min_ms, algo, config";
    Stmt s(c, path_, sql.c_str());
    s.bind(1, fingerprint).bind(2, key);
    while (s.step())
      if (bad_candidate(s, 0).empty()) out.push_back(candidate_from(s, 0));
    return out;
  });
}

// Insert-or-update of one row, where on a primary-key clash the newer date wins: merge() and
// import_rows() write through these. Columns in the order of the SELECTs in merge().
constexpr const char* kUpsertWinner =
    "INSERT INTO winners (fingerprint, key, path, algo, config, median_ms, date, version, min_ms, "
    "rounds, clean_rounds, spread, noisy, name) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
    "?11, ?12, ?13, ?14) ON CONFLICT (fingerprint, key, path) DO UPDATE SET algo = excluded.algo, "
    "config = excluded.config, median_ms = excluded.median_ms, date = excluded.date, "
    "version = excluded.version, min_ms = excluded.min_ms, rounds = excluded.rounds, "
    "clean_rounds = excluded.clean_rounds, spread = excluded.spread, noisy = excluded.noisy, "
    "name = excluded.name WHERE excluded.date > winners.date";
constexpr int kWinnerColumns = 14;
constexpr const char* kUpsertCandidate =
    "INSERT INTO candidates (fingerprint, key, algo, config, status, median_ms, min_ms, max_ms, "
    "packed_median_ms, max_error, workspace_bytes, message, date, version, packed_min_ms, rounds, "
    "clean_rounds, spread, noisy, algo_version) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
    "?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20) ON CONFLICT (fingerprint, key, algo, "
    "config) DO UPDATE SET status = excluded.status, median_ms = excluded.median_ms, "
    "min_ms = excluded.min_ms, max_ms = excluded.max_ms, "
    "packed_median_ms = excluded.packed_median_ms, max_error = excluded.max_error, "
    "workspace_bytes = excluded.workspace_bytes, message = excluded.message, "
    "date = excluded.date, version = excluded.version, packed_min_ms = excluded.packed_min_ms, "
    "rounds = excluded.rounds, clean_rounds = excluded.clean_rounds, spread = excluded.spread, "
    "noisy = excluded.noisy, algo_version = excluded.algo_version "
    "WHERE excluded.date > candidates.date";
constexpr int kCandidateColumns = 20;

// The fingerprint as schema 4 has it: older files' rows were timed hot (migration 4).
std::string fingerprint_column(int version) {
  return version >= 4 ? "fingerprint"
                      : "CASE WHEN instr(fingerprint, '|timing=') = 0 THEN fingerprint || "
                        "'|timing=hot' ELSE fingerprint END";
}
std::string winners_select(int version) {
  return "SELECT " + fingerprint_column(version) + ", key, path, algo, config, median_ms, date, " +
         "version, " + winner_added_columns(version) + " FROM winners ORDER BY 1, key, path";
}
std::string candidates_select(int version) {
  return "SELECT " + fingerprint_column(version) + ", key, " + candidate_columns(version) +
         " FROM candidates ORDER BY 1, key, algo, config";
}

size_t PerfDb::merge(const std::string& other_path) {
  return merge(std::vector<std::string>{other_path}).front();
}

std::vector<size_t> PerfDb::merge(const std::vector<std::string>& other_paths) {
  sqlite3* c = conn();
  if (read_only_) throw Error("perfdb: " + path_ + ": merge: the database was opened read-only");
  std::vector<PerfDb> others;
  for (const auto& p : other_paths) others.push_back(open(p, true));
  // Dates decide which row is newer, so a malformed one (from another program) would win or lose
  // forever, and other bad values would be copied into this database: such a file is refused
  // whole.
  for (const PerfDb& o : others)
    if (std::string bad = o.first_bad_row(); !bad.empty())
      throw Error("perfdb: " + o.path_ + ": " + bad + "; nothing merged");

  // Copies every row of a table from `src`; on a primary-key clash the newer date wins.
  auto copy = [&](const PerfDb& other, const std::string& select, const char* upsert, int columns) {
    size_t changed = 0;
    Stmt from(other.conn(), other.path_, select.c_str());
    Stmt to(c, path_, upsert);
    while (from.step()) {
      for (int i = 0; i < columns; ++i) to.bind_column(i + 1, from, i);
      to.run();
      changed += static_cast<size_t>(sqlite3_changes(c));
      to.reset();
    }
    return changed;
  };
  // One transaction for all sources: a failure anywhere (a value too long, a lock) leaves this
  // database as it was.
  return with_retry(c, path_, [&] {
    WriteTxn txn(c, path_);
    std::vector<size_t> changed;
    for (const PerfDb& other : others) {
      ReadTxn snapshot(other.conn(), other.path_);
      changed.push_back(
          copy(other, winners_select(other.version_), kUpsertWinner, kWinnerColumns) +
          copy(other, candidates_select(other.version_), kUpsertCandidate, kCandidateColumns));
    }
    txn.commit();
    return changed;
  });
}

PerfDb::Rows PerfDb::rows() const {
  sqlite3* c = conn();
  if (std::string bad = first_bad_row(); !bad.empty()) throw Error("perfdb: " + path_ + ": " + bad);
  return with_retry(c, path_, [&] {
    Rows out;
    ReadTxn snapshot(c, path_);
    {
      Stmt s(c, path_, winners_select(version_).c_str());
      while (s.step()) {
        WinnerRow r;
        r.fingerprint = s.text(0);
        r.key = s.text(1);
        r.path = s.text(2) == "packed" ? ExecPath::packed : ExecPath::oneshot;
        r.winner = winner_from(s, 3);
        out.winners.push_back(std::move(r));
      }
    }
    Stmt s(c, path_, candidates_select(version_).c_str());
    while (s.step()) {
      CandidateRow r;
      r.fingerprint = s.text(0);
      r.key = s.text(1);
      r.candidate = candidate_from(s, 2);
      r.version = s.text(13);
      out.candidates.push_back(std::move(r));
    }
    return out;
  });
}

size_t PerfDb::import_rows(const Rows& rows) {
  sqlite3* c = conn();
  if (read_only_) throw Error("perfdb: " + path_ + ": import: the database was opened read-only");
  auto need = [](const std::string& v, const std::string& what) {
    if (v.empty()) throw Error("PerfDb::import_rows: " + what + ": must not be empty");
  };
  for (size_t i = 0; i < rows.winners.size(); ++i) {
    const WinnerRow& r = rows.winners[i];
    const std::string at = "winners[" + std::to_string(i) + "]";
    need(r.fingerprint, at + ".fingerprint"), need(r.key, at + ".key");
    need(r.winner.algo_id, at + ".algo"), need(r.winner.date, at + ".date");
  }
  for (size_t i = 0; i < rows.candidates.size(); ++i) {
    const CandidateRow& r = rows.candidates[i];
    const std::string at = "candidates[" + std::to_string(i) + "]";
    need(r.fingerprint, at + ".fingerprint"), need(r.key, at + ".key");
    need(r.candidate.algo_id, at + ".algo");
    need(r.candidate.date, at + ".date");
  }
  return with_retry(c, path_, [&] {
    WriteTxn txn(c, path_);
    size_t changed = 0;
    Stmt win(c, path_, kUpsertWinner);
    for (const WinnerRow& r : rows.winners) {
      const PerfWinner& w = r.winner;
      win.bind(1, r.fingerprint).bind(2, r.key).bind(3, std::string(to_string(r.path)));
      win.bind(4, w.algo_id).bind(5, w.config).bind(6, w.median_ms).bind(7, w.date);
      win.bind(8, w.version).bind_opt(9, w.min_ms);
      bind_quality(win, 10, w.quality);
      win.bind(14, w.name);
      win.run();
      changed += static_cast<size_t>(sqlite3_changes(c));
      win.reset();
    }
    Stmt cand(c, path_, kUpsertCandidate);
    for (const CandidateRow& r : rows.candidates) {
      const PerfCandidate& m = r.candidate;
      cand.bind(1, r.fingerprint).bind(2, r.key).bind(3, m.algo_id).bind(4, m.config);
      cand.bind(5, std::string(to_string(m.status))).bind_opt(6, m.median_ms).bind_opt(7, m.min_ms);
      cand.bind_opt(8, m.max_ms).bind_opt(9, m.packed_median_ms).bind_opt(10, m.max_error);
      cand.bind_int(11, static_cast<int64_t>(m.workspace_bytes)).bind(12, m.message);
      cand.bind(13, m.date).bind(14, r.version);
      cand.bind_opt(15, m.packed_min_ms);
      bind_quality(cand, 16, m.quality);
      cand.bind(20, m.algo_version);
      cand.run();
      changed += static_cast<size_t>(sqlite3_changes(c));
      cand.reset();
    }
    txn.commit();
    return changed;
  });
}

std::string PerfDb::integrity_check() const {
  sqlite3* c = conn();
  const std::string sqlite = with_retry(c, path_, [&] {
    Stmt s(c, path_, "PRAGMA integrity_check(20)");
    std::string out;
    while (s.step()) out += (out.empty() ? "" : "; ") + s.text(0);
    return out;
  });
  if (sqlite != "ok") return sqlite;
  std::string bad = first_bad_row();
  return bad.empty() ? sqlite : bad;
}

std::string PerfDb::first_bad_row() const {
  sqlite3* c = conn();
  return with_retry(c, path_, [&]() -> std::string {
    ReadTxn snapshot(c, path_);
    // Rows come sorted by fingerprint and key: each distinct key is parsed once.
    std::string good_key;
    auto keys = [&](const Stmt& s, const char* table) {
      std::string bad = bad_label(s, 0, "fingerprint", true);
      if (bad.empty() && (s.type(1) != SQLITE_TEXT || s.text(1) != good_key)) {
        bad = bad_key(s, 1);
        if (bad.empty()) good_key = s.text(1);
      }
      return bad.empty() ? bad
                         : std::string(table) + " row " +
                               quoted_head(s.type(1) == SQLITE_TEXT ? s.text(1) : "") + ": " + bad;
    };
    Stmt w(c, path_, winners_select(version_).c_str());
    while (w.step()) {
      if (std::string bad = keys(w, "winners"); !bad.empty()) return bad;
      if (std::string bad = bad_winner(w, 3); !bad.empty())
        return "winners row " + w.text(1) + " (" + w.text(2) + "): " + bad;
    }
    Stmt k(c, path_, candidates_select(version_).c_str());
    while (k.step()) {
      if (std::string bad = keys(k, "candidates"); !bad.empty()) return bad;
      if (std::string bad = bad_candidate(k, 2); !bad.empty())
        return "candidates row " + k.text(1) + " " + k.text(2) + " " + k.text(3) + ": " + bad;
    }
    return "";
  });
}

}  // namespace conv
