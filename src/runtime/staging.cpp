#include "kern/runtime/staging.hpp"

#include <algorithm>

#include "kern/error.hpp"

namespace kern::runtime {

std::vector<StagingPiece> plan_staging(std::span<const BindCopy> copies, std::uint64_t chunk) {
  if (chunk == 0) fail(ErrorKind::Api, "staging chunk size must be positive");
  std::vector<StagingPiece> out;
  for (std::size_t ci = 0; ci < copies.size(); ++ci) {
    const BindCopy& c = copies[ci];
    const bool strided = c.kind == BindCopy::Kind::Strided && c.height > 1;
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

}  // namespace kern::runtime
