#include "kern/driver/generation_config.hpp"

#include <charconv>
#include <filesystem>

#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/base/json.hpp"

namespace kern::driver {

std::vector<std::int64_t> parse_eos_tokens(const std::string& json_text, const std::string& what) {
  const Json j = parse_json_strict(json_text, {ErrorKind::WeightArtifact, what});
  if (!j.is_object()) fail(ErrorKind::WeightArtifact, "{}: not a JSON object", what);
  auto it = j.find("eos_token_id");
  if (it == j.end() || it->is_null()) return {};
  std::vector<std::int64_t> ids;
  auto take = [&](const Json& v, const std::string& path) {
    if (!v.is_number_integer()) fail(ErrorKind::WeightArtifact, "{}: {} must be an integer token id", what, path);
    ids.push_back(v.get<std::int64_t>());
  };
  if (it->is_array()) {
    for (std::size_t i = 0; i < it->size(); ++i) take((*it)[i], "eos_token_id[" + std::to_string(i) + "]");
  } else {
    take(*it, "eos_token_id");
  }
  return ids;
}

std::vector<std::int64_t> read_eos_tokens(const std::string& weights) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir(weights);
  if (!fs::is_directory(dir, ec)) dir = dir.parent_path();
  const fs::path file = dir / "generation_config.json";
  if (!fs::is_regular_file(file, ec)) return {};
  return parse_eos_tokens(read_file(file.string()), file.string());
}

std::vector<std::int64_t> parse_id_list(const std::string& text, const std::string& what) {
  std::vector<std::int64_t> ids;
  std::size_t start = 0;
  while (true) {
    std::size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    std::int64_t v = 0;
    const auto [p, e] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || e != std::errc() || p != item.data() + item.size() || v < 0)
      fail(ErrorKind::Api, "{}: '{}' is not a token id (expected a comma-separated list of non-negative integers)",
           what, item);
    ids.push_back(v);
    if (end == text.size()) break;
    start = end + 1;
  }
  return ids;
}

}  // namespace kern::driver
