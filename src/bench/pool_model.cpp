// kern bench, the state pool's figures (issue 16): medians and rates from the samples, the split
// of a KV size into one-row checkpoints, the remap manifest, the targets, the table section and
// the JSON value.
#include <algorithm>

#include "kern/base/error.hpp"
#include "kern/bench/bench.hpp"

namespace kern::bench {
namespace {

using OJ = nlohmann::ordered_json;

void require(bool ok, const char* what) {
  if (!ok) fail(ErrorKind::Api, "bench: {}", what);
}

std::uint64_t median_count(std::vector<std::uint64_t> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];  // the upper middle one for an even count: a count, not a mean
}

constexpr double kGiB = 1073741824.0;

std::string in_gib(std::uint64_t bytes) { return fmt::format("{:.3f} GiB", static_cast<double>(bytes) / kGiB); }

}  // namespace

CopyCeiling make_copy_ceiling(std::uint64_t bytes, const std::vector<double>& ms) {
  require(!ms.empty(), "a pinned copy ceiling needs samples");
  require(bytes > 0, "a pinned copy ceiling needs a size");
  CopyCeiling c;
  c.bytes = bytes;
  c.ms = median(ms);
  require(c.ms > 0, "a pinned copy took no time");
  c.gbps = static_cast<double>(bytes) / (c.ms * 1e-3) / 1e9;
  return c;
}

PoolOpCost make_pool_op_cost(std::string op, std::uint64_t context, const std::vector<double>& us) {
  require(!us.empty(), "a pool call cost needs samples");
  PoolOpCost c;
  c.op = std::move(op);
  c.context = context;
  c.reps = us.size();
  c.us = median(us);
  return c;
}

RemapFigure make_remap_figure(std::string direction, std::uint64_t chunk_bytes, const std::vector<double>& ms,
                              const std::vector<std::uint64_t>& mapped, const std::vector<std::uint64_t>& unmapped,
                              const std::vector<std::uint64_t>& plans) {
  require(!ms.empty(), "a remap figure needs samples");
  require(mapped.size() == ms.size() && unmapped.size() == ms.size() && plans.size() == ms.size(),
          "a remap figure needs one chunk count and plan count per sample");
  RemapFigure r;
  r.direction = std::move(direction);
  r.reps = ms.size();
  r.chunk_bytes = chunk_bytes;
  r.ms = median(ms);
  r.chunks_mapped = median_count(mapped);
  r.chunks_unmapped = median_count(unmapped);
  r.plans = median_count(plans);
  if (r.ms > 0) {
    r.chunks_per_s = static_cast<double>(r.chunks_mapped) / (r.ms * 1e-3);
    r.gbps = static_cast<double>(r.chunks_mapped * chunk_bytes) / (r.ms * 1e-3) / 1e9;
  }
  return r;
}

TransferPoint make_transfer_point(std::string direction, std::uint64_t bytes, std::uint64_t pages,
                                  std::uint64_t stores, const std::vector<double>& ms,
                                  const std::vector<double>& issue_us, double ceiling_gbps) {
  require(!ms.empty() && !issue_us.empty(), "a park / wake figure needs samples");
  require(bytes > 0, "a park / wake figure needs a size");
  TransferPoint t;
  t.direction = std::move(direction);
  t.bytes = bytes;
  t.pages = pages;
  t.stores = stores;
  t.reps = ms.size();
  t.ms = median(ms);
  t.issue_us = median(issue_us);
  require(t.ms > 0, "a park / wake took no time");
  t.gbps = static_cast<double>(bytes) / (t.ms * 1e-3) / 1e9;
  t.of_ceiling = ceiling_gbps > 0 ? t.gbps / ceiling_gbps : 0;
  return t;
}

OverlapPoint make_overlap_point(std::string direction, std::uint64_t context, std::uint64_t bytes,
                                const std::vector<double>& base_ms, const std::vector<double>& during_ms,
                                std::size_t rounds, double covered) {
  require(!base_ms.empty() && !during_ms.empty(), "a decode-during-transfer figure needs samples");
  OverlapPoint o;
  o.direction = std::move(direction);
  o.context = context;
  o.bytes = bytes;
  o.replays = during_ms.size();
  o.rounds = rounds;
  o.base_us = median(base_ms) * 1e3;
  o.during_us = median(during_ms) * 1e3;
  require(o.base_us > 0, "a decode step took no time");
  o.slowdown = o.during_us / o.base_us - 1;
  o.covered = covered;
  return o;
}

std::uint64_t pages_for_bytes(std::uint64_t bytes, std::uint64_t page_bytes) {
  require(page_bytes > 0, "pages_for_bytes: a page of 0 bytes");
  return (bytes + page_bytes - 1) / page_bytes;
}

std::vector<std::uint64_t> store_tokens(std::uint64_t pages, std::uint64_t unit, std::uint64_t row_pages) {
  require(unit > 0 && row_pages > 0, "store_tokens: a unit and a row of at least one page");
  std::vector<std::uint64_t> out;
  for (std::uint64_t left = pages; left > 0;) {
    const std::uint64_t n = std::min(left, row_pages);
    out.push_back(n * unit);
    left -= n;
  }
  return out;
}

nlohmann::ordered_json with_seq_state(const nlohmann::ordered_json& manifest, const std::string& state,
                                      std::uint64_t bytes_per_seq, const std::string& program) {
  if (bytes_per_seq == 0) fail(ErrorKind::Api, "bench: a per-seq state of 0 bytes");
  OJ m = manifest;
  if (!m.contains("states") || !m["states"].is_object() || !m.contains("programs") || !m["programs"].is_object())
    fail(ErrorKind::Manifest, "bench: the manifest has no states or programs");
  if (m["states"].contains(state)) fail(ErrorKind::Manifest, "bench: the manifest already has a state '{}'", state);
  if (m["programs"].contains(program))
    fail(ErrorKind::Manifest, "bench: the manifest already has a program '{}'", program);
  for (const auto& [name, p] : m["programs"].items()) {
    if (!p.contains("calls") || !p["calls"].is_array()) continue;
    // The program's calls up to its first one that names a state (so that every buffer that call
    // reads is written before it: the verifier's dataflow rule), that call pointed at the new state.
    OJ calls = OJ::array();
    for (const OJ& call : p["calls"]) {
      OJ copy = call;
      bool named = false;
      if (copy.contains("args") && copy["args"].is_array())
        for (OJ& a : copy["args"])
          if (a.is_object() && a.contains("state")) {
            a["state"] = state;
            named = true;
          }
      calls.push_back(std::move(copy));
      if (!named) continue;
      m["states"][state] = {{"bytes_per_seq", bytes_per_seq}};
      m["programs"][program] = {{"calls", std::move(calls)}};
      return m;
    }
  }
  fail(ErrorKind::Manifest, "bench: no call of the manifest names a state");
}

void pool_targets(const PoolFigures& p, std::vector<Target>& out) {
  if (!p.measured) return;
  auto add = [&](std::string name, std::string rule, double measured, bool pass) {
    out.push_back(Target{std::move(name), std::move(rule), measured, pass});
  };
  for (const TransferPoint& t : p.transfers)
    if (t.of_ceiling > 0)
      add(fmt::format("{} {:.2f} GiB: GB/s / pinned {} ceiling", t.direction, t.bytes / kGiB,
                      t.direction == "park" ? "D2H" : "H2D"),
          ">= 0.90", t.of_ceiling, t.of_ceiling >= 0.9);
  for (const TransferPoint& t : p.issue)
    add(fmt::format("{} issue of {} pages (ms)", t.direction, t.pages), "<= 1.0", t.issue_us / 1e3,
        t.issue_us <= 1000.0);
  for (const OverlapPoint& o : p.overlap)
    add(fmt::format("decode at {} during a {:.1f} GiB {}: slowdown (%)", o.context, o.bytes / kGiB, o.direction),
        "<= 3.0", 100 * o.slowdown, o.slowdown <= 0.03);
}

std::string format_pool(const PoolFigures& p) {
  std::string s;
  auto line = [&](const std::string& l) { s += l + "\n"; };
  if (!p.measured) {
    line(fmt::format("state pool (issue 16): not measured: {}", p.note));
    return s;
  }
  line(fmt::format("state pool (issue 16): unit {} tokens, page {:.3f} MiB of KV, chunk {} MiB, {} pages, a row "
                   "holds {} tokens",
                   p.unit, p.page_bytes / 1048576.0, p.chunk_bytes >> 20, p.pages, p.row_tokens));
  if (!p.note.empty()) line("  note: " + p.note);
  line("  host cost of one call (median us; what it produced dropped afterwards, untimed)");
  line(fmt::format("  {:<12} {:>8} {:>6} {:>10}", "op", "context", "reps", "us"));
  for (const PoolOpCost& o : p.ops) line(fmt::format("  {:<12} {:>8} {:>6} {:>10.1f}", o.op, o.context, o.reps, o.us));
  if (p.remap_measured) {
    line(fmt::format("  remap (first call planning it -> settle() returning; {})", p.remap_note));
    line(fmt::format("  {:<14} {:>7} {:>9} {:>6} {:>10} {:>10} {:>8}", "direction", "chunks", "unmapped", "plans",
                     "ms", "chunks/s", "GB/s"));
    for (const RemapFigure& r : p.remap)
      line(fmt::format("  {:<14} {:>7} {:>9} {:>6} {:>10.3f} {:>10.0f} {:>8.1f}", r.direction, r.chunks_mapped,
                       r.chunks_unmapped, r.plans, r.ms, r.chunks_per_s, r.gbps));
  } else {
    line("  remap: not measured: " + p.remap_note);
  }
  if (!p.host_measured) {
    line("  host tier: not measured: " + p.host_note);
    return s;
  }
  if (!p.host_note.empty()) line("  host tier: " + p.host_note);
  line("  park / wake (issue -> every copy landed; median)");
  line(fmt::format("  {:<6} {:>11} {:>7} {:>6} {:>10} {:>10} {:>8} {:>10}", "dir", "KV", "pages", "stores", "ms",
                   "issue us", "GB/s", "of ceil"));
  for (const std::vector<TransferPoint>* v : {&p.transfers, &p.issue})
    for (const TransferPoint& t : *v)
      line(fmt::format("  {:<6} {:>11} {:>7} {:>6} {:>10.3f} {:>10.1f} {:>8.1f} {:>10.3f}", t.direction, in_gib(t.bytes),
                       t.pages, t.stores, t.ms, t.issue_us, t.gbps, t.of_ceiling));
  for (const OverlapPoint& o : p.overlap)
    line(fmt::format("  decode at {} during a {} {}: {:.1f} us vs {:.1f} us alone ({:+.2f} %), {} replays in {} "
                     "rounds, {:.0f} % inside the transfers",
                     o.context, in_gib(o.bytes), o.direction, o.during_us, o.base_us, 100 * o.slowdown, o.replays,
                     o.rounds, 100 * o.covered));
  return s;
}

nlohmann::ordered_json pool_json(const PoolFigures& p) {
  OJ j;
  j["measured"] = p.measured;
  j["note"] = p.note;
  j["unit"] = p.unit;
  j["page_bytes"] = p.page_bytes;
  j["chunk_bytes"] = p.chunk_bytes;
  j["pages"] = p.pages;
  j["row_tokens"] = p.row_tokens;
  OJ ops = OJ::array();
  for (const PoolOpCost& o : p.ops) ops.push_back({{"op", o.op}, {"context", o.context}, {"reps", o.reps}, {"us", o.us}});
  j["ops"] = std::move(ops);
  OJ remap = OJ::array();
  for (const RemapFigure& r : p.remap)
    remap.push_back({{"direction", r.direction},
                     {"reps", r.reps},
                     {"chunk_bytes", r.chunk_bytes},
                     {"chunks", r.chunks_mapped},
                     {"chunks_unmapped", r.chunks_unmapped},
                     {"plans", r.plans},
                     {"ms", r.ms},
                     {"chunks_per_s", r.chunks_per_s},
                     {"gbps", r.gbps}});
  j["remap"] = {{"measured", p.remap_measured}, {"note", p.remap_note}, {"moves", std::move(remap)}};
  auto transfers = [](const std::vector<TransferPoint>& v) {
    OJ a = OJ::array();
    for (const TransferPoint& t : v)
      a.push_back({{"direction", t.direction},
                   {"bytes", t.bytes},
                   {"pages", t.pages},
                   {"stores", t.stores},
                   {"reps", t.reps},
                   {"ms", t.ms},
                   {"issue_us", t.issue_us},
                   {"gbps", t.gbps},
                   {"of_ceiling", t.of_ceiling}});
    return a;
  };
  OJ overlap = OJ::array();
  for (const OverlapPoint& o : p.overlap)
    overlap.push_back({{"direction", o.direction},
                       {"context", o.context},
                       {"bytes", o.bytes},
                       {"replays", o.replays},
                       {"rounds", o.rounds},
                       {"base_us", o.base_us},
                       {"during_us", o.during_us},
                       {"slowdown", o.slowdown},
                       {"covered", o.covered}});
  j["host"] = {{"measured", p.host_measured},
               {"note", p.host_note},
               {"transfers", transfers(p.transfers)},
               {"issue", transfers(p.issue)},
               {"overlap", std::move(overlap)}};
  return j;
}

}  // namespace kern::bench
