#include "kern/base/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "kern/base/error.hpp"
#include "kern/base/unique_fd.hpp"

extern char** environ;

namespace kern::base {
namespace {

using Clock = std::chrono::steady_clock;

struct Pipe {
  UniqueFd read, write;
};

Pipe make_pipe() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) fail(ErrorKind::Io, "pipe2: {}", std::strerror(errno));
  return {UniqueFd(p[0]), UniqueFd(p[1])};
}

// Reads what is available from `fd` into `dst` (up to `cap` bytes kept); false at EOF.
bool drain(int fd, std::string& dst, std::size_t cap, bool& truncated) {
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      std::size_t keep = dst.size() < cap ? std::min(cap - dst.size(), static_cast<std::size_t>(n)) : 0;
      dst.append(buf, keep);
      if (keep < static_cast<std::size_t>(n)) truncated = true;
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
    return false;  // a read error on our own pipe: treat as EOF
  }
}

}  // namespace

std::string ProcessResult::describe_status() const {
  if (timed_out) return "timed out (killed)";
  if (signal != 0) return fmt::format("killed by signal {} ({})", signal, ::strsignal(signal));
  return fmt::format("exit status {}", exit_code);
}

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::optional<std::string> find_executable(std::string_view name) {
  if (name.empty()) return std::nullopt;
  std::string n(name);
  if (n.find('/') != std::string::npos) return is_executable_file(n) ? std::optional(n) : std::nullopt;
  const char* path = std::getenv("PATH");
  if (path == nullptr) return std::nullopt;
  std::string_view rest(path);
  while (true) {
    std::size_t colon = rest.find(':');
    std::string_view dir = rest.substr(0, colon);
    std::string cand = dir.empty() ? n : std::string(dir) + "/" + n;
    if (!dir.empty() && is_executable_file(cand)) return cand;
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return std::nullopt;
}

ProcessResult run_process(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                          std::size_t max_output) {
  if (argv.empty()) fail(ErrorKind::Io, "run_process: empty argv");
  Pipe out = make_pipe();
  Pipe err = make_pipe();

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out.write.get(), 1);
  posix_spawn_file_actions_adddup2(&fa, err.write.get(), 2);
  // The child gets default signal dispositions and an empty mask (the parent may block some).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, argv[0].c_str(), &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) fail(ErrorKind::Io, "cannot run {}: {}", argv[0], std::strerror(rc));
  out.write.reset();
  err.write.reset();
  ::fcntl(out.read.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(err.read.get(), F_SETFL, O_NONBLOCK);

  ProcessResult r;
  const auto deadline = Clock::now() + timeout;
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      r.timed_out = true;
      break;
    }
    pollfd pf[2];
    int n = 0;
    if (out_open) pf[n++] = {out.read.get(), POLLIN, 0};
    if (err_open) pf[n++] = {err.read.get(), POLLIN, 0};
    int p = ::poll(pf, static_cast<nfds_t>(n), static_cast<int>(std::min<long long>(left, 1000)));
    if (p < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      fail(ErrorKind::Io, "poll on {}'s output: {}", argv[0], std::strerror(e));
    }
    for (int i = 0; i < n; ++i) {
      if (pf[i].revents == 0) continue;
      bool is_out = pf[i].fd == out.read.get();
      bool open = drain(pf[i].fd, is_out ? r.out : r.err, max_output, r.output_truncated);
      if (!open) (is_out ? out_open : err_open) = false;
    }
  }
  if (r.timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) fail(ErrorKind::Io, "waitpid for {}: {}", argv[0], std::strerror(errno));
  }
  if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
  }
  return r;
}

}  // namespace kern::base
