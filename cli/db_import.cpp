// autotune db import: reading an export (`db export --json`) back, every field checked. Its own
// object library, so that the fuzz target fuzz/fuzz_db_import.cpp reads files as autotune does.
#include "db_import.hpp"

#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "import_limit.hpp"
#include "iso_date.hpp"
#include "options.hpp"
#include "perf_rows.hpp"
#include "quoted.hpp"
#include "regular_file.hpp"

namespace conv::cli {

namespace {

using Json = nlohmann::json;

// Reading the text form back: every field checked, errors name the entry and field.
struct Reader {
  std::string file;
  static std::string name(const std::string& where, const char* field) {
    return where.empty() ? field : where + "." + field;
  }
  const Json& at(const Json& o, const std::string& where, const char* field) const {
    if (!o.is_object()) fail(where, "expected an object");
    auto it = o.find(field);
    if (it == o.end()) fail(name(where, field), "missing");
    return *it;
  }
  std::string text(const Json& o, const std::string& where, const char* field,
                   bool non_empty = true) const {
    const Json& v = at(o, where, field);
    if (!v.is_string()) fail(name(where, field), "expected a string");
    std::string s = v.get<std::string>();
    if (non_empty && s.empty()) fail(name(where, field), "must not be empty");
    if (s.size() > 4096) fail(name(where, field), "longer than 4096 characters");
    if (s.find('\0') != std::string::npos) fail(name(where, field), "holds a NUL character");
    return s;
  }
  // A problem key exactly as ConvProblem::key() writes it: a row under any other text could
  // never be looked up, and "mb0" is no convolution at all.
  std::string key(const Json& o, const std::string& where) const {
    std::string k = text(o, where, "key");
    const std::string why = conv::perf_rows::key_problem(k);
    if (why.empty()) return k;
    fail(where + ".key", why + " (expected e.g. " + conv::ConvProblem{}.key() + ")");
  }
  // A number from 0 to 1e300 as the database holds it, or null for "unknown" (-1) where
  // `nullable`; with `infinite`, also "inf" (export's spelling of an error on a non-finite
  // output, which JSON has no number for).
  double num(const Json& o, const std::string& where, const char* field, bool nullable = true,
             bool infinite = false) const {
    const Json& v = at(o, where, field);
    if (v.is_null() && nullable) return -1;
    if (infinite && v.is_string() && v.get<std::string>() == "inf") return HUGE_VAL;
    if (!v.is_number())
      fail(name(where, field), infinite ? "expected a number or \"inf\"" : "expected a number");
    const double d = v.get<double>();
    if (!(d >= 0 && d <= conv::perf_rows::kMaxNumber))
      fail(name(where, field), "expected a number from 0 to 1e300");
    return d;
  }
  // A byte count as the database holds it: an integer in [0, 2^63), which db check accepts and
  // db export writes (a float had been required, so 2^63 - 1 exported but did not import), or a
  // whole float below 2^53 (earlier exports wrote 14784.0; larger floats are not exact).
  uint64_t count(const Json& o, const std::string& where, const char* field) const {
    const Json& v = at(o, where, field);
    if (v.is_number_unsigned() && v.get<uint64_t>() <= uint64_t{INT64_MAX})
      return v.get<uint64_t>();
    if (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() >= 0)
      return static_cast<uint64_t>(v.get<int64_t>());
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (d >= 0 && d < 0x1p53 && d == std::floor(d)) return static_cast<uint64_t>(d);
    }
    fail(name(where, field),
         "expected a whole number of bytes: an integer from 0 to 2^63 - 1, or a float below 2^53");
  }
  conv::MeasureQuality quality(const Json& o, const std::string& where) const {
    const Json& q = at(o, where, "quality");
    const std::string w = where + ".quality";
    conv::MeasureQuality m;
    const double rounds = num(q, w, "rounds", false), clean = num(q, w, "clean_rounds", false);
    if (rounds > 1e9 || clean > rounds || rounds != std::floor(rounds) ||
        clean != std::floor(clean))
      fail(w, "rounds and clean_rounds must be integers with clean_rounds <= rounds");
    m.rounds = static_cast<int>(rounds);
    m.clean_rounds = static_cast<int>(clean);
    m.spread = num(q, w, "spread");
    const Json& noisy = at(q, w, "noisy");
    if (!noisy.is_boolean()) fail(w + ".noisy", "expected true or false");
    m.noisy = noisy.get<bool>();
    return m;
  }
  std::string date(const Json& o, const std::string& where) const {
    std::string d = text(o, where, "date");
    if (const std::string why = conv::date_problem(d); !why.empty()) fail(where + ".date", why);
    return d;
  }
  // Text printed one row per line (a layer name into batch files, a device fingerprint into
  // tables): no control characters.
  std::string label(const Json& o, const std::string& where, const char* field,
                    bool non_empty) const {
    std::string t = text(o, where, field, non_empty);
    if (const std::string why = conv::perf_rows::label_problem(t); !why.empty())
      fail(name(where, field), why);
    return t;
  }
  // min <= median <= max where known: a row otherwise contradicts itself.
  void ordered(const std::string& where, double min_ms, double median_ms, double max_ms) const {
    if (!conv::perf_rows::times_ordered(min_ms, median_ms, max_ms))
      fail(where, "expected min_ms <= median_ms <= max_ms");
  }
  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw UsageError("import: " + file + ": " + where + ": " + what);
  }
};

// The export format nests 4 deep ({"candidates": [{"quality": {...}}]}); the parser's stacks
// grow with the depth (20 MB of `[` took 1.57 GB), so deeper input is refused as it is read.
constexpr size_t kMaxJsonDepth = 32;

// Where the parser is in the file, and how far it may read.
struct ReadPosition {
  std::string file;
  uint64_t limit = 0;
  uint64_t bytes = 0, line = 1, column = 0;
  std::string at() const {
    return "import: " + file + ": line " + std::to_string(line) + ", column " +
           std::to_string(column) + ": ";
  }
};

// "20 MB" (the CLI's limits are whole MB), else bytes.
std::string limit_text(uint64_t bytes) {
  return bytes % (1 << 20) ? std::to_string(bytes) + "-byte" : std::to_string(bytes >> 20) + " MB";
}

// The file's bytes for the parser, counted: messages name the line and column, and a file that
// stat() called small but that grows while it is read (or a /proc file, whose size is 0) is cut
// off at the size limit.
class CountingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = char;
  CountingIterator() = default;  // the end
  CountingIterator(std::istream& in, ReadPosition* pos) : it_(in), pos_(pos) {}
  char operator*() const { return *it_; }
  CountingIterator& operator++() {
    if (*it_ == '\n') {
      ++pos_->line;
      pos_->column = 0;
    } else {
      ++pos_->column;
    }
    if (++pos_->bytes > pos_->limit)
      throw UsageError("import: " + pos_->file + ": over the " + limit_text(pos_->limit) +
                       " limit while read (CONVTUNE_IMPORT_MAX_FILE_MB)");
    ++it_;
    return *this;
  }
  bool operator==(const CountingIterator& o) const { return it_ == o.it_; }
  bool operator!=(const CountingIterator& o) const { return it_ != o.it_; }

 private:
  std::istreambuf_iterator<char> it_;
  ReadPosition* pos_ = nullptr;
};

// Builds the document as Json::parse does, refusing as it reads nesting past kMaxJsonDepth and a
// key given twice in one object (the parser keeps the last silently, so a file with two
// "winners" arrays would have imported one of them as if it were all). Not Json::parse with a
// callback: its end of each object scans the enclosing array, quadratic (3.5M `{}` in one array
// ran over 10 minutes).
class DocumentBuilder : public nlohmann::json_sax<Json> {
 public:
  explicit DocumentBuilder(const ReadPosition& pos) : pos_(pos) {}
  Json document;

  bool null() override { return add(nullptr); }
  bool boolean(bool v) override { return add(v); }
  bool number_integer(number_integer_t v) override { return add(v); }
  bool number_unsigned(number_unsigned_t v) override { return add(v); }
  bool number_float(number_float_t v, const string_t&) override { return add(v); }
  bool string(string_t& v) override { return add(std::move(v)); }
  bool binary(binary_t& v) override { return add(Json::binary(std::move(v))); }
  bool start_object(std::size_t) override {
    open(Json::object());
    keys_.emplace_back();
    return true;
  }
  bool key(string_t& k) override {
    if (!keys_.back().insert(k).second)
      throw UsageError(pos_.at() + "key " + conv::quoted(k) +
                       " given twice in one object (which one counts is undefined)");
    key_ = std::move(k);
    return true;
  }
  bool end_object() override {
    keys_.pop_back();
    open_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    open(Json::array());
    return true;
  }
  bool end_array() override {
    open_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const Json::exception& e) override {
    throw UsageError("import: " + pos_.file + ": not JSON: " + e.what());
  }

 private:
  // The open arrays and objects, innermost last; only the innermost grows, so the pointers into
  // its enclosing one stay valid.
  std::vector<Json*> open_;
  std::vector<std::set<std::string>> keys_;  // of each open object
  std::string key_;                          // the key of the next value in an object
  const ReadPosition& pos_;

  Json* place(Json&& v) {
    if (open_.empty()) return &(document = std::move(v));
    Json& in = *open_.back();
    if (in.is_object()) return &(in[key_] = std::move(v));
    in.push_back(std::move(v));
    return &in.back();
  }
  bool add(Json&& v) {
    place(std::move(v));
    return true;
  }
  void open(Json&& empty) {
    if (open_.size() >= kMaxJsonDepth)
      throw UsageError(pos_.at() + "nested deeper than " + std::to_string(kMaxJsonDepth) +
                       " arrays and objects (an export nests 4 deep)");
    open_.push_back(place(std::move(empty)));
  }
};

// A fingerprint from before timing modes (exports of schema 3 and older) was timed hot, as
// perf database migration 4 records it.
std::string timed(std::string fingerprint) {
  if (fingerprint.find("|timing=") == std::string::npos) fingerprint += "|timing=hot";
  return fingerprint;
}

}  // namespace

conv::PerfDb::Rows read_export(std::istream& in, const std::string& file, uint64_t max_bytes) {
  ReadPosition pos;
  pos.file = file;
  pos.limit = max_bytes;
  DocumentBuilder builder(pos);
  // The builder throws on every error, with its line and column.
  if (!Json::sax_parse(CountingIterator(in, &pos), CountingIterator(), &builder))
    throw UsageError("import: " + file + ": not JSON");
  const Json& j = builder.document;
  Reader r{file};
  const auto format = j.is_object() ? j.find("format") : j.end();
  if (!j.is_object() || format == j.end() || *format != "convtune perfdb export")
    r.fail("format", "expected \"convtune perfdb export\" (made by autotune db export --json)");
  if (r.num(j, "", "format_version", false) != 1)
    r.fail("format_version", "this build reads format_version 1");
  // The source file's schema (informational: the rows are converted), but a bad one means the
  // file was not written by an export.
  if (j.contains("schema")) {
    const Json& v = j["schema"];
    if (!v.is_number_integer() || v.get<int64_t>() < 1 ||
        v.get<int64_t>() > conv::PerfDb::schema_version())
      // An array or object is not echoed: dumping a deeply nested one overflowed the stack.
      r.fail("schema",
             "expected an integer from 1 to " + std::to_string(conv::PerfDb::schema_version()) +
                 ", got " +
                 (v.is_structured() ? std::string(v.type_name()) : v.dump().substr(0, 40)));
  }
  conv::PerfDb::Rows rows;
  const Json& winners = r.at(j, "", "winners");
  const Json& candidates = r.at(j, "", "candidates");
  if (!winners.is_array()) r.fail("winners", "expected an array");
  if (!candidates.is_array()) r.fail("candidates", "expected an array");
  // Two entries for one row would silently lose one of them: refused, naming both.
  std::map<std::string, size_t> seen;
  auto once = [&](const std::string& row_key, const std::string& where, size_t i) {
    auto [it, fresh] = seen.emplace(row_key, i);
    if (!fresh) r.fail(where, "the same row as entry " + std::to_string(it->second));
  };
  for (size_t i = 0; i < winners.size(); ++i) {
    const Json& o = winners[i];
    const std::string w = "winners[" + std::to_string(i) + "]";
    conv::PerfDb::WinnerRow row;
    row.fingerprint = timed(r.label(o, w, "fingerprint", true));
    row.key = r.key(o, w);
    const std::string path = r.text(o, w, "path");
    if (path != "oneshot" && path != "packed") r.fail(w + ".path", "expected oneshot or packed");
    row.path = path == "packed" ? conv::ExecPath::packed : conv::ExecPath::oneshot;
    row.winner.name = r.label(o, w, "name", false);  // as the descriptor parser refuses them
    row.winner.algo_id = r.text(o, w, "algo");
    row.winner.config = r.text(o, w, "config", false);
    row.winner.median_ms = r.num(o, w, "median_ms", false);
    row.winner.min_ms = r.num(o, w, "min_ms");
    r.ordered(w, row.winner.min_ms, row.winner.median_ms, -1);
    row.winner.quality = r.quality(o, w);
    row.winner.date = r.date(o, w);
    row.winner.version = r.text(o, w, "version", false);
    once("w\n" + row.fingerprint + "\n" + row.key + "\n" + path, w, i);
    rows.winners.push_back(std::move(row));
  }
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Json& o = candidates[i];
    const std::string w = "candidates[" + std::to_string(i) + "]";
    conv::PerfDb::CandidateRow row;
    conv::PerfCandidate& c = row.candidate;
    row.fingerprint = timed(r.label(o, w, "fingerprint", true));
    row.key = r.key(o, w);
    c.algo_id = r.text(o, w, "algo");
    c.config = r.text(o, w, "config", false);
    c.algo_version = r.text(o, w, "algo_version", false);
    const std::optional<conv::CandidateStatus> status =
        conv::parse_candidate_status(r.text(o, w, "status"));
    if (!status) r.fail(w + ".status", conv::perf_rows::kStatusRule);
    c.status = *status;
    c.median_ms = r.num(o, w, "median_ms");
    // The tuner reuses an "ok" row's times instead of measuring: without one it has none.
    if (c.status == conv::CandidateStatus::ok && c.median_ms < 0)
      r.fail(w + ".median_ms", "expected a time for a candidate with status ok");
    c.min_ms = r.num(o, w, "min_ms");
    c.max_ms = r.num(o, w, "max_ms");
    r.ordered(w, c.min_ms, c.median_ms, c.max_ms);
    c.packed_median_ms = r.num(o, w, "packed_median_ms");
    c.packed_min_ms = r.num(o, w, "packed_min_ms");
    c.max_error = r.num(o, w, "max_error", true, true);
    c.workspace_bytes = r.count(o, w, "workspace_bytes");
    c.message = r.text(o, w, "message", false);
    c.quality = r.quality(o, w);
    c.date = r.date(o, w);
    row.version = r.text(o, w, "version", false);
    const std::string row_key =
        "c\n" + row.fingerprint + "\n" + row.key + "\n" + c.algo_id + "\n" + c.config;
    once(row_key, w, i);
    rows.candidates.push_back(std::move(row));
  }
  return rows;
}

conv::PerfDb::Rows import_json(const std::string& file) {
  uint64_t max_bytes = 0;
  try {
    conv::require_regular_file(file, "import:");
    conv::check_import_size(file, "import:");
    max_bytes = conv::import_max_file_bytes();
  } catch (const conv::Error& e) {
    throw UsageError(e.what());
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) throw UsageError("import: " + file + ": cannot be read");
  return read_export(in, file, max_bytes);
}

}  // namespace conv::cli
