// A Runtime's state pool mapped by another process (issue 20: "a second process maps the first
// one's pool through POSIX fds and reads back bytes the first wrote"; docs/multi-gpu-handles.md,
// "Sharing a pool with another process"). The owner sends, over a connected Unix-domain socket,
// the pool's description (kern/pool/share.hpp) and then one POSIX file descriptor per chunk, at
// most 64 per message (SCM_RIGHTS, kern/base/fd_passing.hpp); the receiver imports each chunk as
// its descriptors arrive and closes them at once, so neither side holds more than 64 descriptors
// whatever the pool's size, then maps every position the description names into address ranges
// of its own. The bytes are the owner's: what either process writes the other reads (after the
// writer's stream has finished the write).
//
// Messages: first the description's wire form with no descriptors, then ceil(chunks / 64)
// messages whose payload is the 8-byte tag "kernfds1" with the next descriptors in chunk order.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "kern/pool/share.hpp"

namespace kern::runtime {

// The sending end is Runtime::send_pool.

// Another process's pool mapped into the current context's device `ordinal` (the caller makes a
// context current first and keeps it for the view's life).
class PoolView {
 public:
  // Receives a description and its descriptors from `sock` (Io error for a malformed description,
  // a peer that closes early, descriptors more or fewer than the description's chunks, a tag other
  // than "kernfds1", or `timeout` on one message), imports every chunk and maps every position
  // the description names. Cuda error when the driver refuses a descriptor or a mapping (a chunk
  // smaller than the description says, another device's memory).
  static PoolView receive(int sock, int ordinal, std::chrono::milliseconds timeout);
  PoolView(PoolView&&) noexcept;
  PoolView& operator=(PoolView&&) noexcept;
  ~PoolView();

  const pool::PoolShare& share() const;
  // The device address of `state`'s arena: offset o of the owner's state (as read_state_at and a
  // page table address it) is base(state) + o here. Api error for an unknown state.
  std::uint64_t base(std::string_view state) const;
  // Copies `bytes` of `state` from `offset` to host memory (synchronously). Api error when the range
  // leaves the arena or touches a position with nothing mapped.
  void read(std::string_view state, std::uint64_t offset, std::span<std::byte> out) const;
  void write(std::string_view state, std::uint64_t offset, std::span<const std::byte> bytes) const;

 private:
  struct Impl;
  explicit PoolView(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kern::runtime
