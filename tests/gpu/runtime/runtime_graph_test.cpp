// CUDA graphs: replay bit-identical to eager (kernels and cuBLASLt GEMMs in the graph), one
// graph per assignment of the vars the program reads (other vars normalised away), replay with
// other values refused.
#include "gpu_fixture.hpp"

namespace kern::gputest {
namespace {

const char* kGraphManifest = R"({
  "schema_version": 5,
  "model": "runtime-graph-test",
  "vars": {"tokens": {"max": 16}, "other": {"max": 8}},
  "buffers": {
    "h_in": {"dtype": "bf16", "shape": ["tokens", 256], "kind": "input"},
    "w_scale": {"dtype": "bf16", "shape": [256], "kind": "weight", "bind": [{"tensor": "w_scale"}]},
    "w_proj": {"dtype": "bf16", "shape": [512, 256], "kind": "weight", "bind": [{"tensor": "w_proj"}]},
    "w_proj2": {"dtype": "bf16", "shape": [512, 256], "kind": "weight", "bind": [{"tensor": "w_proj2"}]},
    "h1": {"dtype": "bf16", "shape": ["tokens", 256], "kind": "workspace"},
    "out": {"dtype": "bf16", "shape": ["tokens", 512], "kind": "output"},
    "aux_out": {"dtype": "bf16", "shape": ["other", 256], "kind": "output"}
  },
  "modules": {"k": {"source": "runtime_test_kernels", "sha256": "@SHA@"}},
  "ops": {
    "scale": {
      "params": ["in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32", "i32"],
      "impl": {"launches": [{"module": "k", "entry": "scale_bf16", "block": [256, 1, 1], "grid": ["tokens", 1, 1]}]}
    },
    "scale_aux": {
      "params": ["in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32", "i32"],
      "impl": {"launches": [{"module": "k", "entry": "scale_bf16", "block": [256, 1, 1], "grid": ["other", 1, 1]}]}
    },
    "gemm": {
      "params": ["in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32", "i32", "i32"],
      "impl": {"launches": [{"entry": "extern:cublaslt_bf16_tn"}]}
    },
    "gemm_acc": {
      "params": ["in buffer<bf16>", "in buffer<bf16>", "inout buffer<bf16>", "i32", "i32", "i32"],
      "impl": {"launches": [{"entry": "extern:cublaslt_bf16_tn_acc"}]}
    }
  },
  "programs": {
    "step": {"batch": {"groups": 1, "rows": "tokens"}, "graph": true, "calls": [
      {"label": "scale", "op": "scale", "args": [{"buf": "h_in"}, {"buf": "w_scale"}, {"buf": "h1"},
        {"expr": {"mul": ["tokens", 256]}}, {"i32": 256}]},
      {"label": "proj", "op": "gemm", "args": [{"buf": "h1"}, {"buf": "w_proj"}, {"buf": "out"}, {"var": "tokens"}, {"i32": 512}, {"i32": 256}]},
      {"label": "proj2", "op": "gemm_acc", "args": [{"buf": "h_in"}, {"buf": "w_proj2"}, {"buf": "out"}, {"var": "tokens"}, {"i32": 512}, {"i32": 256}]}
    ]},
    "aux": {"calls": [
      {"op": "scale_aux", "args": [{"buf": "h_in"}, {"buf": "w_scale"}, {"buf": "aux_out"}, {"expr": {"mul": ["other", 256]}}, {"i32": 256}]}
    ]}
  }
})";

weights::HostTensors graph_weights() {
  weights::HostTensors t;
  auto add = [&](const char* name, std::vector<std::uint64_t> shape, std::uint64_t seed) {
    std::uint64_t n = 1;
    for (auto d : shape) n *= d;
    auto v = random_bf16(n, seed);
    auto s = std::as_bytes(std::span(v));
    t.add(name, DType::BF16, shape, std::vector<std::byte>(s.begin(), s.end()));
  };
  add("w_scale", {256}, 11);
  add("w_proj", {512, 256}, 12);
  add("w_proj2", {512, 256}, 13);
  return t;
}

TEST(RuntimeGpuGraph, ReplayIsBitIdenticalToEager) {
  auto rt = load(verified(kGraphManifest));
  rt->load_weights(graph_weights());
  for (std::uint64_t tokens : {1u, 5u, 16u}) {
    SCOPED_TRACE("tokens=" + std::to_string(tokens));
    auto h = random_bf16(tokens * 256, 100 + tokens);
    rt->write_input("h_in", as_bytes(h), true);
    rt->set_eager(true);
    rt->run("step", {{"tokens", tokens}});
    auto eager = rt->read_output("out");
    rt->set_eager(false);
    const auto captures = rt->stats().graph_captures;
    rt->run("step", {{"tokens", tokens}});
    EXPECT_EQ(rt->stats().graph_captures, captures + 1);
    auto graph = rt->read_output("out");
    ASSERT_EQ(graph, eager);
    // replay on new input data: identical to eager on the same data
    auto h2 = random_bf16(tokens * 256, 200 + tokens);
    rt->write_input("h_in", as_bytes(h2), true);
    const auto launches = rt->stats().graph_launches;
    rt->replay("step", {{"tokens", tokens}});
    EXPECT_EQ(rt->stats().graph_launches, launches + 1);
    auto replayed = rt->read_output("out");
    rt->set_eager(true);
    rt->run("step", {{"tokens", tokens}});
    rt->set_eager(false);
    EXPECT_EQ(replayed, rt->read_output("out"));
    EXPECT_NE(replayed, graph) << "new inputs must change the output";
    // the output is not all zero and depends on the input (sanity)
    bool nonzero = false;
    for (auto b : replayed) nonzero = nonzero || b != std::byte{0};
    EXPECT_TRUE(nonzero);
  }
  // vars the program does not read are normalised away: no new capture
  const auto captures = rt->stats().graph_captures;
  rt->run("step", {{"tokens", 5}, {"other", 3}});
  rt->run("step", {{"tokens", 5}, {"other", 7}});
  rt->replay("step", {{"tokens", 5}, {"other", 1}});
  EXPECT_EQ(rt->stats().graph_captures, captures);
  // replay with vars no graph was captured for is refused; the runtime stays usable
  expect_error([&] { rt->replay("step", {{"tokens", 6}}); }, ErrorKind::Api, "no graph captured for tokens=6");
  expect_error([&] { rt->replay("aux", {{"other", 2}}); }, ErrorKind::Api, "does not declare graph");
  rt->run("step", {{"tokens", 6}});
  EXPECT_EQ(rt->stats().graph_captures, captures + 1);
  rt->replay("step", {{"tokens", 6}});
  rt->run("aux", {{"other", 2}});
}

}  // namespace
}  // namespace kern::gputest
