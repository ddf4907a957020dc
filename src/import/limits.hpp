// How large an untrusted model file may be, and how much memory parsing it may take. Both are
// checked before the allocation they guard: the size with stat, the memory by an estimate made
// in one pass over the bytes (a 20 MB file of empty ONNX nodes parsed into 2 GB).
#pragma once

#include <cstdint>
#include <string>

#include "importers.hpp"

namespace conv::import {

/// The file's size; fails (naming the file) when it cannot be read or is over
/// CONVTUNE_IMPORT_MAX_FILE_MB (conv::check_import_size, shared with `autotune db import`).
uint64_t checked_file_size(const Source& src);

/// Fails (naming the file, the estimate and the variable to raise) when `estimate` is over
/// CONVTUNE_IMPORT_MAX_MEMORY_MB, else 128 MiB + 4 x `file_bytes` (real models, mostly weights,
/// take about 1-2 x their size, so an import peaks under 300 MB + 10 x the file's size); `what`
/// says what was counted, e.g. "12 M nodes and strings".
void check_parse_estimate(const Source& src, uint64_t estimate, uint64_t file_bytes,
                          const std::string& what);

}  // namespace conv::import
