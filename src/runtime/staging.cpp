#include "kern/runtime/staging.hpp"

#include <algorithm>

#include "kern/base/error.hpp"

namespace kern::runtime {

std::vector<StagingPiece> plan_staging(std::span<const weights::BindCopy> copies, std::uint64_t chunk) {
  if (chunk == 0) fail(ErrorKind::Api, "staging chunk size must be positive");
  std::vector<StagingPiece> out;
  for (std::size_t ci = 0; ci < copies.size(); ++ci) {
    const weights::BindCopy& c = copies[ci];
    const bool strided = c.kind == weights::BindCopy::Kind::Strided && c.height > 1;
    if (!strided) {
      const std::uint64_t total = c.width * c.height;
      for (std::uint64_t off = 0; off < total; off += chunk) {
        StagingPiece p;
        p.copy = ci;
        p.src_offset = c.src_offset + off;
        p.dst_offset = c.dst_offset + off;
        p.bytes = std::min(chunk, total - off);
        out.push_back(p);
      }
      continue;
    }
    if (c.width > chunk) {  // a row does not fit: each row in contiguous pieces
      for (std::uint64_t r = 0; r < c.height; ++r)
        for (std::uint64_t off = 0; off < c.width; off += chunk) {
          StagingPiece p;
          p.copy = ci;
          p.row = r;
          p.src_offset = c.src_offset + r * c.src_pitch + off;
          p.dst_offset = c.dst_offset + r * c.dst_pitch + off;
          p.bytes = std::min(chunk, c.width - off);
          out.push_back(p);
        }
      continue;
    }
    const std::uint64_t per = std::max<std::uint64_t>(1, c.src_pitch ? (chunk - c.width) / c.src_pitch + 1 : 1);
    for (std::uint64_t r = 0; r < c.height; r += per) {
      StagingPiece p;
      p.copy = ci;
      p.strided = true;
      p.row = r;
      p.rows = std::min(per, c.height - r);
      p.src_offset = c.src_offset + r * c.src_pitch;
      p.dst_offset = c.dst_offset + r * c.dst_pitch;
      p.width = c.width;
      p.bytes = (p.rows - 1) * c.src_pitch + c.width;
      out.push_back(p);
    }
  }
  return out;
}

namespace {

std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) & ~(a - 1); }

}  // namespace

std::uint64_t LoadPlan::max_fill_bytes() const {
  std::uint64_t m = 0;
  for (const SlabFill& f : fills) m = std::max(m, f.bytes);
  return m;
}

LoadPlan plan_load(std::span<const std::vector<weights::BindCopy>> targets, const LoadLayout& layout) {
  if (layout.slab_bytes == 0 || layout.read_bytes == 0)
    fail(ErrorKind::Api, "weight loading: slab size ({}) and read size ({}) must be positive", layout.slab_bytes,
         layout.read_bytes);
  if (layout.align == 0 || (layout.align & (layout.align - 1)) != 0 || layout.align > layout.slab_bytes)
    fail(ErrorKind::Api, "weight loading: slab alignment {} must be a power of two no larger than the slab ({} bytes)",
         layout.align, layout.slab_bytes);
  LoadPlan plan;
  plan.layout = layout;
  SlabFill fill;
  auto close_fill = [&] {
    if (!fill.pieces.empty()) plan.fills.push_back(std::move(fill));
    fill = SlabFill{};
  };
  for (std::size_t t = 0; t < targets.size(); ++t) {
    for (const weights::BindCopy& c : targets[t]) plan.payload_bytes += c.bytes();
    for (const StagingPiece& p : plan_staging(targets[t], layout.slab_bytes)) {
      // p.bytes <= slab_bytes (plan_staging's guarantee); start a new fill when it does not fit.
      std::uint64_t at = align_up(fill.bytes, layout.align);
      if (!fill.pieces.empty() && (at > layout.slab_bytes || p.bytes > layout.slab_bytes - at)) {
        close_fill();
        at = 0;
      }
      const std::size_t index = fill.pieces.size();
      fill.pieces.push_back(SlabPiece{t, p, at});
      for (std::uint64_t off = 0; off < p.bytes; off += layout.read_bytes) {
        const std::uint64_t n = std::min(layout.read_bytes, p.bytes - off);
        fill.reads.push_back(SlabRead{index, p.src_offset + off, at + off, n});
        plan.read_bytes += n;
        ++plan.read_count;
      }
      fill.bytes = at + p.bytes;
    }
  }
  close_fill();
  return plan;
}

bool fits_2d_copy(const weights::BindCopy& copy) {
  constexpr std::uint64_t kMaxPitch = (1ull << 31) - 1;
  return copy.src_pitch <= kMaxPitch && copy.dst_pitch <= kMaxPitch && copy.width <= copy.src_pitch &&
         copy.width <= copy.dst_pitch;
}

}  // namespace kern::runtime
