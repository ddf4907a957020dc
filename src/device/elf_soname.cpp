#include "elf_soname.hpp"

#include <elf.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <vector>

namespace conv {

namespace {

// Section headers and dynamic entries past these counts mark a crafted file, not a plugin (a
// real one has about 40 sections and 40 dynamic entries).
constexpr uint64_t kMaxSections = 4096;
constexpr uint64_t kMaxDynamicBytes = uint64_t{1} << 20;
constexpr uint64_t kMaxStringBytes = uint64_t{16} << 20;

class File {
 public:
  explicit File(const std::string& path) : in_(path, std::ios::binary | std::ios::ate) {
    if (in_) size_ = static_cast<uint64_t>(std::max<std::streamoff>(0, in_.tellg()));
  }
  bool ok() const { return static_cast<bool>(in_); }
  // Reads n bytes at offset into out; false where they are not all inside the file.
  bool read(uint64_t offset, void* out, uint64_t n) {
    if (offset > size_ || size_ - offset < n) return false;
    in_.seekg(static_cast<std::streamoff>(offset));
    return static_cast<bool>(in_.read(static_cast<char*>(out), static_cast<std::streamsize>(n)));
  }

 private:
  std::ifstream in_;
  uint64_t size_ = 0;
};

}  // namespace

std::string elf_soname(const std::string& path, std::string& why) {
  const auto fail = [&why](const char* reason) {
    why = reason;
    return std::string();
  };
  File file(path);
  if (!file.ok()) return fail("cannot be read");
  Elf64_Ehdr eh{};
  if (!file.read(0, &eh, sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    return fail("is not an ELF file");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
      eh.e_machine != EM_X86_64 || eh.e_type != ET_DYN)
    return fail("is not an x86-64 shared library");
  if (eh.e_shnum == 0 || eh.e_shnum > kMaxSections || eh.e_shentsize != sizeof(Elf64_Shdr))
    return fail("has no usable section headers");
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  if (!file.read(eh.e_shoff, sections.data(), sections.size() * sizeof(Elf64_Shdr)))
    return fail("is truncated (section headers)");
  for (const Elf64_Shdr& dyn : sections) {
    if (dyn.sh_type != SHT_DYNAMIC) continue;
    // The first dynamic section is the one the loader reads.
    if (dyn.sh_link >= sections.size() || dyn.sh_size > kMaxDynamicBytes)
      return fail("has a malformed dynamic section");
    const Elf64_Shdr& strtab = sections[dyn.sh_link];
    std::vector<Elf64_Dyn> entries(dyn.sh_size / sizeof(Elf64_Dyn));
    if (!file.read(dyn.sh_offset, entries.data(), entries.size() * sizeof(Elf64_Dyn)))
      return fail("is truncated (dynamic section)");
    for (const Elf64_Dyn& d : entries) {
      if (d.d_tag == DT_NULL) break;
      if (d.d_tag != DT_SONAME) continue;
      if (d.d_un.d_val >= strtab.sh_size || strtab.sh_size > kMaxStringBytes)
        return fail("has a malformed soname");
      std::string names(strtab.sh_size - d.d_un.d_val, '\0');
      const uint64_t at = strtab.sh_offset + d.d_un.d_val;
      if (at < strtab.sh_offset || !file.read(at, names.data(), names.size()))
        return fail("is truncated (string table)");
      const size_t nul = names.find('\0');
      if (nul == std::string::npos) return fail("has a malformed soname");
      return names.substr(0, nul);
    }
    break;
  }
  return fail("has no soname");
}

}  // namespace conv
