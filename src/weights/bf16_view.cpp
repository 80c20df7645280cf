#include "kern/weights/bf16_view.hpp"

#include <cstring>
#include <vector>

#include "kern/base/error.hpp"
#include "kern/weights/bind_plan.hpp"

namespace kern::weights {

std::uint16_t f32_to_bf16_bits(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

float f16_bits_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  std::uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13);  // inf / NaN
  } else if (exp != 0) {
    u = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    u = sign;
  } else {  // subnormal: normalise
    int e = -1;
    std::uint32_t m = man;
    do {
      ++e;
      m <<= 1;
    } while ((m & 0x400u) == 0);
    u = sign | (static_cast<std::uint32_t>(112 - e) << 23) | ((m & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

Bf16View::Bf16View(const Tensors& inner, const std::set<std::string>& convert) : inner_(inner) {
  for (const std::string& name : convert) {
    const TensorInfo* t = inner.find(name);
    if (!t) fail(ErrorKind::WeightArtifact, "tensor {} is not in the checkpoint", name);
    if (t->dtype != DType::F16 && t->dtype != DType::F32)
      fail(ErrorKind::WeightArtifact, "tensor {} is {}: only f16 and f32 tensors are converted to bf16", name,
           manifest_name(t->dtype));
    TensorInfo b = *t;
    b.dtype = DType::BF16;
    b.bytes = t->bytes / dtype_size(t->dtype) * 2;
    converted_.emplace(name, std::move(b));
  }
}

const TensorInfo* Bf16View::find(std::string_view name) const {
  auto it = converted_.find(name);
  return it != converted_.end() ? &it->second : inner_.find(name);
}

void Bf16View::read_checked(const TensorInfo& tensor, std::uint64_t offset, std::uint64_t n, void* dst) const {
  auto it = converted_.find(tensor.name);
  if (it == converted_.end() || &it->second != &tensor) {
    inner_.read(tensor, offset, n, dst);
    return;
  }
  const TensorInfo& src = *inner_.find(tensor.name);
  if (offset % 2 || n % 2)
    fail(ErrorKind::Manifest, "tensor {}: a read of [{}, +{}) splits a bf16 element", tensor.name, offset, n);
  const std::uint64_t es = dtype_size(src.dtype), count = n / 2;
  std::vector<std::byte> raw(count * es);
  inner_.read(src, offset / 2 * es, raw.size(), raw.data());
  auto* out = static_cast<std::uint16_t*>(dst);
  for (std::uint64_t i = 0; i < count; ++i) {
    float v;
    if (src.dtype == DType::F32) {
      std::memcpy(&v, raw.data() + i * 4, 4);
    } else {
      std::uint16_t h;
      std::memcpy(&h, raw.data() + i * 2, 2);
      v = f16_bits_to_f32(h);
    }
    const std::uint16_t b = f32_to_bf16_bits(v);
    std::memcpy(out + i, &b, 2);
  }
}

std::set<std::string> tensors_to_bf16(const core::Manifest& m, const Tensors& tensors,
                                      const std::map<std::string, std::uint32_t>& rank_of_group) {
  std::set<std::string> out;
  auto consider = [&](const std::string& buffer, const core::TensorRef& ref) {
    const std::string name = bound_tensor_name(buffer, ref, rank_of_group);
    const TensorInfo* t = tensors.find(name);
    if (t && (t->dtype == DType::F16 || t->dtype == DType::F32)) out.insert(name);
  };
  for (const auto& [name, b] : m.buffers) {
    if (b.dtype != DType::BF16 || (b.kind != core::BufferKind::Weight && b.kind != core::BufferKind::Source)) continue;
    for (const core::BindSegment& seg : b.bind) {
      consider(name, seg.tensor);
      if (seg.interleave) consider(name, seg.interleave->with);
    }
  }
  return out;
}

}  // namespace kern::weights
