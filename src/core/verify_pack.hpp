// Internal to the verifier: pack images and tensormap descriptors (R12).
#pragma once

#include <string>
#include <vector>

#include "core/verify_context.hpp"

namespace kern::core::verifier {

struct PackParamUse {
  std::uint32_t param = 0;
  bool read = false, write = false;
  std::string path;
};

// What a pack touches, for the op's dataflow.
struct PackUses {
  std::vector<PackParamUse> params;
  std::vector<std::string> scratch;
  std::vector<TensormapUse> tensormaps;
};

// Checks a pack passed to a bytes<`declared_size`> launch param; `path` ends in `.pack`.
PackUses check_pack(Context& c, const Op& op, const Pack& pack, std::uint64_t declared_size, const std::string& path);

}  // namespace kern::core::verifier
