// The import size and memory limits, with their environment overrides.
#include "limits.hpp"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string_view>

#include "conv/error.hpp"
#include "import_limit.hpp"
#include "quoted.hpp"

namespace conv::import {

namespace {

/// The value of `var` in MiB as bytes, or nothing when unset; a value that is not a positive
/// integer is an error naming the variable rather than a limit silently off.
std::optional<uint64_t> env_mib(const char* var) {
  const char* text = std::getenv(var);
  if (!text) return std::nullopt;
  const std::string_view s(text);
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 1 ||
      v > (uint64_t{1} << 40))
    throw Error(std::string(var) + "=" + quoted(s) +
                ": expected a size in MiB, an integer from 1 to 2^40");
  return v << 20;
}

std::string mib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

uint64_t max_parse_bytes(uint64_t file_bytes) {
  return env_mib("CONVTUNE_IMPORT_MAX_MEMORY_MB").value_or((uint64_t{128} << 20) + 4 * file_bytes);
}

}  // namespace

uint64_t checked_file_size(const Source& src) {
  check_import_size(src.path, "model");  // the message Source::fail would give
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(src.path, ec);
  if (ec) src.fail("cannot read: " + ec.message());
  return size;
}

void check_parse_estimate(const Source& src, uint64_t estimate, uint64_t file_bytes,
                          const std::string& what) {
  const uint64_t limit = max_parse_bytes(file_bytes);
  if (estimate > limit)
    src.fail(
        "reading it would take about " + mib(estimate) + " of memory (" + what + "), over the " +
        mib(limit) + " limit (" +
        (std::getenv("CONVTUNE_IMPORT_MAX_MEMORY_MB") ? "" : "128 MiB + 4 x the file's size; ") +
        "CONVTUNE_IMPORT_MAX_MEMORY_MB sets it)");
}

}  // namespace conv::import
