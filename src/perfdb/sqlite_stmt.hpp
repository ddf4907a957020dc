// The thin layer between conv::PerfDb and the SQLite C API: a prepared statement that finalizes
// itself, an IMMEDIATE transaction that rolls back unless committed, the busy-retry loop every
// perfdb operation runs in, and errors that always name the perfdb file.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <utility>

#include "conv/error.hpp"

namespace conv::perfdb_detail {

/// How long one operation keeps retrying while other processes hold the write lock.
constexpr int kBusyTimeoutMs = 30000;

/// A failed SQLite call; `code` is the extended result code (SQLITE_BUSY_SNAPSHOT, ...).
class SqliteError : public conv::Error {
 public:
  SqliteError(const std::string& message, int code, std::string detail)
      : conv::Error(message), code(code), detail(std::move(detail)) {}
  int code;
  std::string detail;  ///< SQLite's own message
  bool busy() const { return (code & 0xff) == SQLITE_BUSY || (code & 0xff) == SQLITE_LOCKED; }
};

/// Throws SqliteError "perfdb: <path>: <what>: <sqlite message>". Corruption codes
/// (SQLITE_CORRUPT, SQLITE_NOTADB) throw conv::Error with the "not a convtune perf database"
/// wording instead, so a damaged file reads the same whether open() or a later query notices it.
[[noreturn]] void fail(sqlite3* db, int rc, const std::string& path, const std::string& what);

/// "perfdb: <path>: not a convtune perf database (<why>); move or delete it ..." as conv::Error.
[[noreturn]] void fail_not_perfdb(const std::string& path, const std::string& why);

/// Runs `sql` (one or more statements without results).
void exec(sqlite3* db, const std::string& path, const std::string& sql);

/// A prepared statement (sqlite3_prepare_v2), finalized on destruction. Column and bind indexes
/// follow SQLite: binds count from 1, columns from 0.
class Stmt {
 public:
  Stmt(sqlite3* db, const std::string& path, const char* sql);
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, const std::string& v);
  Stmt& bind(int i, double v);
  Stmt& bind_int(int i, int64_t v);
  /// Binds `v`, or NULL when v < 0: the -1 "not measured" marker of PerfCandidate is NULL in SQL.
  Stmt& bind_opt(int i, double v);
  /// Binds column `col` of `src`'s current row as it is (any type, NULL included).
  Stmt& bind_column(int i, const Stmt& src, int col);

  /// One sqlite3_step: true while a row is available, false when done; throws on error.
  bool step();
  /// Steps a statement that returns no rows (or whose rows are ignored) to completion.
  void run();
  /// Makes the statement reusable with new bindings.
  void reset();

  std::string text(int col) const;
  double real(int col) const;
  /// The column, or -1 when it is NULL.
  double real_opt(int col) const;
  int64_t integer(int col) const;
  /// SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_TEXT, SQLITE_BLOB or SQLITE_NULL.
  int type(int col) const { return sqlite3_column_type(stmt_, col); }

 private:
  sqlite3* db_;
  const std::string& path_;
  sqlite3_stmt* stmt_ = nullptr;
};

/// Runs `fn` until it completes without SQLITE_BUSY/SQLITE_LOCKED, for up to kBusyTimeoutMs.
/// The busy handler already waits inside one call; this loop covers the cases where SQLite returns
/// BUSY without waiting (WAL recovery by another process, a closing last connection). `fn` must be
/// restartable: an open transaction is rolled back before the next try.
template <class F>
auto with_retry(sqlite3* db, const std::string& path, F&& fn) -> decltype(fn());

/// BEGIN IMMEDIATE ... COMMIT; rolled back by the destructor unless commit() ran. IMMEDIATE takes
/// the write lock up front, so the busy timeout applies and no read-then-write upgrade can fail.
class WriteTxn {
 public:
  WriteTxn(sqlite3* db, const std::string& path);
  ~WriteTxn();
  WriteTxn(const WriteTxn&) = delete;
  WriteTxn& operator=(const WriteTxn&) = delete;
  void commit();

 private:
  sqlite3* db_;
  const std::string& path_;
  bool open_ = false;
};

/// A deferred read transaction, so several queries see one snapshot; ended by the destructor.
/// Inside an already open transaction it does nothing (that one gives the snapshot).
class ReadTxn {
 public:
  ReadTxn(sqlite3* db, const std::string& path);
  ~ReadTxn();
  ReadTxn(const ReadTxn&) = delete;
  ReadTxn& operator=(const ReadTxn&) = delete;

 private:
  sqlite3* db_;
  bool own_;
};

// ---- implementation of the template ----

/// Sleeps a short, randomised time between retries (so retrying writers do not move in lockstep);
/// returns false once `start_ms` is more than kBusyTimeoutMs ago.
bool backoff(int64_t start_ms, int attempt);
int64_t now_ms();

template <class F>
auto with_retry(sqlite3* db, const std::string& path, F&& fn) -> decltype(fn()) {
  const int64_t start = now_ms();
  for (int attempt = 0;; ++attempt) {
    try {
      return fn();
    } catch (const SqliteError& e) {
      if (!e.busy()) throw;
      if (!sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      if (!backoff(start, attempt))
        throw SqliteError("perfdb: " + path + ": still locked by another process after " +
                              std::to_string(kBusyTimeoutMs / 1000) + " s (" + e.what() + ")",
                          e.code, e.detail);
    }
  }
}

}  // namespace conv::perfdb_detail
