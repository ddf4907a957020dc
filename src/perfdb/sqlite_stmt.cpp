// Statement, transaction and error helpers for perfdb/ (see sqlite_stmt.hpp).
#include "sqlite_stmt.hpp"

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

namespace conv::perfdb_detail {

void fail_not_perfdb(const std::string& path, const std::string& why) {
  throw conv::Error("perfdb: " + path + ": not a convtune perf database (" + why +
                    "); move or delete it, or point CONVTUNE_PERFDB at another file");
}

void fail(sqlite3* db, int rc, const std::string& path, const std::string& what) {
  const std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  const int primary = rc & 0xff;
  if (primary == SQLITE_NOTADB || primary == SQLITE_CORRUPT)
    fail_not_perfdb(path, (primary == SQLITE_NOTADB ? "not an SQLite file: " : "damaged: ") + msg);
  throw SqliteError("perfdb: " + path + ": " + what + ": " + msg, rc, msg);
}

void exec(sqlite3* db, const std::string& path, const std::string& sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    sqlite3_free(err);  // sqlite3_errmsg(db) carries the same text
    // Name the statement by its start: enough to tell "BEGIN IMMEDIATE" from "COMMIT".
    const size_t b = std::min(sql.find_first_not_of(" \n"), sql.size());
    fail(db, rc, path, sql.substr(b, std::min<size_t>(sql.find_first_of(";\n", b) - b, 60)));
  }
}

Stmt::Stmt(sqlite3* db, const std::string& path, const char* sql) : db_(db), path_(path) {
  const int rc = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  if (rc != SQLITE_OK) fail(db, rc, path, std::string("prepare \"") + sql + "\"");
}

Stmt& Stmt::bind(int i, const std::string& v) {
  const int rc =
      sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) fail(db_, rc, path_, "bind");
  return *this;
}

Stmt& Stmt::bind(int i, double v) {
  const int rc = sqlite3_bind_double(stmt_, i, v);
  if (rc != SQLITE_OK) fail(db_, rc, path_, "bind");
  return *this;
}

Stmt& Stmt::bind_int(int i, int64_t v) {
  const int rc = sqlite3_bind_int64(stmt_, i, v);
  if (rc != SQLITE_OK) fail(db_, rc, path_, "bind");
  return *this;
}

Stmt& Stmt::bind_opt(int i, double v) {
  if (v >= 0) return bind(i, v);
  const int rc = sqlite3_bind_null(stmt_, i);
  if (rc != SQLITE_OK) fail(db_, rc, path_, "bind");
  return *this;
}

Stmt& Stmt::bind_column(int i, const Stmt& src, int col) {
  const int rc = sqlite3_bind_value(stmt_, i, sqlite3_column_value(src.stmt_, col));
  if (rc != SQLITE_OK) fail(db_, rc, path_, "bind");
  return *this;
}

bool Stmt::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  // sqlite3_reset makes the statement reusable after a failure (e.g. BUSY) and keeps errmsg.
  sqlite3_reset(stmt_);
  fail(db_, rc, path_, std::string("\"") + sqlite3_sql(stmt_) + "\"");
}

void Stmt::run() {
  while (step()) {
  }
}

void Stmt::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::string Stmt::text(int col) const {
  const auto* p = sqlite3_column_text(stmt_, col);
  return p ? std::string(reinterpret_cast<const char*>(p),
                         static_cast<size_t>(sqlite3_column_bytes(stmt_, col)))
           : std::string();
}

double Stmt::real(int col) const {
  return sqlite3_column_double(stmt_, col);
}

double Stmt::real_opt(int col) const {
  return sqlite3_column_type(stmt_, col) == SQLITE_NULL ? -1.0 : sqlite3_column_double(stmt_, col);
}

int64_t Stmt::integer(int col) const {
  return sqlite3_column_int64(stmt_, col);
}

WriteTxn::WriteTxn(sqlite3* db, const std::string& path) : db_(db), path_(path) {
  exec(db_, path_, "BEGIN IMMEDIATE");
  open_ = true;
}

WriteTxn::~WriteTxn() {
  if (open_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

void WriteTxn::commit() {
  exec(db_, path_, "COMMIT");
  open_ = false;
}

ReadTxn::ReadTxn(sqlite3* db, const std::string& path)
    : db_(db), own_(sqlite3_get_autocommit(db) != 0) {
  if (own_) exec(db, path, "BEGIN");
}

ReadTxn::~ReadTxn() {
  if (own_) sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
}

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

bool backoff(int64_t start_ms, int attempt) {
  if (now_ms() - start_ms > kBusyTimeoutMs) return false;
  thread_local std::minstd_rand rng(std::random_device{}());
  const int cap = attempt < 6 ? 1 << attempt : 50;  // 1, 2, 4, ... 32, then 50 ms
  std::this_thread::sleep_for(std::chrono::milliseconds(1 + rng() % cap));
  return true;
}

}  // namespace conv::perfdb_detail
