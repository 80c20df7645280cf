// The multi-GPU handshake's pure half (include/kern/core/handshake.hpp): the offer's wire form (round
// trip, every refusal naming its field) and the connect plan (imports, peer arrays, NCCL ids) with
// its refusals: digest mismatches, missing and misordered ranks, missing handles, size mismatches.
#include <gtest/gtest.h>

#include <string>

#include "kern/base/error.hpp"
#include "kern/core/handshake.hpp"

namespace kern::core {
namespace {

const std::string kDigest(64, 'a');

OfferHandle fabric_handle(std::string target, std::uint64_t bytes, std::uint8_t seed) {
  OfferHandle h;
  h.target = std::move(target);
  h.bytes = bytes;
  FabricHandle f{};
  for (std::size_t i = 0; i < f.size(); ++i) f[i] = static_cast<std::uint8_t>(seed + i);
  h.fabric = f;
  return h;
}

OfferHandle fd_handle(std::string target, std::uint64_t bytes, std::uint32_t fd) {
  OfferHandle h;
  h.target = std::move(target);
  h.bytes = bytes;
  h.fd = fd;
  return h;
}

NcclUniqueId nccl_id(std::uint8_t seed) {
  NcclUniqueId id{};
  for (std::size_t i = 0; i < id.size(); ++i) id[i] = static_cast<std::uint8_t>(seed * 3 + i);
  return id;
}

// Rank r of group tp (and ep when given): handles for flags (fabric) and kv (an fd); rank 0 leads.
Offer offer_of(std::uint64_t r, bool ep = false) {
  Offer o;
  o.digest = kDigest;
  o.ranks["tp"] = r;
  if (ep) o.ranks["ep"] = r;
  o.handles = {fabric_handle("flags", 256, static_cast<std::uint8_t>(r)), fd_handle("kv", 1 << 20, 0)};
  if (r == 0) {
    o.nccl["tp"] = nccl_id(7);
    if (ep) o.nccl["ep"] = nccl_id(9);
  }
  return o;
}

// A manifest with group tp of `size` ranks and peer buffers of `flags` (an exported buffer) and `kv`
// (a state); with `ep`, a second group over the same ranks with a peer buffer of kv.
Manifest manifest(std::uint64_t size = 2, bool ep = false) {
  Manifest m;
  m.topology["tp"] = size;
  Buffer flags;
  flags.dtype = DType::U32;
  flags.exported = true;
  m.buffers["flags"] = flags;
  m.states["kv"] = State{};
  Buffer peer;
  peer.dtype = DType::U64;
  peer.kind = BufferKind::Peer;
  peer.group = "tp";
  peer.of = "flags";
  m.buffers["flag_peers"] = peer;
  peer.of = "kv";
  m.buffers["kv_peers"] = peer;
  if (ep) {
    m.topology["ep"] = size;
    peer.group = "ep";
    m.buffers["kv_peers_ep"] = peer;
  }
  return m;
}

std::string error_of(const std::function<void()>& fn, ErrorKind kind) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(HandshakeWire, RoundTrip) {
  const Offer o = offer_of(0, true);
  const std::string text = write_offer(o);
  EXPECT_EQ(parse_offer(text, 1), o);
  EXPECT_EQ(write_offer(parse_offer(text, 1)), text);
  EXPECT_NE(text.find("\"fd\":0"), std::string::npos) << text;
  const Offer peer = offer_of(1);
  EXPECT_EQ(parse_offer(write_offer(peer), 1), peer);
  EXPECT_TRUE(parse_offer(write_offer(peer), 1).nccl.empty());
}

// Each malformed offer is refused as Io, naming its field.
TEST(HandshakeWire, RefusesMalformedOffers) {
  const std::string good = write_offer(offer_of(0));
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const auto at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? s : s.replace(at, from.size(), to);
  };
  const std::string fab(128, 'b');
  struct Case {
    std::string text;
    std::size_t fds;
    std::string says;
  };
  const Case cases[] = {
      {"not json", 1, "offer"},
      {good, 0, "descriptor 0 of the 0"},
      {with("\"kern_offer\":1", "\"kern_offer\":2"), 1, "kern_offer"},
      {with("\"kern_offer\":1,", ""), 1, "missing field 'kern_offer'"},
      {with("\"kern_offer\":1", "\"kern_offer\":1,\"extra\":0"), 1, "extra: unknown field"},
      {with(kDigest, std::string(64, 'A')), 1, "lowercase hex"},
      {with(kDigest, std::string(62, 'a')), 1, "64 lowercase hex digits"},
      {with("\"tp\":0", "\"tp\":-1"), 1, "ranks.tp"},
      {with("\"tp\":0", "\"tp\":0.5"), 1, "ranks.tp"},
      {with("\"bytes\":256", "\"bytes\":0"), 1, "at least one byte"},
      {with("\"target\":\"kv\"", "\"target\":\"flags\""), 1, "once each, in name order"},
      {with("\"target\":\"kv\"", "\"target\":\"a\""), 1, "once each, in name order"},
      {with("\"target\":\"kv\"", "\"target\":\"\""), 1, "non-empty name"},
      {with("\"fd\":0", "\"fd\":3"), 2, "descriptor 3 of the 2"},
      {with("\"fd\":0", "\"fd\":0,\"fabric\":\"" + fab + "\""), 1, "exactly one of"},
      {with(",\"fd\":0", ""), 1, "exactly one of"},
      {with("\"fd\":0", "\"fd\":0,\"spare\":1"), 1, "handles[1].spare: unknown field"},
      {with("\"nccl\":{\"tp\"", "\"nccl\":{\"xx\""), 1, "no index in"},
      {with("\"ranks\":{\"tp\":0}", "\"ranks\":{\"tp\":1}"), 1, "only a group's index 0 leads"},
      {with("\"handles\":[", "\"handles\":[[],"), 1, "expected an object"},
      {std::string(100, '[') + std::string(100, ']'), 1, "offer"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const std::string what = error_of([&] { parse_offer(c.text, c.fds); }, ErrorKind::Io);
    EXPECT_NE(what.find(c.says), std::string::npos) << what;
  }
  // An fd named twice: two fd handles on the same descriptor.
  Offer twice = offer_of(1);
  twice.handles[0] = fd_handle("flags", 256, 0);
  const std::string what = error_of([&] { parse_offer(write_offer(twice), 2); }, ErrorKind::Io);
  EXPECT_NE(what.find("descriptor 0 named twice"), std::string::npos) << what;
}

TEST(HandshakePlan, TwoRanks) {
  const Manifest m = manifest();
  const std::map<std::string, std::vector<Offer>> offers = {{"tp", {offer_of(0), offer_of(1)}}};
  const ConnectPlan p0 = plan_connect(m, offer_of(0), offers);
  ASSERT_EQ(p0.imports.size(), 2u);  // rank 1's flags and kv, in target order
  EXPECT_EQ(p0.imports[0].rank, 1u);
  EXPECT_EQ(p0.imports[0].target, "flags");
  EXPECT_EQ(p0.imports[0].handle, 0u);
  EXPECT_EQ(p0.imports[1].target, "kv");
  EXPECT_EQ(p0.imports[1].handle, 1u);
  ASSERT_EQ(p0.arrays.size(), 2u);
  EXPECT_EQ(p0.arrays[0].buffer, "flag_peers");
  EXPECT_EQ(p0.arrays[0].import_of_rank, (std::vector<std::int64_t>{-1, 0}));
  EXPECT_EQ(p0.arrays[1].buffer, "kv_peers");
  EXPECT_EQ(p0.arrays[1].import_of_rank, (std::vector<std::int64_t>{-1, 1}));
  ASSERT_EQ(p0.nccl.size(), 1u);
  EXPECT_EQ(p0.nccl.at("tp"), nccl_id(7));
  const ConnectPlan p1 = plan_connect(m, offer_of(1), offers);
  ASSERT_EQ(p1.imports.size(), 2u);
  EXPECT_EQ(p1.imports[0].rank, 0u);
  EXPECT_EQ(p1.arrays[1].import_of_rank, (std::vector<std::int64_t>{1, -1}));
  EXPECT_EQ(p1.nccl.at("tp"), nccl_id(7));  // every rank joins with the leader's id
}

// A peer that is in two groups is imported once; every array points at the same import.
TEST(HandshakePlan, ImportsEachPeerTargetOnce) {
  const Manifest m = manifest(2, true);
  const std::map<std::string, std::vector<Offer>> offers = {{"ep", {offer_of(0, true), offer_of(1, true)}},
                                                           {"tp", {offer_of(0, true), offer_of(1, true)}}};
  const ConnectPlan p = plan_connect(m, offer_of(1, true), offers);
  ASSERT_EQ(p.imports.size(), 2u);  // rank 0's kv (first seen in ep) and flags
  EXPECT_EQ(p.imports[0].group, "ep");
  EXPECT_EQ(p.imports[0].target, "kv");
  EXPECT_EQ(p.imports[1].target, "flags");
  ASSERT_EQ(p.arrays.size(), 3u);
  EXPECT_EQ(p.arrays[1].buffer, "kv_peers");
  EXPECT_EQ(p.arrays[2].buffer, "kv_peers_ep");
  EXPECT_EQ(p.arrays[1].import_of_rank, p.arrays[2].import_of_rank);
  EXPECT_EQ(p.nccl.size(), 2u);
}

TEST(HandshakePlan, Refusals) {
  const Manifest m = manifest(3);
  auto offers_with = [&](auto change) {
    std::vector<Offer> list = {offer_of(0), offer_of(1), offer_of(2)};
    change(list);
    return std::map<std::string, std::vector<Offer>>{{"tp", list}};
  };
  struct Case {
    std::map<std::string, std::vector<Offer>> offers;
    std::string says;
  };
  const std::string other(64, 'c');
  const Case cases[] = {
      {offers_with([&](auto& l) { l[2].digest = other; }), "rank 2 of group 'tp' loaded another manifest (sha256 " + other},
      {offers_with([](auto& l) { l.pop_back(); }), "group 'tp' has 3 ranks, 2 offers came (missing rank 2)"},
      {offers_with([](auto& l) { std::swap(l[1], l[2]); }), "the offer at position 1 of group 'tp' is not rank 1's (index 2)"},
      {offers_with([](auto& l) { l[2].handles.pop_back(); }), "rank 2 of group 'tp' offers no handle for 'kv'"},
      {offers_with([](auto& l) { l[1].handles[0].bytes = 512; }), "'flags' is 512 bytes on rank 1"},
      {offers_with([](auto& l) { l[2].nccl["tp"] = nccl_id(1); }), "rank 2 of group 'tp' offers an NCCL id"},
      {offers_with([](auto& l) { l[0].handles[0].bytes = 128; }), "holds another offer"},
      {{}, "no offers for group 'tp'"},
      {{{"tp", {offer_of(0), offer_of(1), offer_of(2)}}, {"dp", {}}}, "group 'dp', which the manifest does not declare"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.says);
    const std::string what = error_of([&] { plan_connect(m, offer_of(0), c.offers); }, ErrorKind::Api);
    EXPECT_NE(what.find(c.says), std::string::npos) << what;
  }
  Offer lost = offer_of(0);
  lost.ranks.clear();
  const std::string what =
      error_of([&] { plan_connect(m, lost, offers_with([](auto&) {})); }, ErrorKind::Api);
  EXPECT_NE(what.find("this rank has no index in group 'tp'"), std::string::npos) << what;
}

TEST(HandshakePlan, PeerTargetsPerGroup) {
  const auto t = peer_targets(manifest(2, true));
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t.at("tp"), (std::vector<std::string>{"flags", "kv"}));
  EXPECT_EQ(t.at("ep"), (std::vector<std::string>{"kv"}));
}

}  // namespace
}  // namespace kern::core
