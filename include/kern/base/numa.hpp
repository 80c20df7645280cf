// NUMA placement of host memory (the host tier's pinned block, issue 16): which node a PCI device
// sits on (sysfs), how many nodes the machine has, and a scope that binds the calling thread's
// memory policy to one node (set_mempolicy through libnuma) and restores the previous policy when
// it ends. Pages allocated and touched inside the scope come from that node.
#pragma once

#include <string>
#include <string_view>

namespace kern::base {

// The node of a PCI device from /sys/bus/pci/devices/<bus id, lower case>/numa_node; -1 when the
// file is missing or says -1 (a one-node machine, or firmware that does not tell).
int numa_node_of_pci(std::string_view bus_id);
// Entries node<N> under /sys/devices/system/node (0 when that directory is missing).
int numa_node_count();

class MemoryPolicyScope {
 public:
  // Binds to `node` when node >= 0 and the kernel accepts it; otherwise leaves the policy alone.
  // bound() and note() say what happened (for the log).
  explicit MemoryPolicyScope(int node);
  ~MemoryPolicyScope();
  MemoryPolicyScope(const MemoryPolicyScope&) = delete;
  MemoryPolicyScope& operator=(const MemoryPolicyScope&) = delete;
  bool bound() const { return bound_; }
  const std::string& note() const { return note_; }

 private:
  bool bound_ = false;
  int old_mode_ = 0;
  unsigned long old_mask_[16] = {};  // 1024 nodes
  std::string note_;
};

}  // namespace kern::base
