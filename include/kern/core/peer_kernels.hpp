// The kernels of a manifest that receive a peer buffer (issue 20): the ones the runtime's multimem
// scan (include/kern/registry/multimem_scan.hpp) must clear before they load. Decided from the
// manifest alone.
#pragma once

#include <string>
#include <vector>

#include "kern/core/manifest.hpp"

namespace kern::core {

struct PeerKernel {
  std::string module, entry;  // the launch's kernel
  std::string op, buffer;     // an op that launches it and a peer buffer one of its calls passes
  bool operator==(const PeerKernel&) const = default;
};

// Every module launch (externs are not kernels of ours) of an op some program call passes a peer
// buffer to, where the launch reads that param: all params when the launch has no `args`, else a
// {"param": i} arg or a pack field of param i. One entry per (module, entry), in (module, entry)
// order, naming the first (program, call) order op and buffer that put it there.
std::vector<PeerKernel> peer_kernels(const Manifest& m);

}  // namespace kern::core
