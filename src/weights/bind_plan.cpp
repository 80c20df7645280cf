#include "kern/weights/bind_plan.hpp"

#include <set>

#include "checked_math.hpp"
#include "kern/base/error.hpp"

namespace kern::weights {

namespace {

using core::BindSegment;
using core::Range;
using core::RangeRef;
using core::TensorRef;

// Error context of one segment: "buffer w_qkv bind[1]".
struct Where {
  std::string_view buffer;
  std::size_t segment;
  std::string prefix() const { return fmt::format("buffer {} bind[{}]", buffer, segment); }
};

template <typename... Args>
[[noreturn]] void bad(const Where& at, fmt::format_string<Args...> f, Args&&... args) {
  fail(ErrorKind::WeightArtifact, "{}: {}", at.prefix(), fmt::format(f, std::forward<Args>(args)...));
}

std::uint32_t rank_in(const std::string& group, const std::map<std::string, std::uint32_t>& rank_of_group,
                      const Where& at) {
  auto it = rank_of_group.find(group);
  if (it == rank_of_group.end()) fail(ErrorKind::Api, "{}: no rank given for topology group {}", at.prefix(), group);
  return it->second;
}

const std::string& resolve_name(const TensorRef& ref, const std::map<std::string, std::uint32_t>& rank_of_group,
                                const Where& at, std::string_view role) {
  if (!ref.rank_selected()) {
    if (ref.name.empty()) bad(at, "{} has an empty tensor name", role);
    return ref.name;
  }
  const std::uint32_t rank = rank_in(ref.group, rank_of_group, at);
  if (rank >= ref.per_rank.size())
    bad(at, "{}: rank {} in group {} is outside the per-rank tensor table ({} entries)", role, rank, ref.group,
        ref.per_rank.size());
  const std::string& name = ref.per_rank[rank];
  if (name.empty()) bad(at, "{}: per-rank entry {} of group {} is an empty tensor name", role, rank, ref.group);
  return name;
}

const TensorInfo& resolve_tensor(const TensorRef& ref, const Tensors& tensors, DType buffer_dtype,
                                 const std::map<std::string, std::uint32_t>& rank_of_group, const Where& at,
                                 std::string_view role) {
  const std::string& name = resolve_name(ref, rank_of_group, at, role);
  const TensorInfo* t = tensors.find(name);
  if (t == nullptr) bad(at, "tensor {} ({}) is not in the checkpoint", name, role);
  if (t->dtype != buffer_dtype)
    bad(at, "tensor {} is {} but the buffer is {}", name, manifest_name(t->dtype), manifest_name(buffer_dtype));
  return *t;
}

// The tensor as a matrix [rows, cols] of elements.
struct MatrixView {
  std::uint64_t rows = 1, cols = 1, elem = 1;
  std::uint64_t row_bytes() const { return cols * elem; }
};

MatrixView matrix_of(const TensorInfo& t, const Where& at) {
  MatrixView m;
  m.elem = dtype_size(t.dtype);
  if (!t.shape.empty()) m.rows = t.shape[0];
  for (std::size_t i = 1; i < t.shape.size(); ++i) {
    auto c = weights::checked_mul(m.cols, t.shape[i]);
    if (!c) bad(at, "tensor {}: shape overflows 64-bit element counts", t.name);
    m.cols = *c;
  }
  auto bytes = weights::checked_mul(m.rows, m.cols);
  if (bytes) bytes = weights::checked_mul(*bytes, m.elem);
  if (!bytes || *bytes != t.bytes)
    bad(at, "tensor {}: shape and dtype give a size different from its {} bytes", t.name, t.bytes);
  return m;
}

Range resolve_range(const std::optional<RangeRef>& ref, std::uint64_t extent,
                    const std::map<std::string, std::uint32_t>& rank_of_group, const Where& at,
                    const std::string& tensor, std::string_view axis) {
  if (!ref) return Range{0, extent};
  Range r = ref->single;
  if (ref->rank_selected()) {
    const std::uint32_t rank = rank_in(ref->group, rank_of_group, at);
    if (rank >= ref->per_rank.size())
      bad(at, "tensor {}: {}: rank {} in group {} is outside the per-rank range table ({} entries)", tensor, axis, rank,
          ref->group, ref->per_rank.size());
    r = ref->per_rank[rank];
  }
  if (r.from >= r.to) bad(at, "tensor {}: {} [{}, {}) is empty or reversed", tensor, axis, r.from, r.to);
  if (r.to > extent)
    bad(at, "tensor {}: {} [{}, {}) is outside the tensor's {} {}", tensor, axis, r.from, r.to, extent, axis);
  return r;
}

class PlanBuilder {
 public:
  explicit PlanBuilder(BindPlan& plan) : plan_(plan) {}

  std::uint64_t at() const { return dst_; }

  void contiguous(const std::string& tensor, std::uint64_t src, std::uint64_t dst, std::uint64_t bytes) {
    if (bytes == 0) return;
    if (!plan_.copies.empty()) {
      BindCopy& prev = plan_.copies.back();
      if (prev.kind == BindCopy::Kind::Contiguous && prev.tensor == tensor && prev.src_offset + prev.width == src &&
          prev.dst_offset + prev.width == dst) {
        prev.width += bytes;
        prev.src_pitch = prev.dst_pitch = prev.width;
        return;
      }
    }
    plan_.copies.push_back(BindCopy{BindCopy::Kind::Contiguous, tensor, src, dst, bytes, 1, bytes, bytes});
  }

  void strided(const std::string& tensor, std::uint64_t src, std::uint64_t src_pitch, std::uint64_t dst,
               std::uint64_t dst_pitch, std::uint64_t width, std::uint64_t height) {
    if (width == 0 || height == 0) return;
    if (height == 1 || (width == src_pitch && width == dst_pitch)) {
      contiguous(tensor, src, dst, width * height);
      return;
    }
    plan_.copies.push_back(BindCopy{BindCopy::Kind::Strided, tensor, src, dst, width, height, src_pitch, dst_pitch});
  }

  // Advances the destination cursor by the bytes the segment produced.
  void advance(std::uint64_t bytes, const Where& at, const std::string& tensor) {
    auto end = weights::checked_add(dst_, bytes);
    if (!end || *end > plan_.buffer_bytes)
      bad(at, "tensor {} ends at byte {}, past the buffer's {} bytes (bind covers too much)", tensor,
          end ? fmt::format("{}", *end) : std::string("beyond 2^64"), plan_.buffer_bytes);
    dst_ = *end;
  }

 private:
  BindPlan& plan_;
  std::uint64_t dst_ = 0;
};

void plan_interleave(const BindSegment& seg, const TensorInfo& a, const Tensors& tensors, DType dtype,
                     const std::map<std::string, std::uint32_t>& rank_of_group, const Where& at, PlanBuilder& out) {
  if (seg.rows || seg.cols) bad(at, "tensor {}: interleave does not allow rows or cols", a.name);
  const TensorInfo& b = resolve_tensor(seg.interleave->with, tensors, dtype, rank_of_group, at, "interleave.with");
  if (a.shape != b.shape)
    bad(at, "tensor {} and interleave.with tensor {} differ in shape ({} vs {})", a.name, b.name,
        fmt::join(a.shape, "x"), fmt::join(b.shape, "x"));
  const MatrixView m = matrix_of(a, at);
  const std::uint64_t n = seg.interleave->rows;
  if (n == 0) bad(at, "tensor {}: interleave rows must be positive", a.name);
  if (m.rows % n != 0) bad(at, "tensor {}: interleave block of {} rows does not divide its {} rows", a.name, n, m.rows);
  const std::uint64_t block = n * m.row_bytes();  // <= tensor bytes: no overflow
  const std::uint64_t blocks = m.rows / n;
  const std::uint64_t base = out.at();
  out.advance(a.bytes, at, a.name);
  out.advance(b.bytes, at, b.name);
  out.strided(a.name, 0, block, base, 2 * block, block, blocks);
  out.strided(b.name, 0, block, base + block, 2 * block, block, blocks);
}

void plan_slice(const BindSegment& seg, const TensorInfo& t, const std::map<std::string, std::uint32_t>& rank_of_group,
                const Where& at, PlanBuilder& out) {
  const MatrixView m = matrix_of(t, at);
  const Range rows = resolve_range(seg.rows, m.rows, rank_of_group, at, t.name, "rows");
  const Range cols = resolve_range(seg.cols, m.cols, rank_of_group, at, t.name, "cols");
  const std::uint64_t width = (cols.to - cols.from) * m.elem;  // all <= tensor bytes
  const std::uint64_t height = rows.to - rows.from;
  const std::uint64_t src = rows.from * m.row_bytes() + cols.from * m.elem;
  const std::uint64_t dst = out.at();
  out.advance(width * height, at, t.name);
  out.strided(t.name, src, m.row_bytes(), dst, width, width, height);
}

}  // namespace

std::string bound_tensor_name(std::string_view buffer_name, const core::TensorRef& ref,
                              const std::map<std::string, std::uint32_t>& rank_of_group) {
  return resolve_name(ref, rank_of_group, Where{buffer_name, 0}, "tensor");
}

BindPlan plan_bind(std::string_view buffer_name, const core::Buffer& buf, std::uint64_t buffer_bytes,
                   const Tensors& tensors, const std::map<std::string, std::uint32_t>& rank_of_group) {
  BindPlan plan;
  plan.buffer = std::string(buffer_name);
  plan.buffer_bytes = buffer_bytes;
  if (buf.bind.empty())
    fail(ErrorKind::WeightArtifact, "buffer {}: has no bind segments to fill its {} bytes", buffer_name, buffer_bytes);
  PlanBuilder out(plan);
  std::string last_tensor;
  for (std::size_t i = 0; i < buf.bind.size(); ++i) {
    const BindSegment& seg = buf.bind[i];
    const Where at{buffer_name, i};
    const TensorInfo& t = resolve_tensor(seg.tensor, tensors, buf.dtype, rank_of_group, at, "tensor");
    if (seg.interleave)
      plan_interleave(seg, t, tensors, buf.dtype, rank_of_group, at, out);
    else
      plan_slice(seg, t, rank_of_group, at, out);
    last_tensor = t.name;
  }
  if (out.at() != buffer_bytes)
    fail(ErrorKind::WeightArtifact,
         "buffer {}: bind segments cover {} of its {} bytes ({} bytes short; last tensor {})", buffer_name, out.at(),
         buffer_bytes, buffer_bytes - out.at(), last_tensor);
  return plan;
}

std::string BindCopy::to_string() const {
  if (kind == Kind::Contiguous)
    return fmt::format("copy   {} [{}, +{}) -> [{}, +{})", tensor, src_offset, width, dst_offset, width);
  return fmt::format("copy2d {} src {} pitch {} -> dst {} pitch {}: {} rows x {} bytes", tensor, src_offset, src_pitch,
                     dst_offset, dst_pitch, height, width);
}

std::vector<std::string> BindPlan::tensors() const {
  std::set<std::string> names;
  for (const auto& c : copies) names.insert(c.tensor);
  return {names.begin(), names.end()};
}

std::string BindPlan::to_string() const {
  std::string s = fmt::format("bind {} ({} bytes, {} copies)\n", buffer, buffer_bytes, copies.size());
  for (const auto& c : copies) {
    s += "  ";
    s += c.to_string();
    s += '\n';
  }
  return s;
}

void execute_bind_plan_on_host(const BindPlan& plan, const Tensors& tensors, std::span<std::byte> dst) {
  if (dst.size() != plan.buffer_bytes)
    fail(ErrorKind::Api, "bind plan for {} needs {} bytes of destination, got {}", plan.buffer, plan.buffer_bytes,
         dst.size());
  for (const auto& c : plan.copies) {
    const TensorInfo* t = tensors.find(c.tensor);
    if (t == nullptr)
      fail(ErrorKind::Api, "bind plan for {} names tensor {}, which these tensors lack", plan.buffer, c.tensor);
    for (std::uint64_t r = 0; r < c.height; ++r) {
      const std::uint64_t d = c.dst_offset + r * c.dst_pitch;
      if (d > dst.size() || c.width > dst.size() - d)
        fail(ErrorKind::Api, "bind plan for {}: copy {} writes past the buffer", plan.buffer, c.to_string());
      tensors.read(*t, c.src_offset + r * c.src_pitch, c.width, dst.data() + d);
    }
  }
}

}  // namespace kern::weights
