// ProtocolRunner: one scheduler step on a manifest's programs, through the serving protocol's
// fills only (no buffer or program named here). Inputs go through driver::InputShadow, so a
// decode step writes only what changed since the last one (positions, slots, lengths, and a
// page-table entry where a sequence crossed into a new page).
#include <algorithm>

#include "kern/driver/encode.hpp"
#include "kern/driver/input_shadow.hpp"
#include "kern/serve/step_runner.hpp"

namespace kern::serve {

using core::Fill;

struct ProtocolRunner::State {
  State(const core::Protocol& p, driver::Executor& e, pool::Lease l)
      : protocol(p), exec(e), inputs(p.verified().manifest()), pad(std::move(l)) {}
  const core::Protocol& protocol;
  driver::Executor& exec;
  driver::InputShadow inputs;
  pool::Lease pad;
  std::uint64_t pad_slot = 0;
  core::Forward step;                  // decode: groups x 1 row
  std::optional<core::Forward> chunk;  // prefill: 1 group x var rows
  std::optional<core::Forward> mixed;  // decode groups then chunk groups, var rows in all
  std::uint64_t max_rows = 1, chunk_rows = 1;
  bool sampling_op = false, logprobs = false;
  std::vector<std::int64_t> values;
  // The `history` fill, per group: which sequence's generated tokens row g holds and how many
  // (0 = none known). A row is rewritten from its start when another sequence takes the group.
  const core::FillSlot* history = nullptr;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> history_rows;
  // Per group, the sequence whose logit-bias entries the row's end holds (+ 1; 0 = none) and the slots
  // they take. Sequences move between groups from step to step, so a row's end may be another
  // sequence's generated tokens by the time its owner comes back: write_history forgets it then.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> bias_rows;

  // Writes the logit bias of sequence `seq` at the end of row g, unless it is there already.
  void write_bias(std::uint64_t g, std::uint64_t seq, const driver::SamplingParams& p) {
    if (bias_rows[g].first == seq + 1) return;
    const std::vector<std::byte> tail =
        driver::encode_ints(history->dtype, driver::logit_bias_tail(p), history->buffer);
    exec.write_input_at(history->buffer, (g + 1) * history->width * dtype_size(history->dtype) - tail.size(), tail);
    bias_rows[g] = {seq + 1, 2 * p.logit_bias.size()};
    if (history_rows[g].second > history->width - bias_rows[g].second) history_rows[g] = {0, 0};  // over tokens
  }

  // Brings row g of `history` to `generated` of sequence `seq` with the fewest bytes: the new tail,
  // or the whole row when the group held another sequence.
  void write_history(std::uint64_t g, std::uint64_t seq, std::span<const std::int32_t> generated) {
    auto& [held_seq, held] = history_rows[g];
    const std::uint64_t from = held_seq == seq && held <= generated.size() ? held : 0;
    if (from == generated.size()) return;
    if (generated.size() > history->width - bias_rows[g].second) bias_rows[g] = {0, 0};  // over a bias
    std::vector<std::int64_t> v(generated.begin() + static_cast<std::ptrdiff_t>(from), generated.end());
    const std::vector<std::byte> bytes = driver::encode_ints(history->dtype, v, history->buffer);
    const std::uint64_t elem = dtype_size(history->dtype);
    exec.write_input_at(history->buffer, (g * history->width + from) * elem, bytes);
    held_seq = seq;
    held = generated.size();
  }

  void write_ints(Fill role, std::span<const std::int64_t> v) {
    const core::FillSlot* f = protocol.fill(role);
    if (!f) return;
    inputs.write(exec, f->buffer, driver::encode_ints(f->dtype, v, f->buffer));
  }
  // Page-table rows, per table and group: the entries the device row is known to hold (its first
  // entries; what lies beyond them is never read: a kernel reads the entries below seq_len). A step
  // writes, per group, only the entries from the first that differs (usually none, or the one page a
  // sequence just began), not groups x width entries (164k for 64 groups of the 4B shape).
  std::vector<std::vector<std::vector<std::int64_t>>> held_rows;  // [table][group]
  std::vector<std::int64_t> row_scratch;

  void write_rows(std::span<const pool::Lease* const> leases) {
    const std::vector<core::PageTable>& tables = protocol.page_tables();
    if (held_rows.size() != tables.size()) held_rows.assign(tables.size(), {});
    for (std::size_t ti = 0; ti < tables.size(); ++ti) {
      const core::PageTable& t = tables[ti];
      std::vector<std::vector<std::int64_t>>& held = held_rows[ti];
      if (held.size() < leases.size()) held.resize(leases.size());
      row_scratch.resize(t.width);
      const std::uint64_t elem = dtype_size(t.dtype);
      for (std::size_t g = 0; g < leases.size(); ++g) {
        // Only the lease's own entries (no padding to the row's width: nothing past them is written).
        const std::size_t own = std::min<std::size_t>(t.width, leases[g]->capacity() / t.stride);
        const std::size_t n = leases[g]->extend_row(t.buffer, std::span(row_scratch).first(own), 0);
        std::vector<std::int64_t>& h = held[g];
        std::size_t from = 0;
        while (from < n && from < h.size() && h[from] == row_scratch[from]) ++from;
        if (from == n) continue;
        const std::span<const std::int64_t> tail(row_scratch.data() + from, n - from);
        exec.write_input_at(t.buffer, (g * t.width + from) * elem, driver::encode_ints(t.dtype, tail, t.buffer));
        h.assign(row_scratch.begin(), row_scratch.begin() + static_cast<std::ptrdiff_t>(n));
      }
    }
  }
  // The sampling fills of decode rows `rows` (groups beyond them greedy padding), position per group.
  void write_sampling(std::span<const DecodeCall> rows, std::uint64_t groups,
                      const std::vector<std::int64_t>& position) {
    if (sampling_op) {
      const core::FillSlot* row = protocol.fill(Fill::Sampling);
      const core::FillSlot* keys = protocol.fill(Fill::SamplingKeys);
      std::vector<float> r(groups * core::kSamplingWidth, 0.0f);
      std::vector<std::int64_t> k(groups * core::kSamplingWidth, 0);
      const driver::SamplingParams greedy;
      for (std::uint64_t g = 0; g < groups; ++g) {
        const driver::SamplingParams& p = g < rows.size() && rows[g].sampling ? *rows[g].sampling : greedy;
        const std::uint64_t counter = p.greedy() ? 0 : static_cast<std::uint64_t>(position[g]);
        std::uint64_t history_len = 0;
        if (p.uses_history() && g < rows.size()) {
          if (!history || p.history_slots(rows[g].generated.size()) > history->width)
            fail(ErrorKind::Api, "serve: {} generated tokens and {} logit_bias entries for a history of {}",
                 rows[g].generated.size(), p.logit_bias.size(), history ? history->width : 0);
          if (p.penalized()) {
            write_history(g, rows[g].seq, rows[g].generated);
            history_len = rows[g].generated.size();
          }
          if (p.biased()) write_bias(g, rows[g].seq, p);
        }
        const auto a = driver::sampling_row(p);
        const auto b = driver::sampling_keys_row(p, counter, history_len, g < rows.size() ? rows[g].forced : -1);
        std::copy(a.begin(), a.end(), r.begin() + static_cast<std::ptrdiff_t>(g * core::kSamplingWidth));
        std::copy(b.begin(), b.end(), k.begin() + static_cast<std::ptrdiff_t>(g * core::kSamplingWidth));
      }
      inputs.write(exec, row->buffer, driver::encode_f32(r));
      inputs.write(exec, keys->buffer, driver::encode_ints(keys->dtype, k, keys->buffer));
    }
  }

  // The decode rows' tokens (and log-probs where asked) from the raw `tokens` fill.
  std::vector<Sampled> results(std::span<const DecodeCall> rows, const std::vector<std::byte>& raw,
                               const std::vector<std::int64_t>& position, bool want_logprobs) {
    const core::FillSlot& out = *protocol.fill(Fill::Tokens);
    const std::vector<std::int64_t> produced = driver::decode_ints(out.dtype, raw, out.buffer);
    if (produced.size() < rows.size())
      fail(ErrorKind::Api, "serve: {} tokens for {} rows", produced.size(), rows.size());
    std::vector<Sampled> result(rows.size());
    for (std::size_t g = 0; g < rows.size(); ++g) {
      if (produced[g] < 0)
        fail(ErrorKind::Call, "the device produced token {} at position {}", produced[g], position[g]);
      result[g].token = produced[g];
    }
    if (want_logprobs) {
      const core::FillSlot& lp = *protocol.fill(Fill::Logprobs);
      const core::FillSlot& ids = *protocol.fill(Fill::LogprobIds);
      const std::uint64_t lw = lp.width, iw = ids.width;
      const std::vector<std::byte> lpb = exec.read_output_prefix(lp.buffer, rows.size() * lw * 4);
      const std::vector<std::byte> idb = exec.read_output_prefix(ids.buffer, rows.size() * iw * 4);
      for (std::size_t g = 0; g < rows.size(); ++g) {
        if (!rows[g].sampling || !rows[g].sampling->wants_logprobs()) continue;
        result[g].logprobs =
            driver::decode_logprobs(std::span(lpb).subspan(g * lw * 4, lw * 4),
                                    std::span(idb).subspan(g * iw * 4, iw * 4), rows[g].sampling->logprobs);
      }
    }
    return result;
  }

  void check_error(std::string_view what) {
    driver::check_error_fill(protocol, exec, [what] { return std::string(what); });
  }
};

ProtocolRunner::ProtocolRunner(const core::Protocol& protocol, driver::Executor& exec, pool::Lease pad,
                               std::uint64_t max_rows)
    : s_(std::make_unique<State>(protocol, exec, std::move(pad))) {
  if (!s_->pad.valid() || s_->pad.capacity() < 1) fail(ErrorKind::Api, "serve: the padding lease holds no position");
  s_->pad_slot = s_->pad.slot(0);
  for (Fill f : {Fill::Token, Fill::Position, Fill::SeqLen, Fill::Tokens})
    if (!protocol.fill(f)) fail(ErrorKind::Manifest, "serve: the manifest has no '{}' fill", core::to_string(f));
  if (!protocol.tray_var().empty() || !protocol.line_tables().empty())
    fail(ErrorKind::Manifest, "serve drives paged states only (no tray axis, no per-sequence state tables)");
  std::optional<core::Forward> step = protocol.forward(std::max<std::uint64_t>(max_rows, 1), 1);
  if (!step) fail(ErrorKind::Manifest, "serve: no batch program takes {} sequences of one row", max_rows);
  if (!step->emits_tokens) fail(ErrorKind::Manifest, "serve: the decode program does not write the 'tokens' fill");
  s_->step = *step;
  s_->max_rows = std::min<std::uint64_t>(max_rows, step->groups);
  s_->chunk = protocol.chunk();
  s_->mixed = protocol.mixed();
  // A mixed step's decode groups must be those of the decode program (the same sampling and history rows).
  if (s_->mixed && s_->mixed->decode_groups < s_->max_rows) s_->mixed.reset();
  s_->chunk_rows = s_->chunk ? s_->chunk->rows : 1;
  s_->sampling_op = protocol.fill(Fill::Sampling) && protocol.fill(Fill::SamplingKeys);
  s_->logprobs = protocol.fill(Fill::Logprobs) && protocol.fill(Fill::LogprobIds);
  s_->history = protocol.fill(Fill::History);
  if (s_->history) {
    s_->history_rows.assign(s_->step.groups, {0, 0});
    s_->bias_rows.assign(s_->step.groups, {0, 0});
  }
}

ProtocolRunner::~ProtocolRunner() = default;

std::uint64_t ProtocolRunner::max_rows() const { return s_->max_rows; }
std::uint64_t ProtocolRunner::max_chunk() const { return s_->chunk_rows; }

std::uint64_t ProtocolRunner::bucket(std::uint64_t rows) const {
  std::uint64_t b = 1;
  while (b < rows) b *= 2;
  return std::min(b, s_->step.groups);
}

void ProtocolRunner::check(const driver::SamplingParams& sampling, std::uint64_t max_new, bool prompt_logprobs) const {
  driver::validate(sampling);
  if (prompt_logprobs && !(s_->sampling_op && s_->logprobs))
    fail(ErrorKind::Api,
         "the prompt's log-probs need the sampling op and its 'logprobs' outputs, which the manifest lacks");
  if (!s_->sampling_op && !sampling.plain_greedy())
    fail(ErrorKind::Api, "this manifest generates greedily only (it has no sampling op): temperature 0, no log-probs");
  driver::check_history(sampling, s_->history, max_new, "max_tokens");
  if (sampling.wants_logprobs() && !s_->logprobs)
    fail(ErrorKind::Api, "log-probs were asked for, and the manifest has no 'logprobs' outputs");
}

std::uint64_t ProtocolRunner::prefill_chunks() const { return s_->chunk && s_->chunk->packed ? s_->chunk->groups : 1; }

// Groups: one per chunk, rows: each chunk's in order (one chunk unless the chunk program is packed).
void ProtocolRunner::prefill(std::span<const ChunkCall> chunks) {
  State& s = *s_;
  const std::uint64_t rows = prefill_call_rows(chunks, prefill_chunks(), s.chunk_rows, "serve (the chunk program)");
  std::uint64_t longest = 1;
  for (const ChunkCall& c : chunks) longest = std::max<std::uint64_t>(longest, c.first + c.tokens.size());
  // The var table first: it refuses a call outside the program's bounds before any input is written.
  const core::Forward& f = s.chunk ? *s.chunk : s.step;
  const std::map<std::string, std::uint64_t> table =
      s.chunk ? s.protocol.chunk_vars(f, chunks.size(), rows, longest) : s.protocol.vars(f, 1, rows, longest);
  std::vector<const pool::Lease*> leases;
  std::vector<std::int64_t> token, position, slot, len, cu{0};
  for (const ChunkCall& c : chunks) {
    leases.push_back(c.lease);
    for (std::size_t i = 0; i < c.tokens.size(); ++i) {
      token.push_back(c.tokens[i]);
      position.push_back(static_cast<std::int64_t>(c.first + i));
      slot.push_back(static_cast<std::int64_t>(c.slots[i]));
    }
    len.push_back(static_cast<std::int64_t>(c.first + c.tokens.size()));
    cu.push_back(cu.back() + static_cast<std::int64_t>(c.tokens.size()));
  }
  s.write_rows(leases);
  s.write_ints(Fill::Token, token);
  s.write_ints(Fill::Position, position);
  s.write_ints(Fill::Slot, slot);
  s.write_ints(Fill::Valid, std::vector<std::int64_t>(rows, 1));
  s.write_ints(Fill::SeqLen, len);
  s.write_ints(Fill::CuSeqlens, cu);
  s.exec.run(f.program, core::Vars(table.begin(), table.end()));
  s.check_error("a prefill call");
}

std::vector<std::uint64_t> ProtocolRunner::warm_up() {
  std::vector<std::uint64_t> buckets;
  for (std::uint64_t b = 1;; b *= 2) {
    const std::uint64_t groups = std::min(b, s_->max_rows);
    buckets.push_back(bucket(groups));
    std::vector<DecodeCall> rows(groups, DecodeCall{&s_->pad, s_->pad_slot, 0, 0, nullptr, 0, {}});
    decode(rows);
    if (groups == s_->max_rows) break;
  }
  return buckets;
}

std::vector<Sampled> ProtocolRunner::decode(std::span<const DecodeCall> rows,
                                           const std::function<void()>& while_running) {
  State& s = *s_;
  if (rows.empty()) {
    if (while_running) while_running();
    return {};
  }
  if (rows.size() > s.max_rows)
    fail(ErrorKind::Api, "serve: {} decode rows over the bound {}", rows.size(), s.max_rows);
  const std::uint64_t groups = bucket(rows.size());
  std::vector<const pool::Lease*> leases(groups, &s.pad);
  std::vector<std::int64_t> token(groups, 0), position(groups, 0), slot(groups, static_cast<std::int64_t>(s.pad_slot)),
      len(groups, 1), cu(groups + 1), valid(groups, 1);
  std::uint64_t longest = 1;
  bool want_logprobs = false;
  for (std::size_t g = 0; g < rows.size(); ++g) {
    const DecodeCall& r = rows[g];
    leases[g] = r.lease;
    token[g] = r.token;
    position[g] = static_cast<std::int64_t>(r.position);
    // A scored (forced) row's K/V go to the padding page (the sequence's own were written by its prefill).
    slot[g] = static_cast<std::int64_t>(r.forced >= 0 ? s.pad_slot : r.slot);
    len[g] = static_cast<std::int64_t>(r.position + 1);
    longest = std::max(longest, r.position + 1);
    want_logprobs = want_logprobs || (r.sampling && r.sampling->wants_logprobs());
  }
  for (std::uint64_t g = 0; g <= groups; ++g) cu[g] = static_cast<std::int64_t>(g);
  s.write_rows(leases);
  s.write_ints(Fill::Token, token);
  s.write_ints(Fill::Position, position);
  s.write_ints(Fill::Slot, slot);
  s.write_ints(Fill::Valid, valid);
  s.write_ints(Fill::SeqLen, len);
  s.write_ints(Fill::CuSeqlens, cu);
  s.write_sampling(rows, groups, position);
  const std::map<std::string, std::uint64_t> table = s.protocol.vars(s.step, groups, 1, longest);
  const core::Vars vars(table.begin(), table.end());
  const core::FillSlot& out = *s.protocol.fill(Fill::Tokens);
  std::vector<std::byte> raw(groups * dtype_size(out.dtype));
  if (s.protocol.fill(Fill::Error)) {  // run waits for the call (then the error fill is read): no overlap
    s.exec.run(s.step.program, vars);
    if (while_running) while_running();
    s.check_error("a decode step");
    raw = s.exec.read_output_prefix(out.buffer, raw.size());
  } else {
    s.exec.run_and_read(s.step.program, vars, out.buffer, raw, while_running);
  }
  return s.results(rows, raw, position, want_logprobs);
}

std::uint64_t ProtocolRunner::mixed_chunks() const {
  if (!s_->mixed) return 0;
  return s_->mixed->groups - std::min(s_->mixed->groups, s_->mixed->decode_groups);
}
std::uint64_t ProtocolRunner::mixed_rows() const { return s_->mixed ? s_->mixed->rows : 0; }

// Groups: the decode rows (one each, unpadded: the program runs eagerly), then the chunks; rows: the
// decode rows' then each chunk's. Tokens come back for the decode rows only.
std::vector<Sampled> ProtocolRunner::mixed(std::span<const ChunkCall> chunks, std::span<const DecodeCall> rows) {
  State& s = *s_;
  if (!s.mixed) fail(ErrorKind::Api, "serve: the manifest has no mixed program");
  const std::uint64_t d = rows.size(), c = chunks.size();
  // Decode rows take the decode program's groups (their sampling and history rows).
  if (d > s.max_rows) fail(ErrorKind::Api, "serve: {} decode rows over the bound {}", d, s.max_rows);
  std::uint64_t total = d, longest = 1;
  for (const ChunkCall& ch : chunks) {
    if (ch.tokens.empty() || ch.slots.size() != ch.tokens.size())
      fail(ErrorKind::Api, "serve: a mixed step's chunk of {} rows ({} slots)", ch.tokens.size(), ch.slots.size());
    total += ch.tokens.size();
    longest = std::max<std::uint64_t>(longest, ch.first + ch.tokens.size());
  }
  for (const DecodeCall& r : rows) longest = std::max(longest, r.position + 1);
  // The var table first: it refuses a call outside the program's bounds before any input is written.
  const std::map<std::string, std::uint64_t> table = s.protocol.mixed_vars(*s.mixed, d, c, total, longest);
  std::vector<const pool::Lease*> leases;
  std::vector<std::int64_t> token, position, slot, len, cu{0}, decode_position(d);
  bool want_logprobs = false;
  for (std::size_t g = 0; g < d; ++g) {
    const DecodeCall& r = rows[g];
    leases.push_back(r.lease);
    token.push_back(r.token);
    position.push_back(static_cast<std::int64_t>(r.position));
    decode_position[g] = position.back();
    slot.push_back(static_cast<std::int64_t>(r.forced >= 0 ? s.pad_slot : r.slot));
    len.push_back(static_cast<std::int64_t>(r.position + 1));
    cu.push_back(cu.back() + 1);
    want_logprobs = want_logprobs || (r.sampling && r.sampling->wants_logprobs());
  }
  for (const ChunkCall& ch : chunks) {
    leases.push_back(ch.lease);
    for (std::size_t i = 0; i < ch.tokens.size(); ++i) {
      token.push_back(ch.tokens[i]);
      position.push_back(static_cast<std::int64_t>(ch.first + i));
      slot.push_back(static_cast<std::int64_t>(ch.slots[i]));
    }
    len.push_back(static_cast<std::int64_t>(ch.first + ch.tokens.size()));
    cu.push_back(cu.back() + static_cast<std::int64_t>(ch.tokens.size()));
  }
  s.write_rows(leases);
  s.write_ints(Fill::Token, token);
  s.write_ints(Fill::Position, position);
  s.write_ints(Fill::Slot, slot);
  s.write_ints(Fill::Valid, std::vector<std::int64_t>(total, 1));
  s.write_ints(Fill::SeqLen, len);
  s.write_ints(Fill::CuSeqlens, cu);
  s.write_sampling(rows, d, decode_position);
  const core::Vars vars(table.begin(), table.end());
  const core::FillSlot& out = *s.protocol.fill(Fill::Tokens);
  s.exec.run(s.mixed->program, vars);
  s.check_error("a mixed step");
  const std::vector<std::byte> raw = s.exec.read_output_prefix(out.buffer, d * dtype_size(out.dtype));
  return s.results(rows, raw, decode_position, want_logprobs);
}

std::uint64_t prefill_call_rows(std::span<const ChunkCall> chunks, std::uint64_t max_chunks, std::uint64_t max_rows,
                                std::string_view who) {
  if (chunks.empty() || chunks.size() > max_chunks)
    fail(ErrorKind::Api, "{}: a prefill call of {} chunks (it takes 1 to {})", who, chunks.size(), max_chunks);
  std::uint64_t rows = 0;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const ChunkCall& c = chunks[i];
    if (c.tokens.empty() || c.slots.size() != c.tokens.size())
      fail(ErrorKind::Api, "{}: a prefill chunk of {} rows ({} slots)", who, c.tokens.size(), c.slots.size());
    for (std::size_t j = 0; j < i; ++j)
      if (chunks[j].lease == c.lease) fail(ErrorKind::Api, "{}: two chunks of one sequence in a prefill call", who);
    rows += c.tokens.size();
  }
  if (rows > max_rows) fail(ErrorKind::Api, "{}: a prefill call of {} rows (it takes {})", who, rows, max_rows);
  return rows;
}

std::vector<Sampled> StepRunner::mixed(std::span<const ChunkCall>, std::span<const DecodeCall>) {
  fail(ErrorKind::Api, "serve: this model runs no mixed steps");
}

}  // namespace kern::serve
