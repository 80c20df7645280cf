// How a subcommand plugs into the kern CLI: one file per subcommand defines a static
// Registrar; main() builds the app from every registered subcommand (in name order).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

#include "kern/models/qwen3_gen.hpp"

namespace kern::cli {

// Options every subcommand can see.
struct Globals {
  std::string config;  // --config <kern.toml>; empty = search upward from the working directory
};
const Globals& globals();

// Adds the subcommand to `app`; returns what to run when it is selected. The runner returns
// the exit code: 0 success, 1 bad input (after printing the error), 2 bad usage.
using Runner = std::function<int()>;
using Setup = Runner (*)(CLI::App& app);

struct Registrar {
  Registrar(const char* name, Setup setup);
};

// --decode-attn-items auto|block|warp (kern gen, bench, serve): the names of
// models::decode_attn_items_names(), anything else refused naming them.
inline CLI::Option* add_decode_attn_items(CLI::App& app, models::Qwen3GenOptions::DecodeAttnItems& target,
                                          const std::string& help) {
  return app.add_option_function<std::string>(
      "--decode-attn-items",
      [&target](const std::string& v) {
        const auto& names = models::decode_attn_items_names();
        const auto it = names.find(v);
        if (it == names.end())
          throw CLI::ValidationError("--decode-attn-items", "must be auto, block or warp, not '" + v + "'");
        target = it->second;
      },
      help);
}

}  // namespace kern::cli
