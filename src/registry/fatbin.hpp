// Fatbin containers (magic 0xBA55ED50): a 16-byte header {u32 magic, u16 version,
// u16 header size, u64 payload size} followed by entries, each {u16 kind, u16 version,
// u32 header size, u64 payload size, ..., u32 arch @28, ..., u64 flags @40} and its payload.
// Containers follow each other directly; zero padding between them is skipped.
#pragma once

#include <cstdint>
#include <vector>

#include "kern/registry/registry.hpp"
#include "registry/bytes.hpp"

namespace kern::registry {

inline constexpr std::uint32_t kFatbinMagic = 0xBA55ED50u;

struct FatbinContainer {
  std::uint64_t offset = 0;  // within the parsed bytes
  std::uint64_t size = 0;    // header + payload
  std::vector<FatbinEntry> entries;
};

bool starts_with_fatbin_magic(const Bytes& b, std::uint64_t offset);

// Walks [begin, begin + size) container by container. `where` names the range in errors
// ("section .nv_fatbin"). At least one container is required.
std::vector<FatbinContainer> parse_fatbin_containers(const Bytes& b, std::uint64_t begin, std::uint64_t size,
                                                     std::string_view where);

}  // namespace kern::registry
