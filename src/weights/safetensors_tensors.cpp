#include "kern/base/error.hpp"
#include "kern/weights/tensors.hpp"

namespace kern::weights {

SafetensorsTensors::SafetensorsTensors(SafetensorsCheckpoint checkpoint) : checkpoint_(std::move(checkpoint)) {
  for (const auto& shard : checkpoint_.shards()) files_.push_back(shard.path);
  for (const auto& [name, at] : checkpoint_.tensors()) {
    const auto& shard = checkpoint_.shards()[at.shard];
    TensorInfo info{name, at.entry->dtype, at.entry->shape, at.entry->bytes(), {}};
    info.location.kind = TensorLocation::Kind::File;
    info.location.file = at.shard;
    info.location.offset = shard.header.data_start + at.entry->begin;
    infos_.emplace(name, std::move(info));
  }
}

SafetensorsTensors SafetensorsTensors::open(const std::string& path) {
  return SafetensorsTensors(SafetensorsCheckpoint::open(path));
}

const TensorInfo* SafetensorsTensors::find(std::string_view name) const {
  auto it = infos_.find(name);
  return it == infos_.end() ? nullptr : &it->second;
}

std::vector<std::string> SafetensorsTensors::names() const {
  std::vector<std::string> out;
  out.reserve(infos_.size());
  for (const auto& [name, _] : infos_) out.push_back(name);
  return out;
}

void SafetensorsTensors::read_checked(const TensorInfo& tensor, std::uint64_t offset, std::uint64_t n,
                                      void* dst) const {
  if (tensor.location.kind != TensorLocation::Kind::File || tensor.location.file >= checkpoint_.shards().size())
    fail(ErrorKind::Api, "tensor {} does not belong to this checkpoint", tensor.name);
  checkpoint_.shards()[tensor.location.file].file.read_exact(dst, static_cast<std::size_t>(n),
                                                             tensor.location.offset + offset);
}

}  // namespace kern::weights
