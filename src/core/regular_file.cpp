#include "regular_file.hpp"

#include <filesystem>
#include <system_error>

#include "conv/error.hpp"
#include "quoted.hpp"

namespace conv {

void require_regular_file(const std::string& path, const std::string& what) {
  // The C library would stop at the first NUL and open another file than the one named.
  if (const size_t nul = path.find('\0'); nul != std::string::npos)
    throw Error(what + " " + conv::quoted(path) + ": path: contains a NUL byte at " +
                std::to_string(nul));
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st) || std::filesystem::is_regular_file(st)) return;
  const char* kind = std::filesystem::is_directory(st) ? "a directory"
                     : std::filesystem::is_fifo(st)    ? "a FIFO"
                                                       : "a device or socket";
  throw Error(what + " " + conv::quoted(path) + ": not a regular file (" + kind + ")");
}

}  // namespace conv
