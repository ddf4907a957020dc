// libFuzzer target: `autotune db import`'s reading of an export file (conv::cli::read_export,
// cli/db_import.cpp) on the input bytes. A UsageError naming what is wrong (or a conv::Error) is
// the promised answer; anything else escaping, a signal, a sanitizer report, a hang (-timeout)
// or memory past -rss_limit_mb is a finding.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "conv/error.hpp"
#include "db_import.hpp"
#include "options.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    // The file-size limit applies before reading (stat); this is the limit while reading.
    conv::cli::read_export(in, "fuzz.json", uint64_t{1} << 20);
  } catch (const conv::cli::UsageError&) {
  } catch (const conv::Error&) {
  }
  return 0;
}
