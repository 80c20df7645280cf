// Every call-arg and launch-arg form, a pack, scratch, `when` ranges, shared memory above
// 48 KB, a state with an offset; the same manifest pinned to the cubin and to the fatbin.
#include <bit>

#include "gpu_fixture.hpp"

namespace kern::gputest {
namespace {

const char* kArgsManifest = R"({
  "schema_version": 5,
  "model": "runtime-args-test",
  "topology": {"groups": {"tp": 2}},
  "vars": {"tokens": {"max": 8}, "n": {"max": 16384}},
  "states": {"st": {"bytes": 4096}},
  "buffers": {
    "x": {"dtype": "f32", "shape": ["n"], "kind": "input"},
    "y": {"dtype": "f32", "shape": ["n"], "kind": "carry"},
    "probe": {"dtype": "u64", "shape": [16], "kind": "carry"},
    "probe2": {"dtype": "u64", "shape": [16], "kind": "carry"},
    "probe3": {"dtype": "u64", "shape": [16], "kind": "carry"},
    "gathered": {"dtype": "f32", "shape": ["n"], "kind": "output"},
    "when_out": {"dtype": "u32", "shape": [8], "kind": "output"},
    "smem_out": {"dtype": "f32", "shape": ["n"], "kind": "output"}
  },
  "modules": {"k": {"source": "runtime_test_kernels", "sha256": "@SHA@"}},
  "ops": {
    "axpy": {
      "params": ["in buffer<f32>", "inout buffer<f32>", "i32", "f32"],
      "impl": {"launches": [{"module": "k", "entry": "axpy_f32", "block": [128, 1, 1],
                             "grid": [{"ceil_div": ["n", 128]}, 1, 1]}]}
    },
    "probe": {
      "params": ["out buffer<u64>", "in buffer<u64>", "i32", "i64", "f32", "u8", "i32", "i32"],
      "impl": {"launches": [{"module": "k", "entry": "probe_args", "block": [1, 1, 1], "grid": [1, 1, 1]}]}
    },
    "probe_lits": {
      "params": ["out buffer<u64>", "in buffer<u64>", "i32"],
      "impl": {"launches": [{"module": "k", "entry": "probe_args", "block": [1, 1, 1], "grid": [1, 1, 1],
        "params": ["out buffer<u64>", "in buffer<u64>", "i32", "i64", "f32", "u8", "i32", "i32"],
        "args": [{"param": 0}, {"param": 1}, {"i32": 77}, {"i64": -9000000000}, {"f32": -1.25}, {"u8": 3},
                 {"rank": "tp"}, {"param": 2}]}]}
    },
    "pack": {
      "params": ["out buffer<u64>", "in buffer<u64>", "i64"],
      "impl": {"launches": [{"module": "k", "entry": "probe_pack", "block": [1, 1, 1], "grid": [1, 1, 1],
        "params": ["out buffer<u64>", "bytes<64>"],
        "args": [{"param": 0}, {"pack": {"size": 64, "fields": [
          {"at": 0, "param": 1}, {"at": 8, "var": "tokens"}, {"at": 12, "expr": {"mul": ["tokens", 3]}},
          {"at": 16, "f32": 0.75}, {"at": 20, "rank": "tp"}, {"at": 24, "u8": 9}, {"at": 32, "param": 0},
          {"at": 40, "i64": -2}, {"at": 48, "param": 2}, {"at": 56, "width": 8, "var": "tokens"}]}}]}]}
    },
    "scr": {
      "params": ["in buffer<f32>", "out buffer<f32>", "i32"],
      "impl": {"scratch": {"tmp": {"dtype": "f32", "shape": ["n"]}},
               "launches": [
        {"module": "k", "entry": "fill_scratch", "block": [128, 1, 1], "grid": [{"ceil_div": ["n", 128]}, 1, 1],
         "params": ["in buffer<f32>", "out buffer<f32>", "i32"], "args": [{"param": 0}, {"scratch": "tmp"}, {"param": 2}]},
        {"module": "k", "entry": "gather_scratch", "block": [128, 1, 1], "grid": [{"ceil_div": ["n", 128]}, 1, 1],
         "params": ["in buffer<f32>", "out buffer<f32>", "i32"], "args": [{"scratch": "tmp"}, {"param": 1}, {"param": 2}]}]}
    },
    "when_fill": {
      "params": ["out buffer<u32>", "i32"],
      "impl": {"launches": [
        {"module": "k", "entry": "fill_u32", "block": [32, 1, 1], "grid": [1, 1, 1], "when": {"var": "tokens", "max": 4},
         "params": ["out buffer<u32>", "i32", "i32"], "args": [{"param": 0}, {"i32": 1}, {"param": 1}]},
        {"module": "k", "entry": "fill_u32", "block": [32, 1, 1], "grid": [1, 1, 1], "when": {"var": "tokens", "min": 5},
         "params": ["out buffer<u32>", "i32", "i32"], "args": [{"param": 0}, {"i32": 2}, {"param": 1}]}]}
    },
    "fill_state": {
      "params": ["out state", "i32"],
      "impl": {"launches": [{"module": "k", "entry": "fill_u32", "block": [32, 1, 1], "grid": [1, 1, 1],
        "params": ["out state", "i32", "i32"], "args": [{"param": 0}, {"i32": 23130}, {"param": 1}]}]}
    },
    "smem": {
      "params": ["in buffer<f32>", "out buffer<f32>", "i32"],
      "impl": {"launches": [{"module": "k", "entry": "smem_reverse", "block": [256, 1, 1], "grid": [1, 1, 1],
                             "shared_mem": {"mul": ["n", 4]}}]}
    }
  },
  "programs": {
    "main": {"calls": [
      {"label": "axpy", "op": "axpy", "args": [{"buf": "x"}, {"buf": "y"}, {"var": "n"}, {"f32": 0.5}]},
      {"label": "probe", "op": "probe", "args": [{"buf": "probe"}, {"buf": "probe", "offset": 24}, {"var": "tokens"},
        {"expr": {"add": [{"mul": ["tokens", 1000]}, 7]}}, {"f32": 2.5}, {"u8": 200}, {"rank": "tp"}, {"i32": -5}]},
      {"label": "lits", "op": "probe_lits", "args": [{"buf": "probe2"}, {"buf": "probe2", "offset": 8}, {"expr": {"ceil_div": ["n", 3]}}]},
      {"label": "pack", "op": "pack", "args": [{"buf": "probe3"}, {"buf": "probe3", "offset": 40}, {"i64": 123456789012}]},
      {"label": "scratch", "op": "scr", "args": [{"buf": "x"}, {"buf": "gathered"}, {"var": "n"}]},
      {"label": "when", "op": "when_fill", "args": [{"buf": "when_out"}, {"var": "tokens"}]},
      {"label": "state", "op": "fill_state", "args": [{"state": "st", "offset": 64}, {"var": "tokens"}]},
      {"label": "smem", "op": "smem", "args": [{"buf": "x"}, {"buf": "smem_out"}, {"var": "n"}]}
    ]}
  }
})";

std::uint64_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }

void run_args_suite(const std::string& sha) {
  auto v = verified(kArgsManifest, sha);
  runtime::RuntimeOptions opt;
  opt.ranks["tp"] = 1;
  auto rt = load(v, opt);
  rt->load_weights(weights::HostTensors{});

  const std::uint64_t n = 16384;  // shared memory n*4 = 64 KB > 48 KB
  std::vector<float> x = random_f32(n, 7);
  rt->write_input("x", as_bytes(x));
  for (std::uint64_t tokens : {3u, 6u}) {
    std::vector<float> y0 = from_bytes<float>(rt->read_buffer("y"));
    rt->run("main", {{"tokens", tokens}, {"n", n}});
    SCOPED_TRACE("tokens=" + std::to_string(tokens));
    // axpy: y = 0.5 x + y (var n, literal f32, buffers)
    auto y = from_bytes<float>(rt->read_buffer("y"));
    for (std::size_t i = 0; i < n; i += 997) ASSERT_EQ(y[i], 0.5f * x[i] + y0[i]) << i;
    // call-arg forms: buffer offset, var, expr, f32, u8, rank, i32 literal
    auto p = from_bytes<std::uint64_t>(rt->read_buffer("probe"));
    EXPECT_EQ(p[0], 24u);
    EXPECT_EQ(p[1], tokens);
    EXPECT_EQ(p[2], tokens * 1000 + 7);
    EXPECT_EQ(p[3], bits(2.5f));
    EXPECT_EQ(p[4], 200u);
    EXPECT_EQ(p[5], 1u);  // rank of tp
    EXPECT_EQ(static_cast<std::int64_t>(p[6]), -5);
    // launch-arg forms: forwarded param, literals of every type, rank, forwarded expr
    auto q = from_bytes<std::uint64_t>(rt->read_buffer("probe2"));
    EXPECT_EQ(q[0], 8u);
    EXPECT_EQ(q[1], 77u);
    EXPECT_EQ(static_cast<std::int64_t>(q[2]), -9000000000ll);
    EXPECT_EQ(q[3], bits(-1.25f));
    EXPECT_EQ(q[4], 3u);
    EXPECT_EQ(q[5], 1u);
    EXPECT_EQ(q[6], (n + 2) / 3);
    // pack fields
    auto k = from_bytes<std::uint64_t>(rt->read_buffer("probe3"));
    EXPECT_EQ(k[0], 40u);
    EXPECT_EQ(k[1], tokens);
    EXPECT_EQ(k[2], 3 * tokens);
    EXPECT_EQ(k[3], bits(0.75f));
    EXPECT_EQ(k[4], 1u);
    EXPECT_EQ(k[5], 9u);
    EXPECT_EQ(k[6], 1u);
    EXPECT_EQ(static_cast<std::int64_t>(k[7]), -2);
    EXPECT_EQ(k[8], 123456789012u);
    EXPECT_EQ(k[9], tokens);  // an 8-byte var field
    EXPECT_EQ(k[10], 0u);     // uncovered pack bytes are zero
    // scratch: gathered[i] = x[n-1-i]*2 + (n-1-i)
    auto g = from_bytes<float>(rt->read_output("gathered"));
    for (std::size_t i = 0; i < n; i += 1013) ASSERT_EQ(g[i], x[n - 1 - i] * 2.0f + static_cast<float>(n - 1 - i)) << i;
    // when: value 1 for tokens <= 4, 2 for tokens >= 5, on the first `tokens` entries
    auto w = from_bytes<std::uint32_t>(rt->read_output("when_out"));
    for (std::size_t i = 0; i < tokens; ++i) EXPECT_EQ(w[i], tokens <= 4 ? 1u : 2u) << i;
    // state at an offset
    auto st = from_bytes<std::uint32_t>(rt->read_buffer("st"));
    for (std::size_t i = 0; i < 16; ++i) EXPECT_EQ(st[i], 0u);
    for (std::size_t i = 0; i < tokens; ++i) EXPECT_EQ(st[16 + i], 23130u);
    // shared memory above 48 KB
    auto s = from_bytes<float>(rt->read_output("smem_out"));
    for (std::size_t i = 0; i < n; i += 1021) ASSERT_EQ(s[i], x[i] + x[n - 1 - i]) << i;
  }
  // A smaller n reuses nothing stale: geometry re-evaluated once per assignment.
  const auto evals = rt->stats().geometry_evaluations;
  rt->run("main", {{"tokens", 6}, {"n", n}});
  EXPECT_EQ(rt->stats().geometry_evaluations, evals) << "same vars: nothing re-evaluated";
  rt->run("main", {{"tokens", 6}, {"n", 1000}});
  EXPECT_EQ(rt->stats().geometry_evaluations, evals + 1);
  auto s = from_bytes<float>(rt->read_output("smem_out"));
  for (std::size_t i = 0; i < 1000; i += 7) ASSERT_EQ(s[i], x[i] + x[999 - i]) << i;
  // run_range runs only the named calls: call 1 (probe) with new vars
  rt->run_range("main", {{"tokens", 2}, {"n", 1000}}, 1, 2);
  EXPECT_EQ(from_bytes<std::uint64_t>(rt->read_buffer("probe"))[1], 2u);
  EXPECT_EQ(from_bytes<std::uint64_t>(rt->read_buffer("probe3"))[1], 6u) << "call 3 did not run";
}

TEST(RuntimeGpuArgs, EveryArgFormWithCubin) { run_args_suite(cubin_sha()); }
TEST(RuntimeGpuArgs, EveryArgFormWithFatbin) { run_args_suite(fatbin_sha()); }

}  // namespace
}  // namespace kern::gputest
