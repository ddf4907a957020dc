// The perfdb schema: how a file is recognised as a convtune perf database, its versions, and the
// migrations that bring an older file forward. Internal to perfdb/ (and its tests).
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <vector>

namespace conv::perfdb_detail {

/// PRAGMA application_id of every perfdb file: "cvtn" in ASCII. It is what tells our file from
/// another application's SQLite file.
constexpr int32_t kApplicationId = 0x6376746e;

/// One schema step. Applying it to a file of version `version - 1` yields version `version`.
struct Migration {
  int version;
  const char* summary;
  std::string sql;  ///< statements run inside the migration transaction
};

/// The schema history of this build, in order; migrations()[i].version == i + 1. Append a step to
/// change the schema; never edit a released one. The last step's version is the current schema.
const std::vector<Migration>& migrations();

/// The oldest schema whose tables this build's read queries understand. A read-only open (which
/// cannot migrate) accepts files from this version up to the current one.
constexpr int kOldestReadableVersion = 1;

/// One entry of sqlite_master: a table, index, view or trigger, with the SQL that made it.
struct SchemaObject {
  std::string type, name, table, sql;
  bool operator==(const SchemaObject& o) const {
    return type == o.type && name == o.name && table == o.table && sql == o.sql;
  }
};

/// What an opened SQLite file holds, read in one snapshot.
struct FileInfo {
  enum Kind {
    empty,     ///< no schema at all (a new or 0-byte file): becomes a perfdb when written
    convtune,  ///< carries our application_id
    foreign,   ///< any other SQLite file
  } kind = empty;
  int32_t application_id = 0;
  int version = 0;                    ///< PRAGMA user_version
  std::vector<SchemaObject> objects;  ///< sqlite_master, ordered by type then name
};

/// Reads application_id, user_version and the table names. Throws conv::Error
/// ("not a convtune perf database (...)") when the file is not SQLite at all.
FileInfo inspect(sqlite3* db, const std::string& path);

/// Throws the "not a convtune perf database" / "newer convtune" conv::Error for a file that no
/// migration can turn into a perfdb of `steps`; returns normally otherwise. A file marked as ours
/// must hold exactly the objects `steps` create up to its version: a database from elsewhere is
/// untrusted input, and any extra trigger, view, table, index, constraint or generated column
/// (which SQLite would run while we read or check the file) is refused, naming the object.
void check_compatible(const FileInfo& info, const std::string& path,
                      const std::vector<Migration>& steps);

/// The objects a perfdb of `version` holds: `steps` up to it applied to an empty in-memory
/// database (cached per list and version).
std::vector<SchemaObject> expected_objects(const std::vector<Migration>& steps, int version);

/// Brings the file to the last version of `steps` in one IMMEDIATE transaction (all steps or none;
/// a failed step leaves the file as it was and throws conv::Error naming the step). The version is
/// read again under the write lock, so processes that open a new file at the same time create its
/// schema once. Sets application_id when starting from an empty file. Returns the version the file
/// had before.
int migrate(sqlite3* db, const std::string& path, const std::vector<Migration>& steps);

}  // namespace conv::perfdb_detail
