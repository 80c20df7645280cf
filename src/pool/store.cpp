#include "kern/pool/store.hpp"

#include "pool/core.hpp"
#include "pool/handles.hpp"

namespace kern::pool {

Checkpoint::Checkpoint(const Checkpoint& o)
    : core_(o.core_), tail_(o.tail_), len_(o.len_), pages_(o.pages_), slot_(o.slot_) {
  detail::Handles::retain(*this, core_);
}

Checkpoint::Checkpoint(Checkpoint&& o) noexcept { detail::Handles::steal(*this, core_, o, o.core_); }

Checkpoint& Checkpoint::operator=(Checkpoint o) noexcept {
  reset();
  detail::Handles::steal(*this, core_, o, o.core_);
  return *this;
}

Checkpoint::~Checkpoint() { reset(); }

void Checkpoint::reset() noexcept { detail::Handles::drop(*this, core_); }

std::vector<PageId> Checkpoint::page_ids() const {
  std::vector<PageId> out;
  if (!core_) return out;
  for (std::uint32_t n : core_.get()->nodes.chain(tail_)) out.push_back(core_.get()->nodes[n].page);
  return out;
}

}  // namespace kern::pool
