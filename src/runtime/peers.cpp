// The multi-GPU handshake's runtime half (include/kern/runtime/runtime.hpp: offer, connect,
// connect_local): exports the handles the offer names, imports what core::plan_connect lists and
// writes the peer buffers' address arrays.
#include <algorithm>
#include <set>
#include <utility>

#include "kern/base/error.hpp"
#include "kern/base/log.hpp"
#include "kern/runtime/runtime.hpp"
#include "runtime/runtime_impl.hpp"

namespace kern::runtime {

LocalOffer Runtime::offer() {
  Impl& r = *impl_;
  if (r.m->digest.empty())
    fail(ErrorKind::Api, "offer: the manifest was built in code, not parsed from text: it has no digest to compare");
  r.context->make_current();
  std::set<std::string> targets;
  for (const auto& [group, names] : core::peer_targets(*r.m)) targets.insert(names.begin(), names.end());
  LocalOffer out;
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
  r.offered = out.offer;
  return out;
}

bool Runtime::connected() const { return impl_->unfilled_peers.empty(); }

void Runtime::connect(const std::map<std::string, std::vector<PeerOffer>>& offers) {
  Impl& r = *impl_;
  if (!r.offered) fail(ErrorKind::Api, "connect: call offer() first (connect checks the others against it)");
  if (!r.imported_ranges.empty() || (r.unfilled_peers.empty() && !core::peer_targets(*r.m).empty()))
    fail(ErrorKind::Api, "connect: this rank is connected already");
  std::map<std::string, std::vector<core::Offer>> plain;
  for (const auto& [group, list] : offers)
    for (const PeerOffer& o : list) plain[group].push_back(o.offer);
  const core::ConnectPlan plan = core::plan_connect(*r.m, *r.offered, plain);
  r.context->make_current();
  const std::uint64_t g = cuda::vmm_info(r.options.gpu).granularity;
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
    range.set_access(0, h.bytes, r.options.gpu);
    ranges.push_back(std::move(range));
  }
  for (const core::ConnectPlan::PeerArray& a : plan.arrays) {
    BufferSlot& peer = r.buffers.at(a.buffer);
    std::vector<std::uint64_t> addrs;
    for (const std::int64_t imp : a.import_of_rank)
      addrs.push_back(imp < 0 ? r.buffers.at(a.target).addr : ranges.at(static_cast<std::size_t>(imp)).base());
    if (addrs.size() * sizeof(std::uint64_t) != peer.bytes)
      fail(ErrorKind::Api, "connect: peer buffer {} holds {} bytes, its group {} addresses", a.buffer, peer.bytes,
           addrs.size());
    cuda::copy_h2d_async(peer.addr, addrs.data(), peer.bytes, *r.stream);
    r.wait();  // `addrs` is pageable and goes out of scope
  }
  r.imported_chunks = std::move(chunks);
  r.imported_ranges = std::move(ranges);
  r.unfilled_peers.clear();
  log().info("connect: {} peer buffer{} filled, {} import{}", plan.arrays.size(), plan.arrays.size() == 1 ? "" : "s",
             plan.imports.size(), plan.imports.size() == 1 ? "" : "s");
}

void Runtime::connect_local(std::span<Runtime* const> ranks) {
  std::vector<LocalOffer> offers;
  offers.reserve(ranks.size());
  for (Runtime* rt : ranks) offers.push_back(rt->offer());
  // Every group's offers in rank order (a rank without an index in a group is not among its offers).
  std::map<std::string, std::vector<std::pair<std::uint64_t, std::size_t>>> order;
  for (std::size_t i = 0; i < offers.size(); ++i)
    for (const auto& [group, index] : offers[i].offer.ranks) order[group].emplace_back(index, i);
  std::map<std::string, std::vector<PeerOffer>> all;
  for (auto& [group, list] : order) {
    std::sort(list.begin(), list.end());
    for (const auto& [index, i] : list) {
      PeerOffer p;
      p.offer = offers[i].offer;
      for (const UniqueFd& fd : offers[i].fds) p.fds.push_back(fd.get());
      all[group].push_back(std::move(p));
    }
  }
  for (Runtime* rt : ranks) rt->connect(all);
}

}  // namespace kern::runtime
