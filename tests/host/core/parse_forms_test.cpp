// Every wire form of schema v5 reaches the typed model with the right values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kern/base/sha256.hpp"
#include "parse_support.hpp"

using namespace kern;
using namespace kern::core;
using namespace kern::core::testing;

namespace {

constexpr std::string_view kFull = R"({
  "schema_version": 5,
  "model": "forms",
  "topology": {"groups": {"tp": 2, "pp.a": 2}},
  "cut": {"id": "pp.a", "stage": 1, "stages": 2},
  "vars": {"tokens": {"max": 2048}, "seqs": {"max": 64}, "span": {"max": 8}, "ctx": {"max": 40960}},
  "states": {
    "kv": {"bytes_per_token": 147456},
    "conv": {"bytes_per_seq": 4096},
    "flags": {"bytes": 64},
    "ext": {"host": {"dtype": "bf16", "shape": [0, 8, 128], "strides": [1024, 128, 1]}}
  },
  "buffers": {
    "ids": {"dtype": "i64", "shape": ["tokens"], "kind": "input", "fill": "token",
            "domain": {"index_into": "embed"}},
    "pages": {"dtype": "i32", "shape": ["seqs", 256], "kind": "input",
              "domain": {"index_into": "kv", "stride": 16}},
    "cu": {"dtype": "i32", "shape": [65], "kind": "input", "fill": "cu_seqlens",
           "domain": {"min": 0, "max": "tokens", "monotone": true}},
    "temp": {"dtype": "f32", "shape": [1], "kind": "input", "domain": {"min": -1.5, "max": {"mul": ["seqs", 2]}}},
    "next": {"dtype": "i64", "shape": ["seqs"], "kind": "output", "fill": "tokens"},
    "embed": {"dtype": "bf16", "shape": [151936, 2560], "kind": "weight", "placement": "host",
              "bind": [{"tensor": "model.embed_tokens.weight"}]},
    "qkv": {"dtype": "bf16", "shape": [6144, 2560], "kind": "weight", "bind": [
      {"tensor": "q", "rows": [0, 4096]},
      {"tensor": {"group": "tp", "tensors": ["k0", "k1"]}, "rows": {"group": "tp", "ranges": [[0, 512], [512, 1024]]},
       "cols": [0, 2560]},
      {"tensor": "gate", "interleave": {"with": {"group": "tp", "tensors": ["u0", "u1"]}, "rows": 8}}
    ]},
    "src": {"dtype": "f32", "shape": [4], "kind": "source", "bind": [{"tensor": "a_log"}]},
    "ws": {"dtype": "u8", "shape": [1024], "kind": "workspace", "export": true},
    "aux": {"dtype": "bf16", "shape": ["tokens", 2560], "kind": "carry"},
    "peers": {"dtype": "u64", "shape": [2], "kind": "peer", "of": "ws", "group": "tp"},
    "clk": {"dtype": "i64", "shape": [40], "kind": "output", "fill": "clock"}
  },
  "modules": {"m": {"source": "hf:org/repo/k.so@v1", "sha256": "ab"}},
  "ops": {
    "attn": {
      "params": ["in buffer<bf16>", "inout state", "i32", "out buffer<bf16>"],
      "impl": {
        "scratch": {"part": {"dtype": "f32", "shape": ["tokens", 64]}},
        "launches": [
          {"module": "m", "entry": "split", "params": ["in buffer<bf16>", "inout state", "i32", "out buffer<f32>", "bytes<256>", "f32", "u8", "i64"],
           "block": [128, 1, 1], "grid": [{"ceil_div": [{"mul": ["tokens", 5]}, 4]}, {"add": ["seqs", 1]}, 1],
           "shared_mem": 98304, "cluster": [2, 1, 1], "pdl": true, "when": {"var": "tokens", "min": 1, "max": 64},
           "args": [{"param": 0}, {"param": 1}, {"param": 2}, {"scratch": "part"},
                    {"pack": {"size": 256, "fields": [
                      {"at": 0, "tensormap": {"param": 0, "dtype": "bf16", "dims": [128, 0], "strides": [256], "box": [64, 64],
                                              "swizzle": 128, "l2_promotion": 256, "oob_nan": true, "wrap": false}},
                      {"at": 128, "param": 3}, {"at": 136, "width": 8, "scratch": "part"}, {"at": 144, "i32": -7},
                      {"at": 148, "f32": 0.5}, {"at": 152, "u8": 255}, {"at": 160, "i64": -9}, {"at": 168, "var": "tokens"},
                      {"at": 172, "expr": {"ceil_div": ["tokens", 16]}}, {"at": 176, "rank": "tp"}]}},
                    {"f32": 0.125}, {"u8": 3}, {"i64": 1099511627776}]},
          {"module": "m", "entry": "reduce", "block": [64, 1, 1], "grid": ["seqs", 1, 1], "when": {"var": "tokens", "min": 65}},
          {"entry": "extern:cublaslt_bf16_tn", "when": {"var": "tokens", "max": 2048},
           "algo": {"id": 21, "tile": 18, "stages": 8, "split_k": 1, "reduction": 0, "swizzle": 0, "custom": 0,
                    "inner_shape": 0, "cluster_shape": -1},
           "args": [{"param": 0}, {"param": 0}, {"param": 3}, {"i32": 16}, {"rank": "tp"}]}
        ]
      }
    }
  },
  "programs": {
    "decode": {"batch": {"groups": 64, "rows": 1, "span": "span", "context": "ctx"}, "graph": true, "calls": [
      {"label": "layer0.attn", "op": "attn", "args": [
        {"buf": "aux", "offset": 5120}, {"state": "kv", "offset": 65536}, {"expr": {"add": ["tokens", 1]}}, {"buf": "aux"}]},
      {"op": "attn", "args": [{"buf": "aux"}, {"state": "kv"}, {"i32": -3}, {"buf": "aux"}]},
      {"op": "attn", "args": [{"buf": "aux"}, {"state": "kv"}, {"u8": 7}, {"rank": "tp"}]}
    ]},
    "prefill": {"batch": {"groups": 1, "rows": "tokens"}, "calls": []},
    "load": {"once": true, "calls": []},
    "prep": {"derive": true, "calls": []}
  }
})";

}  // namespace

// The digest the handshake compares is the SHA-256 of the very text parsed: one byte of whitespace
// makes another manifest; one built in code has none.
TEST(ParseForms, DigestIsTheTextsSha256) {
  const Manifest m = parse_manifest(kFull);
  EXPECT_EQ(m.digest, to_hex(sha256(kFull)));
  EXPECT_EQ(m.digest.size(), 64u);
  const std::string spaced = std::string(kFull) + " ";
  const Manifest again = parse_manifest(spaced);
  EXPECT_NE(again.digest, m.digest);
  EXPECT_EQ(again.model, m.model);
  EXPECT_EQ(Manifest{}.digest, "");
}

TEST(ParseForms, TopLevelVarsStates) {
  Manifest m = parse_manifest(kFull);
  EXPECT_EQ(m.topology, (std::map<std::string, std::uint64_t>{{"pp.a", 2}, {"tp", 2}}));
  ASSERT_TRUE(m.cut.has_value());
  EXPECT_EQ(m.cut->id, "pp.a");
  EXPECT_EQ(m.cut->stage, 1u);
  EXPECT_EQ(m.cut->stages, 2u);
  EXPECT_EQ(m.vars.at("ctx").max, 40960u);
  EXPECT_EQ(m.states.at("kv").bytes_per_token, 147456u);
  EXPECT_EQ(m.states.at("conv").bytes_per_seq, 4096u);
  EXPECT_EQ(m.states.at("flags").bytes, 64u);
  const State& ext = m.states.at("ext");
  ASSERT_TRUE(ext.host.has_value());
  EXPECT_EQ(ext.host->dtype, DType::BF16);
  EXPECT_EQ(ext.host->shape, (std::vector<std::uint64_t>{0, 8, 128}));
  EXPECT_EQ(ext.host->strides, (std::vector<std::uint64_t>{1024, 128, 1}));
  EXPECT_EQ(ext.bytes + ext.bytes_per_seq + ext.bytes_per_token, 0u);
}

TEST(ParseForms, BuffersDomainsAndBind) {
  Manifest m = parse_manifest(kFull);
  const Buffer& ids = m.buffers.at("ids");
  EXPECT_EQ(ids.fill, Fill::Token);
  ASSERT_TRUE(ids.domain && ids.domain->index_into);
  EXPECT_EQ(ids.domain->index_into->target, "embed");
  EXPECT_EQ(ids.domain->index_into->stride, 1u);
  EXPECT_EQ(m.buffers.at("pages").domain->index_into->stride, 16u);
  EXPECT_FALSE(m.buffers.at("pages").fill.has_value());

  const Domain& cu = *m.buffers.at("cu").domain;
  EXPECT_EQ(cu.min->kind, Bound::Kind::Int);
  EXPECT_EQ(cu.min->i, 0);
  EXPECT_EQ(cu.max->kind, Bound::Kind::Expr);
  EXPECT_EQ(cu.max->expr.to_string(), "tokens");
  EXPECT_TRUE(cu.monotone);
  EXPECT_FALSE(cu.index_into.has_value());
  const Domain& temp = *m.buffers.at("temp").domain;
  EXPECT_EQ(temp.min->kind, Bound::Kind::Float);
  EXPECT_EQ(temp.min->f, -1.5);
  EXPECT_EQ(temp.max->expr.to_string(), "mul(seqs, 2)");

  EXPECT_EQ(m.buffers.at("next").fill, Fill::Tokens);
  EXPECT_EQ(m.buffers.at("clk").fill, Fill::Clock);
  EXPECT_EQ(m.buffers.at("embed").placement, Placement::Host);
  EXPECT_EQ(m.buffers.at("src").kind, BufferKind::Source);
  EXPECT_TRUE(m.buffers.at("ws").exported);
  EXPECT_EQ(m.buffers.at("aux").kind, BufferKind::Carry);
  const Buffer& peers = m.buffers.at("peers");
  EXPECT_EQ(peers.kind, BufferKind::Peer);
  EXPECT_EQ(peers.of, "ws");
  EXPECT_EQ(peers.group, "tp");

  const auto& bind = m.buffers.at("qkv").bind;
  ASSERT_EQ(bind.size(), 3u);
  EXPECT_EQ(bind[0].tensor.name, "q");
  ASSERT_TRUE(bind[0].rows.has_value());
  EXPECT_FALSE(bind[0].rows->rank_selected());
  EXPECT_EQ(bind[0].rows->single.from, 0u);
  EXPECT_EQ(bind[0].rows->single.to, 4096u);
  EXPECT_FALSE(bind[0].cols.has_value());
  EXPECT_TRUE(bind[1].tensor.rank_selected());
  EXPECT_EQ(bind[1].tensor.group, "tp");
  EXPECT_EQ(bind[1].tensor.per_rank, (std::vector<std::string>{"k0", "k1"}));
  ASSERT_TRUE(bind[1].rows->rank_selected());
  ASSERT_EQ(bind[1].rows->per_rank.size(), 2u);
  EXPECT_EQ(bind[1].rows->per_rank[1].from, 512u);
  EXPECT_EQ(bind[1].rows->per_rank[1].to, 1024u);
  EXPECT_EQ(bind[1].cols->single.to, 2560u);
  ASSERT_TRUE(bind[2].interleave.has_value());
  EXPECT_EQ(bind[2].interleave->rows, 8u);
  EXPECT_EQ(bind[2].interleave->with.per_rank, (std::vector<std::string>{"u0", "u1"}));
}

TEST(ParseForms, LaunchesArgsPacksTensormaps) {
  Manifest m = parse_manifest(kFull);
  const Op& op = m.ops.at("attn");
  EXPECT_EQ(op.impl.scratch.at("part").dtype, DType::F32);
  EXPECT_EQ(op.impl.scratch.at("part").shape[0].var, "tokens");
  ASSERT_EQ(op.impl.launches.size(), 3u);
  const Launch& a = op.impl.launches[0];
  ASSERT_TRUE(a.params.has_value());
  EXPECT_EQ(a.params->size(), 8u);
  EXPECT_EQ((*a.params)[4].bytes, 256u);
  EXPECT_EQ(a.grid[0].to_string(), "ceil_div(mul(tokens, 5), 4)");
  EXPECT_EQ(a.grid[1].to_string(), "add(seqs, 1)");
  EXPECT_EQ(a.shared_mem->value, 98304u);
  EXPECT_EQ(a.cluster, (std::array<std::uint32_t, 3>{2, 1, 1}));
  EXPECT_TRUE(a.pdl);
  EXPECT_EQ(a.when->var, "tokens");
  EXPECT_EQ(a.when->min, 1u);
  EXPECT_EQ(a.when->max, 64u);
  EXPECT_TRUE(a.when->contains(64));
  EXPECT_FALSE(a.when->contains(65));
  ASSERT_TRUE(a.args.has_value());
  const auto& args = *a.args;
  ASSERT_EQ(args.size(), 8u);
  EXPECT_EQ(args[2].kind, LaunchArg::Kind::Param);
  EXPECT_EQ(args[2].param, 2u);
  EXPECT_EQ(args[3].kind, LaunchArg::Kind::Scratch);
  EXPECT_EQ(args[3].name, "part");
  ASSERT_EQ(args[4].kind, LaunchArg::Kind::Pack);
  const Pack& pack = *args[4].pack;
  EXPECT_EQ(pack.size, 256u);
  ASSERT_EQ(pack.fields.size(), 10u);
  const Tensormap& tm = pack.fields[0].tensormap;
  EXPECT_EQ(pack.fields[0].kind, PackField::Kind::Tensormap);
  EXPECT_EQ(tm.dtype, TmaDType::BF16);
  EXPECT_EQ(tm.dims, (std::vector<std::uint64_t>{128, 0}));
  EXPECT_EQ(tm.strides, (std::vector<std::uint64_t>{256}));
  EXPECT_EQ(tm.box, (std::vector<std::uint64_t>{64, 64}));
  EXPECT_EQ(tm.swizzle, 128u);
  EXPECT_EQ(tm.l2_promotion, 256u);
  EXPECT_TRUE(tm.oob_nan);
  EXPECT_FALSE(tm.wrap);
  EXPECT_EQ(pack.fields[1].kind, PackField::Kind::Param);
  EXPECT_EQ(pack.fields[1].param, 3u);
  EXPECT_EQ(pack.fields[1].at, 128u);
  EXPECT_FALSE(pack.fields[1].width.has_value());
  EXPECT_EQ(pack.fields[2].kind, PackField::Kind::Scratch);
  EXPECT_EQ(pack.fields[2].width, 8u);
  EXPECT_EQ(pack.fields[3].literal.kind, Literal::Kind::I32);
  EXPECT_EQ(pack.fields[3].literal.i, -7);
  EXPECT_EQ(pack.fields[4].literal.kind, Literal::Kind::F32);
  EXPECT_EQ(pack.fields[4].literal.f, 0.5);
  EXPECT_EQ(pack.fields[5].literal.i, 255);
  EXPECT_EQ(pack.fields[6].literal.kind, Literal::Kind::I64);
  EXPECT_EQ(pack.fields[7].kind, PackField::Kind::Var);
  EXPECT_EQ(pack.fields[7].name, "tokens");
  EXPECT_EQ(pack.fields[8].kind, PackField::Kind::Expr);
  EXPECT_EQ(pack.fields[8].expr.to_string(), "ceil_div(tokens, 16)");
  EXPECT_EQ(pack.fields[9].kind, PackField::Kind::Rank);
  EXPECT_EQ(pack.fields[9].name, "tp");
  EXPECT_EQ(args[5].literal.kind, Literal::Kind::F32);
  EXPECT_EQ(args[5].literal.f, 0.125);
  EXPECT_EQ(args[6].literal.kind, Literal::Kind::U8);
  EXPECT_EQ(args[7].literal.i, 1099511627776);

  const Launch& b = op.impl.launches[1];
  EXPECT_EQ(b.when->min, 65u);
  EXPECT_FALSE(b.when->max.has_value());
  EXPECT_FALSE(b.shared_mem.has_value());

  const Launch& x = op.impl.launches[2];
  EXPECT_TRUE(x.is_extern());
  EXPECT_EQ(x.extern_name(), "cublaslt_bf16_tn");
  EXPECT_TRUE(x.module.empty());
  EXPECT_EQ(x.block, (std::array<std::uint32_t, 3>{0, 0, 0}));
  ASSERT_TRUE(x.algo.has_value());
  EXPECT_EQ(x.algo->id, 21);
  EXPECT_EQ(x.algo->tile, 18);
  EXPECT_EQ(x.algo->stages, 8);
  EXPECT_EQ(x.algo->cluster_shape, -1);
  EXPECT_EQ((*x.args)[4].kind, LaunchArg::Kind::Rank);
  EXPECT_EQ((*x.args)[4].name, "tp");
}

TEST(ParseForms, ProgramsAndCallArgs) {
  Manifest m = parse_manifest(kFull);
  const Program& d = m.programs.at("decode");
  ASSERT_TRUE(d.batch.has_value());
  EXPECT_EQ(d.batch->groups, 64u);
  EXPECT_FALSE(d.batch->rows.is_var());
  EXPECT_EQ(d.batch->rows.value, 1u);
  EXPECT_EQ(d.batch->span, "span");
  EXPECT_EQ(d.batch->context, "ctx");
  EXPECT_TRUE(d.graph);
  EXPECT_FALSE(d.once);
  ASSERT_EQ(d.calls.size(), 3u);
  const Call& c = d.calls[0];
  EXPECT_EQ(c.label, "layer0.attn");
  EXPECT_EQ(c.args[0].kind, CallArg::Kind::Buf);
  EXPECT_EQ(c.args[0].offset, 5120u);
  EXPECT_EQ(c.args[1].kind, CallArg::Kind::State);
  EXPECT_EQ(c.args[1].offset, 65536u);
  EXPECT_EQ(c.args[2].kind, CallArg::Kind::Expr);
  EXPECT_EQ(c.args[2].expr.to_string(), "add(tokens, 1)");
  EXPECT_EQ(d.calls[1].args[2].kind, CallArg::Kind::Literal);
  EXPECT_EQ(d.calls[1].args[2].literal.i, -3);
  EXPECT_EQ(d.calls[2].args[2].literal.kind, Literal::Kind::U8);
  EXPECT_EQ(d.calls[2].args[3].kind, CallArg::Kind::Rank);
  EXPECT_EQ(d.calls[2].args[3].name, "tp");
  const Program& p = m.programs.at("prefill");
  EXPECT_TRUE(p.batch->rows.is_var());
  EXPECT_EQ(p.batch->rows.var, "tokens");
  EXPECT_TRUE(p.batch->span.empty());
  EXPECT_TRUE(m.programs.at("load").once);
  EXPECT_TRUE(m.programs.at("prep").derive);
  EXPECT_FALSE(m.programs.at("prep").batch.has_value());
}
