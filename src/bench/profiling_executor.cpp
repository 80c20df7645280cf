// kern bench's prefill profile: the forwarding executor with a hook before one program's first run.
#include "bench/profiling_executor.hpp"

#include <utility>

#include "kern/base/error.hpp"

namespace kern::bench {

ProfilingExecutor::ProfilingExecutor(driver::Executor& inner, std::string program, Hook hook)
    : inner_(inner), program_(std::move(program)), hook_(std::move(hook)) {
  if (program_.empty()) fail(ErrorKind::Api, "ProfilingExecutor: no program named");
  if (!hook_) fail(ErrorKind::Api, "ProfilingExecutor: no hook for program {}", program_);
}

void ProfilingExecutor::before_run(std::string_view program, const core::Vars& vars) {
  if (fired_ || program != program_) return;
  fired_ = true;  // once, even if the hook throws (the generation then fails with its error)
  hook_(program, vars);
}

void ProfilingExecutor::write_input(std::string_view buffer, std::span<const std::byte> bytes, bool prefix) {
  inner_.write_input(buffer, bytes, prefix);
}

void ProfilingExecutor::write_input_at(std::string_view buffer, std::uint64_t offset,
                                       std::span<const std::byte> bytes) {
  inner_.write_input_at(buffer, offset, bytes);
}

void ProfilingExecutor::run(std::string_view program, const core::Vars& vars) {
  before_run(program, vars);
  inner_.run(program, vars);
}

void ProfilingExecutor::run_and_read(std::string_view program, const core::Vars& vars, std::string_view buffer,
                                     std::span<std::byte> out, const std::function<void()>& before_wait) {
  before_run(program, vars);
  inner_.run_and_read(program, vars, buffer, out, before_wait);
}

std::vector<std::byte> ProfilingExecutor::read_output(std::string_view buffer) { return inner_.read_output(buffer); }

std::vector<std::byte> ProfilingExecutor::read_buffer(std::string_view name) { return inner_.read_buffer(name); }

std::vector<std::byte> ProfilingExecutor::read_output_prefix(std::string_view buffer, std::uint64_t bytes) {
  return inner_.read_output_prefix(buffer, bytes);
}

std::optional<driver::SeqLimits> ProfilingExecutor::seq_limits() const { return inner_.seq_limits(); }

pool::Granted<pool::Lease> ProfilingExecutor::lease(std::uint64_t tokens) { return inner_.lease(tokens); }

std::optional<pool::Denied> ProfilingExecutor::extend(pool::Lease& lease, std::uint64_t tokens) {
  return inner_.extend(lease, tokens);
}

void ProfilingExecutor::settle() { inner_.settle(); }

std::string one_call_prefill_program(const core::Protocol& protocol, std::uint64_t rows) {
  if (rows == 0)
    fail(ErrorKind::Api, "a prefill profile needs a prompt that leaves the prefill call at least one row (a one-token "
                         "prompt goes through the one-row step alone)");
  const std::optional<core::Forward> chunk = protocol.chunk();
  if (!chunk)
    fail(ErrorKind::Manifest, "no prefill program accepts one sequence of var rows: a prompt would go row by row");
  if (chunk->rows < rows)
    fail(ErrorKind::Api, "a prefill sends {} rows in one call, but program {} takes at most {}", rows, chunk->program,
         chunk->rows);
  return chunk->program;
}

}  // namespace kern::bench
