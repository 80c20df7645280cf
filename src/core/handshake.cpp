// The multi-GPU handshake's pure half: offers, their wire form, the connect plan (handshake.hpp).
#include "kern/core/handshake.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <utility>

#include "kern/base/error.hpp"
#include "kern/base/json_fields.hpp"

namespace kern::core {
namespace {

constexpr std::string_view kHex = "0123456789abcdef";

template <std::size_t N>
std::string hex_of(const std::array<std::uint8_t, N>& bytes) {
  std::string s;
  s.reserve(2 * N);
  for (std::uint8_t b : bytes) {
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 15]);
  }
  return s;
}

const JsonFields kWire(ErrorKind::Io, "offer");

[[noreturn]] void bad(const std::string& path, std::string_view why) { kWire.bad(path, why); }

int hex_digit(char c) {
  const auto at = kHex.find(c);
  return at == std::string_view::npos ? -1 : static_cast<int>(at);
}

template <std::size_t N>
std::array<std::uint8_t, N> bytes_of(const Json& j, const std::string& path) {
  if (!j.is_string()) bad(path, "expected a string of hex digits");
  const std::string& s = j.get_ref<const std::string&>();
  if (s.size() != 2 * N) bad(path, fmt::format("expected {} lowercase hex digits, got {} characters", 2 * N, s.size()));
  std::array<std::uint8_t, N> out{};
  for (std::size_t i = 0; i < N; ++i) {
    const int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);
    if (hi < 0 || lo < 0) bad(path, "expected lowercase hex digits");
    out[i] = static_cast<std::uint8_t>(hi * 16 + lo);
  }
  return out;
}

// Group names are manifest names; an offer's must be non-empty (the manifest check comes at connect).
std::string group_of(const std::string& key, const std::string& path) {
  if (key.empty()) bad(path, "an empty group name");
  return key;
}

[[noreturn]] void refuse(std::string_view what) { fail(ErrorKind::Api, "connect: {}", what); }

}  // namespace

std::string write_offer(const Offer& offer) {
  nlohmann::ordered_json j;
  j["kern_offer"] = 1;
  j["digest"] = offer.digest;
  j["ranks"] = nlohmann::ordered_json::object();
  for (const auto& [g, r] : offer.ranks) j["ranks"][g] = r;
  j["handles"] = nlohmann::ordered_json::array();
  for (const OfferHandle& h : offer.handles) {
    nlohmann::ordered_json e;
    e["target"] = h.target;
    e["bytes"] = h.bytes;
    if (h.fabric) e["fabric"] = hex_of(*h.fabric);
    if (h.fd) e["fd"] = *h.fd;
    j["handles"].push_back(std::move(e));
  }
  j["nccl"] = nlohmann::ordered_json::object();
  for (const auto& [g, id] : offer.nccl) j["nccl"][g] = hex_of(id);
  return j.dump();
}

Offer parse_offer(std::string_view text, std::size_t fds) {
  const Json j = parse_json_strict(text, {ErrorKind::Io, "offer", 16});
  kWire.only(j, {"kern_offer", "digest", "ranks", "handles", "nccl"}, "offer");
  const Json& version = kWire.field(j, "kern_offer", "offer");
  if (!version.is_number_unsigned() || version.get<std::uint64_t>() != 1) bad("kern_offer", "expected 1");
  Offer o;
  const Json& digest = kWire.field(j, "digest", "offer");
  o.digest = hex_of(bytes_of<32>(digest, "digest"));
  const Json& ranks = kWire.field(j, "ranks", "offer");
  if (!ranks.is_object()) bad("ranks", "expected an object");
  for (const auto& [g, r] : ranks.items())
    o.ranks[group_of(g, "ranks")] = kWire.u64(r, json_path_key("ranks", g));
  const Json& handles = kWire.field(j, "handles", "offer");
  if (!handles.is_array()) bad("handles", "expected an array");
  std::vector<bool> fd_used(fds, false);
  for (std::size_t i = 0; i < handles.size(); ++i) {
    const std::string path = json_path_index("handles", i);
    const Json& h = handles[i];
    kWire.only(h, {"target", "bytes", "fabric", "fd"}, path);
    OfferHandle out;
    const Json& target = kWire.field(h, "target", path);
    if (!target.is_string() || target.get_ref<const std::string&>().empty())
      bad(json_path_key(path, "target"), "expected a non-empty name");
    out.target = target.get<std::string>();
    if (!o.handles.empty() && o.handles.back().target >= out.target)
      bad(json_path_key(path, "target"), "targets must be listed once each, in name order");
    out.bytes = kWire.u64(kWire.field(h, "bytes", path), json_path_key(path, "bytes"));
    if (out.bytes == 0) bad(json_path_key(path, "bytes"), "a handle maps at least one byte");
    const bool has_fabric = h.contains("fabric"), has_fd = h.contains("fd");
    if (has_fabric == has_fd) bad(path, "expected exactly one of 'fabric' and 'fd'");
    if (has_fabric) out.fabric = bytes_of<64>(h["fabric"], json_path_key(path, "fabric"));
    if (has_fd) {
      const std::uint64_t fd = kWire.u64(h["fd"], json_path_key(path, "fd"));
      if (fd >= fds)
        bad(json_path_key(path, "fd"), fmt::format("descriptor {} of the {} that came with the offer", fd, fds));
      if (fd_used[fd]) bad(json_path_key(path, "fd"), fmt::format("descriptor {} named twice", fd));
      fd_used[fd] = true;
      out.fd = static_cast<std::uint32_t>(fd);
    }
    o.handles.push_back(std::move(out));
  }
  const Json& nccl = kWire.field(j, "nccl", "offer");
  if (!nccl.is_object()) bad("nccl", "expected an object");
  for (const auto& [g, id] : nccl.items()) {
    const std::string path = json_path_key("nccl", g);
    const auto r = o.ranks.find(group_of(g, "nccl"));
    if (r == o.ranks.end()) bad(path, "an NCCL id for a group the offer has no index in");
    if (r->second != 0) bad(path, fmt::format("only a group's index 0 leads it (this rank is {})", r->second));
    o.nccl[g] = bytes_of<128>(id, path);
  }
  return o;
}

std::map<std::string, std::vector<std::string>> peer_targets(const Manifest& m) {
  std::map<std::string, std::set<std::string>> sets;
  for (const auto& [name, b] : m.buffers)
    if (b.kind == BufferKind::Peer) sets[b.group].insert(b.of);
  std::map<std::string, std::vector<std::string>> out;
  for (auto& [g, s] : sets) out[g].assign(s.begin(), s.end());
  return out;
}

ConnectPlan plan_connect(const Manifest& m, const Offer& mine,
                         const std::map<std::string, std::vector<Offer>>& offers) {
  for (const auto& [g, list] : offers)
    if (!m.topology.count(g)) refuse(fmt::format("offers for group '{}', which the manifest does not declare", g));
  const auto targets = peer_targets(m);
  ConnectPlan plan;
  std::vector<const Offer*> distinct;  // peer offers already imported from, in first-seen order
  std::map<std::pair<std::size_t, std::string>, std::size_t> imported;  // (distinct offer, target) -> import
  std::map<std::string, std::uint64_t> bytes_of_target;
  for (const auto& [g, size] : m.topology) {
    const auto it = offers.find(g);
    if (it == offers.end()) refuse(fmt::format("no offers for group '{}' ({} ranks)", g, size));
    const std::vector<Offer>& list = it->second;
    if (list.size() != size)
      refuse(fmt::format("group '{}' has {} ranks, {} offers came (missing rank {})", g, size, list.size(),
                         std::min<std::size_t>(list.size(), size)));
    const auto me = mine.ranks.find(g);
    if (me == mine.ranks.end() || me->second >= size)
      refuse(fmt::format("this rank has no index in group '{}' of size {}", g, size));
    for (std::size_t r = 0; r < list.size(); ++r) {
      const Offer& o = list[r];
      const auto idx = o.ranks.find(g);
      if (idx == o.ranks.end() || idx->second != r)
        refuse(fmt::format("the offer at position {} of group '{}' is not rank {}'s ({})", r, g, r,
                           idx == o.ranks.end() ? std::string("no index there") : fmt::format("index {}", idx->second)));
      if (o.digest != mine.digest)
        refuse(fmt::format("rank {} of group '{}' loaded another manifest (sha256 {} against this rank's {})", r, g,
                           o.digest, mine.digest));
      if (r == me->second && !(o == mine)) refuse(fmt::format("position {} of group '{}' is this rank's, but holds another offer", r, g));
      for (const auto& [ng, id] : o.nccl)
        if (ng == g && r != 0) refuse(fmt::format("rank {} of group '{}' offers an NCCL id: only rank 0 leads", r, g));
      const auto need = targets.find(g);
      if (need == targets.end()) continue;
      for (const std::string& t : need->second) {
        const auto h = std::find_if(o.handles.begin(), o.handles.end(), [&](const OfferHandle& x) { return x.target == t; });
        if (h == o.handles.end()) refuse(fmt::format("rank {} of group '{}' offers no handle for '{}'", r, g, t));
        const auto [size_it, fresh] = bytes_of_target.emplace(t, h->bytes);
        if (!fresh && size_it->second != h->bytes)
          refuse(fmt::format("'{}' is {} bytes on rank {} of group '{}' and {} bytes elsewhere", t, h->bytes, r, g,
                             size_it->second));
        if (r == me->second) continue;
        std::size_t d = 0;
        while (d < distinct.size() && !(*distinct[d] == o)) ++d;
        if (d == distinct.size()) distinct.push_back(&o);
        if (imported.emplace(std::make_pair(d, t), plan.imports.size()).second)
          plan.imports.push_back({g, r, t, static_cast<std::size_t>(h - o.handles.begin())});
      }
    }
    if (const auto led = list.front().nccl.find(g); led != list.front().nccl.end()) plan.nccl[g] = led->second;
  }
  for (const auto& [name, b] : m.buffers) {
    if (b.kind != BufferKind::Peer) continue;
    const std::vector<Offer>& list = offers.at(b.group);
    const std::uint64_t me = mine.ranks.at(b.group);
    ConnectPlan::PeerArray a{name, b.group, b.of, {}};
    for (std::size_t r = 0; r < list.size(); ++r) {
      if (r == me) {
        a.import_of_rank.push_back(-1);
        continue;
      }
      std::size_t d = 0;
      while (!(*distinct[d] == list[r])) ++d;
      a.import_of_rank.push_back(static_cast<std::int64_t>(imported.at({d, b.of})));
    }
    plan.arrays.push_back(std::move(a));
  }
  return plan;
}

}  // namespace kern::core
