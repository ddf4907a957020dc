// The perfdb schema versions and the migration runner (see schema.hpp). The file format follows
// SQLite's own recommendations for application files: PRAGMA application_id marks the file as
// ours, PRAGMA user_version is the schema version, and a small `meta` table records provenance.
#include "schema.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>

#include "conv/error.hpp"
#include "sqlite_stmt.hpp"

#ifndef CONVTUNE_VERSION
#define CONVTUNE_VERSION "unknown"
#endif

namespace conv::perfdb_detail {

const std::vector<Migration>& migrations() {
  static const std::vector<Migration> steps = {
      {1, "winners, candidates and meta tables",
       // Times in milliseconds; NULL = not measured / not checked (the -1 of PerfCandidate).
       // Dates are UTC ISO 8601 text ("2024-05-01T12:00:00Z"), which sorts chronologically.
       R"sql(
CREATE TABLE meta (
  name  TEXT PRIMARY KEY NOT NULL,
  value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE winners (
  fingerprint TEXT NOT NULL,
  key         TEXT NOT NULL,
  path        TEXT NOT NULL CHECK (path IN ('oneshot', 'packed')),
  algo        TEXT NOT NULL,
  config      TEXT NOT NULL,
  median_ms   REAL NOT NULL,
  date        TEXT NOT NULL,
  version     TEXT NOT NULL,
  PRIMARY KEY (fingerprint, key, path)
) WITHOUT ROWID;
CREATE TABLE candidates (
  fingerprint      TEXT NOT NULL,
  key              TEXT NOT NULL,
  algo             TEXT NOT NULL,
  config           TEXT NOT NULL,
  status           TEXT NOT NULL,
  median_ms        REAL,
  min_ms           REAL,
  max_ms           REAL,
  packed_median_ms REAL,
  max_error        REAL,
  workspace_bytes  INTEGER NOT NULL DEFAULT 0,
  message          TEXT NOT NULL DEFAULT '',
  date             TEXT NOT NULL,
  version          TEXT NOT NULL,
  PRIMARY KEY (fingerprint, key, algo, config)
) WITHOUT ROWID;
INSERT INTO meta (name, value) VALUES
  ('format', 'convtune perf database'),
  ('created_by', 'convtune )sql" CONVTUNE_VERSION R"sql('),
  ('created_at', strftime('%Y-%m-%dT%H:%M:%SZ', 'now'));
)sql"},
      {2, "measurement quality of candidates and winners",
       // rounds 0 = quality unknown (measured before this schema); noisy is 0 or 1.
       R"sql(
ALTER TABLE candidates ADD COLUMN packed_min_ms REAL;
ALTER TABLE candidates ADD COLUMN rounds INTEGER NOT NULL DEFAULT 0;
ALTER TABLE candidates ADD COLUMN clean_rounds INTEGER NOT NULL DEFAULT 0;
ALTER TABLE candidates ADD COLUMN spread REAL;
ALTER TABLE candidates ADD COLUMN noisy INTEGER NOT NULL DEFAULT 0;
ALTER TABLE winners ADD COLUMN min_ms REAL;
ALTER TABLE winners ADD COLUMN rounds INTEGER NOT NULL DEFAULT 0;
ALTER TABLE winners ADD COLUMN clean_rounds INTEGER NOT NULL DEFAULT 0;
ALTER TABLE winners ADD COLUMN spread REAL;
ALTER TABLE winners ADD COLUMN noisy INTEGER NOT NULL DEFAULT 0;
)sql"},
      {3, "implementation version of each measured candidate, layer name of each winner",
       // algo_version '' = unknown (measured before this schema): such a candidate counts as
       // stale and is measured again.
       R"sql(
ALTER TABLE candidates ADD COLUMN algo_version TEXT NOT NULL DEFAULT '';
ALTER TABLE winners ADD COLUMN name TEXT NOT NULL DEFAULT '';
)sql"},
      {4, "timing mode in the fingerprint",
       // Rows measured before timing modes ran back to back on hot buffers: conv::Timing::hot.
       R"sql(
UPDATE winners SET fingerprint = fingerprint || '|timing=hot'
  WHERE instr(fingerprint, '|timing=') = 0;
UPDATE candidates SET fingerprint = fingerprint || '|timing=hot'
  WHERE instr(fingerprint, '|timing=') = 0;
)sql"},
  };
  return steps;
}

FileInfo inspect(sqlite3* db, const std::string& path) {
  FileInfo info;
  ReadTxn txn(db, path);
  {
    Stmt s(db, path, "PRAGMA application_id");
    if (s.step()) info.application_id = static_cast<int32_t>(s.integer(0));
  }
  {
    Stmt s(db, path, "PRAGMA user_version");
    if (s.step()) info.version = static_cast<int>(s.integer(0));
  }
  {
    Stmt s(db, path, "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name");
    while (s.step()) info.objects.push_back({s.text(0), s.text(1), s.text(2), s.text(3)});
  }
  if (info.application_id == kApplicationId)
    info.kind = FileInfo::convtune;
  else if (info.application_id == 0 && info.version == 0 && info.objects.empty())
    info.kind = FileInfo::empty;
  else
    info.kind = FileInfo::foreign;
  return info;
}

std::vector<SchemaObject> expected_objects(const std::vector<Migration>& steps, int version) {
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, std::vector<SchemaObject>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  // Only this build's own list has a stable identity worth caching (tests pass others).
  const bool own = &steps == &migrations();
  const auto key = std::make_pair(static_cast<const void*>(&steps), version);
  if (auto it = cache.find(key); own && it != cache.end()) return it->second;
  sqlite3* raw = nullptr;
  if (sqlite3_open_v2(":memory:", &raw, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    sqlite3_close_v2(raw);
    throw conv::Error("perfdb: cannot open an in-memory database to compare schemas");
  }
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> db(raw, sqlite3_close_v2);
  for (const Migration& m : steps)
    if (m.version <= version) exec(raw, ":memory:", m.sql);
  std::vector<SchemaObject> objects = inspect(raw, ":memory:").objects;
  if (own) cache[key] = objects;
  return objects;
}

void check_compatible(const FileInfo& info, const std::string& path,
                      const std::vector<Migration>& steps) {
  if (info.kind == FileInfo::empty) return;
  if (info.kind == FileInfo::foreign) {
    char id[16];
    std::snprintf(id, sizeof id, "0x%08x", static_cast<unsigned>(info.application_id));
    std::string tables;
    for (const auto& o : info.objects)
      if (o.type == "table") tables += (tables.empty() ? "" : ", ") + o.name;
    fail_not_perfdb(path, "an SQLite file of another application: application_id " +
                              std::string(id) + ", tables: " + (tables.empty() ? "none" : tables));
  }
  const int current = steps.empty() ? 0 : steps.back().version;
  if (info.version > current)
    throw conv::Error("perfdb: " + path + ": written by a newer convtune (schema " +
                      std::to_string(info.version) + ", this build reads up to " +
                      std::to_string(current) + "); use that convtune or another perfdb file");
  if (info.version < 0) fail_not_perfdb(path, "schema version " + std::to_string(info.version));
  const std::vector<SchemaObject> expected = expected_objects(steps, info.version);
  if (info.objects == expected) return;
  const std::string schema = "schema " + std::to_string(info.version);
  for (const SchemaObject& o : info.objects)
    if (std::find_if(expected.begin(), expected.end(), [&](const SchemaObject& e) {
          return e.type == o.type && e.name == o.name;
        }) == expected.end())
      fail_not_perfdb(path, schema + " with an unexpected " + o.type + " \"" + o.name + "\"");
  for (const SchemaObject& e : expected) {
    auto o = std::find_if(info.objects.begin(), info.objects.end(), [&](const SchemaObject& f) {
      return f.type == e.type && f.name == e.name;
    });
    if (o == info.objects.end())
      fail_not_perfdb(path, schema + " without " + e.type + " " + e.name);
    if (!(*o == e))
      fail_not_perfdb(path, schema + " with " + e.type + " " + e.name +
                                " not as convtune creates it (columns, constraints or defaults "
                                "differ)");
  }
  fail_not_perfdb(path, schema + " not as convtune creates it");
}

int migrate(sqlite3* db, const std::string& path, const std::vector<Migration>& steps) {
  return with_retry(db, path, [&] {
    WriteTxn txn(db, path);
    // Another process may have created or migrated the file since open() looked at it.
    const FileInfo info = inspect(db, path);
    check_compatible(info, path, steps);
    const int from = info.version;
    for (const Migration& m : steps) {
      if (m.version <= from) continue;
      try {
        exec(db, path, m.sql);
      } catch (const SqliteError& e) {
        if (e.busy()) throw;
        throw conv::Error("perfdb: " + path + ": migration to schema " + std::to_string(m.version) +
                          " (" + m.summary + ") failed, file left at schema " +
                          std::to_string(from) + ": " + e.detail);
      }
    }
    if (info.kind == FileInfo::empty)
      exec(db, path, "PRAGMA application_id = " + std::to_string(kApplicationId));
    if (!steps.empty() && steps.back().version > from)
      exec(db, path, "PRAGMA user_version = " + std::to_string(steps.back().version));
    txn.commit();
    return from;
  });
}

}  // namespace conv::perfdb_detail
