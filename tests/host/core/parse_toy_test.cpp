// The §2.12 toy manifest parses into exactly the expected typed values.
#include <gtest/gtest.h>

#include "kern/base/error.hpp"
#include "kern/core/manifest.hpp"
#include "parse_support.hpp"

using namespace kern;
using namespace kern::core;

namespace {
constexpr std::string_view kToy = kern::core::testing::kToyManifest;
}  // namespace

TEST(ParseToy, ProducesTheExpectedTypedValues) {
  Manifest m = parse_manifest(kToy);
  EXPECT_EQ(m.schema_version, 5u);
  EXPECT_EQ(m.model, "demo-toy");
  EXPECT_TRUE(m.topology.empty());
  EXPECT_FALSE(m.cut.has_value());

  ASSERT_EQ(m.vars.size(), 1u);
  EXPECT_EQ(m.vars.at("tokens").max, 512u);

  ASSERT_EQ(m.states.size(), 1u);
  const State& cache = m.states.at("cache");
  EXPECT_EQ(cache.bytes_per_token, 128u);
  EXPECT_EQ(cache.bytes_per_seq, 0u);
  EXPECT_EQ(cache.bytes, 0u);
  EXPECT_FALSE(cache.host.has_value());

  ASSERT_EQ(m.buffers.size(), 3u);
  const Buffer& inp = m.buffers.at("inp");
  EXPECT_EQ(inp.dtype, DType::BF16);
  EXPECT_EQ(inp.kind, BufferKind::Input);
  EXPECT_EQ(inp.placement, Placement::Device);
  ASSERT_EQ(inp.shape.size(), 2u);
  EXPECT_TRUE(inp.shape[0].is_var());
  EXPECT_EQ(inp.shape[0].var, "tokens");
  EXPECT_FALSE(inp.shape[1].is_var());
  EXPECT_EQ(inp.shape[1].value, 32u);
  EXPECT_FALSE(inp.fill.has_value());
  EXPECT_FALSE(inp.domain.has_value());
  EXPECT_TRUE(inp.bind.empty());
  const Buffer& gain = m.buffers.at("gain");
  EXPECT_EQ(gain.kind, BufferKind::Weight);
  ASSERT_EQ(gain.bind.size(), 1u);
  EXPECT_EQ(gain.bind[0].tensor.name, "demo.gain");
  EXPECT_FALSE(gain.bind[0].tensor.rank_selected());
  EXPECT_FALSE(gain.bind[0].rows.has_value());
  EXPECT_FALSE(gain.bind[0].interleave.has_value());
  EXPECT_EQ(m.buffers.at("res").kind, BufferKind::Output);

  ASSERT_EQ(m.modules.size(), 1u);
  EXPECT_EQ(m.modules.at("demo").source, "demo.cubin");
  EXPECT_EQ(m.modules.at("demo").sha256, std::string(64, '0'));

  ASSERT_EQ(m.ops.size(), 1u);
  const Op& op = m.ops.at("scale_rows");
  ASSERT_EQ(op.params.size(), 5u);
  EXPECT_EQ(op.params[0].kind, ParamType::Kind::Buffer);
  EXPECT_EQ(op.params[0].dir, Direction::In);
  EXPECT_EQ(op.params[0].dtype, DType::BF16);
  EXPECT_EQ(op.params[2].dir, Direction::Out);
  EXPECT_EQ(op.params[3].kind, ParamType::Kind::State);
  EXPECT_EQ(op.params[3].dir, Direction::InOut);
  EXPECT_EQ(op.params[4].kind, ParamType::Kind::I32);
  EXPECT_TRUE(op.impl.scratch.empty());
  ASSERT_EQ(op.impl.launches.size(), 1u);
  const Launch& l = op.impl.launches[0];
  EXPECT_EQ(l.module, "demo");
  EXPECT_EQ(l.entry, "demo_scale");
  EXPECT_FALSE(l.is_extern());
  EXPECT_FALSE(l.params.has_value());
  EXPECT_EQ(l.block, (std::array<std::uint32_t, 3>{32, 1, 1}));
  EXPECT_EQ(l.grid[0].kind, Expr::Kind::Var);
  EXPECT_EQ(l.grid[0].var, "tokens");
  EXPECT_EQ(l.grid[1].kind, Expr::Kind::Const);
  EXPECT_EQ(l.grid[1].value, 1u);
  EXPECT_EQ(l.grid[2].value, 1u);
  EXPECT_FALSE(l.shared_mem.has_value());
  EXPECT_FALSE(l.cluster.has_value());
  EXPECT_FALSE(l.pdl);
  EXPECT_FALSE(l.when.has_value());
  EXPECT_FALSE(l.args.has_value());
  EXPECT_FALSE(l.algo.has_value());

  ASSERT_EQ(m.programs.size(), 1u);
  const Program& p = m.programs.at("step");
  EXPECT_FALSE(p.batch.has_value());
  EXPECT_FALSE(p.once || p.derive || p.graph);
  ASSERT_EQ(p.calls.size(), 1u);
  const Call& c = p.calls[0];
  EXPECT_EQ(c.op, "scale_rows");
  EXPECT_EQ(c.label, "");
  ASSERT_EQ(c.args.size(), 5u);
  EXPECT_EQ(c.args[0].kind, CallArg::Kind::Buf);
  EXPECT_EQ(c.args[0].name, "inp");
  EXPECT_EQ(c.args[0].offset, 0u);
  EXPECT_EQ(c.args[2].name, "res");
  EXPECT_EQ(c.args[3].kind, CallArg::Kind::State);
  EXPECT_EQ(c.args[3].name, "cache");
  EXPECT_EQ(c.args[4].kind, CallArg::Kind::Var);
  EXPECT_EQ(c.args[4].name, "tokens");
}

TEST(ParseToy, ParseFileNamesThePathOnSyntaxErrors) {
  EXPECT_THROW(parse_manifest_file("/nonexistent/kern/manifest.json"), Error);
}
