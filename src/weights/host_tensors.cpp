#include <cstring>

#include "checked_math.hpp"
#include "kern/base/error.hpp"
#include "kern/weights/tensors.hpp"

namespace kern::weights {

void HostTensors::add(std::string name, DType dtype, std::vector<std::uint64_t> shape, std::vector<std::byte> bytes) {
  if (name.empty()) fail(ErrorKind::Api, "HostTensors: empty tensor name");
  if (entries_.contains(name)) fail(ErrorKind::Api, "HostTensors: tensor {} added twice", name);
  const auto expected = weights::shape_bytes(dtype, shape);
  if (!expected) fail(ErrorKind::Api, "HostTensors: tensor {}: shape overflows 64-bit byte counts", name);
  if (*expected != bytes.size())
    fail(ErrorKind::Api, "HostTensors: tensor {}: {} bytes given, dtype × shape is {}", name, bytes.size(), *expected);
  auto [it, _] = entries_.emplace(name, Entry{});
  Entry& e = it->second;
  e.bytes = std::move(bytes);
  e.info = TensorInfo{std::move(name), dtype, std::move(shape), e.bytes.size(), {}};
  e.info.location.kind = TensorLocation::Kind::Host;
  e.info.location.host = e.bytes.data();
}

const TensorInfo* HostTensors::find(std::string_view name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second.info;
}

std::vector<std::string> HostTensors::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& [name, _] : entries_) out.push_back(name);
  return out;
}

void HostTensors::read_checked(const TensorInfo& tensor, std::uint64_t offset, std::uint64_t n, void* dst) const {
  std::memcpy(dst, tensor.location.host + offset, n);
}

}  // namespace kern::weights
