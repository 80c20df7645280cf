// kern capture [-o DIR] [--inject LIB] [--cupti LIB] [--top N] [--no-timing] -- PROGRAM [ARGS...]: runs a CUDA
// program with kern's CUPTI injection library (lib/libkern_capture.so beside bin/kern), then reads
// back the record it left in DIR (capture.jsonl and modules/<sha256>.cubin), checks it strictly
// (core::parse_capture, every module's bytes against its hash) and prints the summary: kernels by
// time share, each graph's kernel nodes. docs/capture.md.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "command.hpp"
#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/base/log.hpp"
#include "kern/base/sha256.hpp"
#include "kern/core/capture.hpp"

extern char** environ;

namespace kern::cli::cmd_capture {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::string out = "capture", inject, cupti;
  std::size_t top = 25;
  bool no_timing = false;
  std::vector<std::string> command;
};

std::string exe_dir() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : p.parent_path().string();
}

std::string shell_words(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) {
    if (!s.empty()) s += ' ';
    s += a.find_first_of(" \t\"'\\") == std::string::npos ? a : "'" + a + "'";
  }
  return s;
}

// The child's exit status as a shell reports it (128 + signal when a signal ended it).
int run_program(const std::vector<std::string>& command) {
  std::vector<char*> argv;
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
  if (rc != 0) fail(ErrorKind::Io, "kern capture: cannot start {}: {}", command.front(), std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) fail(ErrorKind::Io, "kern capture: waiting for {}: {}", command.front(), std::strerror(errno));
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

int run(const Options& o) {
  if (o.command.empty()) fail(ErrorKind::Api, "kern capture: nothing to run (kern capture [-o DIR] -- PROGRAM [ARGS...])");
  const fs::path dir = fs::absolute(o.out);
  std::error_code ec;
  if (fs::exists(dir / "capture.jsonl", ec) || fs::exists(dir / ".claimed", ec))
    fail(ErrorKind::Api, "kern capture: {} holds a capture already (pass another -o, or remove it)", dir.string());
  fs::create_directories(dir / "modules", ec);
  if (ec) fail(ErrorKind::Io, "kern capture: cannot create {}: {}", dir.string(), ec.message());
  const fs::path inject = fs::absolute(o.inject.empty() ? fs::path(exe_dir()) / ".." / "lib" / "libkern_capture.so"
                                                        : fs::path(o.inject));
  if (!fs::is_regular_file(inject, ec))
    fail(ErrorKind::Io, "kern capture: no injection library at {} (build target kern_capture, or pass --inject)",
         inject.string());
  const std::string program = shell_words(o.command);
  ::setenv("CUDA_INJECTION64_PATH", inject.c_str(), 1);
  ::setenv("KERN_CAPTURE_DIR", dir.c_str(), 1);
  ::setenv("KERN_CAPTURE_PROGRAM", program.c_str(), 1);
  if (!o.cupti.empty()) ::setenv("KERN_CUPTI", fs::absolute(o.cupti).c_str(), 1);
  ::setenv("KERN_CAPTURE_TIMING", o.no_timing ? "0" : "1", 1);
  log().info("capturing `{}` into {}", program, dir.string());
  const int status = run_program(o.command);
  if (status != 0) log().warn("{} exited with status {}", o.command.front(), status);
  const fs::path record = dir / "capture.jsonl";
  if (!fs::exists(record, ec))
    fail(ErrorKind::KernelArtifact,
         "kern capture: `{}` (status {}) left no record in {}: it never initialised CUDA, or the injection library "
         "could not start (its messages above)",
         program, status, dir.string());
  const core::Capture c = core::parse_capture(read_file(record.string()));
  for (const core::CaptureModule& m : c.modules) {
    const std::string ext = m.format == "unknown" ? "bin" : m.format;
    const fs::path file = dir / "modules" / (m.sha256 + "." + ext);
    if (!fs::is_regular_file(file, ec))
      fail(ErrorKind::KernelArtifact, "kern capture: module {} has no bytes at {}", m.sha256, file.string());
    const std::string got = sha256_file_hex(file.string());
    if (got != m.sha256 || fs::file_size(file) != m.bytes)
      fail(ErrorKind::KernelArtifact, "kern capture: {} holds sha256 {} ({} bytes), the record says {} ({} bytes)",
           file.string(), got, fs::file_size(file), m.sha256, m.bytes);
  }
  const std::string summary = core::describe(core::summarize_capture(c), o.top) + "\n";
  std::fwrite(summary.data(), 1, summary.size(), stdout);
  std::fflush(stdout);
  return status;
}

Runner setup(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "capture", "Run a CUDA program under kern's CUPTI injection library: record its modules and kernel launches");
  sub->add_option("-o,--out", opts->out, "record directory (capture.jsonl, modules/)")->capture_default_str();
  sub->add_option("--inject", opts->inject, "injection library (default: <build>/lib/libkern_capture.so)");
  sub->add_option("--cupti", opts->cupti, "libcupti to load (default: the loader's search, then the toolkit's)");
  sub->add_option("--top", opts->top, "kernels listed in the summary")->capture_default_str();
  sub->add_flag("--no-timing", opts->no_timing,
                "no kernel durations (the activity API off: the program's kernels run exactly as without capture)");
  sub->add_option("command", opts->command, "the program and its arguments, after --")->expected(-1);
  return [opts] { return run(*opts); };
}

Registrar reg("capture", setup);

}  // namespace
}  // namespace kern::cli::cmd_capture
