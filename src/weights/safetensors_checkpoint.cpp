// A checkpoint made of one or more safetensors shards, optionally described by an index.
#include <algorithm>
#include <filesystem>
#include <set>

#include "kern/base/error.hpp"
#include "kern/base/json.hpp"
#include "kern/weights/safetensors.hpp"

namespace kern::weights {

namespace fs = std::filesystem;

namespace {

bool is_plain_file_name(std::string_view s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string_view::npos &&
         s.find('\0') == std::string_view::npos;
}

}  // namespace

std::map<std::string, std::string> parse_safetensors_index(std::string_view json_text, std::string_view what) {
  const Json j = parse_json_strict(json_text, {ErrorKind::WeightArtifact, what, 64});
  if (!j.is_object()) fail(ErrorKind::WeightArtifact, "{}: the index must be a JSON object", what);
  for (const auto& [key, _] : j.items())
    if (key != "metadata" && key != "weight_map")
      fail(ErrorKind::WeightArtifact, "{}: unknown key \"{}\" (expected metadata, weight_map)", what, key);
  if (j.contains("metadata") && !j["metadata"].is_object())
    fail(ErrorKind::WeightArtifact, "{}: metadata must be an object", what);
  if (!j.contains("weight_map")) fail(ErrorKind::WeightArtifact, "{}: missing weight_map", what);
  const Json& m = j["weight_map"];
  if (!m.is_object()) fail(ErrorKind::WeightArtifact, "{}: weight_map must be an object", what);
  std::map<std::string, std::string> out;
  for (const auto& [tensor, shard] : m.items()) {
    if (tensor.empty()) fail(ErrorKind::WeightArtifact, "{}: weight_map has an empty tensor name", what);
    if (!shard.is_string())
      fail(ErrorKind::WeightArtifact, "{}: weight_map.{} must be a shard file name (string)", what, tensor);
    std::string s = shard.get<std::string>();
    if (!is_plain_file_name(s))
      fail(ErrorKind::WeightArtifact,
           "{}: weight_map.{} names \"{}\", which is not a file name in the index's directory", what, tensor, s);
    out.emplace(tensor, std::move(s));
  }
  return out;
}

void SafetensorsCheckpoint::add_shard(std::string path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) fail(ErrorKind::WeightArtifact, "{}: not a readable regular file", path);
  File file(path);
  SafetensorsHeader header = read_safetensors_header(file);
  shards_.push_back(SafetensorsShard{std::move(path), std::move(file), std::move(header)});
}

void SafetensorsCheckpoint::build_table() {
  tensors_.clear();
  for (std::size_t s = 0; s < shards_.size(); ++s) {
    for (const auto& e : shards_[s].header.tensors) {
      auto [it, inserted] = tensors_.emplace(e.name, Located{s, &e});
      if (!inserted)
        fail(ErrorKind::WeightArtifact, "tensor {} is in two shards: {} and {}", e.name, shards_[it->second.shard].path,
             shards_[s].path);
    }
  }
}

void SafetensorsCheckpoint::check_against_index(const std::map<std::string, std::string>& weight_map) {
  // Every tensor the index names is in the shard it names ...
  for (const auto& [tensor, shard_name] : weight_map) {
    const Located* at = find(tensor);
    const std::string expected = (fs::path(index_path_).parent_path() / shard_name).string();
    if (at == nullptr)
      fail(ErrorKind::WeightArtifact, "{}: tensor {} is mapped to {}, but {} has no such tensor", index_path_, tensor,
           shard_name, expected);
    if (shards_[at->shard].path != expected)
      fail(ErrorKind::WeightArtifact, "{}: tensor {} is mapped to {}, but it is in {}", index_path_, tensor, shard_name,
           shards_[at->shard].path);
  }
  // ... and every tensor of every shard is in the index.
  for (const auto& [tensor, at] : tensors_)
    if (!weight_map.contains(tensor))
      fail(ErrorKind::WeightArtifact, "{}: tensor {} of {} is missing from the index", index_path_, tensor,
           shards_[at.shard].path);
}

SafetensorsCheckpoint SafetensorsCheckpoint::open(const std::string& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) fail(ErrorKind::WeightArtifact, "{}: no such file or directory", path);
  if (!fs::is_directory(status)) return open_shards({path});

  SafetensorsCheckpoint ck;
  const fs::path dir(path);
  const fs::path index = dir / kSafetensorsIndexName;
  if (fs::exists(index, ec)) {
    ck.index_path_ = index.string();
    const auto weight_map = parse_safetensors_index(read_file(ck.index_path_), ck.index_path_);
    std::set<std::string> shard_names;
    for (const auto& [_, shard] : weight_map) shard_names.insert(shard);
    for (const auto& name : shard_names) {
      const fs::path shard = dir / name;
      if (!fs::is_regular_file(shard, ec))
        fail(ErrorKind::WeightArtifact, "{}: names shard {}, which is missing", ck.index_path_, shard.string());
      ck.add_shard(shard.string());
    }
    ck.build_table();
    ck.check_against_index(weight_map);
    return ck;
  }

  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".safetensors" && entry.is_regular_file(ec)) files.push_back(entry.path().string());
  }
  if (ec) fail(ErrorKind::Io, "cannot list {}: {}", path, ec.message());
  if (files.empty())
    fail(ErrorKind::WeightArtifact, "{}: no {} and no .safetensors files", path, kSafetensorsIndexName);
  std::sort(files.begin(), files.end());
  for (auto& f : files) ck.add_shard(std::move(f));
  ck.build_table();
  return ck;
}

SafetensorsCheckpoint SafetensorsCheckpoint::open_shards(const std::vector<std::string>& paths) {
  if (paths.empty()) fail(ErrorKind::Api, "open_shards: no shard files given");
  SafetensorsCheckpoint ck;
  std::set<std::string> seen;
  for (const auto& p : paths) {
    std::error_code ec;
    const fs::path canonical = fs::weakly_canonical(p, ec);
    if (!seen.insert(ec ? p : canonical.string()).second) fail(ErrorKind::Api, "open_shards: {} is given twice", p);
    ck.add_shard(p);
  }
  ck.build_table();
  return ck;
}

const SafetensorsCheckpoint::Located* SafetensorsCheckpoint::find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

}  // namespace kern::weights
