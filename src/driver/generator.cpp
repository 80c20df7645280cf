// Greedy single-sequence generation over the serving protocol (see kern/driver.hpp).
#include <algorithm>
#include <cstring>
#include <limits>

#include "kern/driver/encode.hpp"
#include "kern/driver/driver.hpp"
#include "kern/base/error.hpp"
#include "kern/core/pages.hpp"
#include "kern/pool/manifest_layout.hpp"

namespace kern::driver {

using core::Fill;

std::string_view to_string(StopReason r) {
  switch (r) {
    case StopReason::Steps: return "steps";
    case StopReason::StopToken: return "stop token";
  }
  return "?";
}

std::uint64_t capacity_for(const core::Protocol& protocol, std::uint64_t tokens) {
  const std::uint64_t unit = core::page_unit(protocol.page_tables());
  return (tokens + unit - 1) / unit * unit;
}

SeqLimits limits_of(const pool::Pool& pool) { return {pool.unit(), pool.row_pages(), pool.total()}; }

std::optional<pool::Pool> sized_pool(const core::Manifest& manifest, const pool::Capacity& capacity) {
  const pool::PoolLayout layout = pool::layout_of(manifest);
  if ((layout.paged.empty() && layout.per_seq.empty()) || !capacity.tokens || *capacity.tokens == 0)
    return std::nullopt;
  std::uint64_t smallest = std::numeric_limits<std::uint64_t>::max();
  for (const auto& s : layout.paged) smallest = std::min(smallest, layout.unit() * s.bytes_per_token);
  for (const auto& s : layout.per_seq) smallest = std::min(smallest, s.bytes_per_seq);
  return pool::Pool::create(layout, pool::PoolConfig::from_capacity(layout, smallest, capacity)).first;
}

std::optional<pool::Denied> hold_tokens(Executor& exec, pool::Lease& lease, std::uint64_t tokens) {
  auto grow = [&]() -> std::optional<pool::Denied> {
    if (lease.valid()) return exec.extend(lease, tokens);
    pool::Granted<pool::Lease> got = exec.lease(tokens);
    if (!got) return got.denied();
    lease = std::move(got).value();
    return std::nullopt;
  };
  std::optional<pool::Denied> denied = grow();
  if (denied && denied->kind == pool::DeniedKind::Remapping) {
    exec.settle();
    denied = grow();
  }
  return denied;
}

void fail_positions(const SeqLimits& limits, bool page_tables, std::uint64_t tokens, const pool::Denied& denied) {
  if (denied.kind == pool::DeniedKind::ExceedsRow && page_tables)
    fail(ErrorKind::Api, "{} positions do not fit one page-table row ({} pages of {} tokens = {} positions)", tokens,
         limits.row_pages, limits.unit, limits.row_pages * limits.unit);
  fail(ErrorKind::Api, "{} positions do not fit the KV capacity of {} tokens ({} pages of {}); the pool said {}",
       tokens, limits.total_pages * limits.unit, limits.total_pages, limits.unit, denied.describe());
}

void check_error_fill(const core::Protocol& protocol, Executor& exec, const std::function<std::string()>& what) {
  const core::FillSlot* err = protocol.fill(Fill::Error);
  if (!err) return;
  const std::vector<std::int64_t> flags = decode_ints(err->dtype, exec.read_output(err->buffer), err->buffer);
  for (std::size_t i = 0; i < flags.size(); ++i)
    if (flags[i] != 0) fail(ErrorKind::Call, "{} raised error flag {} in {}[{}]", what(), flags[i], err->buffer, i);
}

std::optional<std::string> find_logits_output(const core::Protocol& protocol) {
  const core::Manifest& m = protocol.verified().manifest();
  std::optional<std::string> found;
  for (const auto& [name, b] : m.buffers) {
    if (b.kind != core::BufferKind::Output || b.fill || !is_float(b.dtype) || b.shape.size() < 2) continue;
    if (protocol.group_var().empty() || b.shape[0].var != protocol.group_var()) continue;
    if (found) return std::nullopt;  // ambiguous: the caller must name it
    found = name;
  }
  return found;
}

namespace {

// The largest value the buffer's domain admits (inclusive), when it is a plain bound or an
// index into a buffer of constant rows; nullopt otherwise (the runtime checks the rest).
std::optional<std::uint64_t> domain_max(const core::Manifest& m, const std::string& buffer) {
  auto it = m.buffers.find(buffer);
  if (it == m.buffers.end() || !it->second.domain) return std::nullopt;
  const core::Domain& d = *it->second.domain;
  if (d.max) {
    std::map<std::string, std::uint64_t> vmax;
    for (const auto& [n, v] : m.vars) vmax[n] = v.max;
    switch (d.max->kind) {
      case core::Bound::Kind::Int: return d.max->i < 0 ? 0 : static_cast<std::uint64_t>(d.max->i);
      case core::Bound::Kind::Float: return d.max->f < 0 ? 0 : static_cast<std::uint64_t>(d.max->f);
      case core::Bound::Kind::Expr:
        return core::eval(d.max->expr, core::lookup_in(vmax), "buffers." + buffer + ".domain.max");
    }
  }
  if (d.index_into) {
    auto target = m.buffers.find(d.index_into->target);
    if (target == m.buffers.end() || target->second.shape.empty() || target->second.shape[0].is_var())
      return std::nullopt;
    const std::uint64_t stride = d.index_into->stride ? d.index_into->stride : 1;
    const std::uint64_t rows = target->second.shape[0].value / stride;
    if (rows == 0) return 0;
    return rows - 1;
  }
  return std::nullopt;
}

// The program for one sequence × one row: among the programs with exactly one row per group
// (not span ones), the tightest groups bound; else whatever Protocol::forward(1, 1) picks.
// (Protocol::forward prefers the tightest groups bound, which is the rows-as-fed prefill
// program when it is declared with one group: a decode step must be a fixed-shape program.)
std::optional<core::Forward> step_forward(const core::Protocol& p) {
  std::optional<core::Forward> best;
  for (const core::Forward& f : p.forwards()) {
    if (!f.rows_var.empty() || f.rows != 1 || !f.span.empty() || f.groups < 1) continue;
    if (!best || f.groups < best->groups) best = f;
  }
  if (best) return best;
  return p.forward(1, 1);
}

const core::FillSlot& require_fill(const core::Protocol& p, Fill role) {
  const core::FillSlot* f = p.fill(role);
  if (!f)
    fail(ErrorKind::Manifest, "kern run needs an input with fill '{}'; the manifest has none", core::to_string(role));
  return *f;
}

}  // namespace

Generator::Generator(const core::Protocol& protocol, Executor& executor, GeneratorOptions options)
    : protocol_(protocol),
      exec_(executor),
      options_(std::move(options)),
      inputs_(protocol.verified().manifest()) {
  if (options_.steps == 0) fail(ErrorKind::Api, "steps must be at least 1");
  if (options_.chunk == 0) fail(ErrorKind::Api, "chunk must be at least 1 row");
  if (!protocol_.tray_var().empty())
    fail(ErrorKind::Manifest, "kern run drives one sequence; the manifest has a tray axis '{}'", protocol_.tray_var());
  if (!protocol_.line_tables().empty())
    fail(ErrorKind::Manifest, "kern run drives paged states only; per-sequence state table {} is not supported",
         protocol_.line_tables().front().buffer);
  require_fill(protocol_, Fill::Token);
  require_fill(protocol_, Fill::Position);
  require_fill(protocol_, Fill::SeqLen);
  const core::Manifest& m = protocol_.verified().manifest();
  paged_ = std::any_of(m.states.begin(), m.states.end(), [](const auto& s) { return s.second.bytes_per_token > 0; });
  if (paged_) {
    require_fill(protocol_, Fill::Slot);
    const std::optional<SeqLimits> limits = exec_.seq_limits();
    if (!limits)
      fail(ErrorKind::Api, "the manifest has paged states: a token capacity is needed (the executor has no state pool)");
    limits_ = *limits;
  }
  for (const core::PageTable& t : protocol_.page_tables()) {
    rows_.emplace_back(t.width);
    row_filled_.push_back(0);
  }

  std::optional<core::Forward> step = step_forward(protocol_);
  if (!step) fail(ErrorKind::Manifest, "no batch program accepts one sequence of one row (a decode step)");
  if (!step->emits_tokens)
    fail(ErrorKind::Manifest,
         "the one-row program does not write the 'tokens' fill: greedy tokens must come from the device");
  step_ = *step;
  chunk_ = protocol_.chunk();
  if (chunk_) {
    chunk_rows_ = std::min(options_.chunk, chunk_->rows);
  } else {
    chunk_rows_ = 1;  // no chunk program: the prompt goes through the one-row program row by row
  }

  if (!options_.logits_buffer.empty()) {
    auto it = m.buffers.find(options_.logits_buffer);
    if (it == m.buffers.end())
      fail(ErrorKind::Api, "logits buffer '{}' is not in the manifest", options_.logits_buffer);
    const core::Buffer& b = it->second;
    if (b.kind != core::BufferKind::Output)
      fail(ErrorKind::Api,
           "logits buffer '{}' is a {} buffer, not an output (generate the manifest with logits exposed)",
           options_.logits_buffer, core::to_string(b.kind));
    if (b.dtype != DType::BF16 && b.dtype != DType::F16 && b.dtype != DType::F32)
      fail(ErrorKind::Api, "logits buffer '{}' is {}, not bf16/f16/f32", options_.logits_buffer,
           manifest_name(b.dtype));
    if (b.shape.size() < 2 || b.shape[0].var != protocol_.group_var())
      fail(ErrorKind::Api, "logits buffer '{}' must be shaped [{}, vocab]", options_.logits_buffer,
           protocol_.group_var());
    logits_width_ = 1;
    for (std::size_t i = 1; i < b.shape.size(); ++i) {
      if (b.shape[i].is_var())
        fail(ErrorKind::Api, "logits buffer '{}': inner dims must be constant", options_.logits_buffer);
      logits_width_ *= b.shape[i].value;
    }
    logits_dtype_ = b.dtype;
  }

  check_sampling();
  first_from_chunk_ = chunk_ && chunk_->emits_tokens && chunk_->count.empty() && !options_.first_token_from_step &&
                      writes_what_a_step_is_read_for(*chunk_);

  // How far one sequence can go.
  max_positions_ = std::numeric_limits<std::uint64_t>::max();
  if (paged_) {
    max_positions_ = limits_.max_tokens();
    max_positions_why_ =
        limits_.row_pages < limits_.total_pages && !protocol_.page_tables().empty()
            ? fmt::format("one page-table row reaches {} pages of {} tokens", limits_.row_pages, limits_.unit)
            : fmt::format("the KV capacity is {} tokens", limits_.total_pages * limits_.unit);
  }
  if (auto pmax = domain_max(m, protocol_.fill(Fill::Position)->buffer); pmax && *pmax + 1 < max_positions_) {
    max_positions_ = *pmax + 1;
    max_positions_why_ = fmt::format("positions go up to {} (domain of the position input)", *pmax);
  }
  if (auto smax = domain_max(m, protocol_.fill(Fill::SeqLen)->buffer); smax && *smax < max_positions_) {
    max_positions_ = *smax;
    max_positions_why_ = fmt::format("sequence lengths go up to {} (domain of the seq_len input)", *smax);
  }
}

bool Generator::writes_what_a_step_is_read_for(const core::Forward& f) const {
  auto writes = [&](const std::string& buffer) { return std::ranges::binary_search(f.writes, buffer); };
  if (!options_.logits_buffer.empty() && !writes(options_.logits_buffer)) return false;
  if (options_.sampling.wants_logprobs() &&
      !(writes(protocol_.fill(Fill::Logprobs)->buffer) && writes(protocol_.fill(Fill::LogprobIds)->buffer)))
    return false;
  return true;
}

void Generator::check_sampling() const {
  const SamplingParams& s = options_.sampling;
  validate(s);
  const bool op = protocol_.fill(Fill::Sampling) && protocol_.fill(Fill::SamplingKeys);
  if (!op && !s.plain_greedy())
    fail(ErrorKind::Manifest,
         "the manifest has no sampling op (no 'sampling' and 'sampling_keys' fills): it generates greedily only; "
         "generate it again with kern gen");
  check_history(s, protocol_.fill(Fill::History), options_.steps - 1, "--steps (less one)");
  if (s.wants_logprobs() && !(protocol_.fill(Fill::Logprobs) && protocol_.fill(Fill::LogprobIds)))
    fail(ErrorKind::Manifest, "log-probs were asked for, and the manifest has no 'logprobs' and 'logprob_ids' outputs");
}

void Generator::write_sampling(std::uint64_t position, std::span<const std::int64_t> generated) {
  const core::FillSlot* row = protocol_.fill(Fill::Sampling);
  const core::FillSlot* keys = protocol_.fill(Fill::SamplingKeys);
  if (!row || !keys) return;
  const SamplingParams& s = options_.sampling;
  const std::array<float, core::kSamplingWidth> r = sampling_row(s);
  inputs_.write(exec_, row->buffer, encode_f32(r));
  // A greedy draw uses neither the counter nor the history: the keys then stay as first written.
  const bool uses_history = s.penalized();
  const std::uint64_t counter = s.greedy() ? 0 : position;
  const std::array<std::int64_t, core::kSamplingWidth> k =
      sampling_keys_row(s, counter, uses_history ? generated.size() : 0);
  inputs_.write(exec_, keys->buffer, encode_ints(keys->dtype, k, keys->buffer));
  const core::FillSlot* history = protocol_.fill(Fill::History);
  if (uses_history && history && !generated.empty())  // only the newest token differs from what is there
    inputs_.write(exec_, history->buffer, encode_ints(history->dtype, generated, history->buffer));
}

void Generator::write_fill(Fill role, const std::vector<std::int64_t>& values) {
  const core::FillSlot* f = protocol_.fill(role);
  if (!f) return;
  inputs_.write(exec_, f->buffer, encode_ints(f->dtype, values, f->buffer));
}

void Generator::write_pages(std::uint64_t end) {
  if (!paged_ || (lease_.valid() && lease_.capacity() >= end)) return;  // no new page: the rows are as they were
  // A lease at the first call, then one more page at a time.
  if (const std::optional<pool::Denied> denied = hold_tokens(exec_, lease_, end))
    fail_positions(limits_, !protocol_.page_tables().empty(), end, *denied);
  for (std::size_t t = 0; t < protocol_.page_tables().size(); ++t) {  // only the new entries are written
    const core::PageTable& table = protocol_.page_tables()[t];
    row_filled_[t] = lease_.extend_row(table.buffer, rows_[t], row_filled_[t]);
    const std::span<const std::int64_t> held(rows_[t].data(), row_filled_[t]);
    inputs_.write(exec_, table.buffer, encode_ints(table.dtype, held, table.buffer));
  }
}

void Generator::write_rows(std::uint64_t first, std::uint64_t rows) {
  const std::uint64_t end = first + rows;
  std::vector<std::int64_t>& values = values_;
  values.resize(rows);
  for (std::uint64_t r = 0; r < rows; ++r) values[r] = static_cast<std::int64_t>(first + r);
  write_fill(Fill::Position, values);
  if (protocol_.fill(Fill::Slot)) {
    if (paged_)  // else no paged state: a slot is its position (values already hold them)
      for (std::uint64_t r = 0; r < rows; ++r) values[r] = static_cast<std::int64_t>(lease_.slot(first + r));
    write_fill(Fill::Slot, values);
  }
  if (protocol_.fill(Fill::Valid)) {
    values.assign(rows, 1);
    write_fill(Fill::Valid, values);
  }
  write_fill(Fill::SeqLen, {static_cast<std::int64_t>(end)});
  write_fill(Fill::CuSeqlens, {0, static_cast<std::int64_t>(rows)});
}

std::int64_t Generator::call(const core::Forward& f, std::span<const std::int64_t> tokens, std::uint64_t first,
                             GenerationObserver* observer, bool emits, bool ahead) {
  const std::uint64_t rows = tokens.size();
  const std::uint64_t end = first + rows;
  write_pages(end);
  const core::FillSlot* token = protocol_.fill(Fill::Token);
  if (token->axis == protocol_.group_var() && rows > 1)
    fail(ErrorKind::Manifest, "the token input {} is per sequence; it cannot feed {} rows", token->buffer, rows);
  values_.assign(tokens.begin(), tokens.end());
  write_fill(Fill::Token, values_);
  write_rows(first, rows);  // nothing when the previous step wrote them ahead
  write_sampling(end - 1, generated_);

  const std::map<std::string, std::uint64_t> table = protocol_.vars(f, 1, rows, end);
  const core::Vars vars(table.begin(), table.end());
  const core::FillSlot* err = protocol_.fill(Fill::Error);
  if (!emits || err) {
    exec_.run(f.program, vars);
    check_error_fill(protocol_, exec_, [&] { return fmt::format("the call at positions [{}, {})", first, end); });
    if (!emits) return -1;
  }
  const core::FillSlot& out = *protocol_.fill(Fill::Tokens);
  const std::uint64_t per_group = std::max<std::uint64_t>(f.tokens_per_group, 1);
  const std::uint64_t index = std::min<std::uint64_t>(rows, per_group) - 1;  // group 0's last row
  // Only the values up to group 0's last row come back (8 bytes for a one-row decode step); with
  // no error flags to check first, the run and this read share one synchronization.
  std::vector<std::byte> raw;
  if (err) {
    raw = exec_.read_output_prefix(out.buffer, (index + 1) * dtype_size(out.dtype));
  } else {
    raw.resize((index + 1) * dtype_size(out.dtype));
    // While the program runs: the next one-row step's inputs but its token (position end).
    const std::function<void()> next_inputs = [&] {
      write_pages(end + 1);
      write_rows(end, 1);
    };
    exec_.run_and_read(f.program, vars, out.buffer, raw, ahead ? next_inputs : std::function<void()>());
  }
  const std::vector<std::int64_t> produced = decode_ints(out.dtype, raw, out.buffer);
  if (index >= produced.size())
    fail(ErrorKind::Api, "output {} holds {} values; expected at least {}", out.buffer, produced.size(), index + 1);
  const std::int64_t next = produced[index];
  if (next < 0) fail(ErrorKind::Call, "the device produced token {} at position {}", next, end - 1);
  if (options_.sampling.wants_logprobs()) {
    const core::FillSlot& lp = *protocol_.fill(Fill::Logprobs);
    const core::FillSlot& ids = *protocol_.fill(Fill::LogprobIds);
    const std::uint32_t k = options_.sampling.logprobs;
    logprobs_ = decode_logprobs(exec_.read_output_prefix(lp.buffer, (1 + k) * 4),
                                exec_.read_output_prefix(ids.buffer, k * 4), k);
  }
  if (observer && logits_width_) {
    const std::vector<std::byte> logit_bytes =
        exec_.read_output_prefix(options_.logits_buffer, logits_width_ * dtype_size(logits_dtype_));
    const std::vector<float> row = decode_floats(logits_dtype_, logit_bytes, logits_width_, options_.logits_buffer);
    observer->on_logits(end - 1, row);
  } else if (observer) {
    observer->on_logits(end - 1, {});
  }
  return next;
}

void Generator::check_fits(std::uint64_t n) const {
  if (n == 0) fail(ErrorKind::Api, "the prompt is empty: at least one token is needed");
  const std::uint64_t needed = n + options_.steps - 1;  // the last generated token is never fed back
  if (needed > max_positions_)
    fail(ErrorKind::Api, "a prompt of {} tokens and {} steps needs {} positions, but {}", n, options_.steps, needed,
         max_positions_why_);
}

GenerationResult Generator::generate(std::span<const std::int64_t> prompt, GenerationObserver* observer,
                                     std::span<const std::int64_t> forced) {
  check_fits(prompt.size());
  const std::uint64_t steps =
      forced.empty() ? options_.steps : std::min<std::uint64_t>(options_.steps, forced.size());
  const std::uint64_t n = prompt.size();
  lease_ = pool::Lease();  // the previous sequence's pages go back to the pool
  std::fill(row_filled_.begin(), row_filled_.end(), 0);
  inputs_.clear();
  generated_.clear();
  const core::FillSlot* history = protocol_.fill(Fill::History);
  if (options_.sampling.biased() && history) {  // the bias entries at the row's end, once a sequence
    const std::vector<std::byte> tail =
        encode_ints(history->dtype, logit_bias_tail(options_.sampling), history->buffer);
    exec_.write_input_at(history->buffer, history->width * dtype_size(history->dtype) - tail.size(), tail);
  }

  GenerationResult result;
  result.chunk_rows = chunk_rows_;
  const core::Forward& chunk = chunk_ ? *chunk_ : step_;
  // `ahead`: another step follows (unless a stop token comes), so its inputs but the token are
  // written while this one runs.
  std::int64_t token = -1;
  const std::uint64_t rows = chunked_rows(n);
  for (std::uint64_t i = 0; i < rows; i += chunk_rows_) {
    const std::uint64_t c = std::min(chunk_rows_, rows - i);
    const bool yields = first_from_chunk_ && i + c == n;  // the last chunk's row yields the first token
    if (yields && observer) observer->on_prefill_done(i);
    const std::int64_t t = call(chunk, prompt.subspan(i, c), i, observer, yields, yields && steps > 1);
    ++result.chunk_calls;
    if (yields) token = t;
  }
  if (!first_from_chunk_) {  // the prompt's last position through the one-row step
    if (observer) observer->on_prefill_done(n - 1);
    token = call(step_, prompt.subspan(n - 1, 1), n - 1, observer, true, steps > 1);
    ++result.step_calls;
  }

  auto is_stop = [&](std::int64_t t) {
    return std::find(options_.stop_tokens.begin(), options_.stop_tokens.end(), t) != options_.stop_tokens.end();
  };
  while (true) {
    if (!forced.empty()) token = forced[result.tokens.size()];
    result.tokens.push_back(token);
    generated_.push_back(token);
    if (observer && logprobs_) observer->on_logprobs(result.tokens.size() - 1, *logprobs_);
    if (observer) observer->on_token(result.tokens.size() - 1, token);
    if (is_stop(token)) {
      result.reason = StopReason::StopToken;
      break;
    }
    if (result.tokens.size() >= steps) {
      result.reason = StopReason::Steps;
      break;
    }
    const std::int64_t fed[1] = {token};
    token = call(step_, fed, n - 1 + result.tokens.size(), observer, true, result.tokens.size() + 1 < steps);
    ++result.step_calls;
  }
  return result;
}

}  // namespace kern::driver
