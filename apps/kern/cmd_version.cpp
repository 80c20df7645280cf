// kern version: prints the build's version.
#include <cstdio>

#include "command.hpp"

namespace kern::cli::cmd_version {
namespace {
Runner setup(CLI::App& app) {
  app.add_subcommand("version", "Print kern's version");
  return [] {
    std::printf("kern 0.1.0\n");
    return 0;
  };
}
Registrar reg("version", setup);
}  // namespace
}  // namespace kern::cli::cmd_version
