// How a subcommand plugs into the kern CLI: one file per subcommand defines a static
// Registrar; main() builds the app from every registered subcommand (in name order).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

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

}  // namespace kern::cli
