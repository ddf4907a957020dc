// The rules a perf database row obeys, whoever reads or writes it: PerfDb's readers (lookups
// skip a row that breaks them; check, merge and export refuse its file), PerfDb::store() and
// `autotune db import`. Each check returns "" for a good value, else why (without the field).
#pragma once

#include <algorithm>
#include <string>
#include <string_view>

#include "conv/error.hpp"
#include "conv/perfdb.hpp"
#include "conv/problem.hpp"
#include "quoted.hpp"

namespace conv::perf_rows {

/// The largest time, spread or error a row holds (an error may also be +infinity): no
/// measurement comes near it, and a database file from elsewhere is refused above it.
inline constexpr double kMaxNumber = 1e300;

/// What key_problem() says of a descriptor whose own key is other text.
inline constexpr const char* kNotCanonicalKey = "not the canonical key of a problem";

/// "" when `key` is exactly ConvProblem::key() of a problem (a row under any other text is never
/// looked up); kNotCanonicalKey, or the descriptor parser's error when it is no problem at all.
inline std::string key_problem(const std::string& key) {
  try {
    if (parse_descriptor(key).key() == key) return "";
  } catch (const Error& e) {
    return e.what();
  }
  return kNotCanonicalKey;
}

/// Text printed one row per line (a layer name into batch files, a fingerprint into tables).
inline std::string label_problem(std::string_view text) {
  return std::any_of(text.begin(), text.end(), is_control)
             ? "control character (not allowed in names and fingerprints)"
             : "";
}

/// What parse_candidate_status() accepts, for messages.
inline constexpr const char* kStatusRule = "expected ok, rejected, failed or skipped";

/// min <= median <= max where known (a negative time is unknown): a row otherwise contradicts
/// itself.
inline bool times_ordered(double min_ms, double median_ms, double max_ms = -1) {
  return !(min_ms >= 0 && median_ms >= 0 && min_ms > median_ms) &&
         !(max_ms >= 0 && median_ms >= 0 && median_ms > max_ms);
}

}  // namespace conv::perf_rows
