#include "kern/pool/denied.hpp"

#include <fmt/format.h>

namespace kern::pool {

namespace {

struct KindText {
  std::string_view name, advice;
};

KindText text(DeniedKind kind) {
  switch (kind) {
    case DeniedKind::ExceedsRow: return {"ExceedsRow", "more tokens than one page-table row references; it never fits"};
    case DeniedKind::ExceedsPool: return {"ExceedsPool", "no layout of the budget can hold it; it never fits"};
    case DeniedKind::Busy: return {"Busy", "it fits, but what it needs is held; evict something and ask again"};
    case DeniedKind::Remapping:
      return {"Remapping", "a remap is planned or in flight; ask again after it lands, evict nothing"};
    case DeniedKind::HostFull: return {"HostFull", "the host tier has no room; drop a parked entry"};
  }
  return {"?", ""};
}

}  // namespace

std::string_view to_string(DeniedKind kind) { return text(kind).name; }

std::string_view Denied::advice() const { return text(kind).advice; }

std::string Denied::describe() const {
  if (kind == DeniedKind::ExceedsRow) return fmt::format("ExceedsRow (limit {} tokens): {}", limit, advice());
  return fmt::format("{}: {}", to_string(kind), advice());
}

}  // namespace kern::pool
