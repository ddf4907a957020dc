#include "import_limit.hpp"

#include <sys/stat.h>

#include <cstdlib>

#include "conv/error.hpp"
#include "quoted.hpp"

namespace conv {

namespace {

constexpr const char* kVariable = "CONVTUNE_IMPORT_MAX_FILE_MB";
constexpr uint64_t kMb = uint64_t{1} << 20;
// 2^40 MB is far past any disk, and MB * 2^20 stays within 64 bits.
constexpr uint64_t kLargestMb = uint64_t{1} << 40;

}  // namespace

uint64_t import_max_file_bytes() {
  const char* v = std::getenv(kVariable);
  if (!v) return kImportMaxFileMb * kMb;
  const std::string text = v;
  uint64_t mb = 0;
  bool ok = !text.empty() && text.size() <= 13;  // 2^40 has 13 digits: no overflow below
  for (size_t i = 0; ok && i < text.size(); ++i) {
    ok = text[i] >= '0' && text[i] <= '9';
    if (ok) mb = mb * 10 + static_cast<uint64_t>(text[i] - '0');
  }
  if (!ok || mb < 1 || mb > kLargestMb)
    throw Error(std::string(kVariable) + "=" + conv::quoted(text) +
                ": expected a positive integer number of MB (2^20 bytes) up to 2^40, e.g. " +
                std::to_string(kImportMaxFileMb));
  return mb * kMb;
}

void check_import_size(const std::string& path, const std::string& what) {
  const uint64_t limit = import_max_file_bytes();
  struct stat st {};
  if (path.find('\0') != std::string::npos || ::stat(path.c_str(), &st) != 0 ||
      !S_ISREG(st.st_mode))
    return;
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size <= limit) return;
  // Rounded up: a file a byte over a 20 MB limit is "21 MB", not "20 MB is over 20 MB".
  throw Error(what + " " + conv::quoted(path) + ": " + std::to_string((size + kMb - 1) / kMb) +
              " MB is over the " + std::to_string(limit / kMb) + " MB limit (" + kVariable + ")");
}

}  // namespace conv
