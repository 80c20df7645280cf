// kern bench: one sequence's decode inputs at a chosen context, without a prefill.
#include <algorithm>
#include <functional>
#include <map>

#include "kern/driver/encode.hpp"
#include "kern/driver/driver.hpp"
#include "kern/bench/bench.hpp"
#include "kern/driver/input_shadow.hpp"
#include "kern/base/error.hpp"
#include "kern/core/protocol.hpp"

namespace kern::bench {

using core::Fill;

struct DecodeInputs::State {
  const core::Protocol& protocol;
  driver::Executor& exec;
  core::Forward step;
  driver::InputShadow shadow;  // what each input starts with: only changed elements are written
  bool paged = false;          // the manifest has paged states: positions live in `lease`
  driver::SeqLimits limits;    // the pool's, when paged
  pool::Lease lease;           // the sequence's pages (invalid until the first write)
  std::vector<std::vector<std::int64_t>> rows;  // per page table: its row as the lease fills it
  std::vector<std::size_t> filled;              // per page table: entries of rows filled

  State(const core::Protocol& p, driver::Executor& e, core::Forward f)
      : protocol(p), exec(e), step(std::move(f)), shadow(p.verified().manifest()) {
    const core::Manifest& m = p.verified().manifest();
    paged = std::any_of(m.states.begin(), m.states.end(), [](const auto& s) { return s.second.bytes_per_token > 0; });
    if (paged) {
      const std::optional<driver::SeqLimits> l = exec.seq_limits();
      if (!l) fail(ErrorKind::Api, "kern bench: the manifest has paged states and the executor has no state pool");
      limits = *l;
    }
    for (const core::PageTable& t : p.page_tables()) rows.emplace_back(t.width);
    filled.assign(rows.size(), 0);
  }

  void reset() {
    lease = pool::Lease();  // the pages go back to the pool
    std::fill(filled.begin(), filled.end(), 0);
    shadow.clear();
  }
  // Holds pages for positions [0, tokens) and writes the page-table entries that changed.
  void hold(std::uint64_t tokens) {
    if (!paged || (lease.valid() && lease.capacity() >= tokens)) return;
    if (const std::optional<pool::Denied> denied = driver::hold_tokens(exec, lease, tokens))
      driver::fail_positions(limits, !protocol.page_tables().empty(), tokens, *denied);
    for (std::size_t t = 0; t < protocol.page_tables().size(); ++t) {
      const core::PageTable& pt = protocol.page_tables()[t];
      filled[t] = lease.extend_row(pt.buffer, rows[t], filled[t]);
      const std::span<const std::int64_t> held(rows[t].data(), filled[t]);
      shadow.write(exec, pt.buffer, driver::encode_ints(pt.dtype, held, pt.buffer));
    }
  }

  void fill(Fill role, const std::vector<std::int64_t>& values) {
    if (const core::FillSlot* f = protocol.fill(role))
      shadow.write(exec, f->buffer, driver::encode_ints(f->dtype, values, f->buffer));
  }
  // The inputs of one step at position pos (the sequence then holds pos + 1 tokens).
  void inputs(std::uint64_t pos, std::int64_t token) {
    fill(Fill::Token, {token});
    inputs_but_token(pos);
  }
  // The same but the token (what the previous step writes ahead, while it runs).
  void inputs_but_token(std::uint64_t pos) {
    hold(pos + 1);
    fill(Fill::Position, {static_cast<std::int64_t>(pos)});
    if (protocol.fill(Fill::Slot))  // without paged states a slot is its position
      fill(Fill::Slot, {static_cast<std::int64_t>(paged ? lease.slot(pos) : pos)});
    if (protocol.fill(Fill::Valid)) fill(Fill::Valid, {1});
    fill(Fill::SeqLen, {static_cast<std::int64_t>(pos + 1)});
    fill(Fill::CuSeqlens, {0, 1});
  }
};

namespace {

core::Forward decode_step(const core::Protocol& protocol) {
  std::optional<core::Forward> step;
  for (const core::Forward& f : protocol.forwards())
    if (f.rows_var.empty() && f.rows == 1 && f.span.empty() && f.emits_tokens && (!step || f.groups < step->groups))
      step = f;
  if (!step) fail(ErrorKind::Manifest, "kern bench: no one-row program writes the 'tokens' fill (a decode step)");
  for (Fill role : {Fill::Token, Fill::Position, Fill::SeqLen})
    if (!protocol.fill(role))
      fail(ErrorKind::Manifest, "kern bench: the manifest has no input with fill '{}'", core::to_string(role));
  if (!protocol.line_tables().empty() || !protocol.tray_var().empty())
    fail(ErrorKind::Manifest, "kern bench drives one sequence over paged states (no line tables, no tray axis)");
  return *step;
}

}  // namespace

DecodeInputs::DecodeInputs(const core::Protocol& protocol, driver::Executor& executor)
    : s_(new State(protocol, executor, decode_step(protocol))) {}


DecodeInputs::~DecodeInputs() { delete s_; }

const std::string& DecodeInputs::step_program() const { return s_->step.program; }

std::map<std::string, std::uint64_t> DecodeInputs::step_vars(std::uint64_t context) const {
  return s_->protocol.vars(s_->step, 1, 1, context);
}

void DecodeInputs::start(std::uint64_t context, std::int64_t token) {
  if (context == 0) fail(ErrorKind::Api, "kern bench: a decode context is at least 1 token");
  s_->reset();
  s_->inputs(context - 1, token);
}

void DecodeInputs::write(std::uint64_t pos, std::int64_t token) { s_->inputs(pos, token); }

const std::string& DecodeInputs::tokens_buffer() const { return s_->protocol.fill(Fill::Tokens)->buffer; }

void DecodeInputs::write_ahead(std::uint64_t pos) { s_->inputs_but_token(pos); }

std::int64_t DecodeInputs::step(std::uint64_t pos, std::int64_t token, bool ahead) {
  s_->inputs(pos, token);
  const auto table = step_vars(pos + 1);
  const core::FillSlot& out = *s_->protocol.fill(Fill::Tokens);
  std::byte raw[8] = {};
  if (dtype_size(out.dtype) > sizeof raw)
    fail(ErrorKind::Manifest, "kern bench: the tokens output {} is {}, not i32/i64", out.buffer,
         manifest_name(out.dtype));
  const std::span<std::byte> first(raw, dtype_size(out.dtype));               // group 0's token: 8 bytes for i64
  const std::function<void()> next = [&] { s_->inputs_but_token(pos + 1); };  // while the step runs
  s_->exec.run_and_read(s_->step.program, core::Vars(table.begin(), table.end()), out.buffer, first,
                        ahead ? next : std::function<void()>());
  const std::vector<std::int64_t> produced = driver::decode_ints(out.dtype, first, out.buffer);
  if (produced.empty() || produced[0] < 0)
    fail(ErrorKind::Call, "kern bench: the device produced no token at position {}", pos);
  return produced[0];
}

}  // namespace kern::bench
