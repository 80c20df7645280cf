#include "pool/chunk_map.hpp"

#include "kern/base/error.hpp"

namespace kern::pool::detail {

void ChunkMap::init(std::vector<ArenaInfo> arenas, std::uint64_t chunk_bytes, std::uint64_t chunks) {
  if (chunks > kNoChunk) fail(ErrorKind::Api, "pool: {} chunks is more than the pool can number", chunks);
  arenas_ = std::move(arenas);
  chunk_bytes_ = chunk_bytes;
  chunks_ = chunks;
  users_.assign(arenas_.size(), {});
  chunk_.assign(arenas_.size(), {});
  for (std::size_t a = 0; a < arenas_.size(); ++a) {
    users_[a].assign(arenas_[a].positions, 0);
    chunk_[a].assign(arenas_[a].positions, kNoChunk);
  }
  free_.clear();
  for (std::uint32_t c = 0; c < chunks; ++c) free_.insert(free_.end(), c);
}

std::pair<std::uint64_t, std::uint64_t> ChunkMap::span(std::uint32_t arena, std::uint64_t id) const {
  const std::uint64_t b = arenas_[arena].object_bytes;
  const std::uint64_t first = id * b / chunk_bytes_;
  const std::uint64_t end = ((id + 1) * b + chunk_bytes_ - 1) / chunk_bytes_;
  return {first, end};
}

std::uint64_t ChunkMap::positions_for(std::uint32_t arena, std::uint64_t count) const {
  const std::uint64_t bytes = count * arenas_[arena].object_bytes;
  return (bytes + chunk_bytes_ - 1) / chunk_bytes_;
}

void ChunkMap::map_object(std::uint32_t arena, std::uint64_t id, Remap& plan) {
  auto [first, end] = span(arena, id);
  if (end > users_[arena].size())
    fail(ErrorKind::Api, "pool: object {} lies beyond arena {} ({} positions)", id, arena, users_[arena].size());
  for (std::uint64_t p = first; p < end; ++p) {
    if (users_[arena][p]++ != 0) continue;
    if (free_.empty()) fail(ErrorKind::Api, "pool: internal error, no free chunk for arena {} position {}", arena, p);
    const std::uint32_t c = *free_.begin();
    free_.erase(free_.begin());
    chunk_[arena][p] = c;
    plan.maps.push_back({arena, p, c});
    if (!plan.access.empty() && plan.access.back().arena == arena &&
        plan.access.back().first + plan.access.back().count == p)
      ++plan.access.back().count;
    else
      plan.access.push_back({arena, p, 1});
  }
}

void ChunkMap::unmap_object(std::uint32_t arena, std::uint64_t id, Remap& plan) {
  auto [first, end] = span(arena, id);
  for (std::uint64_t p = first; p < end; ++p) {
    if (users_[arena][p] == 0) fail(ErrorKind::Api, "pool: internal error, arena {} position {} has no user", arena, p);
    if (--users_[arena][p] != 0) continue;
    free_.insert(chunk_[arena][p]);
    chunk_[arena][p] = kNoChunk;
    plan.unmaps.push_back({arena, p});
  }
}

}  // namespace kern::pool::detail
