#include "elf_soname.hpp"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

namespace conv {

namespace {

// A CUDA plugin is a few MB; anything far larger is not one, and is not read into memory.
constexpr std::streamoff kMaxBytes = std::streamoff{1} << 30;

template <class T>
bool read_at(const std::vector<char>& file, uint64_t offset, T& out) {
  if (offset > file.size() || file.size() - offset < sizeof(T)) return false;
  std::memcpy(&out, file.data() + offset, sizeof(T));
  return true;
}

}  // namespace

std::string elf_soname(const std::string& path, std::string& why) {
  const auto fail = [&why](const char* reason) {
    why = reason;
    return std::string();
  };
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return fail("cannot be read");
  const std::streamoff size = in.tellg();
  if (size < 0 || size > kMaxBytes) return fail("is not a shared library of a plausible size");
  std::vector<char> file(static_cast<size_t>(size));
  in.seekg(0);
  if (!in.read(file.data(), size)) return fail("cannot be read");

  Elf64_Ehdr eh{};
  if (!read_at(file, 0, eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    return fail("is not an ELF file");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
      eh.e_machine != EM_X86_64 || eh.e_type != ET_DYN || eh.e_shentsize != sizeof(Elf64_Shdr))
    return fail("is not an x86-64 shared library");
  for (uint64_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr dyn{}, strtab{};
    if (!read_at(file, eh.e_shoff + i * sizeof(Elf64_Shdr), dyn)) break;
    if (dyn.sh_type != SHT_DYNAMIC) continue;
    if (dyn.sh_link >= eh.e_shnum ||
        !read_at(file, eh.e_shoff + uint64_t{dyn.sh_link} * sizeof(Elf64_Shdr), strtab))
      break;
    for (uint64_t at = 0; at + sizeof(Elf64_Dyn) <= dyn.sh_size; at += sizeof(Elf64_Dyn)) {
      Elf64_Dyn d{};
      if (!read_at(file, dyn.sh_offset + at, d) || d.d_tag == DT_NULL) break;
      if (d.d_tag != DT_SONAME) continue;
      const uint64_t begin = strtab.sh_offset + d.d_un.d_val;
      const uint64_t end = strtab.sh_offset + strtab.sh_size;
      if (d.d_un.d_val >= strtab.sh_size || end > file.size() || end < begin) break;
      const char* s = file.data() + begin;
      const void* nul = std::memchr(s, '\0', end - begin);
      if (!nul) break;
      return std::string(s, static_cast<const char*>(nul));
    }
  }
  return fail("has no soname");
}

}  // namespace conv
