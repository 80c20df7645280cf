#include "kern/base/numa.hpp"

#include <fmt/format.h>
#include <numaif.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace kern::base {

int numa_node_of_pci(std::string_view bus_id) {
  std::string id(bus_id);
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::ifstream f("/sys/bus/pci/devices/" + id + "/numa_node");
  int node = -1;
  if (!(f >> node)) return -1;
  return node;
}

int numa_node_count() {
  std::error_code ec;
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/sys/devices/system/node", ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 4 && name.compare(0, 4, "node") == 0 &&
        name.find_first_not_of("0123456789", 4) == std::string::npos)
      ++n;
  }
  return n;
}

MemoryPolicyScope::MemoryPolicyScope(int node) {
  constexpr unsigned long kBits = sizeof(old_mask_) * 8;
  if (node < 0) {
    note_ = "no NUMA node given: memory policy left as it is";
    return;
  }
  if (static_cast<unsigned long>(node) >= kBits) {
    note_ = fmt::format("NUMA node {} is beyond {} nodes: memory policy left as it is", node, kBits);
    return;
  }
  if (get_mempolicy(&old_mode_, old_mask_, kBits, nullptr, 0) != 0) {
    note_ = fmt::format("get_mempolicy failed ({}): memory policy left as it is", std::strerror(errno));
    return;
  }
  unsigned long mask[sizeof(old_mask_) / sizeof(unsigned long)] = {};
  mask[node / (8 * sizeof(unsigned long))] = 1ul << (node % (8 * sizeof(unsigned long)));
  if (set_mempolicy(MPOL_BIND, mask, kBits) != 0) {
    note_ = fmt::format("set_mempolicy(MPOL_BIND, node {}) failed ({}): memory policy left as it is", node,
                        std::strerror(errno));
    return;
  }
  bound_ = true;
  note_ = fmt::format("memory policy bound to NUMA node {}", node);
}

MemoryPolicyScope::~MemoryPolicyScope() {
  if (!bound_) return;
  constexpr unsigned long kBits = sizeof(old_mask_) * 8;
  // MPOL_DEFAULT takes no mask; every other mode gets its old one back.
  if (old_mode_ == MPOL_DEFAULT)
    set_mempolicy(MPOL_DEFAULT, nullptr, 0);
  else
    set_mempolicy(old_mode_, old_mask_, kBits);
}

}  // namespace kern::base
