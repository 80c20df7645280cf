// The multi-GPU handshake's runtime half (include/kern/runtime/runtime.hpp: offer, connect,
// connect_local): exports the handles the offer names, imports what core::plan_connect lists and
// writes the peer buffers' address arrays.
#include <algorithm>
#include <set>
#include <utility>

#include "kern/base/error.hpp"
#include "kern/base/fd_passing.hpp"
#include "kern/base/log.hpp"
#include "kern/cuda/cuda.hpp"
#include "kern/runtime/runtime.hpp"
#include "runtime/runtime_impl.hpp"

namespace kern::runtime {

PeerOffer PeerOffer::of(const HeldOffer& held) {
  PeerOffer p;
  p.offer = held.offer;
  for (const UniqueFd& fd : held.fds) p.fds.push_back(fd.get());
  return p;
}

void send_offer(int sock, const HeldOffer& offer, std::chrono::milliseconds timeout) {
  std::vector<int> fds;
  for (const UniqueFd& fd : offer.fds) fds.push_back(fd.get());
  send_fd_text(sock, core::write_offer(offer.offer), fds, timeout);
}

HeldOffer recv_offer(int sock, std::chrono::milliseconds timeout) {
  std::optional<FdMessage> m = recv_fd_message(sock, timeout);
  if (!m) fail(ErrorKind::Io, "offer: the peer closed before sending its offer");
  HeldOffer held;
  held.offer = core::parse_offer(m->text(), m->fds.size());
  held.fds = std::move(m->fds);
  return held;
}

HeldOffer Runtime::offer() {
  Impl& r = *impl_;
  if (r.m->digest.empty())
    fail(ErrorKind::Api, "offer: the manifest was built in code, not parsed from text: it has no digest to compare");
  r.context->make_current();
  std::set<std::string> targets;
  for (const auto& [group, names] : core::peer_targets(*r.m)) targets.insert(names.begin(), names.end());
  HeldOffer out;
  out.offer.digest = r.m->digest;
  out.offer.ranks = r.ranks;
  for (const std::string& t : targets) {  // name order, as the wire form wants
    const auto it = r.buffers.find(t);
    if (it == r.buffers.end())
      fail(ErrorKind::Api,
           "offer: a peer buffer reaches state '{}'; peers of states are not built (a pooled state is many chunks: "
           "see Runtime::send_pool)",
           t);
    const cuda::PhysicalChunk& c = it->second.exported_chunk;
    if (c.bytes() == 0) fail(ErrorKind::Api, "offer: buffer '{}' has no exportable memory", t);
    if (c.kind() != cuda::HandleKind::PosixFd)
      fail(ErrorKind::Api, "offer: buffer '{}' has a {} handle; set KERN_NO_FABRIC=1 before loading", t,
           cuda::handle_kind_name(c.kind()));
    out.fds.emplace_back(c.export_fd());
    core::OfferHandle h;
    h.target = t;
    h.bytes = c.bytes();
    h.fd = static_cast<std::uint32_t>(out.fds.size() - 1);
    out.offer.handles.push_back(std::move(h));
  }
  // The NCCL id of every collective group this rank leads (a size-1 group joined at load).
  for (const std::string& g : r.collective_groups)
    if (r.m->topology.at(g) > 1 && r.ranks.at(g) == 0) out.offer.nccl[g] = cuda::nccl_unique_id();
  r.offered = out.offer;
  return out;
}

bool Runtime::connected() const { return impl_->ready(); }

std::map<std::string, core::NcclUniqueId> Runtime::Impl::attach(
    const std::map<std::string, std::vector<PeerOffer>>& offers) {
  if (!offered) fail(ErrorKind::Api, "connect: call offer() first (connect checks the others against it)");
  if (connected_once) fail(ErrorKind::Api, "connect: this rank is connected already");
  std::map<std::string, std::vector<core::Offer>> plain;
  for (const auto& [group, list] : offers)
    for (const PeerOffer& o : list) plain[group].push_back(o.offer);
  const core::ConnectPlan plan = core::plan_connect(*m, *offered, plain);
  std::map<std::string, core::NcclUniqueId> ids;
  for (const std::string& g : collective_groups) {
    if (m->topology.at(g) == 1) continue;
    const auto id = plan.nccl.find(g);
    if (id == plan.nccl.end())
      fail(ErrorKind::Api, "connect: group {} runs collectives but its rank 0 offered no NCCL id", g);
    ids.emplace(g, id->second);
  }
  context->make_current();
  const std::uint64_t g = cuda::vmm_info(options.gpu).granularity;
  std::vector<cuda::PhysicalChunk> chunks;
  std::vector<cuda::VirtualRange> ranges;
  for (const core::ConnectPlan::Import& imp : plan.imports) {
    const PeerOffer& from = offers.at(imp.group).at(imp.rank);
    const core::OfferHandle& h = from.offer.handles.at(imp.handle);
    const std::string what = fmt::format("buffer {} of rank {} in group {}", imp.target, imp.rank, imp.group);
    if (!h.fd) fail(ErrorKind::Api, "connect: {} comes as a fabric handle; importing those is not built", what);
    if (*h.fd >= from.fds.size())
      fail(ErrorKind::Api, "connect: {} names descriptor {} of the {} given", what, *h.fd, from.fds.size());
    if (h.bytes % g != 0)
      fail(ErrorKind::Api, "connect: {} is {} bytes, not a multiple of the granularity {}", what, h.bytes, g);
    chunks.push_back(cuda::PhysicalChunk::import_fd(from.fds[*h.fd], h.bytes, what));
    cuda::VirtualRange range = cuda::VirtualRange::reserve(h.bytes, g, what);
    range.map(0, chunks.back());
    range.set_access(0, h.bytes, options.gpu);
    ranges.push_back(std::move(range));
  }
  for (const core::ConnectPlan::PeerArray& a : plan.arrays) {
    BufferSlot& peer = buffers.at(a.buffer);
    std::vector<std::uint64_t> addrs;
    for (const std::int64_t imp : a.import_of_rank)
      addrs.push_back(imp < 0 ? buffers.at(a.target).addr : ranges.at(static_cast<std::size_t>(imp)).base());
    if (addrs.size() * sizeof(std::uint64_t) != peer.bytes)
      fail(ErrorKind::Api, "connect: peer buffer {} holds {} bytes, its group {} addresses", a.buffer, peer.bytes,
           addrs.size());
    cuda::copy_h2d_async(peer.addr, addrs.data(), peer.bytes, *stream);
    wait();  // `addrs` is pageable and goes out of scope
  }
  imported_chunks = std::move(chunks);
  imported_ranges = std::move(ranges);
  connected_once = true;
  log().info("connect: {} peer buffer{} filled, {} import{}, {} NCCL group{} to join", plan.arrays.size(),
             plan.arrays.size() == 1 ? "" : "s", plan.imports.size(), plan.imports.size() == 1 ? "" : "s", ids.size(),
             ids.size() == 1 ? "" : "s");
  return ids;
}

void Runtime::Impl::join(const std::map<std::string, core::NcclUniqueId>& ids) {
  context->make_current();
  for (const auto& [g, id] : ids) {
    cuda::NcclId nid;
    std::copy(id.begin(), id.end(), nid.begin());
    comms.insert_or_assign(g, cuda::NcclComm::init(static_cast<int>(m->topology.at(g)), nid,
                                                   static_cast<int>(ranks.at(g))));
  }
}

void Runtime::connect(const std::map<std::string, std::vector<PeerOffer>>& offers) {
  impl_->join(impl_->attach(offers));
}

void Runtime::connect_local(std::span<Runtime* const> ranks) {
  std::vector<HeldOffer> offers;
  offers.reserve(ranks.size());
  for (Runtime* rt : ranks) offers.push_back(rt->offer());
  // Every group's offers in rank order (a rank without an index in a group is not among its offers).
  std::map<std::string, std::vector<std::pair<std::uint64_t, std::size_t>>> order;
  for (std::size_t i = 0; i < offers.size(); ++i)
    for (const auto& [group, index] : offers[i].offer.ranks) order[group].emplace_back(index, i);
  std::map<std::string, std::vector<PeerOffer>> all;
  for (auto& [group, list] : order) {
    std::sort(list.begin(), list.end());
    for (const auto& [index, i] : list) all[group].push_back(PeerOffer::of(offers[i]));
  }
  // Every rank attaches, then all join their NCCL groups in one group call (a rank's init waits
  // for the others').
  std::vector<std::map<std::string, core::NcclUniqueId>> ids;
  for (Runtime* rt : ranks) ids.push_back(rt->impl_->attach(all));
  // No group to join (peer buffers alone): NCCL is never opened.
  if (std::all_of(ids.begin(), ids.end(), [](const auto& i) { return i.empty(); })) return;
  cuda::nccl_group([&] {
    for (std::size_t i = 0; i < ranks.size(); ++i) ranks[i]->impl_->join(ids[i]);
  });
}

bool Runtime::prefer_eager_module_loading() {
  const cuda::ModuleLoading asked = cuda::prefer_eager_module_loading();
  if (!cuda::lazy_module_loading()) return true;
  log().warn("CUDA loads modules lazily in this process ({}): the first call of each program may wait in its peer "
             "barriers until they time out (2 s each); set CUDA_MODULE_LOADING=EAGER before CUDA starts",
             asked == cuda::ModuleLoading::CallerChose ? "CUDA_MODULE_LOADING is set so"
                                                       : "CUDA was initialized before the ranks were loaded");
  return false;
}

}  // namespace kern::runtime
