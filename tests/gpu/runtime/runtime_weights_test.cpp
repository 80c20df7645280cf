// Weights through pinned staging (whole tensors and a 2-D row/column slice), a host-placed
// weight, a derive program transposing a `source` into a `carry`, a `once` program, an
// index-domain input; failure cases: missing tensor, input outside its domain, var above bound.
#include "gpu_fixture.hpp"

namespace kern::gputest {
namespace {

const char* kWeightsManifest = R"({
  "schema_version": 5,
  "model": "runtime-weights-test",
  "vars": {"tokens": {"max": 16}},
  "buffers": {
    "ids": {"dtype": "i64", "shape": ["tokens"], "kind": "input", "domain": {"index_into": "table"}},
    "table": {"dtype": "bf16", "shape": [100, 64], "kind": "weight", "bind": [{"tensor": "emb"}]},
    "emb_out": {"dtype": "bf16", "shape": ["tokens", 64], "kind": "output"},
    "src": {"dtype": "bf16", "shape": [48, 80], "kind": "source", "bind": [{"tensor": "proj"}]},
    "proj_t": {"dtype": "bf16", "shape": [80, 48], "kind": "carry"},
    "proj_sq": {"dtype": "bf16", "shape": [80, 48], "kind": "output"},
    "wsl": {"dtype": "bf16", "shape": [8, 16], "kind": "weight",
            "bind": [{"tensor": "big", "rows": [4, 12], "cols": [16, 32]}]},
    "wsl_sq": {"dtype": "bf16", "shape": [8, 16], "kind": "output"},
    "hw": {"dtype": "f32", "shape": [32], "kind": "weight", "placement": "host", "bind": [{"tensor": "hw"}]},
    "table2": {"dtype": "f32", "shape": [32], "kind": "carry"}
  },
  "modules": {"k": {"source": "runtime_test_kernels", "sha256": "@SHA@"}},
  "ops": {
    "gather": {
      "params": ["in buffer<i64>", "in buffer<bf16>", "out buffer<bf16>", "i32"],
      "impl": {"launches": [{"module": "k", "entry": "gather_rows", "block": [64, 1, 1], "grid": [1, "tokens", 1]}]}
    },
    "transpose": {
      "params": ["in buffer<bf16>", "out buffer<bf16>", "i32", "i32"],
      "impl": {"launches": [{"module": "k", "entry": "transpose_u16", "block": [128, 1, 1], "grid": [1, 48, 1]}]}
    },
    "square": {
      "params": ["in buffer<bf16>", "out buffer<bf16>", "i32"],
      "impl": {"launches": [{"module": "k", "entry": "scale_bf16", "block": [128, 1, 1], "grid": [32, 1, 1],
        "params": ["in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32", "i32"],
        "args": [{"param": 0}, {"param": 0}, {"param": 1}, {"param": 2}, {"param": 2}]}]}
    },
    "iota": {
      "params": ["out buffer<f32>", "i32", "f32", "f32"],
      "impl": {"launches": [{"module": "k", "entry": "iota_f32", "block": [32, 1, 1], "grid": [1, 1, 1]}]}
    },
    "axpy": {
      "params": ["in buffer<f32>", "inout buffer<f32>", "i32", "f32"],
      "impl": {"launches": [{"module": "k", "entry": "axpy_f32", "block": [32, 1, 1], "grid": [1, 1, 1]}]}
    }
  },
  "programs": {
    "derive_t": {"derive": true, "calls": [
      {"label": "t", "op": "transpose", "args": [{"buf": "src"}, {"buf": "proj_t"}, {"i32": 48}, {"i32": 80}]}]},
    "init": {"once": true, "calls": [
      {"op": "iota", "args": [{"buf": "table2"}, {"i32": 32}, {"f32": 0.5}, {"f32": 3.0}]}]},
    "lookup": {"calls": [
      {"label": "embed", "op": "gather", "args": [{"buf": "ids"}, {"buf": "table"}, {"buf": "emb_out"}, {"i32": 64}]},
      {"label": "sq", "op": "square", "args": [{"buf": "proj_t"}, {"buf": "proj_sq"}, {"i32": 3840}]},
      {"label": "wsl", "op": "square", "args": [{"buf": "wsl"}, {"buf": "wsl_sq"}, {"i32": 128}]},
      {"label": "host", "op": "axpy", "args": [{"buf": "hw"}, {"buf": "table2"}, {"i32": 32}, {"f32": 1.0}]}]}
  }
})";

struct Checkpoint {
  std::vector<std::uint16_t> emb = random_bf16(100 * 64, 1);
  std::vector<std::uint16_t> proj = random_bf16(48 * 80, 2);
  std::vector<std::uint16_t> big = random_bf16(32 * 64, 3);
  std::vector<float> hw = random_f32(32, 4);

  weights::HostTensors tensors(bool with_emb = true) const {
    weights::HostTensors t;
    auto bytes = [](const auto& v) {
      auto s = std::as_bytes(std::span(v));
      return std::vector<std::byte>(s.begin(), s.end());
    };
    if (with_emb) t.add("emb", DType::BF16, {100, 64}, bytes(emb));
    t.add("proj", DType::BF16, {48, 80}, bytes(proj));
    t.add("big", DType::BF16, {32, 64}, bytes(big));
    t.add("hw", DType::F32, {32}, bytes(hw));
    return t;
  }
};

std::uint16_t square_bf16(std::uint16_t h) {
  float f = from_bf16(h);
  return to_bf16(f * f);
}

TEST(RuntimeGpuWeights, BindDeriveOnceAndRun) {
  Checkpoint ck;
  auto rt = load(verified(kWeightsManifest));
  rt->load_weights(ck.tensors());
  EXPECT_GT(rt->stats().staging_chunks, 0u);

  // weight slice rows [4,12) × cols [16,32) of big [32, 64]: a strided copy
  auto wsl = from_bytes<std::uint16_t>(rt->read_buffer("wsl"));
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 16; ++c) ASSERT_EQ(wsl[r * 16 + c], ck.big[(r + 4) * 64 + 16 + c]) << r << "," << c;
  // derive: proj_t = transpose(proj), and the source is gone
  auto pt = from_bytes<std::uint16_t>(rt->read_buffer("proj_t"));
  for (int r = 0; r < 48; ++r)
    for (int c = 0; c < 80; ++c) ASSERT_EQ(pt[c * 48 + r], ck.proj[r * 80 + c]);
  expect_error([&] { rt->read_buffer("src"); }, ErrorKind::Api, "source");
  expect_error([&] { rt->run("derive_t", {}); }, ErrorKind::Api, "derive");
  // once: table2 = 0.5 i + 3
  auto t2 = from_bytes<float>(rt->read_buffer("table2"));
  for (int i = 0; i < 32; ++i) ASSERT_EQ(t2[i], 0.5f * i + 3.0f);
  expect_error([&] { rt->run("init", {}); }, ErrorKind::Api, "once");

  std::vector<std::int64_t> ids = {0, 99, 42, 7, 42};
  rt->write_input("ids", as_bytes(ids), true);
  rt->run("lookup", {{"tokens", 5}});
  auto out = from_bytes<std::uint16_t>(rt->read_output("emb_out"));
  for (std::size_t t = 0; t < ids.size(); ++t)
    for (int c = 0; c < 64; ++c) ASSERT_EQ(out[t * 64 + c], ck.emb[ids[t] * 64 + c]) << t;
  auto sq = from_bytes<std::uint16_t>(rt->read_output("proj_sq"));
  for (std::size_t i = 0; i < sq.size(); ++i) ASSERT_EQ(sq[i], square_bf16(pt[i])) << i;
  auto wsq = from_bytes<std::uint16_t>(rt->read_output("wsl_sq"));
  for (std::size_t i = 0; i < wsq.size(); ++i) ASSERT_EQ(wsq[i], square_bf16(wsl[i])) << i;
  // host-placed weight read by a kernel through its mapped address
  t2 = from_bytes<float>(rt->read_buffer("table2"));
  for (int i = 0; i < 32; ++i) ASSERT_EQ(t2[i], 1.0f * ck.hw[i] + (0.5f * i + 3.0f)) << i;

  // failures that leave the runtime usable
  std::vector<std::int64_t> bad = {0, 100, 1};
  expect_error([&] { rt->write_input("ids", as_bytes(bad), true); }, ErrorKind::Domain, "element 1 = 100");
  std::vector<std::int64_t> negative = {-1};
  expect_error([&] { rt->write_input("ids", as_bytes(negative), true); }, ErrorKind::Domain, "below");
  expect_error([&] { rt->run("lookup", {{"tokens", 17}}); }, ErrorKind::Api, "outside its bounds");
  expect_error([&] { rt->run("lookup", {{"tokns", 1}}); }, ErrorKind::Api, "unknown var");
  expect_error([&] { rt->run("lookup", {}); }, ErrorKind::Api, "reads var tokens");
  expect_error([&] { rt->write_input("emb_out", as_bytes(ids), true); }, ErrorKind::Api, "not an input");
  std::vector<std::int64_t> too_many(17, 1);
  expect_error([&] { rt->write_input("ids", as_bytes(too_many), true); }, ErrorKind::Api, "do not fit");
  // the rejected write wrote nothing: the previous ids are still in place
  rt->run("lookup", {{"tokens", 5}});
  EXPECT_EQ(from_bytes<std::uint16_t>(rt->read_output("emb_out")), out);
  std::vector<std::int64_t> ids2 = {5, 6};
  rt->write_input("ids", as_bytes(ids2), true);
  rt->run("lookup", {{"tokens", 2}});
  auto out2 = from_bytes<std::uint16_t>(rt->read_output("emb_out"));
  for (int c = 0; c < 64; ++c) ASSERT_EQ(out2[64 + c], ck.emb[6 * 64 + c]);
  expect_error([&] { rt->load_weights(ck.tensors()); }, ErrorKind::Api, "once");
}

TEST(RuntimeGpuWeights, MissingTensorIsWeightArtifact) {
  Checkpoint ck;
  auto rt = load(verified(kWeightsManifest));
  expect_error([&] { rt->load_weights(ck.tensors(false)); }, ErrorKind::WeightArtifact, "emb");
  expect_error([&] { rt->run("lookup", {{"tokens", 1}}); }, ErrorKind::Api, "load_weights");
}

}  // namespace
}  // namespace kern::gputest
