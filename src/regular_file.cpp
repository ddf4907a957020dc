#include "regular_file.hpp"

#include <filesystem>
#include <system_error>

#include "conv/error.hpp"
#include "quoted.hpp"

namespace conv {

void require_regular_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st) || std::filesystem::is_regular_file(st)) return;
  const char* kind = std::filesystem::is_directory(st) ? "a directory"
                     : std::filesystem::is_fifo(st)    ? "a FIFO"
                                                       : "a device or socket";
  throw Error(what + " " + conv::quoted(path) + ": not a regular file (" + kind + ")");
}

}  // namespace conv
