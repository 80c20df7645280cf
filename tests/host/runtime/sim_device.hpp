// A simulated StateDevice for the state pool's host tests: bytes per physical chunk, each arena's
// position -> chunk mapping and access, a host block; every zero or copy goes through the mapping
// and throws on an unmapped or inaccessible position (what would fault on a GPU). Fences are done
// at once unless held, then land when the test releases them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <vector>

#include "kern/pool/pool.hpp"
#include "runtime/state_device.hpp"

namespace kern::runtime::testing {

class SimDevice final : public StateDevice {
 public:
  SimDevice(const pool::Pool& p, const StateGeometry& g, const pool::Remap& initial)
      : g_(g), chunks_(p.chunks(), std::vector<std::byte>(g.chunk_bytes)), maps_(g.arenas.size()),
        access_(g.arenas.size()) {
    for (const VmmOp& op : vmm_ops(initial, g)) vmm(op);
  }

  void vmm(const VmmOp& op) override {
    std::lock_guard<std::mutex> lock(mu_);
    const std::uint64_t pos = op.offset / g_.chunk_bytes;
    switch (op.kind) {
      case VmmOp::Kind::Unmap:
        if (!maps_[op.arena].erase(pos)) throw std::runtime_error("unmap of an unmapped position");
        access_[op.arena].erase(pos);
        break;
      case VmmOp::Kind::Map:
        if (!maps_[op.arena].emplace(pos, op.chunk).second) throw std::runtime_error("map over a mapping");
        break;
      case VmmOp::Kind::Access:
        for (std::uint64_t q = pos; q < pos + op.bytes / g_.chunk_bytes; ++q) {
          if (!maps_[op.arena].count(q)) throw std::runtime_error("access on an unmapped position");
          access_[op.arena].insert(q);
        }
        break;
    }
    ++vmm_ops_;
  }
  void zero(const ZeroOp& op) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (std::uint64_t i = 0; i < op.bytes; ++i) *at(op.arena, op.offset + i) = std::byte{0};
  }
  void copy(const CopyOp& op) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (std::uint64_t r = 0; r < op.height; ++r)
      for (std::uint64_t i = 0; i < op.width; ++i) {
        const std::uint64_t s = op.src + r * op.src_pitch + i, d = op.dst + r * op.dst_pitch + i;
        const std::byte b = op.src_end == CopyOp::End::Host ? host_.at(s) : *at(op.src_arena, s);
        (op.dst_end == CopyOp::End::Host ? host_.at(d) : *at(op.dst_arena, d)) = b;
      }
    ++copies_;
  }
  std::shared_ptr<Fence> record() override { return std::make_shared<SimFence>(*this, released_, hold_); }
  void reserve_host(std::uint64_t bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!host_.empty()) throw std::runtime_error("host block reserved twice");
    host_.assign(bytes, std::byte{0});
  }
  // The simulated transfer stream runs at once, like the compute stream; only its fences can be held.
  void transfer_after_compute() override { ++transfer_waits_; }
  void transfer(const CopyOp& op) override {
    copy(op);
    ++transfers_;
  }
  std::shared_ptr<Fence> record_transfer() override { return std::make_shared<SimFence>(*this, released_transfers_, hold_transfers_); }

  // Test side.
  void hold_fences(bool hold) {
    {
      std::lock_guard<std::mutex> lock(fence_mu_);
      hold_ = hold;
      if (!hold) ++released_;
    }
    fence_cv_.notify_all();
  }
  void hold_transfers(bool hold) {
    {
      std::lock_guard<std::mutex> lock(fence_mu_);
      hold_transfers_ = hold;
      if (!hold) ++released_transfers_;
    }
    fence_cv_.notify_all();
  }
  std::vector<std::byte>& host_bytes() { return host_; }
  std::uint64_t transfers_run() const { return transfers_; }
  std::uint64_t transfer_waits() const { return transfer_waits_; }
  void write(std::uint32_t arena, std::uint64_t offset, const std::vector<std::byte>& bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    for (std::size_t i = 0; i < bytes.size(); ++i) *at(arena, offset + i) = bytes[i];
  }
  std::vector<std::byte> read(std::uint32_t arena, std::uint64_t offset, std::uint64_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::byte> out(n);
    for (std::uint64_t i = 0; i < n; ++i) out[i] = *at(arena, offset + i);
    return out;
  }
  std::uint64_t vmm_ops_run() const { return vmm_ops_; }
  std::uint64_t copies_run() const { return copies_; }

 private:
  class SimFence final : public Fence {
   public:
    SimFence(SimDevice& d, const std::uint64_t& released, bool held)
        : d_(d), released_(released), epoch_(held ? released + 1 : 0) {}
    bool done() const override {
      std::lock_guard<std::mutex> lock(d_.fence_mu_);
      return released_ >= epoch_;
    }
    void wait() override {
      std::unique_lock<std::mutex> lock(d_.fence_mu_);
      d_.fence_cv_.wait(lock, [&] { return released_ >= epoch_; });
    }

   private:
    SimDevice& d_;
    const std::uint64_t& released_;
    std::uint64_t epoch_;
  };

  std::byte* at(std::uint32_t arena, std::uint64_t offset) {
    const std::uint64_t pos = offset / g_.chunk_bytes;
    const auto it = maps_.at(arena).find(pos);
    if (it == maps_[arena].end()) throw std::runtime_error("access to an unmapped position");
    if (!access_[arena].count(pos)) throw std::runtime_error("access to a position without access rights");
    return &chunks_.at(it->second)[offset % g_.chunk_bytes];
  }

  StateGeometry g_;
  std::mutex mu_;
  std::vector<std::vector<std::byte>> chunks_;
  std::vector<std::map<std::uint64_t, std::uint32_t>> maps_;
  std::vector<std::set<std::uint64_t>> access_;
  std::vector<std::byte> host_;
  std::atomic<std::uint64_t> vmm_ops_{0}, copies_{0}, transfers_{0}, transfer_waits_{0};
  std::mutex fence_mu_;
  std::condition_variable fence_cv_;
  bool hold_ = false, hold_transfers_ = false;
  std::uint64_t released_ = 0, released_transfers_ = 0;
};

}  // namespace kern::runtime::testing
