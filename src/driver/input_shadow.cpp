#include "kern/driver/input_shadow.hpp"

#include <algorithm>

#include "kern/driver/driver.hpp"
#include "kern/base/error.hpp"

namespace kern::driver {

InputShadow::InputShadow(const core::Manifest& m) {
  for (const auto& [name, b] : m.buffers) {
    if (b.kind != core::BufferKind::Input) continue;
    layout_[name] = Layout{dtype_size(b.dtype), b.domain && b.domain->monotone};
  }
}

std::uint64_t InputShadow::write(Executor& exec, std::string_view buffer, std::span<const std::byte> bytes) {
  auto lit = layout_.find(buffer);
  if (lit == layout_.end()) fail(ErrorKind::Api, "'{}' is not an input buffer of the manifest", buffer);
  const Layout& layout = lit->second;
  auto kit = known_.find(buffer);
  if (kit == known_.end()) kit = known_.emplace(std::string(buffer), std::vector<std::byte>{}).first;
  std::vector<std::byte>& known = kit->second;

  // The first differing byte, rounded down to its element.
  const std::size_t common = std::min(known.size(), bytes.size());
  const std::size_t same = static_cast<std::size_t>(
      std::mismatch(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(common), known.begin()).first -
      bytes.begin());
  if (same == bytes.size()) return 0;  // the buffer already starts with these bytes
  const std::size_t from = layout.monotone ? 0 : same / layout.element * layout.element;
  const std::span<const std::byte> part = bytes.subspan(from);
  if (from == 0)
    exec.write_input(buffer, part, true);
  else
    exec.write_input_at(buffer, from, part);

  if (known.size() < bytes.size()) known.resize(bytes.size());
  std::copy(part.begin(), part.end(), known.begin() + static_cast<std::ptrdiff_t>(from));
  return part.size();
}

std::span<const std::byte> InputShadow::known(std::string_view buffer) const {
  auto it = known_.find(buffer);
  if (it == known_.end()) return {};
  return it->second;
}

}  // namespace kern::driver
