// Intrusive reference to the pool's bookkeeping. The Pool and every handle hold one, so handles
// may be dropped in any order, before or after the Pool: the bookkeeping lives until the last.
#pragma once

#include <utility>

namespace kern::pool::detail {

struct PoolCore;
void retain(PoolCore* core);
void release(PoolCore* core);

class CoreRef {
 public:
  CoreRef() = default;
  explicit CoreRef(PoolCore* adopted) : p_(adopted) {}
  CoreRef(const CoreRef& o) : p_(o.p_) {
    if (p_) retain(p_);
  }
  CoreRef(CoreRef&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  CoreRef& operator=(CoreRef o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~CoreRef() {
    if (p_) release(p_);
  }
  PoolCore* get() const { return p_; }
  PoolCore* operator->() const { return p_; }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  PoolCore* p_ = nullptr;
};

}  // namespace kern::pool::detail
