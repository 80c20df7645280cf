#include "kern/serve/runtime_pages.hpp"

namespace kern::serve {

RuntimePages::RuntimePages(runtime::Runtime& rt) : rt_(rt) {
  if (!rt_.state_pool()) fail(ErrorKind::Api, "kern serve: the manifest has no pooled state (no KV cache to page)");
}
std::uint64_t RuntimePages::unit() const { return rt_.state_pool()->unit(); }
std::uint64_t RuntimePages::pages_total() const { return rt_.state_pool()->total(); }
std::uint64_t RuntimePages::pages_used() const { return rt_.state_pool()->used(); }

}  // namespace kern::serve
