#include "runtime/state_plan.hpp"

#include "kern/base/error.hpp"

namespace kern::runtime {

namespace {

using End = CopyOp::End;

std::vector<std::uint32_t> arenas_of(const StateGeometry& g, bool paged) {
  std::vector<std::uint32_t> out;
  for (std::uint32_t a = 0; a < g.arenas.size(); ++a)
    if (g.arenas[a].paged == paged) out.push_back(a);
  return out;
}

// Consecutive ids as (first, count) runs, in the given order.
template <typename Id>
std::vector<std::pair<std::uint64_t, std::uint64_t>> id_runs(const std::vector<Id>& ids) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  for (Id id : ids) {
    if (!out.empty() && out.back().first + out.back().second == id) {
      ++out.back().second;
    } else {
      out.push_back({id, 1});
    }
  }
  return out;
}

// Page runs between a device arena and the host block (to_host: park), per paged arena.
template <typename S, typename D>
void host_page_ops(const pool::Copies<S, D>& copies, const StateGeometry& g, bool to_host, std::vector<CopyOp>& out) {
  if (copies.pages.empty()) return;
  if (g.host_page_stride == 0) fail(ErrorKind::Api, "state plan: host copies without a host tier");
  const std::vector<std::uint32_t> paged = arenas_of(g, true);
  const auto runs = to_host ? copies.runs(S{1}, D{g.host_page_stride}) : copies.runs(S{g.host_page_stride}, D{1});
  for (std::uint32_t a : paged) {
    const ArenaGeometry& ar = g.arenas[a];
    const bool flat = paged.size() == 1 && g.host_page_stride == ar.object_bytes;
    for (const auto& r : runs) {
      const std::uint64_t dev = (to_host ? r.src : r.dst) * ar.object_bytes;
      const std::uint64_t host = (to_host ? r.dst : r.src) + ar.host_offset;
      CopyOp op{to_host ? End::Device : End::Host, to_host ? End::Host : End::Device, a, a,
                to_host ? dev : host,            to_host ? host : dev};
      if (flat || r.count == 1) {
        op.width = r.count * ar.object_bytes;  // one row, or host pages laid exactly like the arena's
      } else {
        op.width = ar.object_bytes;
        op.height = r.count;
        op.src_pitch = to_host ? ar.object_bytes : g.host_page_stride;
        op.dst_pitch = to_host ? g.host_page_stride : ar.object_bytes;
      }
      out.push_back(op);
    }
  }
}

template <typename S, typename D>
void host_slot_ops(const pool::Copies<S, D>& copies, const StateGeometry& g, bool to_host, std::vector<CopyOp>& out) {
  if (!copies.slot) return;
  for (std::uint32_t a : arenas_of(g, false)) {
    const ArenaGeometry& ar = g.arenas[a];
    const std::uint64_t dev = (to_host ? copies.slot->src : copies.slot->dst) * ar.object_bytes;
    const std::uint64_t host = (to_host ? copies.slot->dst : copies.slot->src) + ar.host_offset;
    CopyOp op{to_host ? End::Device : End::Host, to_host ? End::Host : End::Device, a, a,
              to_host ? dev : host,            to_host ? host : dev};
    op.width = ar.object_bytes;
    out.push_back(op);
  }
}

}  // namespace

StateGeometry state_geometry(const pool::Pool& pool, const pool::Host* host) {
  StateGeometry g;
  g.chunk_bytes = pool.chunk_bytes();
  std::uint64_t page_off = 0, slot_off = 0;
  for (const pool::ArenaInfo& a : pool.arenas()) {
    std::uint64_t& off = a.paged ? page_off : slot_off;
    g.arenas.push_back({a.object_bytes, a.paged, off});
    off += a.object_bytes;
  }
  if (host) g.host_page_stride = host->page_stride();
  return g;
}

std::vector<VmmOp> vmm_ops(const pool::Remap& plan, const StateGeometry& g) {
  std::vector<VmmOp> out;
  const std::uint64_t c = g.chunk_bytes;
  for (const pool::Unmap& u : plan.unmaps) out.push_back({VmmOp::Kind::Unmap, u.arena, u.pos * c, c});
  for (const pool::Map& m : plan.maps) out.push_back({VmmOp::Kind::Map, m.arena, m.pos * c, c, m.chunk});
  for (const pool::Access& a : plan.access) out.push_back({VmmOp::Kind::Access, a.arena, a.first * c, a.count * c});
  return out;
}

std::vector<CopyOp> device_copy_ops(const pool::DeviceCopies& copies, const StateGeometry& g) {
  std::vector<CopyOp> out;
  const auto runs = copies.runs(1, 1);
  for (std::uint32_t a : arenas_of(g, true)) {
    const std::uint64_t p = g.arenas[a].object_bytes;
    for (const auto& r : runs) {
      CopyOp op{End::Device, End::Device, a, a, std::uint64_t{r.src} * p, std::uint64_t{r.dst} * p};
      op.width = r.count * p;
      out.push_back(op);
    }
  }
  if (copies.slot) {
    for (std::uint32_t a : arenas_of(g, false)) {
      const std::uint64_t s = g.arenas[a].object_bytes;
      CopyOp op{End::Device, End::Device, a, a, std::uint64_t{copies.slot->src} * s, std::uint64_t{copies.slot->dst} * s};
      op.width = s;
      out.push_back(op);
    }
  }
  return out;
}

std::vector<CopyOp> park_ops(const pool::ParkCopies& copies, const StateGeometry& g) {
  std::vector<CopyOp> out;
  host_page_ops(copies, g, true, out);
  host_slot_ops(copies, g, true, out);
  return out;
}

std::vector<CopyOp> wake_ops(const pool::WakeCopies& copies, const StateGeometry& g) {
  std::vector<CopyOp> out;
  host_page_ops(copies, g, false, out);
  host_slot_ops(copies, g, false, out);
  return out;
}

std::vector<ZeroOp> zero_ops(const std::vector<pool::PageId>& pages, const std::vector<pool::SlotId>& slots,
                             const StateGeometry& g) {
  std::vector<ZeroOp> out;
  const auto page_runs = id_runs(pages);
  const auto slot_runs = id_runs(slots);
  for (std::uint32_t a = 0; a < g.arenas.size(); ++a) {
    const std::uint64_t n = g.arenas[a].object_bytes;
    for (const auto& [first, count] : g.arenas[a].paged ? page_runs : slot_runs)
      out.push_back({a, first * n, count * n});
  }
  return out;
}

}  // namespace kern::runtime
