#include "kern/core/peer_kernels.hpp"

#include <map>
#include <set>
#include <utility>

namespace kern::core {
namespace {

bool reads_param(const Launch& l, std::uint32_t i) {
  if (!l.args) return true;  // forwards every op param in order
  for (const LaunchArg& a : *l.args) {
    if (a.kind == LaunchArg::Kind::Param && a.param == i) return true;
    if (a.kind == LaunchArg::Kind::Pack && a.pack)
      for (const PackField& f : a.pack->fields)
        if (f.kind == PackField::Kind::Param && f.param == i) return true;
  }
  return false;
}

}  // namespace

std::vector<PeerKernel> peer_kernels(const Manifest& m) {
  std::map<std::pair<std::string, std::string>, PeerKernel> found;
  for (const auto& [pname, prog] : m.programs)
    for (const Call& call : prog.calls) {
      auto op = m.ops.find(call.op);
      if (op == m.ops.end()) continue;
      for (std::size_t j = 0; j < call.args.size(); ++j) {
        const CallArg& a = call.args[j];
        if (a.kind != CallArg::Kind::Buf) continue;
        auto b = m.buffers.find(a.name);
        if (b == m.buffers.end() || b->second.kind != BufferKind::Peer) continue;
        for (const Launch& l : op->second.impl.launches)
          if (!l.is_extern() && reads_param(l, static_cast<std::uint32_t>(j)))
            found.try_emplace({l.module, l.entry}, PeerKernel{l.module, l.entry, call.op, a.name});
      }
    }
  std::vector<PeerKernel> out;
  out.reserve(found.size());
  for (auto& [key, k] : found) out.push_back(std::move(k));
  return out;
}

}  // namespace kern::core
