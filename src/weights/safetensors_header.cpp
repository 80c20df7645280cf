// Strict validation of one safetensors header.
#include <algorithm>
#include <cstring>

#include "checked_math.hpp"
#include "kern/base/error.hpp"
#include "kern/base/json.hpp"
#include "kern/weights/safetensors.hpp"

namespace kern::weights {

namespace {

[[noreturn]] void bad(std::string_view what, std::string_view detail) {
  fail(ErrorKind::WeightArtifact, "{}: {}", what, detail);
}

std::uint64_t read_le64(const unsigned char* p) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | p[i];
  return n;
}

// Header length N from the first 8 bytes of a file of `file_size` bytes, bounds-checked.
std::uint64_t header_length(const unsigned char* prefix, std::uint64_t file_size, std::string_view what) {
  const std::uint64_t n = read_le64(prefix);
  if (n > kMaxSafetensorsHeaderBytes)
    bad(what, fmt::format("header length {} is larger than the {}-byte limit", n, kMaxSafetensorsHeaderBytes));
  if (n > file_size - 8)
    bad(what, fmt::format("header length {} runs past the end of the file ({} bytes after the length prefix)", n,
                          file_size - 8));
  return n;
}

std::uint64_t as_u64(const Json& v, std::string_view what, std::string_view tensor, std::string_view field) {
  if (!v.is_number_unsigned())
    bad(what, fmt::format("tensor {}: {} must hold non-negative integers, found {}", tensor, field, v.dump()));
  return v.get<std::uint64_t>();
}

SafetensorsEntry parse_entry(const std::string& name, const Json& v, std::uint64_t data_size, std::string_view what) {
  if (name.empty()) bad(what, "a tensor has an empty name");
  if (!v.is_object()) bad(what, fmt::format("tensor {}: entry must be an object, found {}", name, v.type_name()));
  for (const auto& [key, _] : v.items())
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      bad(what, fmt::format("tensor {}: unknown field \"{}\" (expected dtype, shape, data_offsets)", name, key));
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!v.contains(key)) bad(what, fmt::format("tensor {}: missing field \"{}\"", name, key));

  SafetensorsEntry e;
  e.name = name;
  const Json& dt = v["dtype"];
  if (!dt.is_string()) bad(what, fmt::format("tensor {}: dtype must be a string", name));
  const auto dtype = dtype_from_safetensors(dt.get<std::string>());
  if (!dtype) bad(what, fmt::format("tensor {}: unknown dtype \"{}\"", name, dt.get<std::string>()));
  e.dtype = *dtype;

  const Json& shape = v["shape"];
  if (!shape.is_array()) bad(what, fmt::format("tensor {}: shape must be an array", name));
  for (const Json& d : shape) e.shape.push_back(as_u64(d, what, name, "shape"));

  const Json& off = v["data_offsets"];
  if (!off.is_array() || off.size() != 2)
    bad(what, fmt::format("tensor {}: data_offsets must be an array [begin, end]", name));
  e.begin = as_u64(off[0], what, name, "data_offsets");
  e.end = as_u64(off[1], what, name, "data_offsets");
  if (e.begin > e.end) bad(what, fmt::format("tensor {}: data_offsets [{}, {}] are reversed", name, e.begin, e.end));
  if (e.end > data_size)
    bad(what, fmt::format("tensor {}: data_offsets [{}, {}] run past the data section ({} bytes)", name, e.begin, e.end,
                          data_size));
  const auto bytes = weights::shape_bytes(e.dtype, e.shape);
  if (!bytes) bad(what, fmt::format("tensor {}: shape {} overflows 64-bit byte counts", name, shape.dump()));
  if (*bytes != e.bytes())
    bad(what, fmt::format("tensor {}: shape {} of {} is {} bytes but data_offsets [{}, {}] span {}", name, shape.dump(),
                          safetensors_name(e.dtype), *bytes, e.begin, e.end, e.bytes()));
  return e;
}

}  // namespace

const SafetensorsEntry* SafetensorsHeader::find(std::string_view name) const {
  auto it = std::lower_bound(tensors.begin(), tensors.end(), name,
                             [](const SafetensorsEntry& e, std::string_view n) { return e.name < n; });
  return it != tensors.end() && it->name == name ? &*it : nullptr;
}

SafetensorsHeader parse_safetensors_header(std::string_view json_text, std::uint64_t data_start,
                                           std::uint64_t data_size, std::string_view what) {
  const std::string json_what = fmt::format("{} (safetensors header)", what);
  const Json h = parse_json_strict(json_text, {ErrorKind::WeightArtifact, json_what, 64});
  if (!h.is_object()) bad(what, fmt::format("header must be a JSON object, found {}", h.type_name()));

  SafetensorsHeader out;
  out.data_start = data_start;
  out.data_size = data_size;
  for (const auto& [key, value] : h.items()) {  // nlohmann objects iterate in key order
    if (key == "__metadata__") {
      if (!value.is_object()) bad(what, "__metadata__ must be an object of strings");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) bad(what, fmt::format("__metadata__.{} must be a string, found {}", mk, mv.type_name()));
        out.metadata.emplace(mk, mv.get<std::string>());
      }
      continue;
    }
    out.tensors.push_back(parse_entry(key, value, data_size, what));
  }

  // No two tensors may share a byte (zero-sized tensors occupy none).
  std::vector<const SafetensorsEntry*> by_begin;
  for (const auto& e : out.tensors)
    if (e.bytes() > 0) by_begin.push_back(&e);
  std::sort(by_begin.begin(), by_begin.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->name < b->name;
  });
  for (std::size_t i = 1; i < by_begin.size(); ++i) {
    const auto* prev = by_begin[i - 1];
    const auto* cur = by_begin[i];
    if (cur->begin < prev->end)
      bad(what, fmt::format("tensors {} [{}, {}] and {} [{}, {}] overlap", prev->name, prev->begin, prev->end,
                            cur->name, cur->begin, cur->end));
  }
  return out;  // tensors are in name order already (object keys are sorted)
}

SafetensorsHeader parse_safetensors_image(std::span<const std::byte> image, std::string_view what) {
  if (image.size() < 8)
    bad(what, fmt::format("file is {} bytes, too short for the 8-byte header length", image.size()));
  const auto* p = reinterpret_cast<const unsigned char*>(image.data());
  const std::uint64_t n = header_length(p, image.size(), what);
  std::string_view json(reinterpret_cast<const char*>(p + 8), static_cast<std::size_t>(n));
  return parse_safetensors_header(json, 8 + n, image.size() - 8 - n, what);
}

SafetensorsHeader read_safetensors_header(const File& file) {
  const std::string& what = file.path();
  if (file.size() < 8) bad(what, fmt::format("file is {} bytes, too short for the 8-byte header length", file.size()));
  unsigned char prefix[8];
  file.read_exact(prefix, 8, 0);
  const std::uint64_t n = header_length(prefix, file.size(), what);
  std::string json(static_cast<std::size_t>(n), '\0');
  if (n > 0) file.read_exact(json.data(), json.size(), 8);
  return parse_safetensors_header(json, 8 + n, file.size() - 8 - n, what);
}

}  // namespace kern::weights
