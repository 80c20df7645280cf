// The host tier on the GPU (issue 16): a per-position pattern written into every page of every
// paged state (and the slot) of a long sequence, parked to the pinned host block on the transfer
// stream, the device copy zeroed, woken into a fresh lease on other pages, every byte compared.
// Two shapes: Qwen3-4B's KV (one state of 144 KiB/token, 16-token pages of 2.25 MiB, 40,000
// tokens = 2,500 pages ≈ 5.5 GiB) and an 8B-like hybrid (K and V as two states of 64 KiB/token,
// so host pages are 2-D copy targets, plus a 147 MiB per-sequence state; 47,995 tokens, the last
// page partial). Also: re-parking a woken chain copies no page again, park_now / wake_now, the
// no-token budget, and whole-state I/O refused after a remap.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <variant>

#include "gpu_fixture.hpp"
#include "kern/cuda/vmm.hpp"

namespace kern::gputest {
namespace {

using pool::Lease;

struct Shape {
  const char* name;
  std::vector<std::pair<std::string, std::uint64_t>> paged;  // state, bytes per token
  std::optional<std::pair<std::string, std::uint64_t>> per_seq;
  std::uint64_t tokens;  // the parked sequence's length
};

// A manifest whose only program touches every state and input once (the verifier refuses unused
// ones): fill_u32 with n = 0 writes nothing.
std::string manifest_for(const Shape& s, std::uint64_t row_pages) {
  std::string states, first, calls;
  const auto touch = [&](const std::string& name) {
    calls += fmt::format(", {{\"op\": \"touch_state\", \"args\": [{{\"state\": \"{}\"}}, {{\"i32\": 0}}, {{\"i32\": 0}}]}}", name);
  };
  for (const auto& [name, bpt] : s.paged) {
    states += fmt::format("{}\"{}\": {{\"bytes_per_token\": {}}}", states.empty() ? "" : ", ", name, bpt);
    if (first.empty()) first = name;
    touch(name);
  }
  if (s.per_seq) {
    states += fmt::format(", \"{}\": {{\"bytes_per_seq\": {}}}", s.per_seq->first, s.per_seq->second);
    touch(s.per_seq->first);
  }
  return fmt::format(R"({{
  "schema_version": 5,
  "model": "park-wake-{}",
  "vars": {{"seqs": {{"max": 4}}}},
  "states": {{{}}},
  "buffers": {{
    "block_table": {{"dtype": "i32", "shape": ["seqs", {}], "kind": "input", "domain": {{"index_into": "{}", "stride": 16}}}}
  }},
  "modules": {{"k": {{"source": "runtime_test_kernels", "sha256": "@SHA@"}}}},
  "ops": {{
    "touch_i32": {{"params": ["in buffer<i32>", "i32", "i32"],
                  "impl": {{"launches": [{{"module": "k", "entry": "fill_u32", "block": [32, 1, 1], "grid": [1, 1, 1]}}]}}}},
    "touch_state": {{"params": ["inout state", "i32", "i32"],
                    "impl": {{"launches": [{{"module": "k", "entry": "fill_u32", "block": [32, 1, 1], "grid": [1, 1, 1]}}]}}}}
  }},
  "programs": {{
    "touch": {{"calls": [
      {{"op": "touch_i32", "args": [{{"buf": "block_table"}}, {{"i32": 0}}, {{"i32": 0}}]}}{}
    ]}}
  }}
}})",
                     s.name, states, row_pages, first, calls);
}

// The pattern's 64-bit word w of a sequence's bytes in one state.
std::uint64_t word(std::uint64_t seed, std::uint64_t w) {
  std::uint64_t z = seed * 0x9e3779b97f4a7c15ull + w + 1;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
void fill(std::span<std::byte> out, std::uint64_t seed, std::uint64_t first_byte) {
  for (std::size_t i = 0; i < out.size(); i += 8) {
    const std::uint64_t v = word(seed, (first_byte + i) / 8);
    std::memcpy(out.data() + i, &v, std::min<std::size_t>(8, out.size() - i));
  }
}

// Consecutive page ids folded: (first page, pages, first page's index in the lease).
struct Run {
  std::uint64_t page, count, index;
};
std::vector<Run> runs_of(std::span<const pool::PageId> pages, std::uint64_t upto) {
  std::vector<Run> out;
  for (std::uint64_t i = 0; i < upto; ++i) {
    if (!out.empty() && out.back().page + out.back().count == pages[i])
      ++out.back().count;
    else
      out.push_back({pages[i], 1, i});
  }
  return out;
}

constexpr std::uint64_t kChunk = 256ull << 20;

// Writes (or checks) `tokens` positions of `lease` in every paged state, and its slot.
void pattern(runtime::Runtime& rt, const Shape& s, const Lease& lease, std::uint64_t tokens, bool check) {
  const std::uint64_t pages = (tokens + 15) / 16;
  std::vector<std::byte> want(kChunk), got(check ? kChunk : 0);
  for (std::size_t k = 0; k < s.paged.size(); ++k) {
    const auto& [name, bpt] = s.paged[k];
    const std::uint64_t page_bytes = 16 * bpt, end = tokens * bpt;
    std::uint64_t mismatches = 0;
    for (const Run& r : runs_of(lease.page_ids(), pages)) {
      const std::uint64_t seq0 = r.index * page_bytes;
      const std::uint64_t bytes = std::min(r.count * page_bytes, end - seq0);
      for (std::uint64_t done = 0; done < bytes; done += kChunk) {
        const std::uint64_t n = std::min(kChunk, bytes - done);
        fill(std::span(want).first(n), 17 + k, seq0 + done);
        const std::uint64_t at = r.page * page_bytes + done;
        if (!check) {
          rt.write_state_at(name, at, std::span(want).first(n));
          continue;
        }
        rt.read_state_at(name, at, std::span(got).first(n));
        if (std::memcmp(want.data(), got.data(), n) != 0) {
          for (std::uint64_t i = 0; i < n && mismatches < 4; ++i)
            if (want[i] != got[i]) {
              ADD_FAILURE() << s.name << ": state " << name << " byte " << seq0 + done + i << " of the sequence (token "
                            << (seq0 + done + i) / bpt << "): want " << int(want[i]) << " got " << int(got[i]);
              ++mismatches;
            }
        }
      }
    }
  }
  if (s.per_seq) {
    const auto& [name, bytes] = *s.per_seq;
    ASSERT_TRUE(lease.seq_slot());
    std::vector<std::byte> slot_want(bytes), slot_got(bytes);
    fill(slot_want, 99, 0);
    if (!check) {
      rt.write_state_at(name, *lease.seq_slot() * bytes, slot_want);
    } else {
      rt.read_state_at(name, *lease.seq_slot() * bytes, slot_got);
      EXPECT_TRUE(slot_want == slot_got) << s.name << ": the per-seq state's slot differs after the wake";
    }
  }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class ParkWake : public ::testing::TestWithParam<Shape> {};

TEST_P(ParkWake, EveryByteSurvivesParkZeroAndWakeIntoOtherPages) {
  const Shape& s = GetParam();
  const std::uint64_t pages = (s.tokens + 15) / 16;
  runtime::RuntimeOptions o;
  o.capacity = {3 * pages * 16 + 64, 3};
  auto rt = load(verified(manifest_for(s, pages + 4)), o);
  Lease low = std::move(rt->lease(s.tokens)).value();  // pages 0.. are someone else's
  Lease seq = std::move(rt->lease(s.tokens)).value();
  pattern(*rt, s, seq, s.tokens, false);
  (void)seq.slots(0, s.tokens);  // the positions written (a lease with a slot retires at its position)
  const std::vector<pool::PageId> parked_pages(seq.page_ids().begin(), seq.page_ids().end());

  rt->reserve_host(pages + 1, 2);  // a slot each for the parked store and its re-park below
  ASSERT_NE(rt->host_tier(), nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  auto room = rt->room(rt->retire(std::move(seq), s.tokens));
  ASSERT_TRUE(std::holds_alternative<pool::Room>(room)) << "the host block holds the whole sequence";
  const auto t_issue = std::chrono::steady_clock::now();
  pool::Parked parked = rt->park(std::get<pool::Room>(std::move(room)));
  const double issue_park = seconds_since(t_issue);
  rt->wait_transfers();
  const double park_s = seconds_since(t0);
  EXPECT_EQ(rt->host_tier()->live_pages(), pages);

  rt->zero_states();
  Lease again = std::move(rt->lease(s.tokens)).value();  // takes back the pages just freed
  const auto t1 = std::chrono::steady_clock::now();
  auto waking = rt->wake(parked, s.tokens, s.tokens + 16);
  ASSERT_TRUE(waking.ok()) << waking.denied().describe();
  const double issue_wake = seconds_since(t1);
  runtime::Waking w = std::move(waking).value();
  std::variant<Lease, runtime::Waking> woke = rt->awake(std::move(w));
  while (std::holds_alternative<runtime::Waking>(woke)) woke = rt->awake(std::get<runtime::Waking>(std::move(woke)));
  const double wake_s = seconds_since(t1);
  Lease back = std::get<Lease>(std::move(woke));
  std::uint64_t same = 0;
  for (std::uint64_t i = 0; i < pages; ++i) same += back.page_ids()[i] == parked_pages[i];
  EXPECT_EQ(same, 0u) << "the wake landed on the parked sequence's own pages";
  pattern(*rt, s, back, s.tokens, true);

  double gib = 0;
  for (const auto& [name, bpt] : s.paged) gib += static_cast<double>(s.tokens * bpt) / (1ull << 30);
  std::printf("[park-wake] %s: %.2f GiB, %llu pages: park %.1f ms (issue %.3f ms), wake %.1f ms (issue %.3f ms)\n",
              s.name, gib, static_cast<unsigned long long>(pages), park_s * 1e3, issue_park * 1e3, wake_s * 1e3,
              issue_wake * 1e3);

  // Parked again, the woken chain copies no page: every whole page remembers its host twin.
  const std::uint64_t live = rt->host_tier()->live_pages();
  auto cp = rt->checkpoint(back, s.tokens);
  ASSERT_TRUE(cp.ok()) << cp.denied().describe();
  auto room2 = rt->room(std::move(cp).value());
  ASSERT_TRUE(std::holds_alternative<pool::Room>(room2));
  pool::Parked again_parked = rt->park(std::get<pool::Room>(std::move(room2)));
  rt->wait_transfers();
  const std::uint64_t partial = s.tokens % 16 ? 1 : 0;
  EXPECT_LE(rt->host_tier()->live_pages(), live + partial) << "only a partial last page may be copied again";
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ParkWake,
    ::testing::Values(Shape{"qwen3_4b_40k", {{"kv", 36 * 2 * 8 * 128 * 2}}, std::nullopt, 40000},
                      Shape{"hybrid_8b_48k", {{"k", 32 * 8 * 128 * 2}, {"v", 32 * 8 * 128 * 2}},
                            std::pair<std::string, std::uint64_t>{"conv", 147ull << 20}, 47995}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ParkWakeGpu, ParkNowAndWakeNowCopyOnTheComputeStream) {
  const Shape s{"small", {{"kv", 4096}}, std::nullopt, 100};
  runtime::RuntimeOptions o;
  o.capacity = {1024, 2};
  auto rt = load(verified(manifest_for(s, 32)), o);
  rt->reserve_host(16, 1);
  Lease seq = std::move(rt->lease(100)).value();
  pattern(*rt, s, seq, 100, false);
  const pool::Checkpoint cp = rt->retire(std::move(seq), 100);
  auto parked = rt->park_now(cp);
  ASSERT_TRUE(parked.ok()) << parked.denied().describe();
  auto back = rt->wake_now(parked.value(), 100, 128);
  ASSERT_TRUE(back.ok()) << back.denied().describe();
  pattern(*rt, s, back.value(), 100, true);
}

TEST(ParkWakeGpu, HostFullIsADenialAndKeepsNothing) {
  const Shape s{"small", {{"kv", 4096}}, std::nullopt, 100};
  runtime::RuntimeOptions o;
  o.capacity = {1024, 2};
  auto rt = load(verified(manifest_for(s, 32)), o);
  rt->reserve_host(2, 1);
  Lease seq = std::move(rt->lease(100)).value();
  auto r = rt->room(rt->retire(std::move(seq), 100));
  ASSERT_TRUE(std::holds_alternative<pool::Checkpoint>(r)) << "7 pages do not fit a 2-page host block";
  EXPECT_EQ(rt->host_tier()->used(), 0u);
  auto now = rt->park_now(std::get<pool::Checkpoint>(r));
  ASSERT_FALSE(now.ok());
  EXPECT_EQ(now.denied().kind, pool::DeniedKind::HostFull);
}

TEST(ParkWakeGpu, WithoutTokensThePoolTakesFreeMemoryLessOneGiB) {
  const Shape s{"budget", {{"kv", 147456}}, std::nullopt, 16};
  const cuda::Context context(0);  // current, for the free-memory query before the load
  const std::uint64_t free_before = cuda::mem_info().free;
  runtime::RuntimeOptions o;
  o.capacity = {0, 2};
  auto rt = load(verified(manifest_for(s, 4096)), o);
  const pool::Pool* p = rt->state_pool();
  ASSERT_NE(p, nullptr);
  const std::uint64_t pooled = p->chunks() * p->chunk_bytes();
  EXPECT_LE(pooled, free_before - (1ull << 30));
  EXPECT_GE(pooled + (1ull << 30) + 2 * p->chunk_bytes() + (256ull << 20), free_before)
      << "the pool should take nearly all free memory";
  std::printf("[budget] free %llu MiB before load, pool %llu chunks of %llu MiB, %llu pages\n",
              static_cast<unsigned long long>(free_before >> 20), static_cast<unsigned long long>(p->chunks()),
              static_cast<unsigned long long>(p->chunk_bytes() >> 20), static_cast<unsigned long long>(p->total()));
}

TEST(ParkWakeGpu, WholeStateIoIsRefusedOnceThePoolHasRemapped) {
  const Shape s{"remap", {{"kv", 4096}}, std::pair<std::string, std::uint64_t>{"conv", 1ull << 20}, 16};
  runtime::RuntimeOptions o;
  o.capacity = {4096, 1};
  auto rt = load(verified(manifest_for(s, 64)), o);
  (void)rt->read_state("conv");  // fine before any remap
  std::vector<Lease> held;
  bool remapped = false;
  for (int i = 0; i < 64 && !remapped; ++i) {
    auto g = rt->lease_slot();
    if (g.ok()) {
      held.push_back(std::move(g).value());
      continue;
    }
    ASSERT_EQ(g.denied().kind, pool::DeniedKind::Remapping) << g.denied().describe();
    rt->settle();
    remapped = true;
  }
  ASSERT_TRUE(remapped) << "slots never ran out: no remap";
  expect_error([&] { rt->read_state("conv"); }, ErrorKind::Api, "remapped");
  expect_error([&] { rt->zero_states(); }, ErrorKind::Api, "remapped");
  std::vector<std::byte> one(8);
  expect_error([&] { rt->write_state_at("kv", 0, one); }, ErrorKind::Api, "remapped");
}

}  // namespace
}  // namespace kern::gputest
