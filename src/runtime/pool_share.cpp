// A state pool shared with another process (include/kern/runtime/pool_share.hpp).
#include "kern/runtime/pool_share.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kern/base/error.hpp"
#include "kern/base/fd_passing.hpp"
#include "kern/cuda/cuda.hpp"
#include "kern/cuda/vmm.hpp"
#include "kern/runtime/runtime.hpp"
#include "runtime/pool_share_wire.hpp"
#include "runtime/runtime_impl.hpp"

namespace kern::runtime {
namespace {

constexpr std::string_view kFdsTag = "kernfds1";

}  // namespace

void send_share(int sock, const pool::PoolShare& share, const std::function<UniqueFd(std::size_t)>& export_fd,
                std::chrono::milliseconds timeout) {
  send_fd_text(sock, pool::write_pool_share(share), {}, timeout);
  for (std::size_t first = 0; first < share.chunks; first += kShareFdsPerMessage) {
    const std::size_t n = std::min<std::size_t>(kShareFdsPerMessage, share.chunks - first);
    std::vector<UniqueFd> owned;
    std::vector<int> fds;
    owned.reserve(n);
    for (std::size_t c = first; c < first + n; ++c) {
      owned.push_back(export_fd(c));
      fds.push_back(owned.back().get());
    }
    send_fd_text(sock, kFdsTag, fds, timeout);
  }  // each batch's descriptors close here: the peer holds its own duplicates
}

pool::PoolShare receive_share(int sock,
                              const std::function<void(const pool::PoolShare&, std::size_t, int)>& import_fd,
                              std::chrono::milliseconds timeout) {
  std::optional<FdMessage> head = recv_fd_message(sock, timeout);
  if (!head) fail(ErrorKind::Io, "pool view: the peer closed before sending a description");
  if (!head->fds.empty())
    fail(ErrorKind::Io, "pool view: {} descriptors came with the description, expected none", head->fds.size());
  pool::PoolShare s = pool::parse_pool_share(head->text());
  std::size_t got = 0;
  while (got < s.chunks) {
    std::optional<FdMessage> m = recv_fd_message(sock, timeout);
    if (!m) fail(ErrorKind::Io, "pool view: the peer closed after {} of {} chunk descriptors", got, s.chunks);
    if (m->text() != kFdsTag)
      fail(ErrorKind::Io, "pool view: a descriptor message without the tag '{}'", kFdsTag);
    if (m->fds.empty() || m->fds.size() > s.chunks - got)
      fail(ErrorKind::Io, "pool view: a message of {} descriptors when {} of {} are still to come", m->fds.size(),
           s.chunks - got, s.chunks);
    for (const UniqueFd& fd : m->fds) import_fd(s, got++, fd.get());
  }  // the received descriptors close at the end of each message
  return s;
}

pool::PoolShare Runtime::send_pool(int sock, std::chrono::milliseconds timeout) {
  Impl& r = *impl_;
  if (!r.states || !r.states->state_pool())
    fail(ErrorKind::Api, "send_pool: the manifest has no paged or per-seq state: there is no pool to share");
  settle();
  r.context->make_current();
  const std::vector<cuda::PhysicalChunk>& chunks = r.states->chunks();
  if (!chunks.empty() && chunks.front().kind() != cuda::HandleKind::PosixFd)
    fail(ErrorKind::Api,
         "send_pool: the pool's chunks have {} handles; sharing through a socket needs POSIX file descriptors "
         "(set KERN_NO_FABRIC=1 before loading)",
         cuda::handle_kind_name(chunks.front().kind()));
  const pool::PoolShare share = pool::describe_share(*r.states->pool());
  if (share.chunks != chunks.size())
    fail(ErrorKind::Api, "send_pool: the pool counts {} chunks, the memory holds {}", share.chunks, chunks.size());
  send_share(sock, share, [&](std::size_t c) { return UniqueFd(chunks[c].export_fd()); }, timeout);
  return share;
}

struct PoolView::Impl {
  pool::PoolShare share;
  std::vector<cuda::PhysicalChunk> chunks;
  std::vector<cuda::VirtualRange> arenas;  // destroyed before the chunks
  std::map<std::string, std::size_t, std::less<>> index;
  std::unique_ptr<cuda::Stream> stream;

  std::size_t arena_of(std::string_view state) const {
    const auto it = index.find(state);
    if (it == index.end()) fail(ErrorKind::Api, "pool view: no state '{}' in the shared pool", state);
    return it->second;
  }
  // The device address of [offset, offset + bytes) of `state`, every position it touches mapped.
  std::uint64_t checked(std::string_view state, std::uint64_t offset, std::uint64_t bytes) const {
    const std::size_t a = arena_of(state);
    const std::uint64_t reach = arenas[a].bytes();
    if (offset > reach || bytes > reach - offset)
      fail(ErrorKind::Api, "pool view: [{}, +{}) leaves state '{}' ({} bytes reserved)", offset, bytes, state, reach);
    if (bytes > 0)
      for (std::uint64_t p = offset / share.chunk_bytes; p <= (offset + bytes - 1) / share.chunk_bytes; ++p)
        if (share.arenas[a].chunks[p] < 0)
          fail(ErrorKind::Api, "pool view: state '{}' has nothing mapped at position {} (bytes {}..{})", state, p,
               p * share.chunk_bytes, (p + 1) * share.chunk_bytes);
    return arenas[a].base() + offset;
  }
};

PoolView::PoolView(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PoolView::PoolView(PoolView&&) noexcept = default;
PoolView& PoolView::operator=(PoolView&&) noexcept = default;
PoolView::~PoolView() = default;

PoolView PoolView::receive(int sock, int ordinal, std::chrono::milliseconds timeout) {
  auto impl = std::make_unique<Impl>();
  impl->share = receive_share(
      sock,
      [&](const pool::PoolShare& share, std::size_t c, int fd) {
        if (c == 0) impl->chunks.reserve(share.chunks);
        impl->chunks.push_back(
            cuda::PhysicalChunk::import_fd(fd, share.chunk_bytes, fmt::format("chunk {} of the shared pool", c)));
      },
      timeout);
  const pool::PoolShare& s = impl->share;
  for (std::size_t a = 0; a < s.arenas.size(); ++a) {
    const pool::SharedArena& arena = s.arenas[a];
    cuda::VirtualRange range = cuda::VirtualRange::reserve(arena.chunks.size() * s.chunk_bytes, s.chunk_bytes,
                                                           "shared state " + arena.state);
    for (std::uint64_t p = 0; p < arena.chunks.size(); ++p) {
      if (arena.chunks[p] < 0) continue;
      range.map(p * s.chunk_bytes, impl->chunks[static_cast<std::size_t>(arena.chunks[p])]);
      range.set_access(p * s.chunk_bytes, s.chunk_bytes, ordinal);
    }
    impl->index.emplace(arena.state, a);
    impl->arenas.push_back(std::move(range));
  }
  impl->stream = std::make_unique<cuda::Stream>();
  return PoolView(std::move(impl));
}

const pool::PoolShare& PoolView::share() const { return impl_->share; }

std::uint64_t PoolView::base(std::string_view state) const {
  return impl_->arenas[impl_->arena_of(state)].base();
}

void PoolView::read(std::string_view state, std::uint64_t offset, std::span<std::byte> out) const {
  const std::uint64_t at = impl_->checked(state, offset, out.size());
  if (out.empty()) return;
  cuda::copy_d2h_async(out.data(), at, out.size(), *impl_->stream);
  impl_->stream->synchronize();
}

void PoolView::write(std::string_view state, std::uint64_t offset, std::span<const std::byte> bytes) const {
  const std::uint64_t at = impl_->checked(state, offset, bytes.size());
  if (bytes.empty()) return;
  cuda::copy_h2d_async(at, bytes.data(), bytes.size(), *impl_->stream);
  impl_->stream->synchronize();
}

}  // namespace kern::runtime
