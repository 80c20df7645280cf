#include "pool/core.hpp"

#include <map>

#include "kern/base/error.hpp"

namespace kern::pool::detail {

void retain(PoolCore* core) { ++core->refs; }
void release(PoolCore* core) {
  if (--core->refs == 0) delete core;
}

void ObjectTable::set(std::uint32_t id, ObjectStatus s) {
  const ObjectStatus old = status_[id];
  if (old == s) return;
  auto is_live = [](ObjectStatus x) { return x == ObjectStatus::Free || x == ObjectStatus::Held; };
  if (old == ObjectStatus::Free) free_.erase(id);
  if (old == ObjectStatus::Absent) absent_.erase(id);
  if (s == ObjectStatus::Free) free_.insert(id);
  if (s == ObjectStatus::Absent) absent_.insert(id);
  live_ += is_live(s);
  live_ -= is_live(old);
  held_ += s == ObjectStatus::Held;
  held_ -= old == ObjectStatus::Held;
  status_[id] = s;
}

std::uint64_t PoolCore::page_chunks(std::uint64_t n) const {
  std::uint64_t c = 0;
  for (std::uint32_t a = 0; a < page_arenas; ++a) c += chunks.positions_for(a, n);
  return c;
}

std::uint64_t PoolCore::slot_chunks(std::uint64_t n) const {
  std::uint64_t c = 0;
  for (std::uint32_t a = page_arenas; a < page_arenas + slot_arenas; ++a) c += chunks.positions_for(a, n);
  return c;
}

bool PoolCore::fits(std::uint64_t total_pages, bool need_slot) const {
  if (total_pages > pages.max()) return false;
  const std::uint64_t s = has_seq ? 1 + (need_slot ? 1 : 0) : 0;
  if (s > slots.max()) return false;
  return page_chunks(total_pages) + slot_chunks(s) <= chunks.chunks();
}

Granted<Taken> PoolCore::take(std::uint64_t fresh_pages, bool need_slot) {
  if (fresh_pages <= pages.free().size() && (!need_slot || !slots.free().empty())) {
    Taken t;
    t.pages.reserve(fresh_pages);
    for (std::uint64_t i = 0; i < fresh_pages; ++i) {
      const PageId p = *pages.free().begin();
      pages.set(p, ObjectStatus::Held);
      t.pages.push_back(p);
    }
    if (need_slot) {
      const SlotId s = *slots.free().begin();
      slots.set(s, ObjectStatus::Held);
      slot_refs[s] = 1;
      t.slot = s;
    }
    return t;
  }
  if (pending || in_flight) return Denied{DeniedKind::Remapping};
  if (plan_rebalance(fresh_pages, need_slot)) return Denied{DeniedKind::Remapping};
  return Denied{anything_held() ? DeniedKind::Busy : DeniedKind::ExceedsPool};
}

Granted<Taken> PoolCore::take_row(std::uint64_t tokens, std::uint64_t held, bool with_slot, bool take_slot) {
  const std::uint64_t total = ceil_div(tokens, unit);
  if (total > row_pages) return Denied{DeniedKind::ExceedsRow, row_pages * unit};
  if (!fits(total, with_slot)) return Denied{DeniedKind::ExceedsPool};
  return take(total - held, take_slot);
}

void PoolCore::give_page(PageId page) { pages.set(page, ObjectStatus::Free); }

void PoolCore::release_slot(SlotId slot) {
  if (slot_refs[slot] == 0) fail(ErrorKind::Api, "pool: internal error, slot {} released twice", slot);
  if (--slot_refs[slot] == 0) slots.set(slot, ObjectStatus::Free);
}

std::uint32_t PoolCore::make_node(PageId page, std::uint32_t parent) {
  const std::uint32_t n = nodes.make(parent);
  nodes[n].page = page;
  nodes[n].twin = {};
  return n;
}

void PoolCore::release_node(std::uint32_t n) {
  nodes.release(n, "pool", [this](const Node& node) { give_page(node.page); });
}

bool PoolCore::plan_rebalance(std::uint64_t fresh_pages, bool need_slot) {
  const std::uint64_t free_pages = pages.free().size();
  const std::uint64_t short_pages = fresh_pages > free_pages ? fresh_pages - free_pages : 0;
  const std::uint64_t short_slots = (need_slot && slots.free().empty()) ? 1 : 0;
  if (short_pages > pages.absent().size() || short_slots > slots.absent().size()) return false;

  std::vector<std::uint32_t> target_pages, target_slots;
  for (auto it = pages.absent().begin(); target_pages.size() < short_pages; ++it) target_pages.push_back(*it);
  for (auto it = slots.absent().begin(); target_slots.size() < short_slots; ++it) target_slots.push_back(*it);

  // Sources: free objects of the other kind, highest first, beyond what the request needs.
  std::vector<std::uint32_t> source_pages, source_slots;
  if (short_pages > 0 && short_slots == 0) {
    const std::uint64_t keep = need_slot ? 1 : 0;
    const auto& f = slots.free();
    std::uint64_t avail = f.size() > keep ? f.size() - keep : 0;
    for (auto it = f.rbegin(); it != f.rend() && source_slots.size() < avail; ++it) source_slots.push_back(*it);
  } else if (short_slots > 0 && short_pages == 0) {
    const auto& f = pages.free();
    std::uint64_t avail = f.size() > fresh_pages ? f.size() - fresh_pages : 0;
    for (auto it = f.rbegin(); it != f.rend() && source_pages.size() < avail; ++it) source_pages.push_back(*it);
  }

  // Chunks the targets need: positions not mapped yet, each counted once.
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::uint32_t> scratch;
  std::uint64_t needed = 0;
  auto count_targets = [&](const std::vector<std::uint32_t>& ids, std::uint32_t a0, std::uint32_t a1) {
    for (std::uint32_t id : ids)
      for (std::uint32_t a = a0; a < a1; ++a) {
        auto [first, end] = chunks.span(a, id);
        for (std::uint64_t p = first; p < end; ++p)
          if (chunks.users(a, p) == 0 && scratch.emplace(std::pair{a, p}, 0).second) ++needed;
      }
  };
  count_targets(target_pages, 0, page_arenas);
  count_targets(target_slots, page_arenas, page_arenas + slot_arenas);
  scratch.clear();

  std::uint64_t avail = chunks.free_chunks();
  std::uint64_t used_pages = 0, used_slots = 0;
  auto take_source = [&](std::uint32_t id, std::uint32_t a0, std::uint32_t a1) {
    for (std::uint32_t a = a0; a < a1; ++a) {
      auto [first, end] = chunks.span(a, id);
      for (std::uint64_t p = first; p < end; ++p) {
        auto [it, fresh] = scratch.emplace(std::pair{a, p}, chunks.users(a, p));
        if (--it->second == 0) ++avail;
      }
    }
  };
  while (avail < needed && used_slots < source_slots.size())
    take_source(source_slots[used_slots++], page_arenas, page_arenas + slot_arenas);
  while (avail < needed && used_pages < source_pages.size()) take_source(source_pages[used_pages++], 0, page_arenas);
  if (avail < needed) return false;

  Remap plan;
  plan.id = next_plan++;
  for (std::uint64_t i = 0; i < used_slots; ++i) {
    const std::uint32_t s = source_slots[i];
    slots.set(s, ObjectStatus::Leaving);
    for (std::uint32_t a = page_arenas; a < page_arenas + slot_arenas; ++a) chunks.unmap_object(a, s, plan);
    plan.unmade_slots.push_back(s);
  }
  for (std::uint64_t i = 0; i < used_pages; ++i) {
    const std::uint32_t p = source_pages[i];
    pages.set(p, ObjectStatus::Leaving);
    for (std::uint32_t a = 0; a < page_arenas; ++a) chunks.unmap_object(a, p, plan);
    plan.unmade_pages.push_back(p);
  }
  for (std::uint32_t p : target_pages) {
    pages.set(p, ObjectStatus::Arriving);
    for (std::uint32_t a = 0; a < page_arenas; ++a) chunks.map_object(a, p, plan);
    plan.made_pages.push_back(p);
  }
  for (std::uint32_t s : target_slots) {
    slots.set(s, ObjectStatus::Arriving);
    for (std::uint32_t a = page_arenas; a < page_arenas + slot_arenas; ++a) chunks.map_object(a, s, plan);
    plan.made_slots.push_back(s);
  }
  pending = std::move(plan);
  return true;
}

const PoolLayout::PageTable& PoolCore::page_table(std::string_view name) const {
  for (const auto& t : layout.page_tables)
    if (t.name == name) return t;
  fail(ErrorKind::Api, "pool: unknown page table '{}'", name);
}

const PoolLayout::LineTable& PoolCore::line_table(std::string_view name) const {
  for (const auto& t : layout.line_tables)
    if (t.name == name) return t;
  fail(ErrorKind::Api, "pool: unknown line table '{}'", name);
}

}  // namespace kern::pool::detail
