// The DT_SONAME of an ELF shared library, read from the file without loading it: dlopen() runs a
// library's static initialisers, and another copy of libconvtune.so aborted the process there
// (protobuf refuses a second registration of caffe.proto).
#pragma once

#include <string>

namespace conv {

/// The soname of the 64-bit little-endian ELF file at `path`. Returns "" and sets `why` (e.g.
/// "not an ELF file", "has no soname") when there is none; every offset in the file is
/// bounds-checked, so any file is safe to pass.
std::string elf_soname(const std::string& path, std::string& why);

}  // namespace conv
