// Named tensors from wherever they live: a checkpoint on disk (file ranges), host memory, or
// (later) device memory mapped from another process. Bind planning and loading see only this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kern/base/dtype.hpp"
#include "kern/weights/safetensors.hpp"

namespace kern::weights {

struct TensorLocation {
  enum class Kind : std::uint8_t { File, Host, Device };
  Kind kind = Kind::File;
  std::size_t file = 0;             // File: index into Tensors::files()
  std::uint64_t offset = 0;         // File: absolute byte offset of the first byte in that file
  const std::byte* host = nullptr;  // Host: the first byte
  std::uint64_t device = 0;         // Device: address of the first byte
};

struct TensorInfo {
  std::string name;
  DType dtype = DType::U8;
  std::vector<std::uint64_t> shape;  // empty = scalar
  std::uint64_t bytes = 0;
  TensorLocation location;
};

class Tensors {
 public:
  virtual ~Tensors() = default;
  // The tensor called `name`, or nullptr.
  virtual const TensorInfo* find(std::string_view name) const = 0;
  // Every tensor name, sorted.
  virtual std::vector<std::string> names() const = 0;
  // Paths of the files File locations index (empty when no tensor lives in a file).
  virtual const std::vector<std::string>& files() const;

  // Copies bytes [offset, offset + n) of a tensor to `dst`. Error(Api) for a range past the
  // tensor's end or an unknown name; Error(Io) when the bytes cannot be read.
  void read(const TensorInfo& tensor, std::uint64_t offset, std::uint64_t n, void* dst) const;
  void read(std::string_view name, std::uint64_t offset, std::uint64_t n, void* dst) const;

 protected:
  // Called with a range already checked against tensor.bytes.
  virtual void read_checked(const TensorInfo& tensor, std::uint64_t offset, std::uint64_t n, void* dst) const = 0;
};

// Tensors held in host memory, one owned byte vector each (tests, small derived weights).
class HostTensors final : public Tensors {
 public:
  // Error(Api) for a duplicate name, an empty name, or bytes that disagree with dtype × shape.
  void add(std::string name, DType dtype, std::vector<std::uint64_t> shape, std::vector<std::byte> bytes);
  const TensorInfo* find(std::string_view name) const override;
  std::vector<std::string> names() const override;

 protected:
  void read_checked(const TensorInfo& tensor, std::uint64_t offset, std::uint64_t n, void* dst) const override;

 private:
  struct Entry {
    TensorInfo info;
    std::vector<std::byte> bytes;
  };
  std::map<std::string, Entry, std::less<>> entries_;
};

// The tensors of a safetensors checkpoint; bytes are read with pread on demand.
class SafetensorsTensors final : public Tensors {
 public:
  explicit SafetensorsTensors(SafetensorsCheckpoint checkpoint);
  // SafetensorsCheckpoint::open(path) (a file or a checkpoint directory).
  static SafetensorsTensors open(const std::string& path);

  const TensorInfo* find(std::string_view name) const override;
  std::vector<std::string> names() const override;
  const std::vector<std::string>& files() const override { return files_; }
  const SafetensorsCheckpoint& checkpoint() const { return checkpoint_; }

 protected:
  void read_checked(const TensorInfo& tensor, std::uint64_t offset, std::uint64_t n, void* dst) const override;

 private:
  SafetensorsCheckpoint checkpoint_;
  std::vector<std::string> files_;
  std::map<std::string, TensorInfo, std::less<>> infos_;
};

}  // namespace kern::weights
