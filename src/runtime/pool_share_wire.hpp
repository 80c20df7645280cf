// The pool-share transport without CUDA (kern/runtime/pool_share.hpp says what travels): the
// description first, then the chunks' descriptors at most 64 per message tagged "kernfds1". The
// descriptors come from, and go to, callbacks, so that host tests drive it with memfds and
// Runtime::send_pool / PoolView::receive with exported and imported chunks.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>

#include "kern/base/unique_fd.hpp"
#include "kern/pool/share.hpp"

namespace kern::runtime {

inline constexpr std::size_t kShareFdsPerMessage = 64;

// Sends `share`, then share.chunks descriptors: export_fd(c) for chunk c, each batch closed once sent.
void send_share(int sock, const pool::PoolShare& share, const std::function<UniqueFd(std::size_t)>& export_fd,
                std::chrono::milliseconds timeout);

// Receives a description and every descriptor it announces, calling import_fd(description, c, fd)
// for chunk c as its message arrives (the descriptor closes right after). Io errors: no description, descriptors
// with the description, a malformed description, a message without the tag, an empty message or one
// with more descriptors than are still to come, a peer that closes early, a timeout.
pool::PoolShare receive_share(int sock,
                              const std::function<void(const pool::PoolShare&, std::size_t, int)>& import_fd,
                              std::chrono::milliseconds timeout);

}  // namespace kern::runtime
