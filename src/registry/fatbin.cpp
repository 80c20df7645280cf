#include "registry/fatbin.hpp"

#include <fmt/format.h>

#include "registry/elf.hpp"

namespace kern::registry {

namespace {
constexpr std::uint64_t kContainerHeader = 16;
constexpr std::uint64_t kEntryHeaderMin = 48;  // up to and including the flags
constexpr std::uint64_t kFlagCompressed = 0x2000;      // LZ4
constexpr std::uint64_t kFlagCompressedZstd = 0x8000;  // zstd: CUDA 13's nvcc compresses PTX so by default

FatbinEntry parse_entry(const Bytes& b, std::uint64_t at, std::uint64_t header, std::uint64_t size,
                        std::string_view where) {
  FatbinEntry e;
  std::uint16_t kind = b.u16(at, "fatbin entry kind");
  e.kind = kind == 1 ? FatbinEntry::Kind::Ptx : kind == 2 ? FatbinEntry::Kind::Elf : FatbinEntry::Kind::Other;
  e.arch = b.u32(at + 28, "fatbin entry arch");
  std::uint64_t flags = b.u64(at + 40, "fatbin entry flags");
  e.size = size;
  e.payload_offset = at + header;
  auto payload = b.slice(at + header, size, "fatbin entry payload");
  Bytes p(payload, where);
  e.compressed = (flags & (kFlagCompressed | kFlagCompressedZstd)) != 0 ||
                 (e.kind == FatbinEntry::Kind::Elf && !looks_like_elf(p));
  if (e.kind == FatbinEntry::Kind::Elf && !e.compressed) {
    std::string what = fmt::format("{} cubin of sm_{} at offset {:#x}", where, e.arch, at + header);
    Bytes cubin(payload, what);
    Elf64 elf = parse_elf64(cubin);
    e.functions = elf_global_functions(cubin, elf);
  }
  return e;
}

std::vector<FatbinEntry> parse_entries(const Bytes& b, std::uint64_t begin, std::uint64_t end, std::string_view where) {
  std::vector<FatbinEntry> out;
  std::uint64_t at = begin;
  while (at < end) {
    if (end - at < kEntryHeaderMin) {
      for (std::uint64_t i = at; i < end; ++i)
        if (b.u8(i, "fatbin padding") != 0)
          fail(ErrorKind::KernelArtifact, "{}: {} stray bytes at offset {:#x} after the last fatbin entry", b.what(),
               end - at, at);
      break;
    }
    std::uint32_t header = b.u32(at + 4, "fatbin entry header size");
    std::uint64_t size = b.u64(at + 8, "fatbin entry size");
    if (header < kEntryHeaderMin || header > end - at || size > end - at - header)
      fail(ErrorKind::KernelArtifact,
           "{}: fatbin entry at offset {:#x} (header {} bytes, payload {} bytes) does not fit its container (ends at "
           "{:#x})",
           b.what(), at, header, size, end);
    out.push_back(parse_entry(b, at, header, size, where));
    at += header + size;
  }
  return out;
}
}  // namespace

bool starts_with_fatbin_magic(const Bytes& b, std::uint64_t offset) {
  return b.has(offset, 4) && b.u32(offset, "fatbin magic") == kFatbinMagic;
}

std::vector<FatbinContainer> parse_fatbin_containers(const Bytes& b, std::uint64_t begin, std::uint64_t size,
                                                     std::string_view where) {
  b.slice(begin, size, where);
  const std::uint64_t end = begin + size;
  std::vector<FatbinContainer> out;
  std::uint64_t at = begin;
  while (true) {
    while (at < end && b.u8(at, "fatbin padding") == 0) ++at;  // alignment padding between containers
    if (at >= end) break;
    if (!starts_with_fatbin_magic(b, at) || end - at < kContainerHeader)
      fail(ErrorKind::KernelArtifact, "{}: {} holds no fatbin container at offset {:#x} (magic {:#x} expected)",
           b.what(), where, at, kFatbinMagic);
    std::uint16_t header = b.u16(at + 6, "fatbin header size");
    std::uint64_t payload = b.u64(at + 8, "fatbin payload size");
    if (header < kContainerHeader || header > end - at || payload > end - at - header)
      fail(ErrorKind::KernelArtifact,
           "{}: fatbin container at offset {:#x} claims {} header + {} payload bytes, but {} ends {} bytes later",
           b.what(), at, header, payload, where, end - at);
    FatbinContainer c;
    c.offset = at;
    c.size = header + payload;
    c.entries = parse_entries(b, at + header, at + c.size, where);
    out.push_back(std::move(c));
    at += out.back().size;
  }
  if (out.empty()) fail(ErrorKind::KernelArtifact, "{}: {} holds no fatbin container", b.what(), where);
  return out;
}

}  // namespace kern::registry
