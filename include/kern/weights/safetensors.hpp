// Reading safetensors checkpoints: one file, a directory (with or without
// `model.safetensors.index.json`), or an explicit list of shards.
//
// File format: 8-byte little-endian header length N, N bytes of JSON
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__"?: {str: str}},
// then the data section; offsets are relative to its start.
//
// Every header is checked strictly before anything trusts it (see docs/weights.md); every
// problem is Error(WeightArtifact) naming the file and, where there is one, the tensor.
// Bytes are read with pread (kern::File::read_exact), never mmap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kern/base/dtype.hpp"
#include "kern/base/file.hpp"

namespace kern::weights {

inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;
inline constexpr std::string_view kSafetensorsIndexName = "model.safetensors.index.json";

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::U8;
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0, end = 0;  // relative to the data section
  std::uint64_t bytes() const { return end - begin; }
};

struct SafetensorsHeader {
  std::uint64_t data_start = 0;           // file offset of the data section (8 + N)
  std::uint64_t data_size = 0;            // bytes after the header
  std::vector<SafetensorsEntry> tensors;  // sorted by name
  std::map<std::string, std::string> metadata;
  const SafetensorsEntry* find(std::string_view name) const;  // nullptr if absent
};

// Validates the header JSON text of a file whose data section starts at `data_start` and holds
// `data_size` bytes. `what` names the file in messages. Pure.
SafetensorsHeader parse_safetensors_header(std::string_view json_text, std::uint64_t data_start,
                                           std::uint64_t data_size, std::string_view what);
// Same from a whole file image held in memory (length prefix + header + data).
SafetensorsHeader parse_safetensors_image(std::span<const std::byte> image, std::string_view what);
// Same from an open file (reads only the length prefix and the header).
SafetensorsHeader read_safetensors_header(const File& file);

// The index of a sharded checkpoint: tensor name -> shard file name (a plain name in the
// index's directory). Strict: only "metadata" (an object) and "weight_map" keys.
std::map<std::string, std::string> parse_safetensors_index(std::string_view json_text, std::string_view what);

struct SafetensorsShard {
  std::string path;
  File file;
  SafetensorsHeader header;
};

class SafetensorsCheckpoint {
 public:
  struct Located {
    std::size_t shard = 0;  // index into shards()
    const SafetensorsEntry* entry = nullptr;
  };

  // A .safetensors file, or a directory: with model.safetensors.index.json, exactly the shards
  // it names (other files ignored); without one, every *.safetensors file in it.
  static SafetensorsCheckpoint open(const std::string& path);
  // An explicit list of shard files (no index).
  static SafetensorsCheckpoint open_shards(const std::vector<std::string>& paths);

  const std::vector<SafetensorsShard>& shards() const { return shards_; }
  // Every tensor, by name (a name lives in exactly one shard).
  const std::map<std::string, Located, std::less<>>& tensors() const { return tensors_; }
  const Located* find(std::string_view name) const;
  const std::string& index_path() const { return index_path_; }  // empty: no index

 private:
  void add_shard(std::string path);
  void build_table();
  void check_against_index(const std::map<std::string, std::string>& weight_map);

  std::vector<SafetensorsShard> shards_;
  std::map<std::string, Located, std::less<>> tensors_;
  std::string index_path_;
};

}  // namespace kern::weights
