// kern.toml: where a target's manifest, kernels, weights and tokenizer live, plus run defaults.
// Found by walking up from the working directory (or given with --config). Paths in it are
// relative to the file's folder and are returned absolute. Command-line flags beat it.
//
//   gpu = 0
//   [targets.qwen3-tiny]
//   manifest = "build/qwen3-tiny.json"
//   kernels = "build/kernels"
//   weights = ["models/qwen3-tiny"]      # dirs or files (a single string is accepted too)
//   tokenizer = "models/qwen3-tiny/tokenizer.json"
//   [run]
//   prompt = "Hello"
//   steps = 32
//   target = "qwen3-tiny"                # the default target
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kern::cli {

struct Target {
  std::string name;
  std::string manifest;  // empty when not set
  std::string kernels;
  std::vector<std::string> weights;
  std::string tokenizer;
};

struct RunDefaults {
  std::optional<std::string> prompt;
  std::optional<std::int64_t> steps;
  std::optional<std::string> target;
};

struct Config {
  std::string path;  // the kern.toml read; empty when none was found
  std::optional<std::int64_t> gpu;
  std::map<std::string, Target> targets;
  RunDefaults run;

  // `name` empty: the [run] target, else the only target if there is exactly one, else nullopt.
  // A name that is not a target is an Error(Api) listing the targets.
  std::optional<Target> target(const std::string& name_or_default) const;
};

// Reads `explicit_path` (Io error if absent), or the nearest kern.toml walking up from the
// working directory (an empty Config when there is none). Malformed TOML, a wrong type or an
// unknown key is an Error(Api) naming the file, the key and (for syntax) the line.
Config load_config(const std::string& explicit_path);
// Same, from text; `path` locates relative paths and names the file in errors.
Config parse_config(const std::string& text, const std::string& path);
// The nearest kern.toml in `start` or one of its parents; empty when none.
std::string find_config(const std::string& start);

}  // namespace kern::cli
