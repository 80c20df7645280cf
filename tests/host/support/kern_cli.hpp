// Runs the built kern binary (KERN_BINARY_DIR/bin/kern) with shell-quoted arguments in a fresh
// temporary directory: its exit code, stdout and stderr. For tests of a subcommand's behaviour.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "kern/base/file.hpp"

namespace kern_test {

struct CliResult {
  int code = -1;
  std::string out, err;
};

inline std::string kern_binary() { return std::string(KERN_BINARY_DIR) + "/bin/kern"; }

// `args` is pasted into a shell command line after the binary: quote what needs quoting.
inline CliResult run_kern(const std::string& args, const std::string& tag = "cli") {
  const auto dir = std::filesystem::temp_directory_path() / ("kern_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string out = (dir / "out").string(), err = (dir / "err").string();
  const std::string cmd = "cd '" + dir.string() + "' && '" + kern_binary() + "' " + args + " >'" + out + "' 2>'" + err + "'";
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = kern::read_file(out);
  r.err = kern::read_file(err);
  std::filesystem::remove_all(dir);
  return r;
}

}  // namespace kern_test
