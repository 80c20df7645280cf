// Intrusive references to the pool's bookkeeping (and the host tier's). The Pool and every handle
// hold one, so handles may be dropped in any order, before or after the Pool: the bookkeeping
// lives until the last.
#pragma once

#include <utility>

namespace kern::pool::detail {

// A counted reference to a `Core` with free functions retain(Core*) and release(Core*).
template <class Core>
class Ref {
 public:
  Ref() = default;
  explicit Ref(Core* adopted) : p_(adopted) {}
  Ref(const Ref& o) : p_(o.p_) {
    if (p_) retain(p_);
  }
  Ref(Ref&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  Ref& operator=(Ref o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~Ref() {
    if (p_) release(p_);
  }
  Core* get() const { return p_; }
  Core* operator->() const { return p_; }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  Core* p_ = nullptr;
};

struct PoolCore;
void retain(PoolCore* core);
void release(PoolCore* core);
using CoreRef = Ref<PoolCore>;

}  // namespace kern::pool::detail
