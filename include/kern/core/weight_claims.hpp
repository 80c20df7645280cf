// kern test's shared weights (issue 19: `Runtime::load_over`): which weight buffers of a candidate
// manifest may use the reference runtime's copy instead of binding their own. Pure: decided from
// the two manifests alone; the runtime adds what only it knows (same GPU, same rank) and does the
// claiming.
//
// A candidate buffer T is claimed by the reference buffer R (the first such R in name order) when
// both are weights bound straight from the checkpoint and their declarations are identical: kind
// weight, placement, dtype, a constant shape of the same extents, the same fill and domain (none),
// and the same bind segments (tensor names, row and column ranges, interleaves, rank selections).
// A weight that any program writes (a derive or once program's output: a derived weight) is never
// claimed, on either side: its contents depend on that program, not on the declaration.
#pragma once

#include <string>
#include <vector>

#include "kern/core/manifest.hpp"

namespace kern::core {

struct WeightClaim {
  std::string buffer;     // the candidate's
  std::string reference;  // the reference's buffer it uses
};
struct WeightNotClaimed {
  std::string buffer;  // the candidate's
  std::string why;     // names the program / call that writes it, or what differs
};
struct WeightClaims {
  std::vector<WeightClaim> claimed;         // by candidate buffer name
  std::vector<WeightNotClaimed> not_claimed;
};

WeightClaims weight_claims(const Manifest& candidate, const Manifest& reference);

// "program P call i (label) writes it", or empty when no call of any program writes `buffer`.
std::string weight_writer(const Manifest& m, const std::string& buffer);

}  // namespace kern::core
