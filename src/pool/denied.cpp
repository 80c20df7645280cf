#include "kern/pool/denied.hpp"

#include <fmt/format.h>

namespace kern::pool {

std::string_view to_string(DeniedKind kind) {
  switch (kind) {
    case DeniedKind::ExceedsRow: return "ExceedsRow";
    case DeniedKind::ExceedsPool: return "ExceedsPool";
    case DeniedKind::Busy: return "Busy";
    case DeniedKind::Remapping: return "Remapping";
    case DeniedKind::HostFull: return "HostFull";
  }
  return "?";
}

std::string_view Denied::advice() const {
  switch (kind) {
    case DeniedKind::ExceedsRow: return "more tokens than one page-table row references; it never fits";
    case DeniedKind::ExceedsPool: return "no layout of the budget can hold it; it never fits";
    case DeniedKind::Busy: return "it fits, but what it needs is held; evict something and ask again";
    case DeniedKind::Remapping: return "a remap is planned or in flight; ask again after it lands, evict nothing";
    case DeniedKind::HostFull: return "the host tier has no room; drop a parked entry";
  }
  return "";
}

std::string Denied::describe() const {
  if (kind == DeniedKind::ExceedsRow) return fmt::format("ExceedsRow (limit {} tokens): {}", limit, advice());
  return fmt::format("{}: {}", to_string(kind), advice());
}

}  // namespace kern::pool
