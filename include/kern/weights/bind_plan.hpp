// Bind planning: how a weight/source buffer is assembled from checkpoint tensors.
//
// A pure function turns a buffer's `bind` segments (manifest schema v5) and the tensors into an
// exact list of copies: contiguous copies and 2-D strided copies whose destination ranges are
// pairwise disjoint and together cover [0, buffer bytes) byte for byte. The runtime executes the
// plan (through pinned staging); nothing here touches memory or files.
//
// Semantics (docs/weights.md): each tensor is viewed as a matrix [dim0, product of the other
// dims] (a scalar is [1, 1], a vector [n, 1]); `rows` / `cols` slice it ([from, to), default
// whole); segments are laid end to end; `interleave {with: B, rows: n}` alternates n-row
// blocks of A and B (same shape and dtype as each other and the buffer, n divides dim0, no
// rows/cols). Per-rank forms pick the entry at this process's rank in the named group.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kern/core/manifest.hpp"
#include "kern/weights/tensors.hpp"

namespace kern::weights {

struct BindCopy {
  enum class Kind : std::uint8_t {
    Contiguous,  // bytes [src_offset, +width) -> [dst_offset, +width); height 1
    Strided,     // height rows of width bytes: row i from src_offset + i*src_pitch to dst_offset + i*dst_pitch
  };
  Kind kind = Kind::Contiguous;
  std::string tensor;
  std::uint64_t src_offset = 0;  // bytes from the tensor's first byte
  std::uint64_t dst_offset = 0;  // bytes from the buffer's first byte
  std::uint64_t width = 0;       // bytes per row (Contiguous: the whole copy)
  std::uint64_t height = 1;      // rows (Contiguous: 1)
  std::uint64_t src_pitch = 0;   // bytes between row starts in the tensor (Contiguous: width)
  std::uint64_t dst_pitch = 0;   // bytes between row starts in the buffer (Contiguous: width)

  std::uint64_t bytes() const { return width * height; }
  std::string to_string() const;
  bool operator==(const BindCopy&) const = default;
};

struct BindPlan {
  std::string buffer;
  std::uint64_t buffer_bytes = 0;
  // In segment order (an interleave gives its A copy, then its B copy). Zero-byte copies are
  // dropped; a contiguous copy that continues the previous contiguous copy of the same tensor
  // in both source and destination is merged into it.
  std::vector<BindCopy> copies;

  std::vector<std::string> tensors() const;  // distinct tensor names, sorted
  std::string to_string() const;             // one header line, then one line per copy
};

// Plans buffer `buffer_name` (`buf.bind`, `buf.dtype`) of `buffer_bytes` bytes.
// `rank_of_group`: this process's rank in each topology group (for per-rank tensors/ranges).
// Errors: Error(WeightArtifact) naming the buffer, segment and tensor for a missing tensor, a
// dtype mismatch, an empty / reversed / out-of-tensor range, an interleave shape mismatch, a
// rank outside a per-rank table, or segments covering fewer or more bytes than the buffer;
// Error(Api) when `rank_of_group` lacks a group a per-rank form names.
// The checkpoint tensor `ref` names for this process's ranks (Error(WeightArtifact / Api) as plan_bind).
std::string bound_tensor_name(std::string_view buffer_name, const core::TensorRef& ref,
                              const std::map<std::string, std::uint32_t>& rank_of_group);

BindPlan plan_bind(std::string_view buffer_name, const core::Buffer& buf, std::uint64_t buffer_bytes,
                   const Tensors& tensors, const std::map<std::string, std::uint32_t>& rank_of_group);

// Executes a plan into host memory (host-placed weights, tests): `dst` must be exactly
// plan.buffer_bytes long. Reads through tensors.read (pread for checkpoints).
void execute_bind_plan_on_host(const BindPlan& plan, const Tensors& tensors, std::span<std::byte> dst);

}  // namespace kern::weights
