// Writes safetensors files: the header (8-byte little-endian length, then JSON padded with
// spaces to a multiple of 8, as Hugging Face's writer does) first, then every tensor's bytes
// in declared order, streamed through large buffered writes. Also writes the shard index
// `model.safetensors.index.json` of a sharded checkpoint.
//
// Misuse (bytes for the wrong tensor, too many or too few bytes) is Error(Api); a failed
// write is Error(Io).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kern/base/dtype.hpp"

namespace kern::weights {

struct TensorSpec {
  std::string name;
  DType dtype = DType::U8;
  std::vector<std::uint64_t> shape;  // empty = scalar (one element)
};

// Bytes of one tensor: product(shape) × dtype size; Error(Api) on overflow.
std::uint64_t tensor_spec_bytes(const TensorSpec& spec);

class SafetensorsWriter {
 public:
  // Creates (truncates) `path` and writes the header. Tensor names must be non-empty, unique
  // and not "__metadata__"; Error(Api) otherwise.
  SafetensorsWriter(std::string path, std::vector<TensorSpec> tensors,
                    std::map<std::string, std::string> metadata = {});
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;
  // Closes the file. A writer destroyed before finish() leaves a truncated file behind, which
  // any reader rejects (its header promises more data than the file holds).
  ~SafetensorsWriter();

  // Appends bytes of tensor `name`. Tensors must be written in declared order; a tensor may be
  // written in several chunks. Error(Api) when `name` is not the tensor being written (or the
  // next one once it is complete) or when the chunk runs past the tensor's size.
  void append(std::string_view name, std::span<const std::byte> bytes);
  // Flushes and closes. Error(Api) naming the first tensor that did not get exactly its bytes.
  void finish();

  const std::string& path() const { return path_; }
  // Size of the header block (8 + padded JSON) and of the whole file.
  std::uint64_t header_size() const { return header_size_; }
  static std::uint64_t file_size(const std::vector<TensorSpec>& tensors,
                                 const std::map<std::string, std::string>& metadata = {});
  // The header block exactly as written: 8-byte length + padded JSON.
  static std::string header_block(const std::vector<TensorSpec>& tensors,
                                  const std::map<std::string, std::string>& metadata = {});

 private:
  void write_raw(const std::byte* p, std::size_t n);
  void flush();

  std::string path_;
  std::vector<TensorSpec> tensors_;
  std::vector<std::uint64_t> sizes_;
  std::uint64_t header_size_ = 0;
  std::size_t current_ = 0;        // tensor being written
  std::uint64_t written_ = 0;      // bytes of tensors_[current_] so far
  std::vector<std::byte> buffer_;  // pending bytes
  std::size_t buffered_ = 0;
  int fd_ = -1;
  bool finished_ = false;
};

// Writes `model.safetensors.index.json` (or any path): {"metadata": {"total_size": N},
// "weight_map": {tensor: shard file name}}. Shard names must be plain file names.
void write_safetensors_index(const std::string& path, const std::map<std::string, std::string>& weight_map,
                             std::uint64_t total_size);

}  // namespace kern::weights
