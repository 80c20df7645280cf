// The multi-GPU handshake's pure half (issue 20; docs/multi-gpu-handles.md, "The handshake"): what
// one rank offers the others, its wire form, and the plan `connect` follows once every rank's offer
// is in. Nothing here touches CUDA or NCCL: the runtime exports the handles, imports what the plan
// lists and writes the peer arrays it describes.
//
// An offer says which manifest the rank loaded (its SHA-256), the rank's index in each topology
// group, one handle per memory target a peer buffer can reach (every exported buffer and state the
// manifest's peer buffers name in `of`), and the NCCL unique id of each group the rank leads (index 0).
// A handle is a 64-byte fabric handle or a POSIX file descriptor; fds travel beside the offer as
// SCM_RIGHTS data (kern/base/fd_passing.hpp) and the offer names them by their index there.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kern/core/manifest.hpp"

namespace kern::core {

using FabricHandle = std::array<std::uint8_t, 64>;
using NcclUniqueId = std::array<std::uint8_t, 128>;

struct OfferHandle {
  std::string target;        // an exported buffer or a state
  std::uint64_t bytes = 0;   // what the importer maps
  std::optional<FabricHandle> fabric;  // exactly one of fabric and fd
  std::optional<std::uint32_t> fd;     // index among the descriptors that travel with the offer
  bool operator==(const OfferHandle&) const = default;
};

struct Offer {
  std::string digest;                             // the manifest's SHA-256, 64 lowercase hex digits
  std::map<std::string, std::uint64_t> ranks;     // topology group -> this rank's index
  std::vector<OfferHandle> handles;               // one per target, in target order
  std::map<std::string, NcclUniqueId> nccl;       // groups this rank leads -> their NCCL unique id
  bool operator==(const Offer&) const = default;
};

// The wire form: one JSON object (docs/multi-gpu-handles.md gives its fields), written in a fixed
// order so equal offers give equal bytes.
std::string write_offer(const Offer& offer);
// Parses a wire-form offer that arrived with `fds` descriptors. Anything else than what write_offer
// writes (unknown or missing fields, wrong types, bad hex, a handle with both or neither of fabric and
// fd, an fd index >= fds or used twice, targets out of order or repeated, zero bytes, a group led at a
// non-zero index) is an Error(Io) naming the field: an offer comes from another process.
Offer parse_offer(std::string_view text, std::size_t fds);

// What `connect` does with every group's offers (in rank order), for the rank whose offer is `mine`.
struct ConnectPlan {
  // One import per distinct (peer offer, target): a rank that is in several groups is mapped once.
  struct Import {
    std::string group;        // the first group (in name order) whose offers hold it
    std::uint64_t rank = 0;   // its index there
    std::string target;
    std::size_t handle = 0;   // index in that offer's handles
  };
  // One per peer buffer: entry r is this rank's own target (-1) or the index of the import mapping
  // rank r's.
  struct PeerArray {
    std::string buffer, group, target;
    std::vector<std::int64_t> import_of_rank;
  };
  std::vector<Import> imports;
  std::vector<PeerArray> arrays;             // in buffer-name order
  std::map<std::string, NcclUniqueId> nccl;  // every group with a leader's id -> that id
};

// The targets each topology group's peer buffers reach (`of`), i.e. what every rank must offer.
std::map<std::string, std::vector<std::string>> peer_targets(const Manifest& m);

// Checks the offers and plans the imports. Refused with an Error(Api) naming the rank and group: a
// group of the manifest without offers or with a count other than its size, an offer at position r
// whose index in that group is not r, a digest other than this rank's (a different manifest), this
// rank's own position holding another offer than `mine`, a rank offering no handle for a target a
// peer buffer reaches, targets of one name offered with different sizes, an NCCL id from any rank
// but the group's index 0.
ConnectPlan plan_connect(const Manifest& m, const Offer& mine,
                         const std::map<std::string, std::vector<Offer>>& offers);

}  // namespace kern::core
