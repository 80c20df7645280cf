// kern bench's prefill profile: an Executor that forwards everything to another one and, at the
// first run of one chosen program, first hands that run's vars to a hook (which times the
// program's calls through the runtime), so that a whole generation through kern run's Generator
// can be profiled at exactly the call a prefill makes, with the inputs it wrote in place.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "kern/driver/driver.hpp"
#include "kern/core/protocol.hpp"

namespace kern::bench {

class ProfilingExecutor final : public driver::Executor {
 public:
  using Hook = std::function<void(std::string_view program, const core::Vars& vars)>;
  // `hook` runs once, just before the first run (run or run_and_read) of `program` is forwarded.
  ProfilingExecutor(driver::Executor& inner, std::string program, Hook hook);

  void write_input(std::string_view buffer, std::span<const std::byte> bytes, bool prefix) override;
  void write_input_at(std::string_view buffer, std::uint64_t offset, std::span<const std::byte> bytes) override;
  void run(std::string_view program, const core::Vars& vars) override;
  void run_and_read(std::string_view program, const core::Vars& vars, std::string_view buffer, std::span<std::byte> out,
                    const std::function<void()>& before_wait) override;
  std::vector<std::byte> read_output(std::string_view buffer) override;
  std::vector<std::byte> read_buffer(std::string_view name) override;
  std::vector<std::byte> read_output_prefix(std::string_view buffer, std::uint64_t bytes) override;
  std::optional<driver::SeqLimits> seq_limits() const override;
  pool::Granted<pool::Lease> lease(std::uint64_t tokens) override;
  std::optional<pool::Denied> extend(pool::Lease& lease, std::uint64_t tokens) override;
  void settle() override;

  // Whether the hook has run.
  bool fired() const { return fired_; }

 private:
  void before_run(std::string_view program, const core::Vars& vars);

  driver::Executor& inner_;
  std::string program_;
  Hook hook_;
  bool fired_ = false;
};

// The program through which kern run's Generator, with chunk = the prompt's length, sends the
// prompt's `rows` chunked rows (driver::Generator::chunked_rows) in exactly one call. Error(Api) for
// no row or more rows than that program takes; Error(Manifest) when the protocol has no prefill
// (chunk) program.
std::string one_call_prefill_program(const core::Protocol& protocol, std::uint64_t rows);

}  // namespace kern::bench
