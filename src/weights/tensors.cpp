#include "kern/weights/tensors.hpp"

#include "kern/base/error.hpp"

namespace kern::weights {

const std::vector<std::string>& Tensors::files() const {
  static const std::vector<std::string> kNone;
  return kNone;
}

void Tensors::read(const TensorInfo& tensor, std::uint64_t offset, std::uint64_t n, void* dst) const {
  if (offset > tensor.bytes || n > tensor.bytes - offset)
    fail(ErrorKind::Api, "read of {} bytes at offset {} of tensor {} runs past its {} bytes", n, offset, tensor.name,
         tensor.bytes);
  if (n == 0) return;
  read_checked(tensor, offset, n, dst);
}

void Tensors::read(std::string_view name, std::uint64_t offset, std::uint64_t n, void* dst) const {
  const TensorInfo* t = find(name);
  if (t == nullptr) fail(ErrorKind::Api, "read of unknown tensor {}", name);
  read(*t, offset, n, dst);
}

}  // namespace kern::weights
