// The decode host path's runtime API: write_input_at (a ranged write keeps the other elements;
// range, alignment, monotone and domain refusals leave the buffer as it was) and run_and_read
// (the same bytes as run + read_output, its range checked before anything runs; inputs written
// ahead by its callback land for the next run, not this read), in eager and graph mode.
#include "gpu_fixture.hpp"

namespace kern::gputest {
namespace {

const char* kIoManifest = R"({
  "schema_version": 5,
  "model": "runtime-io-test",
  "vars": {"tokens": {"max": 8}},
  "buffers": {
    "ids": {"dtype": "i64", "shape": ["tokens"], "kind": "input", "domain": {"index_into": "table"}},
    "mono": {"dtype": "i64", "shape": ["tokens"], "kind": "input", "domain": {"min": 0, "max": 15, "monotone": true}},
    "table": {"dtype": "bf16", "shape": [16, 64], "kind": "weight", "bind": [{"tensor": "emb"}]},
    "rows": {"dtype": "bf16", "shape": ["tokens", 64], "kind": "output"},
    "mono_rows": {"dtype": "bf16", "shape": ["tokens", 64], "kind": "output"}
  },
  "modules": {"k": {"source": "runtime_test_kernels", "sha256": "@SHA@"}},
  "ops": {
    "gather": {
      "params": ["in buffer<i64>", "in buffer<bf16>", "out buffer<bf16>", "i32"],
      "impl": {"launches": [{"module": "k", "entry": "gather_rows", "block": [64, 1, 1], "grid": [1, "tokens", 1]}]}
    }
  },
  "programs": {
    "step": {"batch": {"groups": 1, "rows": "tokens"}, "graph": true, "calls": [
      {"label": "ids", "op": "gather", "args": [{"buf": "ids"}, {"buf": "table"}, {"buf": "rows"}, {"i32": 64}]},
      {"label": "mono", "op": "gather", "args": [{"buf": "mono"}, {"buf": "table"}, {"buf": "mono_rows"}, {"i32": 64}]}
    ]}
  }
})";

struct Io {
  std::vector<std::uint16_t> emb = random_bf16(16 * 64, 21);
  std::unique_ptr<runtime::Runtime> rt;

  explicit Io(bool eager) {
    runtime::RuntimeOptions o;
    o.eager = eager;
    rt = load(verified(kIoManifest), o);
    weights::HostTensors t;
    auto s = std::as_bytes(std::span(emb));
    t.add("emb", DType::BF16, {16, 64}, std::vector<std::byte>(s.begin(), s.end()));
    rt->load_weights(t);
  }
  // The rows the gather must produce for these ids.
  std::vector<std::uint16_t> expected(const std::vector<std::int64_t>& ids) const {
    std::vector<std::uint16_t> out;
    for (std::int64_t id : ids) out.insert(out.end(), emb.begin() + id * 64, emb.begin() + (id + 1) * 64);
    return out;
  }
  std::vector<std::uint16_t> rows(const char* output, std::size_t n) {
    auto all = from_bytes<std::uint16_t>(rt->read_output(output));
    all.resize(n * 64);
    return all;
  }
};

class RuntimeGpuIo : public ::testing::TestWithParam<bool> {};

TEST_P(RuntimeGpuIo, RangedWriteKeepsTheOtherElements) {
  Io io(GetParam());
  const std::vector<std::int64_t> ids{1, 2, 3, 4}, mono{0, 2, 5, 9};
  io.rt->write_input("ids", as_bytes(ids), true);
  io.rt->write_input("mono", as_bytes(mono), true);
  io.rt->run("step", {{"tokens", 4}});
  EXPECT_EQ(io.rows("rows", 4), io.expected(ids));
  // Element 2 only, then elements 3..4 (past the old end), each run in between or not.
  const std::vector<std::int64_t> six{6};
  io.rt->write_input_at("ids", 2 * 8, as_bytes(six));
  io.rt->run("step", {{"tokens", 4}});
  EXPECT_EQ(io.rows("rows", 4), io.expected({1, 2, 6, 4}));
  const std::vector<std::int64_t> tail{15, 7};
  io.rt->write_input_at("ids", 3 * 8, as_bytes(tail));
  io.rt->write_input_at("ids", 0, as_bytes(six));  // two writes before the next run
  io.rt->run("step", {{"tokens", 5}});
  EXPECT_EQ(io.rows("rows", 5), io.expected({6, 2, 6, 15, 7}));
  // A monotone input takes a ranged write at its start.
  const std::vector<std::int64_t> low{1};
  io.rt->write_input_at("mono", 0, as_bytes(low));
  io.rt->run("step", {{"tokens", 4}});
  EXPECT_EQ(io.rows("mono_rows", 4), io.expected({1, 2, 5, 9}));
}

TEST_P(RuntimeGpuIo, RefusedRangedWritesLeaveTheBufferAsItWas) {
  Io io(GetParam());
  const std::vector<std::int64_t> ids{1, 2, 3, 4}, mono{0, 2, 5, 9}, one{5}, bad{3, 16};
  io.rt->write_input("ids", as_bytes(ids), true);
  io.rt->write_input("mono", as_bytes(mono), true);
  expect_error([&] { io.rt->write_input_at("ids", 8 * 8, as_bytes(one)); }, ErrorKind::Api, "outside input ids");
  expect_error([&] { io.rt->write_input_at("ids", 7 * 8, as_bytes(bad)); }, ErrorKind::Api, "outside input ids");
  expect_error([&] { io.rt->write_input_at("ids", 12, as_bytes(one)); }, ErrorKind::Api, "multiples");
  expect_error([&] { io.rt->write_input_at("ids", 8, std::as_bytes(std::span(one)).first(4)); }, ErrorKind::Api,
               "multiples");
  expect_error([&] { io.rt->write_input_at("ids", 8, as_bytes(bad)); }, ErrorKind::Domain,
               "count from buffer element 1");
  expect_error([&] { io.rt->write_input_at("mono", 8, as_bytes(one)); }, ErrorKind::Api, "monotone");
  expect_error([&] { io.rt->write_input_at("rows", 0, as_bytes(one)); }, ErrorKind::Api, "not an input");
  io.rt->run("step", {{"tokens", 4}});
  EXPECT_EQ(io.rows("rows", 4), io.expected(ids));
  EXPECT_EQ(io.rows("mono_rows", 4), io.expected(mono));
}

TEST_P(RuntimeGpuIo, RunAndReadMatchesRunThenRead) {
  Io io(GetParam());
  const std::vector<std::int64_t> ids{3, 1, 4, 1, 5}, mono{0, 1, 2, 3, 4};
  io.rt->write_input("ids", as_bytes(ids), true);
  io.rt->write_input("mono", as_bytes(mono), true);
  std::vector<std::byte> got(3 * 64 * 2);
  io.rt->run_and_read("step", {{"tokens", 5}}, "rows", 64 * 2, got);  // rows 1..3
  const auto want = io.expected({1, 4, 1});
  EXPECT_EQ(from_bytes<std::uint16_t>(got), want);
  // The next token's inputs, written while nothing waits on the staging: same again.
  const std::vector<std::int64_t> next{9};
  io.rt->write_input_at("ids", 2 * 8, as_bytes(next));
  io.rt->run_and_read("step", {{"tokens", 5}}, "rows", 2 * 64 * 2, std::span(got).first(64 * 2));
  EXPECT_EQ(from_bytes<std::uint16_t>(std::vector<std::byte>(got.begin(), got.begin() + 128)), io.expected({9}));
  io.rt->run("step", {{"tokens", 5}});
  EXPECT_EQ(io.rows("rows", 5), io.expected({3, 1, 9, 1, 5}));
  // Out of range: refused before anything runs.
  const runtime::RuntimeStats before = io.rt->stats();
  std::vector<std::byte> big(9 * 64 * 2);
  expect_error(
      [&] {
        io.rt->run_and_read("step", {{"tokens", 5}}, "rows", 0, big);
      },
      ErrorKind::Api, "outside output rows");
  expect_error(
      [&] {
        io.rt->run_and_read("step", {{"tokens", 5}}, "ids", 0, std::span(got).first(8));
      },
      ErrorKind::Api, "not an output");
  EXPECT_EQ(io.rt->stats().kernel_launches, before.kernel_launches);
  EXPECT_EQ(io.rt->stats().graph_launches, before.graph_launches);
}

TEST_P(RuntimeGpuIo, RunAndReadWritesAheadWhileTheProgramRuns) {
  Io io(GetParam());
  const std::vector<std::int64_t> ids{2, 7, 11}, mono{0, 1, 2}, next{12, 13, 14}, bad{16};
  io.rt->write_input("ids", as_bytes(ids), true);
  io.rt->write_input("mono", as_bytes(mono), true);
  for (int step = 0; step < 3; ++step) {  // the same staging reused step after step
    SCOPED_TRACE("step " + std::to_string(step));
    const std::vector<std::int64_t> now = step % 2 == 0 ? ids : next;
    const std::vector<std::int64_t> ahead = step % 2 == 0 ? next : ids;
    std::vector<std::byte> got(3 * 64 * 2);
    // The read is queued before the callback's copy: it sees this step's rows.
    io.rt->run_and_read("step", {{"tokens", 3}}, "rows", 0, got,
                        [&] { io.rt->write_input("ids", as_bytes(ahead), true); });
    EXPECT_EQ(from_bytes<std::uint16_t>(got), io.expected(now));
  }
  io.rt->run("step", {{"tokens", 3}});
  EXPECT_EQ(io.rows("rows", 3), io.expected(next));
  // A callback that throws (a refused write): the error comes out, nothing is left half done.
  std::vector<std::byte> got(64 * 2, std::byte{0x5a});
  expect_error(
      [&] {
        io.rt->run_and_read("step", {{"tokens", 3}}, "rows", 0, got,
                            [&] { io.rt->write_input_at("ids", 0, as_bytes(bad)); });
      },
      ErrorKind::Domain, "ids");
  EXPECT_EQ(got, std::vector<std::byte>(64 * 2, std::byte{0x5a}));
  io.rt->run("step", {{"tokens", 3}});
  EXPECT_EQ(io.rows("rows", 3), io.expected(next));
}

INSTANTIATE_TEST_SUITE_P(EagerAndGraph, RuntimeGpuIo, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "eager" : "graph"; });

}  // namespace
}  // namespace kern::gputest
