// A pool's memory as another process maps it (issue 20: "a second process maps the first one's pool
// through POSIX fds"; docs/multi-gpu-handles.md, "Sharing a pool with another process"): which chunk
// sits at which position of every state's arena, and the wire form that travels beside the chunks'
// descriptors. Pure: the runtime exports the descriptors and sends both; the importer maps what the
// description says.
//
// A description is a snapshot: a later remap in the owner moves chunks between positions, and the
// importer must fetch a new description (the chunks and their descriptors stay the same).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kern::pool {

class Pool;

struct SharedArena {
  std::string state;
  bool paged = true;                 // a page arena, else a slot arena
  std::uint64_t object_bytes = 0;    // one page or one slot
  // Per chunk position of the arena (position p covers bytes [p, p + 1) · chunk_bytes of the
  // state): the index of the chunk mapped there among the shared descriptors, or -1 when nothing
  // is mapped. The arena reserves chunks.size() positions.
  std::vector<std::int64_t> chunks;
  bool operator==(const SharedArena&) const = default;
};

struct PoolShare {
  std::uint64_t chunk_bytes = 0;
  std::uint64_t chunks = 0;          // descriptors that travel with it: every pool chunk, in chunk order (at most 2^20)
  std::vector<SharedArena> arenas;   // in the pool's arena order
  bool operator==(const PoolShare&) const = default;
};

// The pool's mapping now (Pool::chunk_at for every arena position).
PoolShare describe_share(const Pool& pool);

// The wire form: one JSON object, fields in a fixed order,
// {"kern_pool_share": 1, "chunk_bytes": C, "chunks": K, "arenas": [{"state": "kv", "paged": true,
//  "object_bytes": B, "chunks": [0, 1, -1]}]}.
std::string write_pool_share(const PoolShare& share);

// Parses a wire-form description (the transport then checks that `chunks` descriptors come with
// it). Anything but what write_pool_share writes (unknown or missing fields, wrong types, a version
// other than 1, a chunk size of 0 or above 1 TiB, more than 2^20 chunks, no arenas or more than 4,096, an
// empty or repeated state name, an object size of 0, an arena of no positions or reserving more than
// 2^48 bytes, a chunk index outside [-1, chunks), one chunk at two positions) is an Error(Io) naming
// the field: a description comes from another process.
PoolShare parse_pool_share(std::string_view text);

}  // namespace kern::pool
