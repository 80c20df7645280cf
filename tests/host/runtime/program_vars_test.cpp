// Graph-key normalisation: only vars a program's launches read are part of its key.
#include <gtest/gtest.h>

#include "kern/core/manifest.hpp"
#include "kern/runtime/program_vars.hpp"

namespace kern::runtime {
namespace {

const char* kProgramVarsManifest = R"({
  "schema_version": 5, "model": "keys",
  "vars": {"tokens": {"max": 64}, "seqs": {"max": 8}, "span": {"max": 4}, "ctx": {"max": 4096}, "unused_here": {"max": 2}},
  "buffers": {"x": {"dtype": "f32", "shape": ["tokens"], "kind": "input"}},
  "modules": {"k": {"source": "k.cubin", "sha256": "0000000000000000000000000000000000000000000000000000000000000000"}},
  "ops": {
    "grid_op": {"params": ["in buffer<f32>", "i32"],
      "impl": {"launches": [{"module": "k", "entry": "a", "block": [1,1,1], "grid": [{"ceil_div": ["tokens", 4]}, 1, 1],
                             "args": [{"param": 0}, {"i32": 1}]}]}},
    "fwd_op": {"params": ["in buffer<f32>", "i32"],
      "impl": {"launches": [{"module": "k", "entry": "b", "block": [1,1,1], "grid": [1,1,1], "when": {"var": "span", "min": 2}}]}},
    "pack_op": {"params": ["in buffer<f32>", "i32"],
      "impl": {"launches": [{"module": "k", "entry": "c", "block": [1,1,1], "grid": [1,1,1], "shared_mem": {"mul": ["ctx", 2]},
        "params": ["bytes<8>"], "args": [{"pack": {"size": 8, "fields": [{"at": 0, "param": 1}]}}]}]}}
  },
  "programs": {
    "p1": {"calls": [{"op": "grid_op", "args": [{"buf": "x"}, {"var": "seqs"}]}]},
    "p2": {"calls": [{"op": "fwd_op", "args": [{"buf": "x"}, {"var": "seqs"}]}]},
    "p3": {"calls": [{"op": "pack_op", "args": [{"buf": "x"}, {"expr": {"add": ["unused_here", 1]}}]}]}
  }
})";

std::vector<std::string> names(const VarTable& t, const std::vector<std::uint32_t>& idx) {
  std::vector<std::string> out;
  for (auto i : idx) out.push_back(t.name(i));
  return out;
}

TEST(RuntimeGraphKey, OnlyVarsLaunchesReadAreKeyed) {
  auto m = core::parse_manifest(kProgramVarsManifest);
  VarTable t(m);
  // p1 passes seqs, but the launch replaces that param with a literal: only the grid's tokens
  EXPECT_EQ(names(t, program_read_vars(m, m.programs.at("p1"), t)), (std::vector<std::string>{"tokens"}));
  // p2 forwards seqs (default args) and is gated by span
  EXPECT_EQ(names(t, program_read_vars(m, m.programs.at("p2"), t)), (std::vector<std::string>{"seqs", "span"}));
  // p3: shared_mem reads ctx; a pack field forwards an expression over unused_here
  EXPECT_EQ(names(t, program_read_vars(m, m.programs.at("p3"), t)), (std::vector<std::string>{"ctx", "unused_here"}));
}

TEST(RuntimeGraphKey, KeysIgnoreOtherVars) {
  auto m = core::parse_manifest(kProgramVarsManifest);
  VarTable t(m);
  auto read = program_read_vars(m, m.programs.at("p1"), t);
  std::vector<std::uint64_t> a(t.size(), 1), b(t.size(), 1);
  a[*t.index("tokens")] = b[*t.index("tokens")] = 9;
  a[*t.index("seqs")] = 3;
  b[*t.index("seqs")] = 7;
  b[*t.index("ctx")] = 4000;
  EXPECT_EQ(graph_key(read, a.data()), graph_key(read, b.data()));
  b[*t.index("tokens")] = 10;
  EXPECT_NE(graph_key(read, a.data()), graph_key(read, b.data()));
  EXPECT_EQ(describe_key(read, graph_key(read, a.data()), t), "tokens=9");
  EXPECT_EQ(describe_key({}, {}, t), "no vars");
}

}  // namespace
}  // namespace kern::runtime
