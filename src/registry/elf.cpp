#include "registry/elf.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace kern::registry {

namespace {
constexpr std::uint32_t kShtSymtab = 2;
constexpr std::uint32_t kShtNobits = 8;
constexpr std::uint64_t kShdrSize = 64;
constexpr std::uint64_t kSymSize = 24;
constexpr std::uint64_t kPhdrSize = 56;
constexpr std::size_t kMaxSections = 1 << 20;

ElfSection read_section_header(const Bytes& b, std::uint64_t at, std::size_t index) {
  std::string f = fmt::format("section header {}", index);
  b.slice(at, kShdrSize, f);
  ElfSection s;
  s.type = b.u32(at + 4, f);
  s.offset = b.u64(at + 24, f);
  s.size = b.u64(at + 32, f);
  s.link = b.u32(at + 40, f);
  s.entsize = b.u64(at + 56, f);
  return s;
}
// Program headers (if any) and every segment's file range must lie inside the file.
void check_segments(const Bytes& b) {
  std::uint64_t phoff = b.u64(0x20, "e_phoff");
  std::uint16_t phentsize = b.u16(0x36, "e_phentsize");
  std::uint64_t phnum = b.u16(0x38, "e_phnum");
  if (phoff == 0 || phnum == 0) return;
  if (phentsize != kPhdrSize)
    fail(ErrorKind::KernelArtifact, "{}: e_phentsize is {}, ELF64 program headers are {} bytes", b.what(), phentsize,
         kPhdrSize);
  if (!b.has(phoff, phnum * kPhdrSize))
    fail(ErrorKind::KernelArtifact, "{}: program headers ({} at offset {:#x}) run past the end of the file ({} bytes)",
         b.what(), phnum, phoff, b.size());
  for (std::uint64_t i = 0; i < phnum; ++i) {
    std::uint64_t at = phoff + i * kPhdrSize;
    std::uint64_t offset = b.u64(at + 8, "p_offset");
    std::uint64_t filesz = b.u64(at + 32, "p_filesz");
    if (!b.has(offset, filesz))
      fail(ErrorKind::KernelArtifact,
           "{}: segment {} ({} bytes at offset {:#x}) runs past the end of the file ({} bytes)", b.what(), i, filesz,
           offset, b.size());
  }
}
}  // namespace

bool looks_like_elf(const Bytes& b) {
  if (!b.has(0, 4)) return false;
  auto s = b.slice(0, 4, "ELF magic");
  return s[0] == std::byte{0x7f} && s[1] == std::byte{'E'} && s[2] == std::byte{'L'} && s[3] == std::byte{'F'};
}

const ElfSection* Elf64::find(std::string_view name) const {
  for (const auto& s : sections)
    if (s.name == name) return &s;
  return nullptr;
}

Elf64 parse_elf64(const Bytes& b) {
  if (!looks_like_elf(b)) fail(ErrorKind::KernelArtifact, "{}: not an ELF file", b.what());
  std::uint8_t cls = b.u8(4, "ELF class");
  std::uint8_t data = b.u8(5, "ELF data encoding");
  if (cls != 2) fail(ErrorKind::KernelArtifact, "{}: ELF class {} is not ELF64", b.what(), cls);
  if (data != 1) fail(ErrorKind::KernelArtifact, "{}: ELF data encoding {} is not little-endian", b.what(), data);
  b.slice(0, 64, "ELF header");
  Elf64 elf;
  elf.type = b.u16(16, "e_type");
  elf.machine = b.u16(18, "e_machine");
  check_segments(b);
  std::uint64_t shoff = b.u64(0x28, "e_shoff");
  std::uint16_t shentsize = b.u16(0x3a, "e_shentsize");
  std::uint64_t shnum = b.u16(0x3c, "e_shnum");
  std::uint32_t shstrndx = b.u16(0x3e, "e_shstrndx");
  if (shoff == 0) return elf;  // no section table
  if (shentsize != kShdrSize)
    fail(ErrorKind::KernelArtifact, "{}: e_shentsize is {}, ELF64 section headers are {} bytes", b.what(), shentsize,
         kShdrSize);
  if (shnum == 0 || shstrndx == 0xffff) {  // extended numbering lives in section 0
    ElfSection s0 = read_section_header(b, shoff, 0);
    if (shnum == 0) shnum = s0.size;
    if (shstrndx == 0xffff) shstrndx = s0.link;
  }
  if (shnum > kMaxSections || !b.has(shoff, shnum * kShdrSize))
    fail(ErrorKind::KernelArtifact,
         "{}: section table ({} headers at offset {:#x}) runs past the end of the file ({} bytes)", b.what(), shnum,
         shoff, b.size());
  std::vector<std::uint32_t> name_offsets;
  for (std::size_t i = 0; i < shnum; ++i) {
    ElfSection s = read_section_header(b, shoff + i * kShdrSize, i);
    name_offsets.push_back(b.u32(shoff + i * kShdrSize, "sh_name"));
    if (s.type != kShtNobits && !b.has(s.offset, s.size))
      fail(ErrorKind::KernelArtifact,
           "{}: section {} ({} bytes at offset {:#x}) runs past the end of the file ({} bytes)", b.what(), i, s.size,
           s.offset, b.size());
    elf.sections.push_back(std::move(s));
  }
  if (shstrndx != 0) {
    if (shstrndx >= elf.sections.size())
      fail(ErrorKind::KernelArtifact, "{}: e_shstrndx {} is not a section (there are {})", b.what(), shstrndx,
           elf.sections.size());
    const ElfSection names = elf.sections[shstrndx];
    if (names.type == kShtNobits) fail(ErrorKind::KernelArtifact, "{}: the section name table has no bytes", b.what());
    for (std::size_t i = 0; i < elf.sections.size(); ++i) {
      if (name_offsets[i] >= names.size)
        fail(ErrorKind::KernelArtifact, "{}: section {} names offset {} beyond the name table ({} bytes)", b.what(), i,
             name_offsets[i], names.size);
      elf.sections[i].name =
          std::string(b.cstr(names.offset + name_offsets[i], names.offset + names.size, "section name"));
    }
  }
  return elf;
}

namespace {
std::vector<std::string> elf_function_symbols(const Bytes& b, const Elf64& elf, bool with_local) {
  std::vector<std::string> out;
  for (const auto& sec : elf.sections) {
    if (sec.type != kShtSymtab) continue;
    if (sec.entsize != kSymSize)
      fail(ErrorKind::KernelArtifact, "{}: symbol table entries are {} bytes, ELF64 symbols are {}", b.what(),
           sec.entsize, kSymSize);
    if (sec.link >= elf.sections.size())
      fail(ErrorKind::KernelArtifact, "{}: symbol table links to section {}, there are {}", b.what(), sec.link,
           elf.sections.size());
    const ElfSection& strtab = elf.sections[sec.link];
    if (strtab.type == kShtNobits) fail(ErrorKind::KernelArtifact, "{}: the symbol name table has no bytes", b.what());
    for (std::uint64_t at = sec.offset; at + kSymSize <= sec.offset + sec.size; at += kSymSize) {
      std::uint32_t name = b.u32(at, "st_name");
      std::uint8_t info = b.u8(at + 4, "st_info");
      std::uint16_t shndx = b.u16(at + 6, "st_shndx");
      bool func = (info & 0xf) == 2;
      bool global = (info >> 4) == 1 || (info >> 4) == 2;
      bool local = (info >> 4) == 0;
      if (!func || !(global || (with_local && local)) || shndx == 0 || name == 0) continue;
      if (name >= strtab.size)
        fail(ErrorKind::KernelArtifact, "{}: symbol name offset {} beyond the name table ({} bytes)", b.what(), name,
             strtab.size);
      out.emplace_back(b.cstr(strtab.offset + name, strtab.offset + strtab.size, "symbol name"));
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

std::vector<std::string> elf_global_functions(const Bytes& b, const Elf64& elf) { return elf_function_symbols(b, elf, false); }
std::vector<std::string> elf_functions(const Bytes& b, const Elf64& elf) { return elf_function_symbols(b, elf, true); }

}  // namespace kern::registry
