// conv::PerfDb: the SQLite perf database of winners and measured candidates (MIOpen's perf db).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "conv/error.hpp"

struct sqlite3;

namespace conv {

/// Which execution path a winner is for: a one-shot call (weights transformed inside the call,
/// what best_forward pays) or a Plan with pre-packed weights.
enum class ExecPath { oneshot, packed };
const char* to_string(ExecPath p);

/// The stored winner for one (fingerprint, key, path).
struct PerfWinner {
  std::string algo_id;
  std::string config;
  double median_ms = 0;
  std::string date;     ///< UTC, ISO 8601, when stored
  std::string version;  ///< convtune version that measured it
};

/// One measured candidate (all of them are kept, not only the winner).
struct PerfCandidate {
  std::string algo_id;
  std::string config;
  std::string status;  ///< "ok", "rejected" (error above bound), "failed" (threw), "skipped"
  double median_ms = -1, min_ms = -1, max_ms = -1;  ///< one-shot times; -1 = not measured
  double packed_median_ms = -1;                     ///< with pre-packed weights; -1 = n/a
  double max_error = -1;  ///< max |y - y_ref| / sum|x*w| per output; -1 = not checked
  double workspace_bytes = 0;
  std::string message;  ///< reason for rejected/failed/skipped
};

/// A SQLite perf database file (WAL mode, schema version table with migrations).
///
/// Every write is one IMMEDIATE transaction with a busy timeout, so concurrent writers from
/// several processes all succeed and lose nothing; a killed writer leaves the last committed state.
/// Rows are keyed by (fingerprint, key[, path]); lookups only ever match this exact fingerprint,
/// and files of another (newer) schema are refused.
class PerfDb {
 public:
  /// Opens (creating file, parent directories and schema when `read_only` is false) the database.
  /// Throws conv::Error ("perfdb: <path>: ...") when the file is not a convtune perf database,
  /// is of a newer schema version, cannot be created, or is not writable for a writer.
  static PerfDb open(const std::string& path, bool read_only = false);

  /// The default path: $CONVTUNE_PERFDB, else $XDG_CACHE_HOME/convtune/perfdb.sqlite, else
  /// $HOME/.cache/convtune/perfdb.sqlite.
  static std::string default_path();

  PerfDb(PerfDb&&) noexcept;
  PerfDb& operator=(PerfDb&&) noexcept;
  ~PerfDb();

  const std::string& path() const { return path_; }

  std::optional<PerfWinner> lookup(const std::string& fingerprint, const std::string& key,
                                   ExecPath path = ExecPath::oneshot) const;

  /// Stores, in one transaction, all measured candidates of (fingerprint, key) (replacing the
  /// earlier measurements of the same candidates) and the winner for each path given.
  /// A null winner pointer leaves that path's stored winner as it was.
  void store(const std::string& fingerprint, const std::string& key,
             const std::vector<PerfCandidate>& candidates, const PerfWinner* oneshot_winner,
             const PerfWinner* packed_winner);

  struct Entry {
    std::string key;
    ExecPath path;
    PerfWinner winner;
  };
  /// All winners stored for `fingerprint`, ordered by key then path.
  std::vector<Entry> winners(const std::string& fingerprint) const;

  /// The measured candidates of (fingerprint, key), ordered by one-shot median time.
  std::vector<PerfCandidate> candidates(const std::string& fingerprint,
                                        const std::string& key) const;

  /// Current schema version written by this build.
  static int schema_version();

 private:
  PerfDb() = default;
  std::string path_;
  sqlite3* db_ = nullptr;
};

}  // namespace conv
