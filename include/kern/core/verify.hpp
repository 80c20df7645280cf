// Verification: a Manifest in, a Verified out. The runtime accepts only Verified, so nothing
// downstream re-checks what the verifier proved.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kern/core/manifest.hpp"

namespace kern::core {

struct Violation {
  std::string path;     // JSON path, e.g. ops.attn.impl.launches[1].grid[0]
  std::string rule;     // rule id, e.g. "R6.grid" (see docs/manifest.md)
  std::string message;  // what is wrong, in one sentence
  std::string line() const { return path + ": " + message + " [" + rule + "]"; }
};

// Every violation of every rule, in a deterministic order (empty = valid).
std::vector<Violation> check(const Manifest& m);

class Verified {
 public:
  const Manifest& manifest() const { return *m_; }
  const Manifest* operator->() const { return m_.get(); }

 private:
  explicit Verified(std::shared_ptr<const Manifest> m) : m_(std::move(m)) {}
  friend Verified verify(Manifest m);
  std::shared_ptr<const Manifest> m_;
};

// Throws Error(ManifestVerify, "<n> violations", one detail line per violation).
Verified verify(Manifest m);

}  // namespace kern::core
