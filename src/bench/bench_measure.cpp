// kern bench measurements on one GPU: ceilings, decode at a context, prefill, child processes.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "bench/profiling_executor.hpp"
#include "kern/cuda/blaslt.hpp"
#include "kern/cuda/cuda.hpp"
#include "kern/cuda/event.hpp"
#include "kern/driver/driver.hpp"
#include "kern/bench/bench.hpp"
#include "kern/driver/runtime_executor.hpp"
#include "kern/base/error.hpp"
#include "kern/base/log.hpp"
#include "kern/core/protocol.hpp"
#include "kern/runtime/runtime.hpp"

namespace kern::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

template <typename Body>
double median_event_ms(const cuda::Stream& s, std::size_t reps, Body body) {
  std::vector<double> ms;
  cuda::TimingEvent start, end;
  body();  // warm-up
  for (std::size_t i = 0; i < reps; ++i) {
    start.record(s);
    body();
    end.record(s);
    ms.push_back(cuda::elapsed_ms(start, end));
  }
  return median(ms);
}

}  // namespace

Ceilings measure_ceilings(int gpu, std::uint64_t copy_bytes, std::uint64_t gemm_size, std::size_t reps,
                          std::uint64_t pinned_bytes) {
  cuda::Context ctx(gpu);
  cuda::Stream stream;
  double copy_ms = 0;
  {
    cuda::DeviceMemory a = cuda::DeviceMemory::allocate(copy_bytes, "bench copy source");
    cuda::DeviceMemory b = cuda::DeviceMemory::allocate(copy_bytes, "bench copy destination");
    cuda::memset_d8_async(a.ptr(), 0x3c, copy_bytes, stream);
    copy_ms = median_event_ms(stream, reps, [&] { cuda::copy_d2d_async(b.ptr(), a.ptr(), copy_bytes, stream); });
  }
  double gemm_ms = 0;
  {
    const std::uint64_t n = gemm_size, bytes = n * n * 2;
    cuda::DeviceMemory a = cuda::DeviceMemory::allocate(bytes, "bench GEMM A");
    cuda::DeviceMemory w = cuda::DeviceMemory::allocate(bytes, "bench GEMM W");
    cuda::DeviceMemory c = cuda::DeviceMemory::allocate(bytes, "bench GEMM C");
    cuda::memset_d8_async(a.ptr(), 0x3c, bytes, stream);  // bf16 0x3c3c ≈ 0.0115: finite products
    cuda::memset_d8_async(w.ptr(), 0x3c, bytes, stream);
    cuda::BlasLt blas;
    cuda::GemmShape shape;
    shape.m = shape.n = shape.k = n;
    shape.lda = shape.ldc = n;
    blas.prepare(shape);
    gemm_ms = median_event_ms(stream, reps, [&] { blas.gemm_bf16_tn(shape, a.ptr(), w.ptr(), c.ptr(), stream); });
  }
  // One large block of pinned host memory each way (what a park or a wake of a long sequence is).
  std::vector<double> h2d_ms, d2h_ms;
  if (pinned_bytes > 0) {
    cuda::PinnedMemory host = cuda::PinnedMemory::allocate(pinned_bytes, "bench pinned copy block");
    std::memset(host.data(), 0x3c, pinned_bytes);  // touched: every page resident before the first copy
    cuda::DeviceMemory dev = cuda::DeviceMemory::allocate(pinned_bytes, "bench pinned copy device side");
    cuda::TimingEvent start, end;
    for (int dir = 0; dir < 2; ++dir) {
      std::vector<double>& ms = dir == 0 ? h2d_ms : d2h_ms;
      for (std::size_t i = 0; i < reps + 1; ++i) {  // the first one warms up
        start.record(stream);
        if (dir == 0)
          cuda::copy_h2d_async(dev.ptr(), host.data(), pinned_bytes, stream);
        else
          cuda::copy_d2h_async(host.data(), dev.ptr(), pinned_bytes, stream);
        end.record(stream);
        const double t = cuda::elapsed_ms(start, end);
        if (i > 0) ms.push_back(t);
      }
    }
  }
  stream.synchronize();
  Ceilings c = make_ceilings(copy_bytes, copy_ms, gemm_size, gemm_size, gemm_size, gemm_ms);
  if (pinned_bytes > 0) {
    c.h2d = make_copy_ceiling(pinned_bytes, h2d_ms);
    c.d2h = make_copy_ceiling(pinned_bytes, d2h_ms);
  }
  return c;
}

// ---- DecodeBench ----

struct DecodeBench::State {
  runtime::Runtime& rt;
  driver::RuntimeExecutor exec;
  DecodeInputs inputs;
  std::uint64_t context = 0;
  std::int64_t token = 0;

  State(const core::Protocol& protocol, runtime::Runtime& runtime) : rt(runtime), exec(runtime), inputs(protocol, exec) {}
  core::Vars vars() const {
    const auto table = inputs.step_vars(context);
    return core::Vars(table.begin(), table.end());
  }
  void require_context() const {
    if (context == 0) fail(ErrorKind::Api, "kern bench: set a context first");
  }
};

DecodeBench::DecodeBench(const core::Protocol& protocol, runtime::Runtime& runtime)
    : s_(new State(protocol, runtime)) {}

DecodeBench::~DecodeBench() { delete s_; }

void DecodeBench::set_context(std::uint64_t context, std::int64_t token) {
  s_->inputs.start(context, token);
  s_->context = context;
  s_->token = token;
}

std::vector<double> DecodeBench::gpu_step_ms(std::size_t replays) {
  s_->require_context();
  return s_->rt.time_replays(s_->inputs.step_program(), s_->vars(), replays);
}

namespace {

// DecodeBench::e2e_ms's timed loop over `inputs` (see there), `wait` holding until the executor is idle.
// `check`, when set, runs after each timed step (untimed): the manifest's error flags.
std::vector<double> e2e_loop(DecodeInputs& inputs, const std::function<void()>& wait, std::uint64_t c,
                             std::int64_t token, std::size_t steps, const std::function<void()>& check = {}) {
  // The token the untimed set-up writes: one the device produced (in its domain), so that the
  // timed step, fed the caller's token, rewrites it as a decode step does (unless they are equal).
  inputs.start(c, token);
  const std::int64_t before = inputs.step(c - 1, token, false);
  std::vector<double> ms;
  for (std::size_t i = 0; i < steps; ++i) {
    // Untimed: the sequence holds c − 1 tokens (inputs at position c − 2), and what the previous
    // step would have written ahead while it ran (position c − 1's inputs but the token) has landed.
    inputs.start(c - 1, before);
    inputs.write_ahead(c - 1);
    wait();
    const Clock::time_point t0 = Clock::now();
    // The step at position c − 1 (the sequence holds c tokens): the token written, the program
    // run, the next step's inputs written ahead meanwhile, the token read back.
    inputs.step(c - 1, token, true);
    ms.push_back(ms_between(t0, Clock::now()));
    if (check) check();
  }
  return ms;
}

}  // namespace

std::vector<double> decode_e2e_ms(const core::Protocol& protocol, driver::Executor& executor,
                                  const std::function<void()>& wait, std::uint64_t context, std::int64_t token,
                                  std::size_t steps) {
  if (context < 2) fail(ErrorKind::Api, "kern bench: a decode e2e figure needs a context of at least 2");
  DecodeInputs inputs(protocol, executor);
  // A step whose error fill is non-zero (a peer barrier that timed out) computed a wrong token: no
  // figure from it (the generator fails such calls the same way).
  std::function<void()> check;
  if (protocol.fill(core::Fill::Error))
    check = [&] { driver::check_error_fill(protocol, executor, [] { return std::string("kern bench: a decode step"); }); };
  return e2e_loop(inputs, wait, context, token, steps, check);
}

std::vector<double> DecodeBench::e2e_ms(std::size_t steps) {
  s_->require_context();
  const std::uint64_t c = s_->context;
  if (c < 2) return loop_ms(steps);  // no position before the first one to start from
  const std::vector<double> ms = e2e_loop(s_->inputs, [this] { s_->rt.synchronize(); }, c, s_->token, steps);
  set_context(s_->context, s_->token);  // back to the context the caller set
  if (const char* d = std::getenv("KERN_BENCH_HOSTLOOP_DETAIL"); d && *d && std::string_view(d) != "0")
    print_hostloop_detail(ms, steps);
  return ms;
}

void DecodeBench::print_hostloop_detail(const std::vector<double>& fixed_ms, std::size_t steps) {
  const std::vector<double> loop = loop_ms(steps);
  const HostPhases h = phases(steps);
  const std::vector<double> step = gpu_step_ms(steps);
  const double gpu = 1e3 * median(step);
  const double fixed = 1e3 * median(fixed_ms);
  const double cont = 1e3 * median(loop);
  std::fprintf(stderr,
               "hostloop context %llu (%zu steps, median us): GPU step (replays) %.1f | e2e at this context %.1f "
               "(minus step %.1f) | continuous loop to context %llu %.1f (minus step %.1f) | phases: token write %.1f, "
               "launch %.1f, next inputs ahead %.1f, wait+read %.1f (minus step %.1f), total %.1f\n",
               static_cast<unsigned long long>(s_->context), steps, gpu, fixed, fixed - gpu,
               static_cast<unsigned long long>(s_->context + steps - 1), cont, cont - gpu, h.write_us, h.launch_us,
               h.ahead_us, h.wait_us, h.wait_us - gpu, h.total_us);
}

std::vector<double> DecodeBench::loop_ms(std::size_t steps) {
  s_->require_context();
  std::vector<double> ms;
  std::int64_t token = s_->token;
  std::uint64_t pos = s_->context - 1;
  Clock::time_point last = Clock::now();
  for (std::size_t i = 0; i < steps; ++i, ++pos) {
    token = s_->inputs.step(pos, token);
    const Clock::time_point now = Clock::now();
    ms.push_back(ms_between(last, now));
    last = now;
  }
  set_context(s_->context, s_->token);
  return ms;
}

HostPhases DecodeBench::phases(std::size_t steps) {
  s_->require_context();
  std::vector<double> write, launch, ahead, wait, total;
  std::int64_t token = s_->token;
  std::uint64_t pos = s_->context - 1;
  std::byte raw[8] = {};
  const std::string& out = s_->inputs.tokens_buffer();
  const std::size_t width = std::min<std::uint64_t>(sizeof raw, s_->rt.buffer_bytes(out));
  for (std::size_t i = 0; i < steps; ++i, ++pos) {
    const Clock::time_point t0 = Clock::now();
    s_->inputs.write(pos, token);  // the token (the rest was written ahead, but at the first step)
    const Clock::time_point t1 = Clock::now();
    const auto table = s_->inputs.step_vars(pos + 1);
    s_->rt.launch(s_->inputs.step_program(), core::Vars(table.begin(), table.end()));
    const Clock::time_point t2 = Clock::now();
    s_->inputs.write_ahead(pos + 1);  // while the program runs
    const Clock::time_point t3 = Clock::now();
    s_->rt.read_output(out, 0, std::span<std::byte>(raw, width));  // queued behind them; the one wait
    const Clock::time_point t4 = Clock::now();
    std::int64_t next = 0;
    std::memcpy(&next, raw, width);  // little-endian: an i32 token fits the low bytes
    if (width == 4) next = static_cast<std::int32_t>(next);
    if (next < 0) fail(ErrorKind::Call, "kern bench: the device produced token {} at position {}", next, pos);
    token = next;
    write.push_back(1e3 * ms_between(t0, t1));
    launch.push_back(1e3 * ms_between(t1, t2));
    ahead.push_back(1e3 * ms_between(t2, t3));
    wait.push_back(1e3 * ms_between(t3, t4));
    total.push_back(1e3 * ms_between(t0, t4));
  }
  set_context(s_->context, s_->token);
  HostPhases h;
  h.steps = steps;
  h.write_us = median(write);
  h.launch_us = median(launch);
  h.ahead_us = median(ahead);
  h.wait_us = median(wait);
  h.total_us = median(total);
  return h;
}

std::vector<std::pair<std::string, double>> DecodeBench::call_ms(std::size_t reps) {
  s_->require_context();
  std::vector<std::pair<std::string, double>> out;
  for (const runtime::CallTime& c : s_->rt.time_calls(s_->inputs.step_program(), s_->vars(), reps))
    out.emplace_back(c.op, c.ms);
  return out;
}

// ---- prefill ----

namespace {

// The bench's deterministic prompt of `tokens` ids below `vocab`.
std::vector<std::int64_t> bench_prompt(std::uint64_t tokens, std::uint64_t vocab) {
  if (vocab == 0) fail(ErrorKind::Api, "kern bench: a vocabulary of 0 tokens");
  std::vector<std::int64_t> prompt(tokens);
  for (std::uint64_t i = 0; i < tokens; ++i) prompt[i] = static_cast<std::int64_t>((i * 7919 + 13) % vocab);
  return prompt;
}

driver::GeneratorOptions first_token_only(std::uint64_t chunk, bool from_step) {
  driver::GeneratorOptions o;
  o.steps = 1;
  o.chunk = chunk;
  o.first_token_from_step = from_step;
  return o;
}

}  // namespace

std::vector<double> measure_prefill_ms(const core::Protocol& protocol, runtime::Runtime& runtime, std::uint64_t tokens,
                                       std::uint64_t chunk, std::uint64_t vocab, std::size_t reps,
                                       bool first_token_from_step) {
  driver::RuntimeExecutor exec(runtime);
  return measure_prefill_ms(protocol, exec, tokens, chunk, vocab, reps, first_token_from_step);
}

std::vector<double> measure_prefill_ms(const core::Protocol& protocol, driver::Executor& exec, std::uint64_t tokens,
                                       std::uint64_t chunk, std::uint64_t vocab, std::size_t reps,
                                       bool first_token_from_step) {
  driver::Generator gen(protocol, exec, first_token_only(chunk, first_token_from_step));
  const std::vector<std::int64_t> prompt = bench_prompt(tokens, vocab);
  std::vector<double> ms;
  for (std::size_t r = 0; r < reps + 1; ++r) {
    const Clock::time_point t0 = Clock::now();
    gen.generate(prompt);
    const double t = ms_between(t0, Clock::now());
    if (r > 0) ms.push_back(t);
  }
  return ms;
}

// Why running the prefill program more than once before the real call changes nothing: with chunk
// = tokens the generator sends the prompt's rows (all of them, or positions [0, tokens − 1) when a
// one-row step yields the first token) of a fresh sequence (its pages handed out again from the
// first) in one call of the prefill program, over inputs written before the hook fires and not
// written again until that call has run; time_calls enqueues the same calls over the same inputs.
// Every buffer that program reads is an input, a weight, the load program's RoPE table, or written
// earlier in the same run (embedding -> hidden first, then normed, qkv, attn, delta, gate_up, act,
// last, logits; src/models/qwen3/gen.cpp, forward_calls with prefill; its GEMMs are
// extern:cublaslt_bf16_tn, beta = 0, not the accumulating _acc form decode uses), and the KV cache
// it reads is only the slots of positions below the call's seq_len, each written by the same run's
// qk_norm_rope_cache before the attention reads it. So each run writes the same values to the same
// places, and the real call that follows reads nothing the profiling runs left. The first token of
// an unprofiled prefill is taken first and compared: a difference is logged.
PrefillCallTimes prefill_call_ms(const core::Protocol& protocol, runtime::Runtime& runtime, std::uint64_t tokens,
                                 std::uint64_t vocab, std::size_t reps, bool first_token_from_step) {
  if (reps == 0) fail(ErrorKind::Api, "kern bench: a prefill profile needs at least one repetition");
  const std::vector<std::int64_t> prompt = bench_prompt(tokens, vocab);
  const driver::GeneratorOptions options = first_token_only(tokens, first_token_from_step);
  driver::RuntimeExecutor exec(runtime);
  PrefillCallTimes out;
  std::string program;
  std::int64_t reference = 0;
  {  // its pages go back to the pool before the profiled generation leases them
    driver::Generator unprofiled(protocol, exec, options);
    out.rows = unprofiled.chunked_rows(tokens);
    program = one_call_prefill_program(protocol, out.rows);  // refused before anything runs
    reference = unprofiled.generate(prompt).tokens.at(0);
  }

  ProfilingExecutor profiling(exec, program, [&](std::string_view p, const core::Vars& vars) {
    for (const runtime::CallTime& c : runtime.time_calls(p, vars, reps)) out.ms.emplace_back(c.op, c.ms);
  });
  driver::Generator gen(protocol, profiling, options);
  const driver::GenerationResult got = gen.generate(prompt);
  if (!profiling.fired() || got.chunk_calls != 1)
    fail(ErrorKind::Api, "kern bench: the prefill of {} tokens made {} calls of program {}, not one", tokens,
         got.chunk_calls, program);
  if (got.tokens.at(0) != reference)
    log().warn("kern bench: the profiled prefill of {} tokens produced token {}, the unprofiled one {}", tokens,
               got.tokens.at(0), reference);
  return out;
}

// ---- child processes ----

namespace {

std::vector<char*> c_argv(const std::vector<std::string>& argv) {
  std::vector<char*> a;
  for (const std::string& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  return a;
}

// Waits for `pid` until `deadline`; kills it past the deadline. Exit status, −1 on timeout.
int wait_child(pid_t pid, Clock::time_point deadline) {
  while (true) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    if (r < 0) return 127;
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    ::usleep(2000);
  }
}

// The last non-empty line of a small text file ("" when there is none).
std::string last_line(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return "";
  std::string text;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) {
    text.append(buf, n);
    if (text.size() > (1u << 20)) text.erase(0, text.size() - 4096);
  }
  std::fclose(f);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  const std::size_t nl = text.rfind('\n');
  return nl == std::string::npos ? text : text.substr(nl + 1);
}

}  // namespace

std::optional<double> time_to_first_output(const std::vector<std::string>& argv, const std::string& stderr_path,
                                           int timeout_s, std::string& why) {
  int fds[2];
  if (::pipe(fds) != 0) fail(ErrorKind::Io, "kern bench: pipe failed: {}", std::strerror(errno));
  std::vector<char*> a = c_argv(argv);
  const Clock::time_point t0 = Clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) fail(ErrorKind::Io, "kern bench: fork failed: {}", std::strerror(errno));
  if (pid == 0) {
    ::dup2(fds[1], 1);
    const int err = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (err >= 0) ::dup2(err, 2);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execv(a[0], a.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  const Clock::time_point deadline = t0 + std::chrono::seconds(timeout_s);
  std::optional<double> first;
  char buf[4096];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) break;
    pollfd p{fds[0], POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left));
    if (r <= 0) {
      if (r < 0 && errno == EINTR) continue;
      break;
    }
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0 && !first) first = ms_between(t0, Clock::now());
    if (n <= 0) break;
  }
  ::close(fds[0]);
  const int status = wait_child(pid, deadline + std::chrono::seconds(5));
  if (status == -1) {
    why = fmt::format("{} did not finish within {} s", argv[0], timeout_s);
    return std::nullopt;
  }
  if (status != 0) {
    why = fmt::format("{} exited with status {}: {}", argv[0], status, last_line(stderr_path));
    return std::nullopt;
  }
  if (!first) why = fmt::format("{} wrote nothing to stdout", argv[0]);
  return first;
}

int run_child(const std::vector<std::string>& argv, int timeout_s) {
  std::vector<char*> a = c_argv(argv);
  const Clock::time_point t0 = Clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) fail(ErrorKind::Io, "kern bench: fork failed: {}", std::strerror(errno));
  if (pid == 0) {
    ::dup2(2, 1);
    ::execvp(a[0], a.data());
    ::_exit(127);
  }
  return wait_child(pid, t0 + std::chrono::seconds(timeout_s));
}

}  // namespace kern::bench
