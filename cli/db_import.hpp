// autotune db import: an export file's rows, every field checked (cli/db_import.cpp).
#pragma once

#include <cstdint>
#include <istream>
#include <string>

#include "conv/perfdb.hpp"

namespace conv::cli {

/// The rows of the export text `in` (`file` names it in messages), of at most `max_bytes` bytes.
/// Throws UsageError ("import: FILE: ...") naming the line and column, or the entry and field,
/// of the first thing wrong: not JSON, nesting deeper than 32, a key twice in one object, more
/// than `max_bytes`, or any value `autotune db export` would not have written.
conv::PerfDb::Rows read_export(std::istream& in, const std::string& file, uint64_t max_bytes);

/// read_export() of the file at `file`, after checking that it is a regular file no larger than
/// CONVTUNE_IMPORT_MAX_FILE_MB (conv::check_import_size()).
conv::PerfDb::Rows import_json(const std::string& file);

}  // namespace conv::cli
