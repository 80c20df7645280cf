// kern: the command-line entry. Exit codes: 0 success, 1 bad input, 2 bad usage.
#include <cstdio>
#include <map>
#include <string>

#include "command.hpp"
#include "kern/base/error.hpp"
#include "kern/base/log.hpp"

namespace kern::cli {

namespace {
std::map<std::string, Setup>& registry() {
  static std::map<std::string, Setup> r;
  return r;
}
Globals g_globals;
}  // namespace

const Globals& globals() { return g_globals; }

Registrar::Registrar(const char* name, Setup setup) { registry()[name] = setup; }

}  // namespace kern::cli

int main(int argc, char** argv) {
  using namespace kern;
  CLI::App app{"kern: runs large language models on NVIDIA GPUs from a declarative manifest"};
  app.require_subcommand(1);
  app.option_defaults()->always_capture_default();
  app.add_option("--config", cli::g_globals.config,
                 "kern.toml to read (default: nearest one walking up from the working directory)");

  std::map<CLI::App*, cli::Runner> runners;
  for (auto& [name, setup] : cli::registry()) {
    (void)name;
    size_t before = app.get_subcommands({}).size();
    cli::Runner run = setup(app);
    auto subs = app.get_subcommands({});
    if (subs.size() > before) runners[subs.back()] = std::move(run);
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }

  try {
    for (auto& [sub, run] : runners)
      if (sub->parsed()) return run();
    return 2;
  } catch (const Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of host memory\n");
    return 1;
  }
}
