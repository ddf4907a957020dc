// conv::PerfDb: the SQLite perf database of winners and measured candidates (MIOpen's perf db).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "conv/error.hpp"

namespace conv {

/// Which execution path a winner is for: a one-shot call (weights transformed inside the call,
/// what best_forward pays) or a Plan with pre-packed weights.
enum class ExecPath { oneshot, packed };
const char* to_string(ExecPath p);

/// How far a measured time can be trusted on a shared machine. The tuner times candidates in
/// interleaved rounds and detects rounds that another process disturbed (see TuneOptions).
struct MeasureQuality {
  int rounds = 0;        ///< timing rounds; 0 = unknown (stored before perfdb schema 2)
  int clean_rounds = 0;  ///< rounds in which no disturbance was detected
  double spread = -1;    ///< (median - min) / min over the clean rounds; -1 = fewer than 2
  /// No clean measurement was possible within the budget: every round was disturbed, so the
  /// time is only an upper bound. For a winner: some candidate that could have won is noisy.
  /// `autotune tune` without --force measures noisy entries again.
  bool noisy = false;
};

/// The stored winner for one (fingerprint, key, path).
struct PerfWinner {
  std::string algo_id;
  std::string config;
  double median_ms = 0;    ///< median of the clean rounds on this path, ms
  double min_ms = -1;      ///< the estimate the choice was made on: fastest clean round, ms
  MeasureQuality quality;  ///< of the winner's time; noisy also when the decision is unsure
  std::string date;        ///< UTC, ISO 8601, when stored; store() fills an empty one with now
  std::string version;     ///< convtune version that measured it; empty = this build's
  std::string name;  ///< the layer's name when tuned (ConvProblem::name), for people; may be ""
};

/// What became of one candidate of a tune.
enum class CandidateStatus {
  ok,        ///< measured, output within its error bound
  rejected,  ///< error above its bound: cannot win
  failed,    ///< threw: cannot win
  skipped    ///< not measured (time budget, workspace limit)
};
/// "ok", "rejected", "failed" or "skipped": the text perf databases and JSON exports hold.
const char* to_string(CandidateStatus s);
/// The status `text` names, or std::nullopt for any other text (a file from elsewhere).
std::optional<CandidateStatus> parse_candidate_status(std::string_view text);

/// One candidate's measurement: what the tuner measures (CandidateResult, tuner.hpp) and the
/// perf database stores (PerfCandidate) share these fields.
struct Measurement {
  std::string algo_id;
  std::string config;
  CandidateStatus status = CandidateStatus::ok;
  std::string message;  ///< reason for rejected/failed/skipped
  /// One-shot times, ms: median and minimum of the clean rounds (of all rounds when none was
  /// clean), slowest round; -1 = not measured. Candidates are ranked by min_ms.
  double median_ms = -1, min_ms = -1, max_ms = -1;
  double packed_median_ms = -1, packed_min_ms = -1;  ///< with pre-packed weights; -1 = n/a
  /// Normalized error max |y - y_ref| / s_o with the algorithm's error scale s_o (the contract
  /// of Algorithm::error_bound); -1 = not checked.
  double max_error = -1;
  uint64_t workspace_bytes = 0;  ///< bytes
  MeasureQuality quality;        ///< of the one-shot time; noisy when either path's time is
};

/// One measured candidate as stored (all of them are kept, not only the winner).
struct PerfCandidate : Measurement {
  std::string date;  ///< UTC, ISO 8601, when stored; store() fills an empty one with now
  /// Algorithm::version() of the implementation measured; "" = unknown (stored before perfdb
  /// schema 3), which counts as out of date.
  std::string algo_version;
};

/// A SQLite perf database file (WAL mode, schema version with migrations; see perfdb/schema.cpp).
///
/// Every write is one IMMEDIATE transaction with a 30 s busy timeout and retry on SQLITE_BUSY, so
/// concurrent writers from several processes all succeed and lose nothing; a killed writer leaves
/// the last committed state. Rows are keyed by (fingerprint, key[, path]); lookups only ever match
/// this exact fingerprint, and files of a newer schema are refused.
///
/// Files: a convtune perfdb carries PRAGMA application_id 0x6376746e ("cvtn") and its schema
/// version in PRAGMA user_version. A missing or empty (0-byte) file is a new, empty database: a
/// writer creates the schema in it, a read-only open sees no entries. Any other file (not SQLite,
/// truncated or damaged, another application's SQLite file) is refused with a conv::Error.
///
/// Each PerfDb is one SQLite connection: use one per thread (calls on one object are not
/// synchronised beyond SQLite's own mutex). Move-only.
class PerfDb {
 public:
  /// Opens the database at `path`. A writer (`read_only` false) creates the parent directories
  /// and the file, switches it to WAL mode and migrates an older schema forward; a reader
  /// (SQLITE_OPEN_READONLY) never changes the file and reads schemas from the oldest readable one
  /// up to this build's. Throws conv::Error "perfdb: <path>: ..." when the file is not a convtune
  /// perf database ("not a convtune perf database (...)"), was written by a newer convtune
  /// ("written by a newer convtune (schema N, this build reads up to M)"), cannot be created, does
  /// not exist (reader), or is not writable (writer).
  static PerfDb open(const std::string& path, bool read_only = false);

  /// The default path: $CONVTUNE_PERFDB, else $XDG_CACHE_HOME/convtune/perfdb.sqlite (when it is
  /// an absolute path, as the XDG spec requires), else $HOME/.cache/convtune/perfdb.sqlite.
  /// Empty variables count as unset. Throws conv::Error when none is set.
  static std::string default_path();

  PerfDb(PerfDb&&) noexcept;
  PerfDb& operator=(PerfDb&&) noexcept;
  ~PerfDb();

  const std::string& path() const { return path_; }
  bool read_only() const { return read_only_; }

  /// The winner stored for exactly (fingerprint, key, path), or nullopt.
  std::optional<PerfWinner> lookup(const std::string& fingerprint, const std::string& key,
                                   ExecPath path = ExecPath::oneshot) const;

  /// Stores, in one transaction, all measured candidates of (fingerprint, key) (replacing the
  /// earlier measurements of the same (algo_id, config); other candidates stay) and the winner for
  /// each path given, replacing that path's earlier winner. A null winner pointer leaves that
  /// path's stored winner as it was. `key` is ConvProblem::key() of the problem; a winner's
  /// name is stored with control characters as '_'. Throws conv::Error ("PerfDb::store: <field>:
  /// ...") when the database was opened read-only, when fingerprint, key or an algo_id is empty,
  /// the key is not a problem's canonical key, the fingerprint holds a control character, a
  /// status is not ok/rejected/failed/skipped, an "ok" candidate has no median_ms, a time is not
  /// finite, or min_ms <= median_ms <= max_ms does not hold where known: rows the readers would
  /// refuse are not written.
  void store(const std::string& fingerprint, const std::string& key,
             const std::vector<PerfCandidate>& candidates, const PerfWinner* oneshot_winner,
             const PerfWinner* packed_winner);

  struct Entry {
    std::string key;
    ExecPath path;
    PerfWinner winner;
  };
  /// All winners stored for `fingerprint`, ordered by key then path (oneshot before packed).
  std::vector<Entry> winners(const std::string& fingerprint) const;

  /// The measured candidates of (fingerprint, key), ordered by one-shot time estimate (min_ms;
  /// fastest first, unmeasured ones last), ties by algo_id then config.
  std::vector<PerfCandidate> candidates(const std::string& fingerprint,
                                        const std::string& key) const;

  /// Copies every row of the perfdb at `other_path` (all fingerprints) into this one, in one
  /// transaction. A row whose primary key already exists here is replaced only when the other
  /// row's date is newer. Returns the number of rows inserted or replaced. Throws conv::Error when
  /// this database is read-only or `other_path` is not a readable convtune perf database.
  size_t merge(const std::string& other_path);

  /// merge() of several files in one transaction: all of them or none (every file is opened
  /// and checked first; one with a malformed date is refused). Returns the rows inserted or
  /// replaced per file.
  std::vector<size_t> merge(const std::vector<std::string>& other_paths);

  /// Every row, for export and review: winners ordered by fingerprint, key, path; candidates
  /// by fingerprint, key, algo_id, config.
  struct WinnerRow {
    std::string fingerprint, key;
    ExecPath path = ExecPath::oneshot;
    PerfWinner winner;
  };
  struct CandidateRow {
    std::string fingerprint, key;
    PerfCandidate candidate;
    std::string version;  ///< convtune version that stored it
  };
  struct Rows {
    std::vector<WinnerRow> winners;
    std::vector<CandidateRow> candidates;
  };
  Rows rows() const;

  /// Writes `rows` (e.g. read back from an export) as merge() does: one transaction, a row
  /// whose primary key exists here replaced only by a newer date; dates and versions are kept.
  /// Returns the rows inserted or replaced. Throws conv::Error naming the row and field when a
  /// fingerprint, key, algo_id, status or date is empty, or when the database is read-only.
  size_t import_rows(const Rows& rows);

  /// SQLite's full PRAGMA integrity_check: "ok", or the first problems found; then
  /// first_bad_row()'s.
  std::string integrity_check() const;

  /// "" when every row holds values convtune writes, else the first other row and column, e.g.
  /// "winners row <key> (oneshot): median_ms: expected a number from 0 to 1e300". Lookups skip such
  /// rows, rows() throws conv::Error for them and merge() refuses their file.
  std::string first_bad_row() const;

  /// The schema version of the open file (older files opened read-only keep theirs).
  int file_schema_version() const { return version_; }

  /// Whether `path` exists, or cannot be checked (an unreadable directory: open() then says
  /// why). Never throws.
  static bool file_exists(const std::string& path);

  /// Current schema version written by this build.
  static int schema_version();

 private:
  struct Connection;         // the SQLite connection, defined in perfdb.cpp
  struct ConnectionCloser {  // closes it (sqlite3_close_v2), so a PerfDb owns its connection
    void operator()(Connection* c) const noexcept;
  };
  PerfDb() = default;
  Connection& conn() const;
  std::string path_;
  std::unique_ptr<Connection, ConnectionCloser> db_;
  bool read_only_ = false;
  int version_ = 0;  ///< the file's schema (a read-only open reads older schemas as they are)
};

/// The read-only system perf databases, consulted after the user's (MIOpen's system perf db):
/// the files named in $CONVTUNE_SYSTEM_PERFDB (':'-separated, empty entries ignored), then the
/// *.sqlite files in <datadir>/convtune/perfdb/ next to the installed library (e.g.
/// /usr/local/share/convtune/perfdb/ for /usr/local/lib/libconvtune.so), sorted by name. The
/// variable's entries are returned whether they exist or not (opening them reports why not);
/// ':' cannot be part of a path there.
std::vector<std::string> system_perfdb_paths();

}  // namespace conv
