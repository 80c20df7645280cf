// Minimal ELF64 (little-endian) reading: the header and section table, enough to find the
// `.nv_fatbin` section of a host library and the symbol table of a cubin. No libelf.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "registry/bytes.hpp"

namespace kern::registry {

inline constexpr std::uint16_t kEmX86_64 = 62;
inline constexpr std::uint16_t kEmAarch64 = 183;
inline constexpr std::uint16_t kEmCuda = 190;

bool looks_like_elf(const Bytes& b);  // starts with \x7fELF

struct ElfSection {
  std::string name;
  std::uint32_t type = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint32_t link = 0;
  std::uint64_t entsize = 0;
};

struct Elf64 {
  std::uint16_t type = 0;     // e_type (3 = ET_DYN)
  std::uint16_t machine = 0;  // e_machine
  std::vector<ElfSection> sections;

  const ElfSection* find(std::string_view name) const;
};

// Parses the ELF64 header and section table; every section's file range is checked to lie
// inside the file (SHT_NOBITS excepted). Error(KernelArtifact) otherwise.
Elf64 parse_elf64(const Bytes& b);

// Names of the global functions (STT_FUNC, STB_GLOBAL/WEAK, defined) of the ELF's symbol
// table, sorted and unique; empty when there is no symbol table.
std::vector<std::string> elf_global_functions(const Bytes& b, const Elf64& elf);
// The same with local functions too (a cubin's kernels of internal linkage): what a loaded image
// can launch.
std::vector<std::string> elf_functions(const Bytes& b, const Elf64& elf);

}  // namespace kern::registry
