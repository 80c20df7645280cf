// Shared by the parse_*_test.cpp files: the §2.12 toy manifest as JSON to mutate, and a helper
// that returns the ManifestParse error message of a document.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "kern/base/error.hpp"
#include "kern/base/json.hpp"
#include "kern/core/manifest.hpp"

namespace kern::core::testing {

inline constexpr std::string_view kToyManifest = R"({
  "schema_version": 5,
  "model": "demo-toy",
  "vars":    { "tokens": { "max": 512 } },
  "states":  { "cache":  { "bytes_per_token": 128 } },
  "buffers": {
    "inp":  { "dtype": "bf16", "shape": ["tokens", 32], "kind": "input" },
    "gain": { "dtype": "bf16", "shape": [32], "kind": "weight",
              "bind": [ { "tensor": "demo.gain" } ] },
    "res":  { "dtype": "bf16", "shape": ["tokens", 32], "kind": "output" }
  },
  "modules": {
    "demo": { "source": "demo.cubin",
              "sha256": "0000000000000000000000000000000000000000000000000000000000000000" }
  },
  "ops": {
    "scale_rows": {
      "params": ["in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "inout state", "i32"],
      "impl": { "launches": [
        { "module": "demo", "entry": "demo_scale", "block": [32, 1, 1], "grid": ["tokens", 1, 1] }
      ] }
    }
  },
  "programs": {
    "step": { "calls": [
      { "op": "scale_rows",
        "args": [ {"buf": "inp"}, {"buf": "gain"}, {"buf": "res"}, {"state": "cache"}, {"var": "tokens"} ] }
    ] }
  }
})";

inline Json toy() { return Json::parse(kToyManifest); }

// The message of the ManifestParse error `text` raises ("no error" if it parses).
inline std::string parse_error_text(std::string_view text) {
  try {
    parse_manifest(text);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::ManifestParse) << e.message();
    return e.message();
  }
  return "no error";
}

inline std::string parse_error(const Json& doc) { return parse_error_text(doc.dump()); }

// The launch / call of the toy, for mutation.
inline Json& toy_launch(Json& doc) { return doc["ops"]["scale_rows"]["impl"]["launches"][0]; }
inline Json& toy_call(Json& doc) { return doc["programs"]["step"]["calls"][0]; }

}  // namespace kern::core::testing
