// Chunk positions of every pooled arena: which physical chunk backs each position, and how many
// objects use it (a position straddling two objects is shared and counted twice).
#pragma once

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "kern/pool/plans.hpp"
#include "kern/pool/pool.hpp"

namespace kern::pool::detail {

inline constexpr std::uint32_t kNoChunk = 0xffffffffu;

class ChunkMap {
 public:
  void init(std::vector<ArenaInfo> arenas, std::uint64_t chunk_bytes, std::uint64_t chunks);

  // Positions [first, end) that object `id` covers in `arena`.
  std::pair<std::uint64_t, std::uint64_t> span(std::uint32_t arena, std::uint64_t id) const;
  // Positions the first `count` objects of an arena occupy laid out from 0.
  std::uint64_t positions_for(std::uint32_t arena, std::uint64_t count) const;

  // Adds one user to each position of the object; a position going 0 -> 1 gets the lowest free
  // chunk (Map + Access appended to the plan).
  void map_object(std::uint32_t arena, std::uint64_t id, Remap& plan);
  // Removes one user; a position going 1 -> 0 is unmapped and its chunk freed (Unmap appended).
  void unmap_object(std::uint32_t arena, std::uint64_t id, Remap& plan);

  std::uint32_t users(std::uint32_t arena, std::uint64_t pos) const { return users_[arena][pos]; }
  std::uint32_t chunk(std::uint32_t arena, std::uint64_t pos) const { return chunk_[arena][pos]; }
  std::uint64_t free_chunks() const { return free_.size(); }
  std::uint64_t chunks() const { return chunks_; }
  std::uint64_t chunk_bytes() const { return chunk_bytes_; }
  const std::vector<ArenaInfo>& arenas() const { return arenas_; }

 private:
  std::vector<ArenaInfo> arenas_;
  std::uint64_t chunk_bytes_ = 0;
  std::uint64_t chunks_ = 0;
  std::vector<std::vector<std::uint32_t>> users_;
  std::vector<std::vector<std::uint32_t>> chunk_;
  std::set<std::uint32_t> free_;
};

}  // namespace kern::pool::detail
