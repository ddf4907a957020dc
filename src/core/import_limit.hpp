// How big a file an importer reads: hostile input must not take the process down, and the
// parsers' memory grows with the file (issue 59). One limit, CONVTUNE_IMPORT_MAX_FILE_MB, for
// `autotune db import` and the model importers alike.
#pragma once

#include <cstdint>
#include <string>

namespace conv {

/// The default of CONVTUNE_IMPORT_MAX_FILE_MB.
inline constexpr uint64_t kImportMaxFileMb = 2048;

/// The largest file an importer reads, in bytes: CONVTUNE_IMPORT_MAX_FILE_MB (a positive integer
/// of MB, 2^20 bytes each; unset: 2048). Throws conv::Error naming the variable when it is set to
/// anything else (an empty value included).
uint64_t import_max_file_bytes();

/// Throws conv::Error("<what> "<path>": 25 MB is over the 20 MB limit
/// (CONVTUNE_IMPORT_MAX_FILE_MB)") when stat() says the file at `path` is larger than
/// import_max_file_bytes(), before anything reads it; a path stat() cannot see is left to the
/// caller's open(). A file that grows, or reports size 0 (/proc), is the reader's to bound.
void check_import_size(const std::string& path, const std::string& what);

}  // namespace conv
