// Runs a shell command line: its exit status (-1 when it did not exit normally) and its stdout and
// stderr merged. For tests that drive the built binaries through a pipeline of commands.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <utility>

namespace kern_test {

inline std::pair<int, std::string> run_shell(const std::string& cmd) {
  std::string out;
  FILE* f = ::popen((cmd + " 2>&1").c_str(), "r");
  if (f == nullptr) return {-1, out};
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  const int status = ::pclose(f);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace kern_test
