// kern serve's scheduler: which sequences run in the next step, and how. Pure and deterministic
// (std::map / std::deque only, no clock, no randomness): the engine thread asks for a Plan,
// executes it (prefill chunks, then one decode call over the plan's rows), and commits the
// sampled tokens. The scheduler owns every sequence's pages (one pool::Lease each, through
// Pages) and the prefix index; docs/serve.md "The scheduler" gives the rules.
//
// A sequence's tokens are its prompt then what it generated. Its KV is `computed` positions long;
// while computed < tokens − 1 it is prefilling (chunks of the prompt, under the step's budget);
// then each step feeds tokens.back() at position tokens − 1 in one decode row and appends the
// token sampled there. A preempted sequence loses its pages and prefills tokens − 1 again when it
// is readmitted (first in line); what it already generated stays (it was streamed).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "kern/pool/denied.hpp"
#include "kern/pool/host.hpp"
#include "kern/pool/lease.hpp"
#include "kern/pool/prefix.hpp"
#include "kern/pool/store.hpp"

namespace kern::serve {

using SeqId = std::uint64_t;

// The state pool as the scheduler uses it (runtime::Runtime on the GPU, a pure pool::Pool in tests).
class Pages {
 public:
  virtual ~Pages() = default;
  virtual pool::Granted<pool::Lease> lease(std::uint64_t tokens) = 0;
  virtual std::optional<pool::Denied> extend(pool::Lease& lease, std::uint64_t tokens) = 0;
  virtual pool::Granted<pool::Checkpoint> checkpoint(pool::Lease& lease, std::uint64_t len) = 0;
  // A lease of `tokens` from the checkpoint's first `len` tokens.
  virtual pool::Granted<pool::Lease> lease_from(const pool::Checkpoint& cp, std::uint64_t len, std::uint64_t tokens) = 0;
  virtual pool::Granted<pool::Lease> fork(pool::Lease& parent, std::uint64_t len, std::uint64_t tokens) = 0;
  virtual void settle() = 0;  // after a Remapping denial
  virtual std::uint64_t unit() const = 0;         // tokens per page
  virtual std::uint64_t pages_total() const = 0;  // live pages
  virtual std::uint64_t pages_used() const = 0;   // held pages (leases, checkpoints)

  // The host tier (kern serve --host-gib), if there is one. park_if_room copies a cold prefix
  // entry's pages to the host (the checkpoint back when the host has no room); wake makes a lease of
  // `tokens` whose first `len` positions come back from a parked entry. Without a host tier the
  // scheduler drops cold entries and never calls these.
  virtual bool has_host() const { return false; }
  virtual std::variant<pool::Parked, pool::Checkpoint> park_if_room(pool::Checkpoint cp) { return cp; }
  virtual pool::Granted<pool::Lease> wake(const pool::Parked& parked, std::uint64_t len, std::uint64_t tokens);
  virtual std::uint64_t host_bytes_used() const { return 0; }
  virtual std::uint64_t host_bytes_total() const { return 0; }
};

struct SchedulerConfig {
  std::uint64_t max_running = 64;       // sequences per decode call (the decode program's groups bound)
  std::uint64_t max_waiting = 1024;     // queued sequences beyond this are refused at submit (429)
  std::uint64_t chunk = 512;            // rows per prefill call
  std::uint64_t prefill_budget = 2048;  // prompt rows per step, over all chunks
  std::uint64_t max_len = 0;            // positions one sequence may reach (prompt + generated); 0: no bound
  // Mixed steps (mixed_rows > 0): the step's last chunks, up to mixed_chunks of them and with the
  // decode rows at most mixed_rows rows, are marked to run in one forward with the decode rows
  // (Plan::mixed_from); the chunk at the boundary is cut in two where it does not fit whole.
  std::uint64_t mixed_rows = 0;
  std::uint64_t mixed_chunks = 0;
  bool prefix_cache = true;
};

struct SeqSpec {
  std::vector<pool::Token> prompt;  // at least one token
  std::uint64_t max_new = 16;       // tokens to generate at most (>= 1)
  std::vector<std::int64_t> stop_tokens;  // generation ends after emitting one (EOS unless ignore_eos)
  std::uint64_t n = 1;  // samples of this prompt: the first prefills, the others fork its pages
};

enum class End : std::uint8_t {
  Length,     // max_new tokens generated
  StopToken,  // a stop token was generated (it is the last token)
  Stopped,    // finish() from the engine (a stop string matched in the decoded text)
  Cancelled,  // cancel() (the client went away)
  TooLong,    // cannot fit the pool or max_len even alone: refused
};
std::string_view to_string(End e);

struct Chunk {
  SeqId seq = 0;
  std::uint64_t first = 0, count = 0;  // positions [first, first + count) of its tokens
};
struct Row {
  SeqId seq = 0;
  std::uint64_t position = 0;  // feeds tokens[position] (= tokens.back()), samples tokens[position + 1]
};
struct Plan {
  std::vector<Chunk> chunks;       // run first, in order
  // chunks[mixed_from ..] run in one forward with the decode rows (a mixed step), after the others;
  // chunks.size() when none do.
  std::size_t mixed_from = 0;
  std::vector<Row> decode;         // then one decode call, one group per row in this order
  std::vector<SeqId> preempted;    // lost their pages in this plan (they will prefill again)
  std::vector<std::pair<SeqId, End>> ended;  // ended while planning (TooLong)
  bool empty() const { return chunks.empty() && decode.empty(); }
};
struct Emitted {
  SeqId seq = 0;
  std::int64_t token = 0;
  std::optional<End> end;  // set when this token ends the sequence
};

struct SchedulerStats {
  std::uint64_t preemptions = 0;
  std::uint64_t prefix_queries = 0, prefix_hits = 0, cached_tokens = 0;
  std::uint64_t prefill_rows = 0, decode_rows = 0, steps = 0;
  std::uint64_t evictions = 0;     // prefix entries that gave their device pages back
  std::uint64_t parks = 0;         // ... to the host tier (the rest were dropped)
  std::uint64_t wakes = 0;         // prompts that started from a parked entry (their pages copied back)
  std::uint64_t parked_dropped = 0;  // parked entries dropped to make host room
};

class Scheduler {
 public:
  Scheduler(SchedulerConfig config, Pages& pages);
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues `spec.n` sequences (ids returned in order); nullopt when the waiting queue is full.
  // Error(Api) for an empty prompt, max_new 0 or n 0.
  std::optional<std::vector<SeqId>> submit(SeqSpec spec);
  // The next step. Sequences a Plan names stay valid until commit().
  Plan plan();
  // `sampled[i]` is what decode row i of `plan` produced. Returns one Emitted per row, in order.
  std::vector<Emitted> commit(const Plan& plan, std::span<const std::int64_t> sampled);
  // Ends a sequence now (its pages go back): a stop string (Stopped) or a vanished client (Cancelled).
  // Unknown or already ended ids are ignored. Returns whether it was live.
  bool end(SeqId seq, End why);

  // ---- what the engine reads about live sequences (Error(Api) for an unknown id)
  const pool::Lease& lease(SeqId seq) const;
  // Token slots of positions [first, first + count) in its lease (Lease::slots: they must be the
  // lease's to write).
  std::vector<std::uint64_t> slots(SeqId seq, std::uint64_t first, std::uint64_t count);
  std::span<const pool::Token> tokens(SeqId seq) const;
  std::uint64_t prompt_len(SeqId seq) const;
  std::uint64_t generated(SeqId seq) const;
  std::uint64_t cached(SeqId seq) const;  // prompt tokens served by the prefix index at (first) admission
  std::uint64_t sample_index(SeqId seq) const;  // which of its request's n samples it is (0-based)

  std::size_t running() const { return running_.size(); }
  std::size_t waiting() const { return waiting_.size(); }
  std::size_t live() const { return seqs_.size(); }
  std::size_t prefix_entries() const { return prefix_.size(); }
  // Distinct pages the running sequences' leases hold (shared ones once): what the load needs now.
  // Pages only the prefix index holds are not counted: an eviction gives them back.
  std::uint64_t active_pages() const;
  // Drops every prefix entry, parked ones too (their pages go back unless a lease shares them).
  void clear_prefix();
  const SchedulerStats& stats() const { return stats_; }
  const SchedulerConfig& config() const { return config_; }
  // Every running sequence holds a lease covering its computed positions; waiting ones hold none;
  // running <= max_running. Error(Api) naming the broken rule.
  void check_invariants() const;

 private:
  struct Seq {
    std::vector<pool::Token> tokens;
    std::uint64_t prompt_len = 0, max_new = 0, computed = 0, cached = 0, sample = 0;
    std::vector<std::int64_t> stop_tokens;
    pool::Lease lease;
    std::optional<SeqId> leader;  // a sample that forks the leader's prompt pages
    std::uint64_t admitted = 0;   // admission stamp (preemption takes the newest)
    bool running = false, indexed = false, ever_admitted = false;
  };
  Seq& at(SeqId id);
  const Seq& at(SeqId id) const;
  bool admit(SeqId id, Seq& s);                      // pages for a waiting sequence; false: not now
  std::optional<pool::Denied> hold(Seq& s, std::uint64_t tokens);  // lease grows; eviction on Busy
  bool evict_one();                                  // one prefix entry out; false when none
  void preempt(SeqId id);
  void finish(SeqId id);
  void index_prompt(Seq& s);
  void mark_mixed(Plan& p) const;

  SchedulerConfig config_;
  Pages& pages_;
  pool::Prefix<pool::Checkpoint, pool::Parked> prefix_;
  std::map<SeqId, Seq> seqs_;
  std::deque<SeqId> waiting_;
  std::vector<SeqId> running_;  // admission order
  SeqId next_id_ = 1;
  std::uint64_t stamp_ = 0;
  SchedulerStats stats_;
  mutable std::vector<std::uint32_t> page_pass_;  // active_pages(): the pass that last counted each page
  mutable std::uint32_t active_pass_ = 0;
};

// How the engine runs a plan's first `count` chunks as packed prefill calls: [begin, end) runs in
// plan order, each of at most `max_chunks` chunks of different sequences and at most `max_rows` rows
// (a chunk of more rows than that runs alone, for the runner to refuse). With max_chunks 1, one call
// per chunk.
std::vector<std::pair<std::size_t, std::size_t>> pack_chunks(std::span<const Chunk> chunks, std::size_t count,
                                                             std::uint64_t max_chunks, std::uint64_t max_rows);

}  // namespace kern::serve
