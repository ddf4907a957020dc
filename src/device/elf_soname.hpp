// The DT_SONAME of an ELF shared library, read from the file without loading it: dlopen() runs a
// library's static initialisers, and another copy of libconvtune.so aborted the process there
// (protobuf refuses a second registration of caffe.proto).
#pragma once

#include <string>

namespace conv {

/// The soname of the 64-bit little-endian x86-64 shared library at `path`. Returns "" and sets
/// `why` to the reason ("cannot be read", "is not an ELF file", "has no soname", ...) when there
/// is none. Reads only the ELF header, the section headers, the first dynamic section and its
/// string table, each checked against the file's size, so any file is safe to pass.
std::string elf_soname(const std::string& path, std::string& why);

}  // namespace conv
