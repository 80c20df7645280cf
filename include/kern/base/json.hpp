// Strict JSON reading shared by every parser in kern (manifest, safetensors headers,
// shard indexes, tokenizer files): syntax errors carry line:column, duplicate keys are
// errors naming their JSON path, and nesting is bounded so no later walk can overflow.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>

#include "kern/base/error.hpp"

namespace kern::base {

using Json = nlohmann::json;

struct StrictJsonOptions {
  ErrorKind kind = ErrorKind::ManifestParse;  // kind of the error thrown on bad input
  std::string_view what = "json";             // what the text is, for messages ("manifest", "shard a.safetensors")
  std::size_t max_depth = 128;                // nesting deeper than this is refused
};

// Parses `text` or throws Error(options.kind) with a precise message.
Json parse_json_strict(std::string_view text, const StrictJsonOptions& options = {});

// JSON paths as kern prints them: `ops.attn.impl.launches[1].grid[0]`.
std::string json_path_key(std::string_view parent, std::string_view key);
std::string json_path_index(std::string_view parent, std::size_t index);

// 1-based line and column of byte `offset` in `text`.
struct TextPosition {
  std::size_t line = 1;
  std::size_t column = 1;
};
TextPosition text_position(std::string_view text, std::size_t offset);

}  // namespace kern::base

// base is the vocabulary every layer speaks: its names are visible as kern::NAME.
namespace kern {
using namespace base;  // NOLINT(google-build-using-namespace)
}  // namespace kern
