// Where the system perf databases are: $CONVTUNE_SYSTEM_PERFDB, then the data directory of the
// installation libconvtune was loaded from.
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <system_error>

#include "conv/perfdb.hpp"

#ifndef CONVTUNE_LIB_TO_DATADIR
#define CONVTUNE_LIB_TO_DATADIR "../share"
#endif

namespace conv {

namespace fs = std::filesystem;

std::vector<std::string> system_perfdb_paths() {
  std::vector<std::string> paths;
  std::error_code ec;
  if (const char* env = std::getenv("CONVTUNE_SYSTEM_PERFDB")) {
    std::stringstream ss(env);
    // Named files are all kept, present or not: opening a missing one is an error its user sees.
    for (std::string p; std::getline(ss, p, ':');)
      if (!p.empty()) paths.push_back(p);
  }
  // Relative to the library itself, like an $ORIGIN RPATH: any install prefix works.
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&system_perfdb_paths), &info) && info.dli_fname) {
    const fs::path dir =
        fs::path(info.dli_fname).parent_path() / CONVTUNE_LIB_TO_DATADIR / "convtune" / "perfdb";
    std::vector<std::string> installed;
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
         it.increment(ec))
      if (it->path().extension() == ".sqlite" && it->is_regular_file(ec))
        installed.push_back(it->path().lexically_normal().string());
    std::sort(installed.begin(), installed.end());
    paths.insert(paths.end(), installed.begin(), installed.end());
  }
  return paths;
}

}  // namespace conv
