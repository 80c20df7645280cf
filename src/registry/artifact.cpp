// Classifying a kernel artifact and copying its device images out.
#include <algorithm>

#include <fmt/format.h>

#include "kern/base/error.hpp"
#include "kern/registry/registry.hpp"
#include "registry/elf.hpp"
#include "registry/fatbin.hpp"

namespace kern::registry {

using registry::Bytes;

std::string_view to_string(ArtifactKind kind) {
  switch (kind) {
    case ArtifactKind::Cubin: return "cubin";
    case ArtifactKind::Fatbin: return "fatbin";
    case ArtifactKind::HostLibrary: return "host-library";
  }
  return "?";
}

std::string_view file_extension(ArtifactKind kind) {
  if (kind == ArtifactKind::HostLibrary) return "so";
  const std::string_view name = to_string(kind);  // a cubin and a fatbin are named by their kind
  return name == "?" ? "bin" : name;
}

std::string describe(const FatbinEntry& e) {
  std::string_view kind = e.kind == FatbinEntry::Kind::Ptx   ? "ptx"
                          : e.kind == FatbinEntry::Kind::Elf ? "cubin"
                                                             : "unknown";
  std::string s = fmt::format("sm_{} {} ({} B", e.arch, kind, e.size);
  if (e.compressed) s += ", compressed";
  if (!e.functions.empty()) s += fmt::format(", {} function{}", e.functions.size(), e.functions.size() == 1 ? "" : "s");
  return s + ")";
}

namespace {

std::string_view file_name(std::string_view path) {
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::vector<std::string> union_of_functions(const std::vector<FatbinEntry>& entries) {
  std::vector<std::string> all;
  for (const auto& e : entries) all.insert(all.end(), e.functions.begin(), e.functions.end());
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return all;
}

std::string entries_summary(const std::vector<FatbinEntry>& entries) {
  std::string s;
  for (const auto& e : entries) s += (s.empty() ? "" : ", ") + describe(e);
  return s.empty() ? "no entries" : s;
}

// Reads the ELF once, classifying it as cubin or host library.
ArtifactKind classify_elf(const Bytes& b, const registry::Elf64& elf) {
  if (elf.machine == registry::kEmCuda) return ArtifactKind::Cubin;
  if (elf.machine != registry::kEmX86_64 && elf.machine != registry::kEmAarch64)
    fail(ErrorKind::KernelArtifact, "{}: ELF machine {} is neither CUDA (190) nor an x86-64/aarch64 host library",
         b.what(), elf.machine);
  const registry::ElfSection* s = elf.find(".nv_fatbin");
  if (!s) fail(ErrorKind::KernelArtifact, "{}: host ELF has no .nv_fatbin section (no device code)", b.what());
  if (s->type == 8 || s->size == 0) fail(ErrorKind::KernelArtifact, "{}: the .nv_fatbin section is empty", b.what());
  return ArtifactKind::HostLibrary;
}

std::vector<DeviceImage> images_of_containers(const Bytes& b, std::uint64_t begin, std::uint64_t size,
                                              std::string_view where) {
  auto containers = registry::parse_fatbin_containers(b, begin, size, where);
  std::vector<DeviceImage> out;
  for (std::size_t i = 0; i < containers.size(); ++i) {
    const auto& c = containers[i];
    auto bytes = b.slice(c.offset, c.size, "fatbin container");
    DeviceImage img;
    img.bytes.assign(bytes.begin(), bytes.end());
    img.description = fmt::format("{} {} container {}/{} @{:#x} ({} B): {}", file_name(b.what()), where, i + 1,
                                  containers.size(), c.offset, c.size, entries_summary(c.entries));
    img.entries = c.entries;
    img.functions = union_of_functions(img.entries);
    out.push_back(std::move(img));
  }
  return out;
}

}  // namespace

ArtifactKind artifact_kind(std::span<const std::byte> bytes, std::string_view what) {
  Bytes b(bytes, what);
  if (registry::starts_with_fatbin_magic(b, 0)) return ArtifactKind::Fatbin;
  if (registry::looks_like_elf(b)) return classify_elf(b, registry::parse_elf64(b));
  fail(ErrorKind::KernelArtifact,
       "{}: not a kernel artifact (neither a cubin, a fatbin, nor an ELF shared library; {} bytes)", what,
       bytes.size());
}

std::vector<DeviceImage> extract_device_images(std::span<const std::byte> bytes, std::string_view what) {
  Bytes b(bytes, what);
  if (registry::starts_with_fatbin_magic(b, 0)) return images_of_containers(b, 0, b.size(), "fatbin");
  if (!registry::looks_like_elf(b))
    fail(ErrorKind::KernelArtifact,
         "{}: not a kernel artifact (neither a cubin, a fatbin, nor an ELF shared library; {} bytes)", what,
         bytes.size());
  registry::Elf64 elf = registry::parse_elf64(b);
  if (classify_elf(b, elf) == ArtifactKind::HostLibrary) {
    const registry::ElfSection* s = elf.find(".nv_fatbin");
    return images_of_containers(b, s->offset, s->size, ".nv_fatbin");
  }
  FatbinEntry e;
  e.kind = FatbinEntry::Kind::Elf;
  e.size = bytes.size();
  // The SM version sits in e_flags: bits 8..15 from ELF ABI version 8 on (CUDA 12.8+), the low byte before.
  std::uint32_t flags = b.u32(0x30, "e_flags");
  e.arch = b.u8(8, "EI_ABIVERSION") >= 8 ? (flags >> 8) & 0xff : flags & 0xff;
  e.functions = registry::elf_global_functions(b, elf);
  DeviceImage img;
  img.bytes.assign(bytes.begin(), bytes.end());
  img.description = fmt::format("{} cubin ({} B): {}", file_name(what), bytes.size(), describe(e));
  img.functions = e.functions;
  img.entries.push_back(std::move(e));
  return {std::move(img)};
}

}  // namespace kern::registry
