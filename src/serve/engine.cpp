#include "kern/serve/engine.hpp"

#include "kern/base/log.hpp"

#include <algorithm>
#include <chrono>

#include "kern/base/error.hpp"

namespace kern::serve {

Engine::Engine(EngineConfig config, Pages& pages, StepRunner& runner)
    : config_(config), pages_(pages), runner_(runner), scheduler_(config.scheduler, pages) {
  if (config_.scheduler.max_running > runner_.max_rows())
    fail(ErrorKind::Api, "serve: {} sequences per step, and the decode program takes {}", config_.scheduler.max_running,
         runner_.max_rows());
  if (config_.scheduler.chunk > runner_.max_chunk())
    fail(ErrorKind::Api, "serve: prefill chunks of {} rows, and the chunk program takes {}", config_.scheduler.chunk,
         runner_.max_chunk());
}

Engine::~Engine() { stop(); }

void Engine::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { loop(); });
}

void Engine::stop(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // The thread is gone: what is still open is told here.
  for (auto& [id, o] : open_requests_) o.sink->on_error(why);
  open_requests_.clear();
  std::deque<EngineRequest> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    left.swap(inbox_);
  }
  for (EngineRequest& r : left) r.sink->on_error(why);
  open_ = 0;
}

Engine::Submitted Engine::submit(EngineRequest request) {
  std::vector<EngineRequest> one;
  one.push_back(std::move(request));
  return submit_all(std::move(one));
}

Engine::Submitted Engine::submit_all(std::vector<EngineRequest> requests) {
  std::uint64_t samples = 0;
  for (EngineRequest& request : requests) {
    if (request.score_only) request.spec.max_new = 1;  // one decode row, its token told to nobody
    runner_.check(request.sampling, request.spec.max_new, request.prompt_logprobs);
    if (request.spec.prompt.empty()) fail(ErrorKind::Api, "the prompt is empty: at least one token is needed");
    samples += request.spec.n;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return Submitted::Stopping;
  std::uint64_t queued = metrics_.waiting;  // samples: the scheduler's waiting ones and the inbox's
  for (const EngineRequest& r : inbox_) queued += r.spec.n;
  if (queued + samples > config_.scheduler.max_waiting) return Submitted::QueueFull;
  for (EngineRequest& request : requests) {
    inbox_.push_back(std::move(request));
    ++open_;
  }
  cv_.notify_one();
  return Submitted::Queued;
}

std::uint64_t Engine::open_requests() const { return open_.load(); }

EngineMetrics Engine::metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  return metrics_;
}

void Engine::take_submissions() {
  std::deque<EngineRequest> in;
  {
    std::lock_guard<std::mutex> lock(mu_);
    in.swap(inbox_);
  }
  for (EngineRequest& r : in) {
    const std::uint64_t n = r.spec.n;
    const std::uint64_t prompt = r.spec.prompt.size();
    std::optional<std::vector<SeqId>> ids = scheduler_.submit(std::move(r.spec));
    if (!ids) {  // the queue filled between submit() and here
      r.sink->on_error("the waiting queue is full");
      --open_;
      continue;
    }
    const std::uint64_t id = next_request_++;
    Open o{r.sink, r.sampling, n, *ids};
    o.score_prompt = r.prompt_logprobs;
    o.score_only = r.score_only;
    for (std::uint64_t i = 0; i < ids->size(); ++i) seq_owner_[(*ids)[i]] = {id, i};
    open_requests_.emplace(id, std::move(o));
    prompt_tokens_ += prompt;
  }
}

void Engine::end_seq(SeqId seq, End why) {
  auto it = seq_owner_.find(seq);
  if (it == seq_owner_.end()) return;
  const auto [request, sample] = it->second;
  seq_owner_.erase(it);
  auto o = open_requests_.find(request);
  if (o == open_requests_.end()) return;
  auto c = cached_.find(seq);
  const std::uint64_t cached = c == cached_.end() ? 0 : c->second;
  if (c != cached_.end()) cached_.erase(c);
  const std::uint64_t index = sample;  // a structured binding cannot be captured (clang 14)
  if (!guarded(o->first, [&] { o->second.sink->on_end(index, why, cached); })) return;
  if (--o->second.samples == 0) {
    open_requests_.erase(o);
    --open_;
  }
}

bool Engine::guarded(std::uint64_t request, const std::function<void()>& f) {
  try {
    f();
    return true;
  } catch (const std::exception& e) {
    log().error("engine: request {} failed in its sink: {}", request, e.what());
    auto o = open_requests_.find(request);
    if (o == open_requests_.end()) return false;
    for (SeqId s : o->second.seqs) {
      // Between plan and commit the step's rows still name these sequences: they end after it.
      if (defer_ends_)
        deferred_ends_.emplace_back(s, End::Cancelled);
      else
        scheduler_.end(s, End::Cancelled);
      seq_owner_.erase(s);
      cached_.erase(s);
    }
    try {
      o->second.sink->on_error(e.what());
    } catch (const std::exception&) {
    }
    open_requests_.erase(o);
    --open_;
    return false;
  }
}

double Engine::score_prompt(SeqId seq, Open& o, std::uint64_t request) {
  using Clock = std::chrono::steady_clock;
  o.score_prompt = false;
  const std::uint64_t prompt = scheduler_.prompt_len(seq);
  const std::span<const pool::Token> tokens = scheduler_.tokens(seq);
  driver::SamplingParams p;  // greedy settings: the rows are forced, only the log-probs count
  p.logprobs = o.sampling.logprobs;
  p.chosen_logprob = true;
  const pool::Lease& lease = scheduler_.lease(seq);
  std::vector<driver::TokenLogprobs> out;
  out.reserve(prompt > 0 ? prompt - 1 : 0);
  const std::uint64_t bound = std::max<std::uint64_t>(runner_.max_rows(), 1);
  double spent = 0;
  for (std::uint64_t first = 0; first + 1 < prompt; first += bound) {
    const std::uint64_t n = std::min(bound, prompt - 1 - first);
    std::vector<DecodeCall> rows(n);
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::uint64_t pos = first + i;
      rows[i].lease = &lease;
      rows[i].token = tokens[pos];
      rows[i].position = pos;
      rows[i].sampling = &p;
      rows[i].forced = tokens[pos + 1];
    }
    const Clock::time_point t0 = Clock::now();
    std::vector<Sampled> got = runner_.decode(rows);
    spent += std::chrono::duration<double>(Clock::now() - t0).count();
    for (std::uint64_t i = 0; i < n; ++i) {
      if (got.at(i).token != rows[i].forced || !got[i].logprobs)
        fail(ErrorKind::Call, "scoring the prompt: position {} gave token {} without its log-probs (forced {})",
             rows[i].position, got[i].token, rows[i].forced);
      out.push_back(std::move(*got[i].logprobs));
    }
  }
  guarded(request, [&] { o.sink->on_prompt_logprobs(out); });
  return spent;
}

void Engine::deliver() {
  std::vector<Pending> now;
  now.swap(pending_);
  for (Pending& e : now) {
    auto owner = seq_owner_.find(e.seq);
    if (owner == seq_owner_.end()) continue;  // its request failed, or the sample stopped a step ago
    const auto [request, sample] = owner->second;
    Open& o = open_requests_.at(request);
    bool more = true;
    const std::uint64_t index = sample;  // a structured binding cannot be captured (clang 14)
    if (o.score_only) {                  // its one row's token goes nowhere; it ends at max_new 1
      if (e.end) end_seq(e.seq, End::Length);
      continue;
    }
    ++generation_tokens_;
    if (!guarded(request, [&] { more = o.sink->on_token(index, e.token, e.logprobs ? &*e.logprobs : nullptr); }))
      continue;  // the request failed: its sequences are gone
    if (e.end) {
      end_seq(e.seq, *e.end);
    } else if (!more) {
      // A stop string. Between a plan and its commit the step's rows still name the sequence: the
      // scheduler ends it after the commit (that row's token is told to nobody: the owner is gone).
      if (defer_ends_) {
        deferred_ends_.emplace_back(e.seq, End::Stopped);
        end_seq(e.seq, End::Stopped);
      } else if (scheduler_.end(e.seq, End::Stopped)) {
        end_seq(e.seq, End::Stopped);
      }
    }
  }
}

void Engine::step() {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  double prefill_s = 0, decode_s = 0;
  std::uint64_t prefill_calls = 0;
  // Clients that went away: their sequences end before anything is planned (after their tokens of
  // the last step, so that a sink hears on_end last).
  std::vector<std::uint64_t> gone;
  for (auto& [id, o] : open_requests_)
    if (o.sink->cancelled()) gone.push_back(id);
  if (!gone.empty()) deliver();
  for (std::uint64_t id : gone) {
    const std::vector<SeqId> seqs = open_requests_.at(id).seqs;
    for (SeqId s : seqs)
      if (scheduler_.end(s, End::Cancelled)) end_seq(s, End::Cancelled);
  }

  const Plan plan = scheduler_.plan();
  if (!plan.ended.empty()) deliver();
  for (const auto& [seq, why] : plan.ended) end_seq(seq, why);
  // A request whose sink fails from here to the commit keeps its rows in this step (they run, their
  // tokens go nowhere); its sequences end right after the commit.
  defer_ends_ = true;
  auto scheduled = [&](SeqId seq) {
    auto owner = seq_owner_.find(seq);
    if (owner == seq_owner_.end()) return;
    Open& o = open_requests_.at(owner->second.first);
    if (o.scheduled) return;
    o.scheduled = true;
    guarded(owner->second.first, [&] { o.sink->on_scheduled(); });
  };
  for (const Chunk& c : plan.chunks) scheduled(c.seq);
  for (const Row& r : plan.decode) scheduled(r.seq);
  // A request scoring its prompt: its first decode row needs the prompt's K/V in place before the
  // scoring rows run, so such a step runs its chunks and rows apart.
  auto scores = [&](const Row& r) {
    auto owner = seq_owner_.find(r.seq);
    if (owner == seq_owner_.end()) return false;
    auto o = open_requests_.find(owner->second.first);
    return o != open_requests_.end() && o->second.score_prompt;
  };
  // The plan's mixed part (its last chunks, cut by the scheduler to fit beside the decode rows) runs
  // with the decode rows in one forward, after the other chunks.
  const bool scoring = std::any_of(plan.decode.begin(), plan.decode.end(), scores);
  const bool mixed = plan.mixed_from < plan.chunks.size() && !scoring;
  const std::size_t alone = mixed ? plan.mixed_from : plan.chunks.size();
  // The last step's tokens go to their sinks while this step's decode call runs on the GPU, when the
  // step is that call alone; else now, before its first call (a prefill call would hold them back
  // by its whole time). Either way inside the plan-to-commit window: a sink that stops its sample
  // (a stop string) or fails ends its sequences after this step's commit, their rows' tokens told to nobody.
  const bool overlap = plan.chunks.empty() && !plan.decode.empty() && !scoring;
  if (!overlap) deliver();
  std::vector<std::vector<std::uint64_t>> chunk_slots;
  std::vector<ChunkCall> chunk_calls;
  for (const Chunk& c : plan.chunks) chunk_slots.push_back(scheduler_.slots(c.seq, c.first, c.count));
  for (std::size_t i = 0; i < plan.chunks.size(); ++i) {
    const Chunk& c = plan.chunks[i];
    chunk_calls.push_back(
        {&scheduler_.lease(c.seq), chunk_slots[i], scheduler_.tokens(c.seq).subspan(c.first, c.count), c.first});
  }
  // The chunks that run alone, in plan order, packed into as few prefill calls as the runner takes
  // (pack_chunks: at most prefill_chunks() chunks of different sequences and max_chunk() rows a call).
  for (const auto& [begin, end] : pack_chunks(plan.chunks, alone, runner_.prefill_chunks(), runner_.max_chunk())) {
    const Clock::time_point p0 = Clock::now();
    runner_.prefill(std::span<const ChunkCall>(chunk_calls).subspan(begin, end - begin));
    prefill_s += std::chrono::duration<double>(Clock::now() - p0).count();
    ++prefill_calls;
  }
  // Prompt log-probs, before a request's first decode row (its prompt's K/V are all in place then).
  for (const Row& r : plan.decode) {
    if (!scores(r)) continue;
    auto owner = seq_owner_.find(r.seq);
    auto o = open_requests_.find(owner->second.first);
    decode_s += score_prompt(r.seq, o->second, o->first);
  }
  double mixed_s = 0, overlap_s = 0;
  std::vector<Sampled> sampled;
  if (!plan.decode.empty()) {
    std::vector<DecodeCall> rows(plan.decode.size());
    std::vector<driver::SamplingParams> params(plan.decode.size());
    for (std::size_t i = 0; i < plan.decode.size(); ++i) {
      const Row& r = plan.decode[i];
      auto owner = seq_owner_.find(r.seq);
      if (owner != seq_owner_.end()) {  // else its request failed in this step: greedy, told to nobody
        params[i] = open_requests_.at(owner->second.first).sampling;
        params[i].seed += owner->second.second;  // each of n samples draws its own tokens
        cached_[r.seq] = scheduler_.cached(r.seq);
      }
      rows[i].lease = &scheduler_.lease(r.seq);
      rows[i].slot = scheduler_.slots(r.seq, r.position, 1).at(0);
      rows[i].token = scheduler_.tokens(r.seq)[r.position];
      rows[i].position = r.position;
      rows[i].sampling = &params[i];
      if (params[i].uses_history()) {
        const std::uint64_t prompt = scheduler_.prompt_len(r.seq);
        rows[i].seq = r.seq;
        if (r.position + 1 > prompt)
          rows[i].generated = scheduler_.tokens(r.seq).subspan(prompt, r.position + 1 - prompt);
      }
    }
    const Clock::time_point d0 = Clock::now();
    if (mixed) {
      sampled = runner_.mixed(std::span(chunk_calls).subspan(alone), rows);
    } else if (overlap) {
      // Nothing may throw out of the runner's wait window (deliver() keeps what a sink throws to itself).
      std::exception_ptr failed;
      sampled = runner_.decode(rows, [&] {
        const Clock::time_point w0 = Clock::now();
        try {
          deliver();
        } catch (...) {
          failed = std::current_exception();
        }
        overlap_s += std::chrono::duration<double>(Clock::now() - w0).count();
      });
      if (failed) std::rethrow_exception(failed);
    } else {
      sampled = runner_.decode(rows);
    }
    (mixed ? mixed_s : decode_s) += std::chrono::duration<double>(Clock::now() - d0).count();
  }
  std::vector<std::int64_t> tokens(sampled.size());
  for (std::size_t i = 0; i < sampled.size(); ++i) tokens[i] = sampled[i].token;
  const std::vector<Emitted> emitted = scheduler_.commit(plan, tokens);
  defer_ends_ = false;
  for (const auto& [s, why] : deferred_ends_) scheduler_.end(s, why);
  deferred_ends_.clear();
  // This step's tokens wait for the next step's decode call (or its start), unless nothing runs next.
  for (std::size_t i = 0; i < emitted.size(); ++i)
    pending_.push_back({emitted[i].seq, emitted[i].token, emitted[i].end, std::move(sampled[i].logprobs)});
  if (scheduler_.live() == 0) deliver();

  const SchedulerStats& st = scheduler_.stats();
  std::lock_guard<std::mutex> lock(mu_);
  metrics_.running = scheduler_.running();
  metrics_.waiting = scheduler_.waiting();
  metrics_.pages_used = pages_.pages_used();
  metrics_.pages_total = pages_.pages_total();
  metrics_.pages_active = scheduler_.active_pages();
  metrics_.kv_usage = metrics_.pages_total
                          ? static_cast<double>(metrics_.pages_active) / static_cast<double>(metrics_.pages_total)
                          : 0.0;
  metrics_.preemptions = st.preemptions;
  metrics_.host_parks = st.parks;
  metrics_.host_wakes = st.wakes;
  metrics_.host_dropped = st.parked_dropped;
  metrics_.host_bytes_used = pages_.host_bytes_used();
  metrics_.host_bytes_total = pages_.host_bytes_total();
  metrics_.prefix_queries = st.prefix_queries;
  metrics_.prefix_hits = st.prefix_hits;
  metrics_.cached_tokens = st.cached_tokens;
  metrics_.prompt_tokens = prompt_tokens_;
  metrics_.generation_tokens = generation_tokens_;
  metrics_.steps = st.steps;
  metrics_.prefill_rows = st.prefill_rows;
  metrics_.prefill_s += prefill_s;
  metrics_.prefill_calls += prefill_calls;
  metrics_.decode_s += decode_s;
  metrics_.mixed_s += mixed_s;
  metrics_.overlap_s += overlap_s;
  if (mixed) ++metrics_.mixed_calls;
  metrics_.host_s += std::chrono::duration<double>(Clock::now() - t0).count() - prefill_s - decode_s - mixed_s;
  if (!plan.decode.empty()) {
    ++metrics_.decode_calls;
    metrics_.decode_rows += plan.decode.size();
  }
}

void Engine::loop() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stopping_) return;
      if (inbox_.empty() && scheduler_.live() == 0) cv_.wait_for(lock, std::chrono::milliseconds(config_.idle_wait_ms));
      if (stopping_) return;
    }
    try {
      take_submissions();
      if (scheduler_.live() > 0) step();
    } catch (const std::exception& e) {
      log().error("engine: {}", e.what());
      defer_ends_ = false;
      for (const auto& [s, why] : deferred_ends_) scheduler_.end(s, why);
      deferred_ends_.clear();
      pending_.clear();
      for (auto& [id, o] : open_requests_) {
        for (SeqId s : o.seqs) scheduler_.end(s, End::Cancelled);
        o.sink->on_error(e.what());
      }
      open_requests_.clear();
      seq_owner_.clear();
      cached_.clear();
      open_ = 0;
    }
  }
}

}  // namespace kern::serve
