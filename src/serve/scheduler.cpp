#include "kern/serve/scheduler.hpp"

#include <algorithm>

#include "kern/base/error.hpp"

namespace kern::serve {

std::string_view to_string(End e) {
  switch (e) {
    case End::Length: return "length";
    case End::StopToken: return "stop_token";
    case End::Stopped: return "stop";
    case End::Cancelled: return "cancelled";
    case End::TooLong: return "too_long";
  }
  return "?";
}

Scheduler::Scheduler(SchedulerConfig config, Pages& pages) : config_(config), pages_(pages), prefix_(pages.unit()) {
  if (config_.max_running == 0) fail(ErrorKind::Api, "scheduler: max_running 0");
  if (config_.chunk == 0) fail(ErrorKind::Api, "scheduler: chunk 0");
  if (config_.prefill_budget == 0) fail(ErrorKind::Api, "scheduler: prefill budget 0");
}

Scheduler::Seq& Scheduler::at(SeqId id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) fail(ErrorKind::Api, "scheduler: no live sequence {}", id);
  return it->second;
}
const Scheduler::Seq& Scheduler::at(SeqId id) const {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) fail(ErrorKind::Api, "scheduler: no live sequence {}", id);
  return it->second;
}

std::optional<std::vector<SeqId>> Scheduler::submit(SeqSpec spec) {
  if (spec.prompt.empty()) fail(ErrorKind::Api, "scheduler: an empty prompt");
  if (spec.max_new == 0) fail(ErrorKind::Api, "scheduler: max_new 0");
  if (spec.n == 0) fail(ErrorKind::Api, "scheduler: n 0");
  if (waiting_.size() + spec.n > config_.max_waiting) return std::nullopt;
  std::vector<SeqId> ids;
  for (std::uint64_t i = 0; i < spec.n; ++i) {
    const SeqId id = next_id_++;
    Seq s;
    s.tokens = spec.prompt;
    s.prompt_len = spec.prompt.size();
    s.max_new = spec.max_new;
    s.stop_tokens = spec.stop_tokens;
    s.sample = i;
    if (i > 0) s.leader = ids.front();
    seqs_.emplace(id, std::move(s));
    waiting_.push_back(id);
    ids.push_back(id);
  }
  return ids;
}

pool::Granted<pool::Lease> Pages::wake(const pool::Parked&, std::uint64_t, std::uint64_t) {
  fail(ErrorKind::Api, "scheduler: wake without a host tier");
}

// The coldest resident prefix entry gives its device pages back: parked to the host tier when there
// is one (the index drops the coldest parked entries while the host has no room), else dropped.
bool Scheduler::evict_one() {
  if (prefix_.size() == 0) return false;
  std::optional<pool::Prefix<pool::Checkpoint, pool::Parked>::Evicted> e;
  if (pages_.has_host()) {
    e = prefix_.evict([&](pool::Checkpoint cp) {
      std::variant<pool::Parked, pool::Checkpoint> r = pages_.park_if_room(std::move(cp));
      if (r.index() == 0) ++stats_.parks;
      return r;
    });
  } else {
    e = prefix_.evict();
  }
  if (!e) return false;
  ++stats_.evictions;
  stats_.parked_dropped += e->parked_dropped;
  return true;
}

// Grows (or makes) nothing: answers a denial of `tokens` positions by settling (Remapping) or by
// evicting prefix entries (Busy) and asking again; the last denial when that does not help.
std::optional<pool::Denied> Scheduler::hold(Seq& s, std::uint64_t tokens) {
  while (true) {
    std::optional<pool::Denied> d = pages_.extend(s.lease, tokens);
    if (!d) return std::nullopt;
    if (d->kind == pool::DeniedKind::Remapping) {
      pages_.settle();
      continue;
    }
    if (d->kind == pool::DeniedKind::Busy && evict_one()) continue;
    return d;
  }
}

bool Scheduler::admit(SeqId id, Seq& s) {
  const std::uint64_t need = s.tokens.size();  // positions [0, tokens) once it decodes its first row
  if (config_.max_len && s.prompt_len + s.max_new - 1 > config_.max_len) return false;
  // A sample of n: fork the leader's prompt once the leader has prefilled it.
  // The leader ended (or the prompt is one token, with nothing to share): prefill on its own.
  if (s.leader && (!seqs_.count(*s.leader) || s.prompt_len < 2)) s.leader.reset();
  if (s.leader) {
    {
      Seq& l = seqs_.at(*s.leader);
      if (!l.running || l.computed < s.prompt_len - 1) return false;  // not yet: it waits (first in line)
      while (true) {
        auto g = pages_.fork(l.lease, s.prompt_len - 1, need);
        if (g.ok()) {
          s.lease = std::move(g).value();
          s.computed = s.prompt_len - 1;
          if (!s.ever_admitted) s.cached = l.cached;
          break;
        }
        if (g.denied().kind == pool::DeniedKind::Remapping) {
          pages_.settle();
          continue;
        }
        if (g.denied().kind == pool::DeniedKind::Busy && evict_one()) continue;
        if (g.denied().kind == pool::DeniedKind::Busy) return false;
        s.leader.reset();  // never fits as a fork: as an independent sequence below
        break;
      }
    }
  }
  if (!s.lease.valid()) {
    std::optional<pool::Prefix<pool::Checkpoint, pool::Parked>::Hit> hit;
    if (config_.prefix_cache) {
      if (!s.ever_admitted) ++stats_.prefix_queries;
      hit = prefix_.lookup(s.tokens);
    }
    while (true) {
      // A resident entry shares its pages; a parked one is copied back into fresh ones.
      pool::Granted<pool::Lease> g = !hit ? pages_.lease(need)
                                     : hit->tier() == pool::Tier::Resident
                                         ? pages_.lease_from(std::get<0>(hit->found), hit->len, need)
                                         : pages_.wake(std::get<1>(hit->found), hit->len, need);
      if (g.ok()) {
        s.lease = std::move(g).value();
        s.computed = hit ? hit->len : 0;
        if (hit && hit->tier() == pool::Tier::Parked) ++stats_.wakes;
        if (!s.ever_admitted && hit) {
          ++stats_.prefix_hits;
          stats_.cached_tokens += hit->len;
          s.cached = hit->len;
        }
        break;
      }
      if (g.denied().kind == pool::DeniedKind::Remapping) {
        pages_.settle();
        continue;
      }
      if (g.denied().kind == pool::DeniedKind::Busy && evict_one()) {
        if (hit) hit = prefix_.lookup(s.tokens);  // the entry may be gone now
        continue;
      }
      return false;
    }
  }
  s.running = true;
  if (!s.ever_admitted) s.admitted = ++stamp_;
  s.ever_admitted = true;
  running_.push_back(id);
  return true;
}

void Scheduler::preempt(SeqId id) {
  Seq& s = at(id);
  s.lease = pool::Lease();
  s.computed = 0;
  s.running = false;
  s.leader.reset();
  running_.erase(std::find(running_.begin(), running_.end(), id));
  waiting_.push_front(id);
  ++stats_.preemptions;
}

void Scheduler::finish(SeqId id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  if (it->second.running) {
    running_.erase(std::find(running_.begin(), running_.end(), id));
  } else {
    auto w = std::find(waiting_.begin(), waiting_.end(), id);
    if (w != waiting_.end()) waiting_.erase(w);
  }
  seqs_.erase(it);
}

bool Scheduler::end(SeqId id, End) {
  if (!seqs_.count(id)) return false;
  finish(id);
  return true;
}

void Scheduler::index_prompt(Seq& s) {
  s.indexed = true;
  if (!config_.prefix_cache) return;
  const std::uint64_t unit = pages_.unit();
  const std::uint64_t len = std::min(s.computed, s.prompt_len) / unit * unit;
  if (len == 0 || len <= s.cached) return;
  auto g = pages_.checkpoint(s.lease, len);
  if (!g.ok()) return;  // no room for it now: nothing is cached
  prefix_.insert(std::span<const pool::Token>(s.tokens).first(len), std::move(g).value());
}

Plan Scheduler::plan() {
  Plan p;
  ++stats_.steps;
  // The newest running sequence (by first admission) is the one that gives its pages back.
  auto newest = [&]() {
    SeqId best = running_.front();
    for (SeqId id : running_)
      if (seqs_.at(id).admitted > seqs_.at(best).admitted) best = id;
    return best;
  };

  // 1. Every decoding sequence gets the page its next row needs, oldest first; under pressure
  //    prefix entries go first, then the newest running sequence.
  std::vector<SeqId> order = running_;
  std::sort(order.begin(), order.end(), [&](SeqId a, SeqId b) { return seqs_.at(a).admitted < seqs_.at(b).admitted; });
  for (SeqId id : order) {
    auto it = seqs_.find(id);
    if (it == seqs_.end() || !it->second.running) continue;  // preempted meanwhile
    Seq& s = it->second;
    if (s.computed + 1 < s.tokens.size()) continue;  // still prefilling: its lease covers its prompt
    while (s.running) {
      const std::optional<pool::Denied> d = hold(s, s.tokens.size());
      if (!d) break;
      if (d->kind != pool::DeniedKind::Busy) {  // ExceedsRow / ExceedsPool: it can go no further
        p.ended.emplace_back(id, End::TooLong);
        finish(id);
        break;
      }
      const SeqId victim = newest();
      preempt(victim);
      p.preempted.push_back(victim);
    }
  }

  // 2. Admission, first in line first, while there is room in the batch and pages for it. Pages
  //    are kept for the running sequences' next pages (one each) unless nothing runs.
  while (!waiting_.empty() && running_.size() < config_.max_running) {
    const SeqId id = waiting_.front();
    Seq& s = seqs_.at(id);
    const bool never = config_.max_len && s.prompt_len + s.max_new - 1 > config_.max_len;
    if (never) {
      waiting_.pop_front();
      p.ended.emplace_back(id, End::TooLong);
      seqs_.erase(id);
      continue;
    }
    const std::uint64_t unit = pages_.unit();
    const std::uint64_t need_pages = (s.tokens.size() + unit - 1) / unit;
    while (!running_.empty() && pages_.pages_total() - pages_.pages_used() < need_pages + running_.size() &&
           evict_one()) {
    }
    if (!running_.empty() && pages_.pages_total() - pages_.pages_used() < need_pages + running_.size()) break;
    waiting_.pop_front();
    if (!admit(id, s)) {
      if (running_.empty() && !s.leader) {  // alone and still no pages: it never fits
        p.ended.emplace_back(id, End::TooLong);
        seqs_.erase(id);
        continue;
      }
      waiting_.push_front(id);
      break;
    }
  }

  // 3. Prefill chunks under the step's budget, oldest first.
  std::uint64_t budget = config_.prefill_budget;
  for (SeqId id : running_) {
    if (budget == 0) break;
    Seq& s = seqs_.at(id);
    while (budget > 0 && s.computed + 1 < s.tokens.size()) {
      const std::uint64_t n = std::min({config_.chunk, s.tokens.size() - 1 - s.computed, budget});
      p.chunks.push_back({id, s.computed, n});
      s.computed += n;
      budget -= n;
      stats_.prefill_rows += n;
    }
  }

  // 4. One decode row per sequence whose prompt is in, in admission order.
  for (SeqId id : running_) {
    const Seq& s = seqs_.at(id);
    if (s.computed + 1 == s.tokens.size()) p.decode.push_back({id, s.computed});
  }
  stats_.decode_rows += p.decode.size();
  mark_mixed(p);
  return p;
}

// 5. The mixed part: the last chunks that fit beside the decode rows, the one at the boundary cut in
//    two (its first rows run alone before, its last ones in the mixed call), so the chunks of one
//    sequence keep their order and a chunk that completes a prompt runs no later than the decode
//    row that reads it.
void Scheduler::mark_mixed(Plan& p) const {
  p.mixed_from = p.chunks.size();
  if (config_.mixed_rows == 0 || p.decode.empty() || p.chunks.empty() || p.decode.size() >= config_.mixed_rows) return;
  std::uint64_t room = config_.mixed_rows - p.decode.size();
  const std::uint64_t most = config_.mixed_chunks > 0 ? config_.mixed_chunks : UINT64_MAX;
  std::size_t i = p.chunks.size();
  for (std::uint64_t taken = 0; i > 0 && room > 0 && taken < most; ++taken) {
    Chunk& c = p.chunks[i - 1];
    if (c.count <= room) {
      room -= c.count;
      --i;
      continue;
    }
    const Chunk back{c.seq, c.first + c.count - room, room};
    c.count -= room;
    p.chunks.insert(p.chunks.begin() + static_cast<std::ptrdiff_t>(i), back);
    break;
  }
  p.mixed_from = i;
}

std::vector<Emitted> Scheduler::commit(const Plan& plan, std::span<const std::int64_t> sampled) {
  if (sampled.size() != plan.decode.size())
    fail(ErrorKind::Api, "scheduler: {} sampled tokens for {} decode rows", sampled.size(), plan.decode.size());
  std::vector<Emitted> out;
  out.reserve(sampled.size());
  std::vector<SeqId> done;
  for (std::size_t i = 0; i < plan.decode.size(); ++i) {
    const Row& r = plan.decode[i];
    auto it = seqs_.find(r.seq);
    if (it == seqs_.end() || !it->second.running || it->second.computed != r.position)
      fail(ErrorKind::Api, "scheduler: commit of a row the plan does not hold (sequence {})", r.seq);
    Seq& s = it->second;
    if (!s.indexed) index_prompt(s);
    s.tokens.push_back(static_cast<pool::Token>(sampled[i]));
    s.computed = r.position + 1;
    Emitted e{r.seq, sampled[i], std::nullopt};
    const std::uint64_t generated = s.tokens.size() - s.prompt_len;
    if (std::find(s.stop_tokens.begin(), s.stop_tokens.end(), sampled[i]) != s.stop_tokens.end()) {
      e.end = End::StopToken;
    } else if (generated >= s.max_new || (config_.max_len && s.tokens.size() >= config_.max_len)) {
      e.end = End::Length;
    }
    if (e.end) done.push_back(r.seq);
    out.push_back(e);
  }
  for (SeqId id : done) finish(id);
  return out;
}

const pool::Lease& Scheduler::lease(SeqId seq) const { return at(seq).lease; }
std::vector<std::uint64_t> Scheduler::slots(SeqId seq, std::uint64_t first, std::uint64_t count) {
  return at(seq).lease.slots(first, count);
}
std::span<const pool::Token> Scheduler::tokens(SeqId seq) const { return at(seq).tokens; }
std::uint64_t Scheduler::prompt_len(SeqId seq) const { return at(seq).prompt_len; }
std::uint64_t Scheduler::generated(SeqId seq) const {
  const Seq& s = at(seq);
  return s.tokens.size() - s.prompt_len;
}
std::uint64_t Scheduler::cached(SeqId seq) const { return at(seq).cached; }
std::uint64_t Scheduler::sample_index(SeqId seq) const { return at(seq).sample; }

// Once per step (the engine's metrics): one pass over the running leases' page ids, each page counted
// the first time this pass stamps it (no sort, no clearing between passes).
std::uint64_t Scheduler::active_pages() const {
  if (++active_pass_ == 0) {  // the stamps wrapped: start them over
    std::fill(page_pass_.begin(), page_pass_.end(), 0u);
    active_pass_ = 1;
  }
  std::uint64_t n = 0;
  for (SeqId id : running_)
    for (pool::PageId p : at(id).lease.page_ids()) {
      if (p >= page_pass_.size()) page_pass_.resize(static_cast<std::size_t>(p) + 1, 0u);
      if (page_pass_[p] != active_pass_) {
        page_pass_[p] = active_pass_;
        ++n;
      }
    }
  return n;
}

void Scheduler::clear_prefix() {
  while (prefix_.evict()) {  // resident copies dropped (an entry parked too stays, parked only)
  }
  while (prefix_.drop_coldest_parked()) {
  }
}

void Scheduler::check_invariants() const {
  if (running_.size() > config_.max_running)
    fail(ErrorKind::Api, "scheduler: {} running over the bound {}", running_.size(), config_.max_running);
  std::size_t running = 0;
  for (const auto& [id, s] : seqs_) {
    if (s.running) {
      ++running;
      if (!s.lease.valid()) fail(ErrorKind::Api, "scheduler: running sequence {} holds no lease", id);
      if (s.lease.capacity() < std::min<std::uint64_t>(s.computed, s.tokens.size()))
        fail(ErrorKind::Api, "scheduler: sequence {} computed {} beyond its lease's {}", id, s.computed,
             s.lease.capacity());
      if (std::find(running_.begin(), running_.end(), id) == running_.end())
        fail(ErrorKind::Api, "scheduler: running sequence {} is not in the batch list", id);
    } else {
      if (s.lease.valid()) fail(ErrorKind::Api, "scheduler: waiting sequence {} holds a lease", id);
      if (std::find(waiting_.begin(), waiting_.end(), id) == waiting_.end())
        fail(ErrorKind::Api, "scheduler: waiting sequence {} is not queued", id);
    }
  }
  if (running != running_.size() || running_.size() + waiting_.size() != seqs_.size())
    fail(ErrorKind::Api, "scheduler: {} running + {} waiting for {} live sequences", running_.size(), waiting_.size(),
         seqs_.size());
}

std::vector<std::pair<std::size_t, std::size_t>> pack_chunks(std::span<const Chunk> chunks, std::size_t count,
                                                             std::uint64_t max_chunks, std::uint64_t max_rows) {
  std::vector<std::pair<std::size_t, std::size_t>> calls;
  count = std::min(count, chunks.size());
  std::size_t begin = 0;
  std::uint64_t rows = 0;
  for (std::size_t i = 0; i < count; ++i) {
    bool fits = i > begin && i - begin < max_chunks && rows + chunks[i].count <= max_rows;
    for (std::size_t j = begin; fits && j < i; ++j) fits = chunks[j].seq != chunks[i].seq;
    if (i > begin && !fits) {
      calls.emplace_back(begin, i);
      begin = i;
      rows = 0;
    }
    rows += chunks[i].count;
  }
  if (count > begin) calls.emplace_back(begin, count);
  return calls;
}

}  // namespace kern::serve
