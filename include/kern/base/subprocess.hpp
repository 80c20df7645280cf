// Running a helper program (a disassembler, ...) without a shell: argv as given, stdin from
// /dev/null, stdout and stderr captured, killed (SIGKILL) past a timeout.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kern::base {

struct ProcessResult {
  int exit_code = -1;      // when it exited; -1 when a signal ended it
  int signal = 0;          // the signal that ended it, 0 if it exited
  bool timed_out = false;  // killed by run_process at the deadline (signal is then SIGKILL)
  bool output_truncated = false;  // stdout or stderr passed max_output; the rest was discarded
  std::string out;
  std::string err;
  bool ok() const { return !timed_out && signal == 0 && exit_code == 0; }
  // "exit status 2", "killed by signal 9", "timed out after 30000 ms" (with the timeout given)
  std::string describe_status() const;
};

// Spawns argv[0] (an absolute or relative path: no PATH search; see find_executable) with
// the caller's environment. Io error when argv is empty or the program cannot be spawned.
ProcessResult run_process(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                          std::size_t max_output = std::size_t{256} << 20);

// The first executable regular file `name` in the directories of $PATH; nullopt when none.
// A name holding '/' is returned as is when it is an executable file.
std::optional<std::string> find_executable(std::string_view name);
// Whether `path` is a regular file the caller may execute.
bool is_executable_file(const std::string& path);

}  // namespace kern::base

// base is the vocabulary every layer speaks: its names are visible as kern::NAME.
namespace kern {
using namespace base;  // NOLINT(google-build-using-namespace)
}  // namespace kern
