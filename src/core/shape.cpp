// Element counts of shapes (buffers, scratch) at given var values, with checked arithmetic.
#include "kern/base/error.hpp"
#include "kern/core/manifest.hpp"

namespace kern::core {

std::uint64_t shape_elements(const std::vector<Dim>& shape, const VarLookup& vars, std::string_view where) {
  std::uint64_t n = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const Dim& d = shape[i];
    std::uint64_t extent = d.value;
    if (d.is_var()) {
      std::optional<std::uint64_t> v = vars ? vars(d.var) : std::nullopt;
      if (!v) fail(ErrorKind::Manifest, "{}{}shape[{}]: unknown var \"{}\"", where, where.empty() ? "" : ".", i, d.var);
      extent = *v;
    }
    if (__builtin_mul_overflow(n, extent, &n))
      fail(ErrorKind::Manifest, "{}{}shape[{}]: element count overflows u64", where, where.empty() ? "" : ".", i);
  }
  return n;
}

}  // namespace kern::core
