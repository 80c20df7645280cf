// A pool's memory as another process maps it: the description and its wire form (share.hpp).
#include "kern/pool/share.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <utility>

#include "kern/base/error.hpp"
#include "kern/base/json_fields.hpp"
#include "kern/pool/pool.hpp"

namespace kern::pool {
namespace {

constexpr std::uint64_t kMaxChunkBytes = 1ull << 40;
constexpr std::uint64_t kMaxArenaBytes = 1ull << 48;
constexpr std::size_t kMaxArenas = 4096;
constexpr std::uint64_t kMaxChunks = 1ull << 20;

const JsonFields kWire(ErrorKind::Io, "pool share");

[[noreturn]] void bad(const std::string& path, std::string_view why) { kWire.bad(path, why); }

}  // namespace

PoolShare describe_share(const Pool& pool) {
  PoolShare s;
  s.chunk_bytes = pool.chunk_bytes();
  s.chunks = pool.chunks();
  const std::vector<ArenaInfo>& arenas = pool.arenas();
  for (std::size_t a = 0; a < arenas.size(); ++a) {
    SharedArena out;
    out.state = arenas[a].state;
    out.paged = arenas[a].paged;
    out.object_bytes = arenas[a].object_bytes;
    out.chunks.reserve(arenas[a].positions);
    for (std::uint64_t p = 0; p < arenas[a].positions; ++p) {
      const std::optional<std::uint32_t> c = pool.chunk_at(static_cast<std::uint32_t>(a), p);
      out.chunks.push_back(c ? static_cast<std::int64_t>(*c) : -1);
    }
    s.arenas.push_back(std::move(out));
  }
  return s;
}

std::string write_pool_share(const PoolShare& share) {
  nlohmann::ordered_json j;
  j["kern_pool_share"] = 1;
  j["chunk_bytes"] = share.chunk_bytes;
  j["chunks"] = share.chunks;
  j["arenas"] = nlohmann::ordered_json::array();
  for (const SharedArena& a : share.arenas) {
    nlohmann::ordered_json e;
    e["state"] = a.state;
    e["paged"] = a.paged;
    e["object_bytes"] = a.object_bytes;
    e["chunks"] = a.chunks;
    j["arenas"].push_back(std::move(e));
  }
  return j.dump();
}

PoolShare parse_pool_share(std::string_view text) {
  const Json j = parse_json_strict(text, {ErrorKind::Io, "pool share", 8});
  kWire.only(j, {"kern_pool_share", "chunk_bytes", "chunks", "arenas"}, "pool share");
  const Json& version = kWire.field(j, "kern_pool_share", "pool share");
  if (!version.is_number_unsigned() || version.get<std::uint64_t>() != 1) bad("kern_pool_share", "expected 1");
  PoolShare s;
  s.chunk_bytes = kWire.u64(kWire.field(j, "chunk_bytes", "pool share"), "chunk_bytes");
  if (s.chunk_bytes == 0 || s.chunk_bytes > kMaxChunkBytes)
    bad("chunk_bytes", fmt::format("{} is not in [1, 2^40]", s.chunk_bytes));
  s.chunks = kWire.u64(kWire.field(j, "chunks", "pool share"), "chunks");
  if (s.chunks > kMaxChunks) bad("chunks", fmt::format("{} chunks, more than 2^20", s.chunks));
  const Json& arenas = kWire.field(j, "arenas", "pool share");
  if (!arenas.is_array()) bad("arenas", "expected an array");
  if (arenas.empty() || arenas.size() > kMaxArenas)
    bad("arenas", fmt::format("{} arenas, expected 1 to {}", arenas.size(), kMaxArenas));
  std::set<std::string> names;
  std::vector<bool> used(s.chunks, false);
  for (std::size_t i = 0; i < arenas.size(); ++i) {
    const std::string path = json_path_index("arenas", i);
    const Json& a = arenas[i];
    kWire.only(a, {"state", "paged", "object_bytes", "chunks"}, path);
    SharedArena out;
    const Json& state = kWire.field(a, "state", path);
    if (!state.is_string() || state.get_ref<const std::string&>().empty())
      bad(json_path_key(path, "state"), "expected a non-empty name");
    out.state = state.get<std::string>();
    if (!names.insert(out.state).second) bad(json_path_key(path, "state"), fmt::format("'{}' repeated", out.state));
    const Json& paged = kWire.field(a, "paged", path);
    if (!paged.is_boolean()) bad(json_path_key(path, "paged"), "expected true or false");
    out.paged = paged.get<bool>();
    out.object_bytes = kWire.u64(kWire.field(a, "object_bytes", path), json_path_key(path, "object_bytes"));
    if (out.object_bytes == 0) bad(json_path_key(path, "object_bytes"), "an object of 0 bytes");
    const std::string cpath = json_path_key(path, "chunks");
    const Json& chunks = kWire.field(a, "chunks", path);
    if (!chunks.is_array()) bad(cpath, "expected an array");
    if (chunks.empty()) bad(cpath, "an arena of no positions");
    if (chunks.size() > kMaxArenaBytes / s.chunk_bytes)
      bad(cpath, fmt::format("{} positions of {} bytes reserve more than 2^48 bytes", chunks.size(), s.chunk_bytes));
    out.chunks.reserve(chunks.size());
    for (std::size_t p = 0; p < chunks.size(); ++p) {
      const std::string at = json_path_index(cpath, p);
      const Json& c = chunks[p];
      if (!c.is_number_integer()) bad(at, "expected a chunk index or -1");
      const std::int64_t v = c.is_number_unsigned() ? (c.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)
                                                           ? INT64_MAX
                                                           : static_cast<std::int64_t>(c.get<std::uint64_t>()))
                                                    : c.get<std::int64_t>();
      if (v < -1 || (v >= 0 && static_cast<std::uint64_t>(v) >= s.chunks))
        bad(at, fmt::format("chunk {} is not -1 or one of the {} shared", v, s.chunks));
      if (v >= 0) {
        if (used[static_cast<std::size_t>(v)]) bad(at, fmt::format("chunk {} mapped at two positions", v));
        used[static_cast<std::size_t>(v)] = true;
      }
      out.chunks.push_back(v);
    }
    s.arenas.push_back(std::move(out));
  }
  return s;
}

}  // namespace kern::pool
