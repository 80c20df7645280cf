// The driver's Executor over a loaded kern::Runtime.
#pragma once

#include "kern/driver/driver.hpp"
#include "kern/runtime/runtime.hpp"

namespace kern::driver {

class RuntimeExecutor final : public Executor {
 public:
  explicit RuntimeExecutor(runtime::Runtime& runtime) : rt_(runtime) {}
  void write_input(std::string_view buffer, std::span<const std::byte> bytes, bool prefix) override {
    rt_.write_input(buffer, bytes, prefix);
  }
  void write_input_at(std::string_view buffer, std::uint64_t offset, std::span<const std::byte> bytes) override {
    rt_.write_input_at(buffer, offset, bytes);
  }
  void run(std::string_view program, const core::Vars& vars) override { rt_.run(program, vars); }
  void run_and_read(std::string_view program, const core::Vars& vars, std::string_view buffer, std::span<std::byte> out,
                    const std::function<void()>& before_wait) override {
    rt_.run_and_read(program, vars, buffer, 0, out, before_wait);
  }
  std::vector<std::byte> read_output(std::string_view buffer) override { return rt_.read_output(buffer); }
  std::vector<std::byte> read_buffer(std::string_view name) override { return rt_.read_buffer(name); }
  std::vector<std::byte> read_output_prefix(std::string_view buffer, std::uint64_t bytes) override {
    std::vector<std::byte> out(std::min<std::uint64_t>(bytes, rt_.buffer_bytes(buffer)));
    rt_.read_output(buffer, 0, out);
    return out;
  }
  std::optional<SeqLimits> seq_limits() const override {
    const pool::Pool* p = rt_.state_pool();
    if (!p) return std::nullopt;
    return limits_of(*p);
  }
  pool::Granted<pool::Lease> lease(std::uint64_t tokens) override { return rt_.lease(tokens); }
  std::optional<pool::Denied> extend(pool::Lease& lease, std::uint64_t tokens) override {
    return rt_.extend(lease, tokens);
  }
  void settle() override { rt_.settle(); }

 private:
  runtime::Runtime& rt_;
};

}  // namespace kern::driver
