// kern bench, the state pool's host tier (issue 16): park / wake GB/s, the host cost of issuing
// them, and the decode step while one runs on the transfer stream.
#include <algorithm>
#include <chrono>
#include <utility>
#include <variant>

#include "kern/base/error.hpp"
#include "kern/bench/bench.hpp"
#include "kern/core/protocol.hpp"
#include "kern/pool/host.hpp"
#include "kern/pool/pool.hpp"
#include "kern/runtime/runtime.hpp"

namespace kern::bench {
namespace {

using Clock = std::chrono::steady_clock;

double us_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

template <typename T>
T take_granted(pool::Granted<T> g, const std::string& what) {
  if (!g.ok()) fail(ErrorKind::Api, "kern bench: {} denied: {}", what, g.denied().describe());
  return std::move(g).value();
}

struct Shape {
  std::uint64_t unit = 0, row_pages = 0, page_bytes = 0;
};

// Checkpoints of `pages` whole pages, one page-table row each at most, made zero-copy (retire) from
// fresh leases whose positions count as written.
std::vector<pool::Checkpoint> make_stores(runtime::Runtime& rt, const Shape& s, std::uint64_t pages) {
  std::vector<pool::Checkpoint> out;
  for (std::uint64_t tokens : store_tokens(pages, s.unit, s.row_pages)) {
    pool::Lease l = take_granted(rt.lease(tokens), fmt::format("lease({}) for a store to park", tokens));
    l.advance(tokens);
    out.push_back(rt.retire(std::move(l), tokens));
  }
  return out;
}

struct Issued {
  Clock::time_point start, issued;
};

// room + park of every store, on the transfer stream; the stream drained first.
std::vector<pool::Parked> issue_park(runtime::Runtime& rt, std::vector<pool::Checkpoint> stores, Issued& t) {
  std::vector<pool::Parked> parked;
  parked.reserve(stores.size());
  rt.synchronize();
  t.start = Clock::now();
  for (pool::Checkpoint& cp : stores) {
    std::variant<pool::Room, pool::Checkpoint> r = rt.room(std::move(cp));
    if (!std::holds_alternative<pool::Room>(r))
      fail(ErrorKind::Api, "kern bench: the host tier has no room for a store of {} tokens",
           std::get<pool::Checkpoint>(r).tokens());
    parked.push_back(rt.park(std::get<pool::Room>(std::move(r))));
  }
  t.issued = Clock::now();
  return parked;
}

// A wake of every parked store into a lease one token longer, on the transfer stream.
std::vector<runtime::Waking> issue_wake(runtime::Runtime& rt, const std::vector<pool::Parked>& parked, Issued& t) {
  std::vector<runtime::Waking> out;
  out.reserve(parked.size());
  rt.synchronize();
  t.start = Clock::now();
  for (const pool::Parked& p : parked)
    out.push_back(take_granted(rt.wake(p, p.tokens(), p.tokens() + 1), fmt::format("wake of {} tokens", p.tokens())));
  t.issued = Clock::now();
  return out;
}

// Every woken lease handed out (after wait_transfers) and dropped.
void awake_all(runtime::Runtime& rt, std::vector<runtime::Waking>& w) {
  for (runtime::Waking& x : w) {
    std::variant<pool::Lease, runtime::Waking> v = rt.awake(std::move(x));
    if (!std::holds_alternative<pool::Lease>(v))
      fail(ErrorKind::Api, "kern bench: a wake had not landed after wait_transfers()");
  }
  w.clear();
}

}  // namespace

void measure_host_tier(const core::Protocol& protocol, runtime::Runtime& rt, const HostTierPlan& plan, double h2d_gbps, double d2h_gbps, PoolFigures& out) {
  const pool::Pool* pp = rt.state_pool();
  if (!pp) fail(ErrorKind::Api, "kern bench: the manifest has no pooled state");
  const pool::Pool& p = *pp;
  Shape s;
  s.unit = p.unit();
  s.row_pages = p.max_seq_tokens() / p.unit();
  for (const pool::ArenaInfo& a : p.arenas())
    if (a.paged) s.page_bytes += a.object_bytes;
  if (s.page_bytes == 0 || s.row_pages == 0) fail(ErrorKind::Api, "kern bench: the pool has no pages to park");
  const std::size_t reps = std::max<std::size_t>(plan.reps, 1);

  std::uint64_t host_pages = pages_for_bytes(plan.overlap_bytes, s.page_bytes);
  host_pages = std::max(host_pages, plan.issue_pages);
  for (std::uint64_t b : plan.park_bytes) host_pages = std::max(host_pages, pages_for_bytes(b, s.page_bytes));
  if (!rt.host_tier()) rt.reserve_host(host_pages, 0);  // pages only: a store here holds no slot
  out.host_note = fmt::format("pinned block for {} pages ({:.3f} GiB)", host_pages,
                              static_cast<double>(host_pages * s.page_bytes) / 1073741824.0);

  // park then wake of `pages`, reps times after a warm-up each: issue -> wait_transfers().
  auto park_and_wake = [&](std::uint64_t pages, std::vector<TransferPoint>& into) {
    const std::uint64_t stores = store_tokens(pages, s.unit, s.row_pages).size();
    std::vector<double> park_ms, park_us, wake_ms, wake_us;
    std::vector<pool::Parked> kept;
    for (std::size_t r = 0; r < reps + 1; ++r) {
      kept.clear();  // its host pages back before the next park asks for room
      Issued t;
      kept = issue_park(rt, make_stores(rt, s, pages), t);
      rt.wait_transfers();
      const Clock::time_point landed = Clock::now();
      if (r > 0) {
        park_ms.push_back(us_between(t.start, landed) / 1e3);
        park_us.push_back(us_between(t.start, t.issued));
      }
    }
    for (std::size_t r = 0; r < reps + 1; ++r) {
      Issued t;
      std::vector<runtime::Waking> w = issue_wake(rt, kept, t);
      rt.wait_transfers();
      const Clock::time_point landed = Clock::now();
      awake_all(rt, w);
      if (r > 0) {
        wake_ms.push_back(us_between(t.start, landed) / 1e3);
        wake_us.push_back(us_between(t.start, t.issued));
      }
    }
    kept.clear();
    const std::uint64_t bytes = pages * s.page_bytes;
    into.push_back(make_transfer_point("park", bytes, pages, stores, park_ms, park_us, d2h_gbps));
    into.push_back(make_transfer_point("wake", bytes, pages, stores, wake_ms, wake_us, h2d_gbps));
  };
  for (std::uint64_t b : plan.park_bytes) park_and_wake(pages_for_bytes(b, s.page_bytes), out.transfers);
  if (plan.issue_pages > 0) park_and_wake(plan.issue_pages, out.issue);

  // The decode step at the context while a park / wake of overlap_bytes runs on the transfer stream.
  if (plan.overlap_bytes == 0 || plan.overlap_rounds == 0) return;
  const std::uint64_t pages = pages_for_bytes(plan.overlap_bytes, s.page_bytes);
  // The decode sequence holds its own lease (DecodeInputs): its pages are none of a store's.
  DecodeBench decode(protocol, rt);
  decode.set_context(plan.context, 1);
  const std::vector<double> warm = decode.gpu_step_ms(plan.replays);  // graph captured, clocks up
  // Replays per round: about 80 % of the transfer's expected time (from the measured ceiling), so
  // that they run while it does.
  const double step_ms = median(warm);
  std::vector<double> base, during[2];
  double covered[2] = {0, 0};
  std::vector<pool::Parked> parked;
  for (std::size_t round = 0; round < plan.overlap_rounds; ++round) {
    for (int dir = 0; dir < 2; ++dir) {
      const double gbps = dir == 0 ? d2h_gbps : h2d_gbps;
      const double expect_ms = gbps > 0 ? static_cast<double>(pages * s.page_bytes) / (gbps * 1e6) : 100.0;
      const std::size_t n =
          std::clamp<std::size_t>(static_cast<std::size_t>(0.8 * expect_ms / step_ms), 3, plan.replays);
      const std::vector<double> alone = decode.gpu_step_ms(n);
      base.insert(base.end(), alone.begin(), alone.end());
      Issued t;
      std::vector<runtime::Waking> w;
      if (dir == 0) {
        parked.clear();
        parked = issue_park(rt, make_stores(rt, s, pages), t);
      } else {
        w = issue_wake(rt, parked, t);
      }
      const Clock::time_point r0 = Clock::now();
      const std::vector<double> d = decode.gpu_step_ms(n);
      const Clock::time_point r1 = Clock::now();
      rt.wait_transfers();
      const Clock::time_point landed = Clock::now();
      if (dir == 1) awake_all(rt, w);
      during[dir].insert(during[dir].end(), d.begin(), d.end());
      // The replays' host span [r0, r1] against the transfers' [start, landed].
      const double span = us_between(r0, r1);
      covered[dir] += span > 0 ? std::clamp(us_between(r0, landed) / span, 0.0, 1.0) : 0.0;
    }
  }
  parked.clear();
  const std::uint64_t bytes = pages * s.page_bytes;
  for (int dir = 0; dir < 2; ++dir)
    out.overlap.push_back(make_overlap_point(dir == 0 ? "park" : "wake", plan.context, bytes, base, during[dir],
                                             plan.overlap_rounds, covered[dir] / plan.overlap_rounds));
  rt.synchronize();
}

}  // namespace kern::bench
