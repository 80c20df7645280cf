// The state pool on the GPU (issue 16; docs/design/pool-on-gpu.md §1 items 3, 4 and 9): a toy
// manifest with one paged state (kv: 64 KiB per token, pages of 64 tokens = 4 MiB through a
// page table of stride 64) and one per-seq state (conv: 5 MiB per slot, so a slot straddles
// 2 MiB chunks), loaded through Runtime, with the test kernels stamping and checking whole rows
// through the protocol inputs (the page-table row `block_table` and the line table `lines`):
// - a graph captured before remaps that turn page chunks into slot chunks (and back) writes and
//   reads the slots and pages the remaps made; made objects read zero; state addresses unchanged;
// - checkpoint / lease_from / fork at a mid-page length give the child its own partial page;
// - ExceedsRow, ExceedsPool, Busy, and Remapping while a plan waits behind a spinning kernel;
// - 10,000 random operations (tests/common/pool_soak.hpp: pool and host-tier operations) with
//   byte checks, ending with every object and every host page returned.
// Chunks: pool::chunk_bytes_for gives 2 MiB on a 2 MiB granule here (the smallest object, a
// 4 MiB page, is two granules); objects under 4 MiB would get 64 MiB chunks.
#include <chrono>
#include <cstdio>
#include <variant>

#include "gpu_fixture.hpp"
#include "kern/pool/pool.hpp"
#include "pool_soak.hpp"

namespace kern::gputest {
namespace {

using pool::DeniedKind;
using pool::Lease;
using pool::PageId;
using pool::SlotId;

constexpr std::uint64_t kUnit = 64;                   // tokens per page (the page table's stride)
constexpr std::uint64_t kTokenBytes = 64ull << 10;    // kv bytes_per_token
constexpr std::uint64_t kSlotBytes = 5ull << 20;      // conv bytes_per_seq (2.5 chunks: slots share chunks)
constexpr std::uint64_t kTokenWords = kTokenBytes / 4;
constexpr std::uint64_t kSlotWords = kSlotBytes / 4;
constexpr std::uint64_t kRows = 256;   // var n: positions per stamp / check / gather call
constexpr std::uint64_t kLines = 4;    // var m: slots per call
constexpr std::uint64_t kEntries = 32; // page-table row: 32 pages = 2,048 tokens

// The host twin of pool_pattern in runtime_test_kernels.cu: word w of a row stamped with v.
std::uint32_t pattern(std::uint32_t v, std::uint32_t w) {
  if (v == 0) return 0;
  std::uint32_t x = v * 0x9e3779b1u + w * 0x85ebca77u + 0x6a09e667u;
  x ^= x >> 15;
  x *= 0x2c1b3c6du;
  x ^= x >> 12;
  return x;
}

std::string pool_manifest(std::uint64_t entries, std::uint64_t slot_bytes) {
  std::string j = R"({
  "schema_version": 5,
  "model": "pool-gpu-test",
  "vars": {"n": {"max": @ROWS@}, "m": {"max": @LINES@}},
  "states": {"kv": {"bytes_per_token": @TB@}, "conv": {"bytes_per_seq": @SB@}},
  "buffers": {
    "block_table": {"dtype": "i64", "shape": [1, @E@], "kind": "input", "domain": {"index_into": "kv", "stride": @U@}},
    "pos": {"dtype": "i64", "shape": ["n"], "kind": "input"},
    "vals": {"dtype": "u32", "shape": ["n"], "kind": "input"},
    "lines": {"dtype": "i64", "shape": ["m"], "kind": "input", "domain": {"index_into": "conv", "stride": @SB@}},
    "line_vals": {"dtype": "u32", "shape": ["m"], "kind": "input"},
    "kv_out": {"dtype": "u32", "shape": ["n", @TW@], "kind": "output"},
    "conv_out": {"dtype": "u32", "shape": ["m", @SW@], "kind": "output"},
    "kv_report": {"dtype": "u32", "shape": ["n", 4], "kind": "output"},
    "conv_report": {"dtype": "u32", "shape": ["m", 4], "kind": "output"},
    "spun": {"dtype": "u64", "shape": [1], "kind": "output"},
    "where": {"dtype": "u64", "shape": [2], "kind": "output"}
  },
  "modules": {"k": {"source": "runtime_test_kernels", "sha256": "@SHA@"}},
  "ops": {
    "stamp_kv": {
      "params": ["in buffer<i64>", "in buffer<i64>", "in buffer<u32>", "inout state", "i32", "i32", "i32"],
      "impl": {"launches": [{"module": "k", "entry": "stamp_paged_u32", "block": [256, 1, 1], "grid": ["n", 1, 1]}]}
    },
    "gather_kv": {
      "params": ["in buffer<i64>", "in buffer<i64>", "in state", "out buffer<u32>", "i32", "i32", "i32"],
      "impl": {"launches": [{"module": "k", "entry": "gather_paged_u32", "block": [256, 1, 1], "grid": ["n", 1, 1]}]}
    },
    "check_kv": {
      "params": ["in buffer<i64>", "in buffer<i64>", "in buffer<u32>", "in state", "out buffer<u32>", "i32", "i32", "i32"],
      "impl": {"launches": [{"module": "k", "entry": "check_paged_u32", "block": [256, 1, 1], "grid": ["n", 1, 1]}]}
    },
    "stamp_conv": {
      "params": ["in buffer<i64>", "in buffer<u32>", "inout state", "i32", "i32"],
      "impl": {"launches": [{"module": "k", "entry": "stamp_rows_u32", "block": [256, 1, 1], "grid": ["m", 1, 1]}]}
    },
    "gather_conv": {
      "params": ["in buffer<i64>", "in state", "out buffer<u32>", "i32", "i32"],
      "impl": {"launches": [{"module": "k", "entry": "gather_rows_u32", "block": [256, 1, 1], "grid": ["m", 1, 1]}]}
    },
    "check_conv": {
      "params": ["in buffer<i64>", "in buffer<u32>", "in state", "out buffer<u32>", "i32", "i32"],
      "impl": {"launches": [{"module": "k", "entry": "check_rows_u32", "block": [256, 1, 1], "grid": ["m", 1, 1]}]}
    },
    "spin": {
      "params": ["out buffer<u64>", "i64"],
      "impl": {"launches": [{"module": "k", "entry": "spin_ns", "block": [32, 1, 1], "grid": [1, 1, 1]}]}
    },
    "where": {
      "params": ["in state", "in state", "out buffer<u64>"],
      "impl": {"launches": [{"module": "k", "entry": "state_addresses", "block": [32, 1, 1], "grid": [1, 1, 1]}]}
    }
  },
  "programs": {
    "write_kv": {"calls": [@STAMP_KV@]},
    "read_kv": {"calls": [@GATHER_KV@]},
    "check_kv": {"calls": [{"op": "check_kv", "args": [{"buf": "block_table"}, {"buf": "pos"}, {"buf": "vals"}, {"state": "kv"},
      {"buf": "kv_report"}, {"i32": @U@}, {"i32": @TW@}, {"var": "n"}]}]},
    "write_conv": {"calls": [@STAMP_CONV@]},
    "read_conv": {"calls": [@GATHER_CONV@]},
    "check_conv": {"calls": [{"op": "check_conv", "args": [{"buf": "lines"}, {"buf": "line_vals"}, {"state": "conv"},
      {"buf": "conv_report"}, {"i32": @SW@}, {"var": "m"}]}]},
    "step": {"batch": {"groups": 1, "rows": "n"}, "graph": true,
      "calls": [@STAMP_KV@, @STAMP_CONV@, @GATHER_KV@, @GATHER_CONV@]},
    "spin": {"calls": [{"op": "spin", "args": [{"buf": "spun"}, {"i64": 1500000000}]}]},
    "where": {"calls": [{"op": "where", "args": [{"state": "kv"}, {"state": "conv"}, {"buf": "where"}]}]}
  }
})";
  auto sub = [&](const std::string& key, const std::string& value) {
    for (std::size_t at = j.find(key); at != std::string::npos; at = j.find(key, at + value.size()))
      j.replace(at, key.size(), value);
  };
  sub("@STAMP_KV@", R"({"op": "stamp_kv", "args": [{"buf": "block_table"}, {"buf": "pos"}, {"buf": "vals"}, {"state": "kv"}, {"i32": @U@}, {"i32": @TW@}, {"var": "n"}]})");
  sub("@GATHER_KV@", R"({"op": "gather_kv", "args": [{"buf": "block_table"}, {"buf": "pos"}, {"state": "kv"}, {"buf": "kv_out"}, {"i32": @U@}, {"i32": @TW@}, {"var": "n"}]})");
  sub("@STAMP_CONV@", R"({"op": "stamp_conv", "args": [{"buf": "lines"}, {"buf": "line_vals"}, {"state": "conv"}, {"i32": @SW@}, {"var": "m"}]})");
  sub("@GATHER_CONV@", R"({"op": "gather_conv", "args": [{"buf": "lines"}, {"state": "conv"}, {"buf": "conv_out"}, {"i32": @SW@}, {"var": "m"}]})");
  sub("@ROWS@", std::to_string(kRows));
  sub("@LINES@", std::to_string(kLines));
  sub("@TB@", std::to_string(kTokenBytes));
  sub("@SB@", std::to_string(slot_bytes));
  sub("@TW@", std::to_string(kTokenWords));
  sub("@SW@", std::to_string(slot_bytes / 4));
  sub("@E@", std::to_string(entries));
  sub("@U@", std::to_string(kUnit));
  return j;
}

std::string hex(std::uint32_t v) { return fmt::format("0x{:08x}", v); }

// One runtime over the toy manifest, and the byte paths of the tests: stamp / check / gather
// token rows through a page-table row, slots through the line table.
struct PoolRig {
  PoolRig(std::uint64_t tokens, std::uint64_t seqs, std::uint64_t entries = kEntries, std::uint64_t slot_bytes = kSlotBytes)
      : entries(entries), slot_words(slot_bytes / 4) {
    runtime::RuntimeOptions o;
    o.capacity.tokens = tokens;
    o.capacity.seqs = seqs;
    rt = load(verified(pool_manifest(entries, slot_bytes)), o);
    rt->load_weights(weights::HostTensors{});  // no weights; programs may run after this
    EXPECT_NE(rt->state_pool(), nullptr);
    const pool::Pool& p = pool();
    std::printf("[pool] chunk %llu MiB, %llu chunks (%llu free), pages %llu of %llu (unit %llu, row %llu pages), slots %llu of %llu\n",
                static_cast<unsigned long long>(p.chunk_bytes() >> 20), static_cast<unsigned long long>(p.chunks()),
                static_cast<unsigned long long>(p.free_chunks()), static_cast<unsigned long long>(p.total()),
                static_cast<unsigned long long>(p.pages_max()), static_cast<unsigned long long>(p.unit()),
                static_cast<unsigned long long>(p.row_pages()), static_cast<unsigned long long>(p.slots()),
                static_cast<unsigned long long>(p.slots_max()));
  }
  const pool::Pool& pool() const { return *rt->state_pool(); }

  // ---- the backend of pool_soak.hpp: the pool operations
  pool::Granted<Lease> lease(std::uint64_t t) { return rt->lease(t); }
  pool::Granted<Lease> lease_slot() { return rt->lease_slot(); }
  std::optional<pool::Denied> extend(Lease& l, std::uint64_t t) { return rt->extend(l, t); }
  pool::Granted<pool::Checkpoint> checkpoint(Lease& l, std::uint64_t len) { return rt->checkpoint(l, len); }
  pool::Checkpoint retire(Lease&& l, std::uint64_t len) { return rt->retire(std::move(l), len); }
  pool::Granted<Lease> lease_from(const pool::Checkpoint& cp, std::uint64_t t) { return rt->lease_from(cp, t); }
  pool::Granted<Lease> fork(Lease& parent, std::uint64_t len, std::uint64_t t) { return rt->fork(parent, len, t); }
  void settle() { rt->settle(); }
  const pool::Host* host() const { return rt->host_tier(); }
  std::variant<pool::Room, pool::Checkpoint> room(pool::Checkpoint cp) { return rt->room(std::move(cp)); }
  pool::Parked park(pool::Room&& room) { return rt->park(std::move(room)); }
  pool::Granted<runtime::Waking> wake(const pool::Parked& p, std::uint64_t len, std::uint64_t t) { return rt->wake(p, len, t); }
  std::variant<Lease, runtime::Waking> awake(runtime::Waking&& w) { return rt->awake(std::move(w)); }
  pool::Granted<pool::Parked> park_now(const pool::Checkpoint& cp) { return rt->park_now(cp); }
  pool::Granted<Lease> wake_now(const pool::Parked& p, std::uint64_t len, std::uint64_t t) { return rt->wake_now(p, len, t); }

  // The page-table row naming `pages` (entry i = page i: stride == unit), padded with the first.
  void write_row(std::span<const PageId> pages) {
    if (pages.size() > entries) throw Error(ErrorKind::Api, "pool test: more pages than a row holds");
    std::vector<std::int64_t> row(entries, pages.empty() ? 0 : static_cast<std::int64_t>(pages[0]));
    for (std::size_t i = 0; i < pages.size(); ++i) row[i] = pages[i];
    rt->write_input("block_table", as_bytes(row));
  }
  void write_positions(std::uint64_t first, std::span<const std::uint32_t> vals) {
    std::vector<std::int64_t> pos(vals.size());
    for (std::size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<std::int64_t>(first + i);
    rt->write_input("pos", as_bytes(pos), true);
    rt->write_input("vals", std::as_bytes(vals), true);
  }
  void write_lines(std::span<const SlotId> slots, std::span<const std::uint32_t> vals) {
    std::vector<std::int64_t> lines(slots.begin(), slots.end());
    rt->write_input("lines", as_bytes(lines), true);
    rt->write_input("line_vals", std::as_bytes(vals), true);
  }
  // Positions [first, first + vals.size()) get rows stamped with vals[i].
  void stamp(std::span<const PageId> pages, std::uint64_t first, std::span<const std::uint32_t> vals) {
    write_row(pages);
    for (std::size_t at = 0; at < vals.size(); at += kRows) {
      const std::size_t n = std::min<std::size_t>(kRows, vals.size() - at);
      write_positions(first + at, vals.subspan(at, n));
      rt->run("write_kv", {{"n", n}});
    }
  }
  // "" when positions [0, vals.size()) hold vals' rows, else the first position that differs.
  std::string check(std::span<const PageId> pages, std::span<const std::uint32_t> vals) {
    write_row(pages);
    std::vector<std::uint32_t> report(4 * kRows);
    for (std::size_t at = 0; at < vals.size(); at += kRows) {
      const std::size_t n = std::min<std::size_t>(kRows, vals.size() - at);
      write_positions(at, vals.subspan(at, n));
      rt->run_and_read("check_kv", {{"n", n}}, "kv_report", 0, std::as_writable_bytes(std::span(report.data(), 4 * n)));
      for (std::size_t i = 0; i < n; ++i)
        if (report[4 * i] != 0) {
          const std::uint64_t p = at + i;
          return fmt::format("position {} (page {}, token slot {}): {} of {} words differ; first word {}: expected {} "
                             "(value {}), got {}",
                             p, pages[p / kUnit], pages[p / kUnit] * kUnit + p % kUnit, report[4 * i], kTokenWords,
                             report[4 * i + 1], hex(report[4 * i + 3]), vals[p], hex(report[4 * i + 2]));
        }
    }
    return "";
  }
  void stamp_slot(SlotId s, std::uint32_t v) {
    write_lines(std::span(&s, 1), std::span(&v, 1));
    rt->run("write_conv", {{"m", 1}});
  }
  std::string check_slot(SlotId s, std::uint32_t v) {
    write_lines(std::span(&s, 1), std::span(&v, 1));
    std::uint32_t r[4] = {};
    rt->run_and_read("check_conv", {{"m", 1}}, "conv_report", 0, std::as_writable_bytes(std::span(r)));
    if (r[0] == 0) return "";
    return fmt::format("slot {} (value {}): {} of {} words differ; first word {}: expected {}, got {}", s, v, r[0],
                       slot_words, r[1], hex(r[3]), hex(r[2]));
  }

  // The bytes of positions [first, first + count) as the device holds them (read_kv).
  std::vector<std::uint32_t> gather(std::span<const PageId> pages, std::uint64_t first, std::uint64_t count) {
    write_row(pages);
    std::vector<std::uint32_t> out;
    out.reserve(count * kTokenWords);
    for (std::uint64_t at = 0; at < count; at += kRows) {
      const std::uint64_t n = std::min<std::uint64_t>(kRows, count - at);
      std::vector<std::int64_t> pos(n);
      for (std::uint64_t i = 0; i < n; ++i) pos[i] = static_cast<std::int64_t>(first + at + i);
      rt->write_input("pos", as_bytes(pos), true);
      std::vector<std::uint32_t> part(n * kTokenWords);
      rt->run_and_read("read_kv", {{"n", n}}, "kv_out", 0, std::as_writable_bytes(std::span(part)));
      out.insert(out.end(), part.begin(), part.end());
    }
    return out;
  }
  std::vector<std::uint32_t> gather_slot(SlotId s) {
    const std::int64_t line = s;
    rt->write_input("lines", std::as_bytes(std::span(&line, 1)), true);
    std::vector<std::uint32_t> out(slot_words);
    rt->run_and_read("read_conv", {{"m", 1}}, "conv_out", 0, std::as_writable_bytes(std::span(out)));
    return out;
  }
  std::pair<std::uint64_t, std::uint64_t> addresses() {
    rt->run("where", {});
    auto w = from_bytes<std::uint64_t>(rt->read_output("where"));
    return {w.at(0), w.at(1)};
  }

  std::uint64_t entries;
  std::uint64_t slot_words;
  std::unique_ptr<runtime::Runtime> rt;
};

// "" when `got` (rows of `words` words, from position `first`) equals the rows stamped with
// vals; else the first differing word.
std::string compare_rows(const std::vector<std::uint32_t>& got, std::uint64_t first, std::span<const std::uint32_t> vals,
                         std::uint64_t words, const std::string& what) {
  if (got.size() != vals.size() * words) return fmt::format("{}: {} words read, {} expected", what, got.size(), vals.size() * words);
  for (std::size_t i = 0; i < vals.size(); ++i)
    for (std::uint64_t w = 0; w < words; ++w) {
      const std::uint32_t want = pattern(vals[i], static_cast<std::uint32_t>(w)), have = got[i * words + w];
      if (want != have)
        return fmt::format("{}: position {} word {} (byte {}): expected {} (value {}), got {}", what, first + i, w, 4 * w,
                           hex(want), vals[i], hex(have));
    }
  return "";
}

std::vector<std::uint32_t> values(std::uint32_t base, std::uint64_t first, std::uint64_t count) {
  std::vector<std::uint32_t> v(count);
  for (std::uint64_t i = 0; i < count; ++i) v[i] = base + static_cast<std::uint32_t>(first + i);
  return v;
}

// Writes positions [first, first + vals.size()) of a lease through the rig (the lease checks
// that they are its own to write and advances).
void write_lease(PoolRig& r, Lease& l, std::uint64_t first, const std::vector<std::uint32_t>& vals) {
  (void)l.slots(first, vals.size());
  r.stamp(l.page_ids(), first, vals);
}

Lease must(pool::Granted<Lease>&& g, const char* what) {
  if (!g.ok()) throw Error(ErrorKind::Api, fmt::format("pool test: {} denied: {}", what, g.denied().describe()));
  return std::move(g).value();
}

// ------------------------------------------------------------------------------------------

TEST(PoolGpu, RemapPagesSlotsUnderAGraph) {
  // 640 tokens = 10 pages (20 chunks) and 1 sequence = slots 0..2 (15 MiB: 8 chunks), all
  // mapped at load: a fourth slot needs page chunks.
  PoolRig r(640, 1);
  const pool::Pool& p = r.pool();
  ASSERT_EQ(p.chunk_bytes(), 2ull << 20) << "this test's geometry assumes 2 MiB chunks";
  ASSERT_EQ(p.unit(), kUnit);
  ASSERT_EQ(p.slots(), 3u);
  ASSERT_EQ(p.total(), 10u);
  ASSERT_EQ(p.remapped(), 0u);
  const auto where = r.addresses();

  Lease a = must(r.lease(128), "lease(128)");  // 2 pages and a slot
  ASSERT_EQ(a.page_ids().size(), 2u);
  ASSERT_TRUE(a.seq_slot());
  EXPECT_EQ(r.check_slot(*a.seq_slot(), 0), "") << "a leased slot reads zero";
  const auto a_tok = values(0x100000, 0, 128);
  write_lease(r, a, 0, a_tok);
  ASSERT_EQ(r.check(a.page_ids(), a_tok), "");
  // The protocol's own row for a: what the rig writes.
  std::vector<std::int64_t> row(kEntries, -1);
  ASSERT_EQ(a.extend_row("block_table", row), 2u) << "entries written: one per page";
  for (std::size_t i = 0; i < kEntries; ++i)
    ASSERT_EQ(row[i], static_cast<std::int64_t>(a.page_ids()[i < 2 ? i : 0])) << "entry " << i;

  // The graph: stamps positions [8, 16) of the row and the slot the line table names, then
  // reads both back. Captured now, before any remap.
  const runtime::Vars vars{{"n", 8}, {"m", 1}};
  auto step = [&](std::span<const PageId> pages, SlotId slot, std::uint32_t base, bool capture) {
    const auto tok = values(base, 8, 8);
    const std::uint32_t sv = base + 0xff;
    r.write_row(pages);
    r.write_positions(8, tok);
    r.write_lines(std::span(&slot, 1), std::span(&sv, 1));
    const auto captures = r.rt->stats().graph_captures, launches = r.rt->stats().graph_launches;
    if (capture) {
      r.rt->run("step", vars);
      EXPECT_EQ(r.rt->stats().graph_captures, captures + 1) << "the first run captures";
    } else {
      r.rt->replay("step", vars);
      EXPECT_EQ(r.rt->stats().graph_captures, captures) << "no new capture: the old graph";
      EXPECT_EQ(r.rt->stats().graph_launches, launches + 1);
    }
    std::vector<std::uint32_t> kv(8 * kTokenWords), conv(kSlotWords);
    r.rt->read_output("kv_out", 0, std::as_writable_bytes(std::span(kv)));
    r.rt->read_output("conv_out", 0, std::as_writable_bytes(std::span(conv)));
    EXPECT_EQ(compare_rows(kv, 8, tok, kTokenWords, "graph's kv read-back"), "");
    EXPECT_EQ(compare_rows(conv, 0, std::span(&sv, 1), kSlotWords, "graph's conv read-back"), "");
    return std::make_pair(tok, sv);
  };
  auto [tok0, sv0] = step(a.page_ids(), *a.seq_slot(), 0x200000, true);
  std::vector<std::uint32_t> a_now = a_tok;
  std::copy(tok0.begin(), tok0.end(), a_now.begin() + 8);
  ASSERT_EQ(r.check(a.page_ids(), a_now), "");
  ASSERT_EQ(r.check_slot(*a.seq_slot(), sv0), "");

  // Exhaust the slots: each Remapping denial has started a plan that turns free pages' chunks
  // into a slot's; settle() lands it; the new slot reads zero and gets its own value.
  std::vector<Lease> slots;
  std::vector<std::uint32_t> slot_vals;
  std::uint64_t remappings = 0;
  for (int i = 0; i < 64; ++i) {
    pool::Granted<Lease> g = r.lease_slot();
    if (!g.ok()) {
      if (g.denied().kind == DeniedKind::Remapping) {
        ++remappings;
        EXPECT_TRUE(p.remapping());
        r.settle();
        EXPECT_FALSE(p.remapping());
        EXPECT_EQ(p.remapped(), remappings);
        continue;
      }
      EXPECT_EQ(g.denied().kind, DeniedKind::Busy) << g.denied().describe();
      break;
    }
    Lease l = std::move(g).value();
    ASSERT_TRUE(l.seq_slot());
    ASSERT_EQ(r.check_slot(*l.seq_slot(), 0), "") << "a slot leased after " << remappings << " remaps";
    slot_vals.push_back(0x300000 + static_cast<std::uint32_t>(slots.size()));
    r.stamp_slot(*l.seq_slot(), slot_vals.back());
    slots.push_back(std::move(l));
  }
  std::printf("[pool] %zu slots leased beside a's, %llu remaps; pages live %llu, slots live %llu\n", slots.size(),
              static_cast<unsigned long long>(remappings), static_cast<unsigned long long>(p.total()),
              static_cast<unsigned long long>(p.slots()));
  ASSERT_GE(remappings, 3u) << "pages became slots through remaps";
  EXPECT_EQ(p.remapped(), remappings);
  EXPECT_LT(p.total(), 10u) << "the remaps took pages";
  EXPECT_GT(p.slots(), 3u);
  const SlotId newest = *slots.back().seq_slot();
  EXPECT_GE(newest, 3u) << "the last slot is one a remap made";
  EXPECT_EQ(r.addresses(), where) << "the states' addresses never move";

  // The old graph, with its inputs naming the newest slot: it writes and reads the new mapping.
  auto [tok1, sv1] = step(a.page_ids(), newest, 0x400000, false);
  std::copy(tok1.begin(), tok1.end(), a_now.begin() + 8);
  slot_vals.back() = sv1;
  EXPECT_EQ(r.check(a.page_ids(), a_now), "") << "a's pages after the replay";
  EXPECT_EQ(r.check_slot(*a.seq_slot(), sv0), "") << "a's slot untouched by the replay";
  for (std::size_t i = 0; i < slots.size(); ++i)
    EXPECT_EQ(r.check_slot(*slots[i].seq_slot(), slot_vals[i]), "") << "slot lease " << i;

  // Back: dropping the slots and asking for more pages than are free makes pages from slot
  // chunks (which held stamped bytes): the made pages read zero, and the old graph writes them.
  slots.clear();
  const std::uint64_t want = 6;
  ASSERT_LT(p.total() - p.used(), want) << "fewer free pages than the lease needs";
  pool::Granted<Lease> g = r.lease(want * kUnit);
  ASSERT_FALSE(g.ok());
  ASSERT_EQ(g.denied().kind, DeniedKind::Remapping) << g.denied().describe();
  ++remappings;
  r.settle();
  EXPECT_EQ(p.remapped(), remappings);
  Lease d = must(r.lease(want * kUnit), "lease after the page remap");
  ASSERT_TRUE(d.seq_slot());
  EXPECT_EQ(r.check(d.page_ids(), std::vector<std::uint32_t>(want * kUnit, 0)), "") << "made pages read zero";
  EXPECT_EQ(r.check_slot(*d.seq_slot(), 0), "") << "d's slot reads zero";
  std::printf("[pool] d's pages:");
  for (PageId id : d.page_ids()) std::printf(" %u", id);
  std::printf(" (slot %u)\n", *d.seq_slot());
  (void)d.slots(0, 16);
  auto [tok2, sv2] = step(d.page_ids(), *d.seq_slot(), 0x500000, false);
  std::vector<std::uint32_t> d_now(want * kUnit, 0);
  std::copy(tok2.begin(), tok2.end(), d_now.begin() + 8);
  EXPECT_EQ(r.check(d.page_ids(), d_now), "") << "d after the replay: positions 8..15 stamped, the rest zero";
  EXPECT_EQ(r.check_slot(*d.seq_slot(), sv2), "");
  EXPECT_EQ(r.check(a.page_ids(), a_now), "") << "a kept its bytes through every remap";
  EXPECT_EQ(r.check_slot(*a.seq_slot(), sv0), "");
  EXPECT_EQ(r.addresses(), where);
  p.check_invariants();
}

TEST(PoolGpu, ForkAndLeaseFromMidPage) {
  PoolRig r(1024, 4);
  const pool::Pool& p = r.pool();
  ASSERT_EQ(p.unit(), kUnit);
  constexpr std::uint64_t kLen = 100;  // page 0 whole, page 1 up to token 36
  Lease parent = must(r.lease(256), "parent");
  ASSERT_TRUE(parent.seq_slot());
  const auto base = values(0x10000, 0, kLen);
  write_lease(r, parent, 0, base);
  r.stamp_slot(*parent.seq_slot(), 0x55);
  ASSERT_EQ(parent.position(), kLen);

  const pool::Checkpoint cp = [&] {
    auto g = r.checkpoint(parent, kLen);
    if (!g.ok()) throw Error(ErrorKind::Api, "checkpoint denied: " + g.denied().describe());
    return std::move(g).value();
  }();
  Lease child = must(r.lease_from(cp, 256), "lease_from");
  Lease forked = must(r.fork(parent, kLen, 256), "fork");
  const std::vector<PageId> cp_pages = cp.page_ids();
  ASSERT_EQ(cp_pages.size(), 2u);
  ASSERT_EQ(cp.tokens(), kLen);
  EXPECT_EQ(cp_pages[0], parent.page_ids()[0]) << "the whole page is shared, not copied";
  EXPECT_NE(cp_pages[1], parent.page_ids()[1]) << "the checkpoint owns a copy of the partial page";
  for (const Lease* l : {&child, &forked}) {
    const char* who = l == &child ? "lease_from" : "fork";
    ASSERT_GE(l->page_ids().size(), 2u) << who;
    EXPECT_EQ(l->page_ids()[0], parent.page_ids()[0]) << who << ": shares the whole page";
    EXPECT_NE(l->page_ids()[1], parent.page_ids()[1]) << who << ": its own partial page";
    EXPECT_NE(l->page_ids()[1], cp_pages[1]) << who << ": its own partial page";
    EXPECT_EQ(l->prefix(), kLen) << who;
    ASSERT_TRUE(l->seq_slot());
    EXPECT_NE(*l->seq_slot(), *parent.seq_slot()) << who;
  }
  EXPECT_NE(child.page_ids()[1], forked.page_ids()[1]);

  // Every byte of the prefix, read back through each holder's own pages.
  const std::vector<PageId> parent_pages(parent.page_ids().begin(), parent.page_ids().end());
  const std::vector<PageId> child_pages(child.page_ids().begin(), child.page_ids().end());
  const std::vector<PageId> forked_pages(forked.page_ids().begin(), forked.page_ids().end());
  const auto from_parent = r.gather(parent_pages, 0, kLen);
  EXPECT_EQ(compare_rows(from_parent, 0, base, kTokenWords, "parent"), "");
  EXPECT_EQ(compare_rows(r.gather(cp_pages, 0, kLen), 0, base, kTokenWords, "checkpoint"), "");
  EXPECT_EQ(compare_rows(r.gather(child_pages, 0, kLen), 0, base, kTokenWords, "lease_from"), "");
  EXPECT_EQ(compare_rows(r.gather(forked_pages, 0, kLen), 0, base, kTokenWords, "fork"), "");
  for (const std::optional<SlotId> s : {cp.seq_slot(), child.seq_slot(), forked.seq_slot()}) {
    ASSERT_TRUE(s);
    EXPECT_EQ(compare_rows(r.gather_slot(*s), 0, std::vector<std::uint32_t>{0x55}, kSlotWords,
                           fmt::format("copied slot {}", *s)),
              "");
  }

  // The three diverge after the fork point: each writes positions [100, 140) with its own
  // values; the parent also rewrites [64, 100) of its own partial page, which no copy may see.
  const auto p_tail = values(0x20000, kLen, 40), c_tail = values(0x30000, kLen, 40), f_tail = values(0x40000, kLen, 40);
  const auto p_redo = values(0x50000, 64, kLen - 64);
  write_lease(r, parent, kLen, p_tail);
  write_lease(r, child, kLen, c_tail);
  write_lease(r, forked, kLen, f_tail);
  r.stamp(parent.page_ids(), 64, p_redo);
  r.stamp_slot(*parent.seq_slot(), 0x66);
  r.stamp_slot(*child.seq_slot(), 0x77);
  r.stamp_slot(*forked.seq_slot(), 0x88);

  auto joined = [](std::vector<std::uint32_t> head, const std::vector<std::uint32_t>& tail) {
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  };
  std::vector<std::uint32_t> parent_want(base.begin(), base.begin() + 64);
  parent_want = joined(joined(parent_want, p_redo), p_tail);
  EXPECT_EQ(compare_rows(r.gather(parent_pages, 0, kLen + 40), 0, parent_want, kTokenWords, "parent after"), "");
  EXPECT_EQ(compare_rows(r.gather(child_pages, 0, kLen + 40), 0, joined(base, c_tail), kTokenWords, "lease_from after"), "");
  EXPECT_EQ(compare_rows(r.gather(forked_pages, 0, kLen + 40), 0, joined(base, f_tail), kTokenWords, "fork after"), "");
  EXPECT_EQ(compare_rows(r.gather(cp_pages, 0, kLen), 0, base, kTokenWords, "checkpoint after"), "");
  EXPECT_EQ(r.check_slot(*parent.seq_slot(), 0x66), "");
  EXPECT_EQ(r.check_slot(*child.seq_slot(), 0x77), "");
  EXPECT_EQ(r.check_slot(*forked.seq_slot(), 0x88), "");
  EXPECT_EQ(r.check_slot(*cp.seq_slot(), 0x55), "");
  // Diverging tokens are distinct bytes on the device, not just distinct expectations.
  const auto at100 = [&](const std::vector<PageId>& pages) { return r.gather(pages, kLen, 1); };
  EXPECT_NE(at100(parent_pages), at100(child_pages));
  EXPECT_NE(at100(child_pages), at100(forked_pages));
  p.check_invariants();
}

TEST(PoolGpu, Denials) {
  {
    PoolRig narrow(640, 1, /*entries=*/4);  // a row names 4 pages = 256 tokens
    ASSERT_EQ(narrow.pool().row_pages(), 4u);
    pool::Granted<Lease> g = narrow.lease(4 * kUnit + 1);
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.denied().kind, DeniedKind::ExceedsRow) << g.denied().describe();
    EXPECT_EQ(g.denied().limit, 4 * kUnit);
    Lease l = must(narrow.lease(4 * kUnit), "a whole row");
    const std::optional<pool::Denied> e = narrow.extend(l, 4 * kUnit + 1);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->kind, DeniedKind::ExceedsRow) << e->describe();
  }
  PoolRig r(640, 1);
  const pool::Pool& p = r.pool();
  const std::uint64_t free_chunks = p.free_chunks();
  // Every page the arenas can hold plus a slot is more than the budget's chunks.
  {
    pool::Granted<Lease> g = r.lease(p.row_pages() * kUnit);
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.denied().kind, DeniedKind::ExceedsPool) << g.denied().describe() << " (row " << p.row_pages()
                                                        << " pages, pages_max " << p.pages_max() << ")";
    pool::Granted<Lease> past = r.lease(p.row_pages() * kUnit + 1);
    ASSERT_FALSE(past.ok());
    EXPECT_EQ(past.denied().kind, DeniedKind::ExceedsRow) << past.denied().describe();
  }
  // Remapping while a plan is in flight: a 1.5 s kernel runs ahead of the plan's fence.
  {
    const auto t0 = std::chrono::steady_clock::now();
    r.rt->launch("spin", {});
    std::vector<Lease> held;
    pool::Granted<Lease> g = r.lease_slot();
    while (g.ok()) {
      held.push_back(std::move(g).value());
      ASSERT_LT(held.size(), 8u);
      g = r.lease_slot();
    }
    ASSERT_EQ(g.denied().kind, DeniedKind::Remapping) << g.denied().describe();
    ASSERT_TRUE(p.remapping());
    for (int i = 0; i < 3; ++i) {
      pool::Granted<Lease> again = r.lease_slot();
      ASSERT_FALSE(again.ok()) << "call " << i << ": granted while the plan should wait behind the spinning kernel";
      EXPECT_EQ(again.denied().kind, DeniedKind::Remapping) << again.denied().describe();
      pool::Granted<Lease> pages = r.lease(kUnit);
      ASSERT_FALSE(pages.ok()) << "a lease needing a slot is refused too";
      EXPECT_EQ(pages.denied().kind, DeniedKind::Remapping) << pages.denied().describe();
    }
    const double denied_at = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(p.remapped(), 0u) << "nothing landed while the kernel spins";
    EXPECT_LT(denied_at, 1.0) << "the denials came after the spin should have ended: the check proves nothing";
    r.settle();
    const double settled_at = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_FALSE(p.remapping());
    EXPECT_EQ(p.remapped(), 1u);
    std::printf("[pool] denials at %.3f s, settled at %.3f s (spin 1.5 s)\n", denied_at, settled_at);
    EXPECT_GE(settled_at, 1.0) << "settle() returned before the kernel ahead of the fence finished";
    EXPECT_GE(from_bytes<std::uint64_t>(r.rt->read_output("spun")).at(0), 1500000000u);
    Lease s = must(r.lease_slot(), "the slot the plan made");
    EXPECT_EQ(r.check_slot(*s.seq_slot(), 0), "");
  }
  // Busy: leases of one page and a slot until nothing is left to remap.
  {
    std::vector<Lease> held;
    pool::Granted<Lease> last = r.lease(kUnit);
    for (int i = 0; i < 64; ++i) {
      if (last.ok()) {
        held.push_back(std::move(last).value());
      } else if (last.denied().kind == DeniedKind::Remapping) {
        r.settle();
      } else {
        break;
      }
      last = r.lease(kUnit);
    }
    ASSERT_FALSE(last.ok());
    EXPECT_EQ(last.denied().kind, DeniedKind::Busy) << last.denied().describe();
    std::printf("[pool] busy after %zu leases: pages %llu/%llu held, slots %llu held, free chunks %llu\n", held.size(),
                static_cast<unsigned long long>(p.used()), static_cast<unsigned long long>(p.total()),
                static_cast<unsigned long long>(p.slots_used()), static_cast<unsigned long long>(p.free_chunks()));
    EXPECT_GE(held.size(), 3u);
    const std::optional<pool::Denied> e = r.extend(held.front(), 8 * kUnit);
    ASSERT_TRUE(e) << "extend granted with everything held";
    EXPECT_EQ(e->kind, DeniedKind::Busy) << e->describe();
    // Slots alone (no page) may still come from a free page's chunks: take them until Busy.
    pool::Granted<Lease> slot = r.lease_slot();
    for (int i = 0; i < 64; ++i) {
      if (slot.ok()) {
        held.push_back(std::move(slot).value());
      } else if (slot.denied().kind == DeniedKind::Remapping) {
        r.settle();
      } else {
        break;
      }
      slot = r.lease_slot();
    }
    ASSERT_FALSE(slot.ok());
    EXPECT_EQ(slot.denied().kind, DeniedKind::Busy) << slot.denied().describe();
    pool::Granted<Lease> one = r.lease(kUnit);
    ASSERT_FALSE(one.ok());
    EXPECT_EQ(one.denied().kind, DeniedKind::Busy) << one.denied().describe();
    // Evicting one lease of a page and a slot makes room again.
    held.erase(held.begin());
    pool::Granted<Lease> again = r.lease(kUnit);
    if (!again.ok() && again.denied().kind == DeniedKind::Remapping) {
      r.settle();
      again = r.lease(kUnit);
    }
    EXPECT_TRUE(again.ok()) << again.denied().describe();
  }
  r.settle();
  EXPECT_EQ(p.used(), 0u);
  EXPECT_EQ(p.slots_used(), 0u);
  EXPECT_EQ(p.live_nodes(), 0u);
  std::printf("[pool] free chunks %llu at load, %llu at the end\n", static_cast<unsigned long long>(free_chunks),
              static_cast<unsigned long long>(p.free_chunks()));
  p.check_invariants();
}

// 4 MiB slots (two chunks each, like a page: every remap moves whole objects, so the free
// chunks come back to their count at load) and 5 MiB slots (2.5 chunks: neighbours share chunks,
// and a remap may free a chunk no target needs, which then stays free).
class PoolGpuSoak : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(PoolGpuSoak, TenThousandOperationsKeepEveryByteAndReturnEveryObject) {
  // The host soak's pool scaled to 4 MiB pages: 2,560 tokens = 40 pages (80 chunks) and 3
  // sequences = 5 slots.
  const std::uint64_t slot_bytes = GetParam();
  PoolRig r(2560, 3, kEntries, slot_bytes);
  const pool::Pool& p = r.pool();
  const std::uint64_t chunks = p.chunks(), free_chunks = p.free_chunks(), used = p.used(), slots_used = p.slots_used(),
                      nodes = p.live_nodes();
  const auto t0 = std::chrono::steady_clock::now();
  r.rt->reserve_host(24, 2);  // 24 host pages and 2 host slots: HostFull happens
  pooltest::PoolSoak<PoolRig> s(r, 1);
  for (int i = 0; i < 10000; ++i) {
    s.step();
    if (::testing::Test::HasFatalFailure()) FAIL() << "at operation " << i;
    if (i % 97 == 0 || i == 9999) {
      s.check_all();
      if (::testing::Test::HasFatalFailure()) FAIL() << "at operation " << i;
      p.check_invariants();
      r.host()->check_invariants();
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[soak] slots of %llu MiB: %.1f s, %llu remaps landed\n", static_cast<unsigned long long>(slot_bytes >> 20),
              secs, static_cast<unsigned long long>(p.remapped()));
  s.print();
  EXPECT_GT(p.remapped(), 0u) << "the soak exercised remaps";
  for (std::uint64_t n : s.done) EXPECT_GT(n, 100u) << "every kind of operation was granted often";
  for (int i = 0; i < 5; ++i) EXPECT_GT(s.parks[i], 50u) << "every host-tier operation was granted often (" << i << ")";
  EXPECT_GT(s.denied[static_cast<int>(DeniedKind::HostFull)], 0u) << "the host tier filled";
  s.clear();
  r.settle();
  r.rt->wait_transfers();
  EXPECT_EQ(r.host()->used(), 0u) << "every host page and slot returned";
  r.host()->check_invariants();
  EXPECT_EQ(p.used(), used);
  EXPECT_EQ(p.slots_used(), slots_used);
  EXPECT_EQ(p.live_nodes(), nodes);
  EXPECT_EQ(p.chunks(), chunks);
  std::printf("[soak] free chunks: %llu at load, %llu at the end\n", static_cast<unsigned long long>(free_chunks),
              static_cast<unsigned long long>(p.free_chunks()));
  if (slot_bytes % p.chunk_bytes() == 0) {
    EXPECT_EQ(p.free_chunks(), free_chunks) << "objects of whole chunks: every remap moved exactly what it needed";
  } else {
    EXPECT_GE(p.free_chunks(), free_chunks);
  }
  p.check_invariants();
}
INSTANTIATE_TEST_SUITE_P(SlotBytes, PoolGpuSoak, ::testing::Values(4ull << 20, 5ull << 20),
                         [](const ::testing::TestParamInfo<std::uint64_t>& i) {
                           return "Slot" + std::to_string(i.param >> 20) + "MiB";
                         });

}  // namespace
}  // namespace kern::gputest
