// `constants`: every position category, resolution rules and the errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "parse_support.hpp"

using namespace kern;
using namespace kern::core;
using namespace kern::core::testing;
using ::testing::HasSubstr;
using ::testing::StartsWith;

namespace {

Json with_constants(Json doc, Json constants) {
  doc["constants"] = std::move(constants);
  return doc;
}

const Json kConstants = {{"HIDDEN", 32},  {"MAX_TOKENS", 512},
                         {"BLOCK", 128},  {"KV_BYTES", 147456},
                         {"EPS", 1e-6},   {"NEG", -5},
                         {"ONE", 1},      {"PAGE", 16},
                         {"OFF", 65536},  {"BIG", 4294967296ull},
                         {"SMEM", 98304}, {"ALGO", 21},
                         {"SW", 128},     {"TP", 2}};

}  // namespace

TEST(ParseConstants, EveryNumericPositionCategory) {
  Json doc = with_constants(toy(), kConstants);
  doc["vars"]["tokens"]["max"] = "MAX_TOKENS";
  doc["topology"] = {{"groups", {{"tp", "TP"}}}};
  doc["cut"] = {{"id", "pp"}, {"stage", "ONE"}, {"stages", "TP"}};
  doc["states"]["cache"]["bytes_per_token"] = "KV_BYTES";
  doc["states"]["h"] = {{"host", {{"dtype", "u8"}, {"shape", {0, "HIDDEN"}}, {"strides", {"HIDDEN", "ONE"}}}}};
  doc["buffers"]["inp"]["shape"] = {"tokens", "HIDDEN"};
  doc["buffers"]["inp"]["domain"] = {{"min", "NEG"}, {"max", "EPS"}};
  doc["buffers"]["res"]["domain"] = {{"index_into", "cache"}, {"stride", "PAGE"}};
  doc["buffers"]["gain"]["bind"][0]["rows"] = {"ONE", "HIDDEN"};
  doc["buffers"]["gain"]["bind"][0]["cols"] = {{"group", "tp"}, {"ranges", {{0, "PAGE"}, {"PAGE", "HIDDEN"}}}};
  doc["buffers"]["gain"]["bind"].push_back({{"tensor", "a"}, {"interleave", {{"with", "b"}, {"rows", "PAGE"}}}});
  doc["ops"]["scale_rows"]["impl"]["scratch"]["s"] = {{"dtype", "f32"}, {"shape", {"tokens", "BLOCK"}}};
  Json& l = toy_launch(doc);
  l["block"] = {"BLOCK", "ONE", 1};
  l["grid"] = {{{"ceil_div", {"tokens", "PAGE"}}}, "HIDDEN", {{"add", {"ONE", "tokens"}}}};
  l["shared_mem"] = "SMEM";
  l["cluster"] = {"TP", "ONE", "ONE"};
  l["when"] = {{"var", "tokens"}, {"min", "ONE"}, {"max", "MAX_TOKENS"}};
  Json tm = {{"param", "ONE"},          {"dtype", "bf16"}, {"dims", {"HIDDEN", 0}},  {"strides", {"BLOCK"}},
             {"box", {"PAGE", "PAGE"}}, {"swizzle", "SW"}, {"l2_promotion", "BLOCK"}};
  l["args"] = {{{"param", "ONE"}},
               {{"i32", "HIDDEN"}},
               {{"f32", "EPS"}},
               {{"u8", "PAGE"}},
               {{"i64", "BIG"}},
               {{"pack",
                 {{"size", "BLOCK"},
                  {"fields",
                   {{{"at", 0}, {"tensormap", tm}},
                    {{"at", "BLOCK"}, {"width", "PAGE"}, {"i32", "NEG"}},
                    {{"at", 4}, {"expr", {{"mul", {"tokens", "PAGE"}}}}}}}}}}};
  doc["ops"]["ext"] = {{"params", Json::array()},
                       {"impl",
                        {{"launches",
                          {{{"entry", "extern:cublaslt_bf16_tn"},
                            {"algo",
                             {{"id", "ALGO"},
                              {"tile", "NEG"},
                              {"stages", 0},
                              {"split_k", "ONE"},
                              {"reduction", 0},
                              {"swizzle", 0},
                              {"custom", 0},
                              {"inner_shape", 0},
                              {"cluster_shape", 0}}}}}}}}};
  doc["programs"]["step"]["batch"] = {{"groups", "TP"}, {"rows", "HIDDEN"}};
  doc["programs"]["pre"] = {{"batch", {{"groups", 1}, {"rows", "tokens"}}}, {"calls", Json::array()}};
  Json& args = toy_call(doc)["args"];
  args[0]["offset"] = "OFF";
  args[3]["offset"] = "HIDDEN";
  args[4] = {{"i32", "HIDDEN"}};
  toy_call(doc)["args"].push_back({{"expr", {{"mul", {"HIDDEN", "PAGE"}}}}});
  toy_call(doc)["args"].push_back({{"f32", "EPS"}});

  Manifest m = parse_manifest(doc.dump());
  EXPECT_EQ(m.vars.at("tokens").max, 512u);
  EXPECT_EQ(m.topology.at("tp"), 2u);
  EXPECT_EQ(m.cut->stage, 1u);
  EXPECT_EQ(m.cut->stages, 2u);
  EXPECT_EQ(m.states.at("cache").bytes_per_token, 147456u);
  EXPECT_EQ(m.states.at("h").host->shape, (std::vector<std::uint64_t>{0, 32}));
  EXPECT_EQ(m.states.at("h").host->strides, (std::vector<std::uint64_t>{32, 1}));
  const Buffer& inp = m.buffers.at("inp");
  EXPECT_EQ(inp.shape[0].var, "tokens");  // a string naming no constant stays a var
  EXPECT_FALSE(inp.shape[1].is_var());
  EXPECT_EQ(inp.shape[1].value, 32u);
  EXPECT_EQ(inp.domain->min->kind, Bound::Kind::Int);
  EXPECT_EQ(inp.domain->min->i, -5);
  EXPECT_EQ(inp.domain->max->kind, Bound::Kind::Float);
  EXPECT_EQ(inp.domain->max->f, 1e-6);
  EXPECT_EQ(m.buffers.at("res").domain->index_into->stride, 16u);
  const auto& bind = m.buffers.at("gain").bind;
  EXPECT_EQ(bind[0].rows->single.from, 1u);
  EXPECT_EQ(bind[0].rows->single.to, 32u);
  EXPECT_EQ(bind[0].cols->per_rank[1].from, 16u);
  EXPECT_EQ(bind[1].interleave->rows, 16u);
  EXPECT_EQ(m.ops.at("scale_rows").impl.scratch.at("s").shape[1].value, 128u);
  const Launch& launch = m.ops.at("scale_rows").impl.launches[0];
  EXPECT_EQ(launch.block, (std::array<std::uint32_t, 3>{128, 1, 1}));
  EXPECT_EQ(launch.grid[0].to_string(), "ceil_div(tokens, 16)");
  EXPECT_EQ(launch.grid[1].kind, Expr::Kind::Const);
  EXPECT_EQ(launch.grid[1].value, 32u);
  EXPECT_EQ(launch.grid[2].to_string(), "add(1, tokens)");
  EXPECT_EQ(launch.shared_mem->value, 98304u);
  EXPECT_EQ(launch.cluster, (std::array<std::uint32_t, 3>{2, 1, 1}));
  EXPECT_EQ(launch.when->min, 1u);
  EXPECT_EQ(launch.when->max, 512u);
  const auto& la = *launch.args;
  EXPECT_EQ(la[0].param, 1u);
  EXPECT_EQ(la[1].literal.i, 32);
  EXPECT_EQ(la[2].literal.f, 1e-6);
  EXPECT_EQ(la[3].literal.i, 16);
  EXPECT_EQ(la[4].literal.i, 4294967296);
  const Pack& pack = *la[5].pack;
  EXPECT_EQ(pack.size, 128u);
  EXPECT_EQ(pack.fields[0].tensormap.param, 1u);
  EXPECT_EQ(pack.fields[0].tensormap.dims, (std::vector<std::uint64_t>{32, 0}));
  EXPECT_EQ(pack.fields[0].tensormap.strides, (std::vector<std::uint64_t>{128}));
  EXPECT_EQ(pack.fields[0].tensormap.box, (std::vector<std::uint64_t>{16, 16}));
  EXPECT_EQ(pack.fields[0].tensormap.swizzle, 128u);
  EXPECT_EQ(pack.fields[0].tensormap.l2_promotion, 128u);
  EXPECT_EQ(pack.fields[1].at, 128u);
  EXPECT_EQ(pack.fields[1].width, 16u);
  EXPECT_EQ(pack.fields[1].literal.i, -5);
  EXPECT_EQ(pack.fields[2].expr.to_string(), "mul(tokens, 16)");
  EXPECT_EQ(m.ops.at("ext").impl.launches[0].algo->id, 21);
  EXPECT_EQ(m.ops.at("ext").impl.launches[0].algo->tile, -5);
  EXPECT_EQ(m.programs.at("step").batch->groups, 2u);
  EXPECT_FALSE(m.programs.at("step").batch->rows.is_var());
  EXPECT_EQ(m.programs.at("step").batch->rows.value, 32u);
  EXPECT_EQ(m.programs.at("pre").batch->rows.var, "tokens");
  const auto& ca = m.programs.at("step").calls[0].args;
  EXPECT_EQ(ca[0].offset, 65536u);
  EXPECT_EQ(ca[3].offset, 32u);
  EXPECT_EQ(ca[4].kind, CallArg::Kind::Literal);
  EXPECT_EQ(ca[4].literal.i, 32);
  EXPECT_EQ(ca[5].expr.kind, Expr::Kind::Mul);
  EXPECT_EQ(ca[5].expr.args[0].kind, Expr::Kind::Const);  // an expression leaf naming a constant is the constant
  EXPECT_EQ(ca[5].expr.to_string(), "mul(32, 16)");
  EXPECT_EQ(ca[6].literal.f, 1e-6);
}

TEST(ParseConstants, CollisionWithAVar) {
  Json doc = with_constants(toy(), {{"tokens", 4}});
  EXPECT_EQ(parse_error(doc), "constants.tokens: constant \"tokens\" has the same name as a var");
}

TEST(ParseConstants, ValuesMustBeNumbers) {
  for (Json bad : {Json("HIDDEN"), Json("32"), Json::array({1}), Json::object(), Json(true), Json(nullptr),
                   Json{{"mul", {2, 3}}}}) {
    Json doc = with_constants(toy(), {{"HIDDEN", 32}, {"ALIAS", bad}});
    std::string m = parse_error(doc);
    EXPECT_THAT(m, StartsWith("constants.ALIAS: a constant's value must be a number")) << m;
  }
  Json doc = with_constants(toy(), Json::array());
  EXPECT_THAT(parse_error(doc), StartsWith("constants: expected constants map (a JSON object), got an array"));
}

TEST(ParseConstants, NamesMustBeNonEmpty) {
  Json doc = with_constants(toy(), {{"", 3}});
  EXPECT_THAT(parse_error(doc), StartsWith("constants.: a constant name must not be empty"));
}

TEST(ParseConstants, UnknownNameInANonExpressionPosition) {
  struct Case {
    std::string path;
    std::function<void(Json&)> mutate;
  };
  for (const Case& c : std::vector<Case>{
           {"ops.scale_rows.impl.launches[0].block[0]",
            [](Json& d) {
              toy_launch(d)["block"] = {"B", 1, 1};
            }},
           {"vars.tokens.max", [](Json& d) { d["vars"]["tokens"]["max"] = "MAX"; }},
           {"states.cache.bytes_per_token", [](Json& d) { d["states"]["cache"]["bytes_per_token"] = "tokens"; }},
           {"programs.step.calls[0].args[0].offset", [](Json& d) { toy_call(d)["args"][0]["offset"] = "OFF"; }},
           {"programs.step.calls[0].args[4].i32",
            [](Json& d) {
              toy_call(d)["args"][4] = {{"i32", "tokens"}};
            }},
           {"programs.step.batch.groups",
            [](Json& d) {
              d["programs"]["step"]["batch"] = {{"groups", "G"}, {"rows", 1}};
            }},
           {"ops.scale_rows.impl.launches[0].grid[0].mul[1]",
            [](Json& d) {
              toy_launch(d)["grid"][0] = {{"mul", {"tokens", "F"}}};
            }},
       }) {
    Json doc = with_constants(toy(), {{"HIDDEN", 32}});
    c.mutate(doc);
    std::string m = parse_error(doc);
    EXPECT_THAT(m, StartsWith(c.path + ": ")) << m;
    EXPECT_THAT(m, ::testing::AnyOf(HasSubstr("unknown constant"), HasSubstr("cannot be a var"))) << m;
  }
  Json doc = toy();
  toy_launch(doc)["block"] = {"B", 1, 1};
  EXPECT_EQ(parse_error(doc),
            "ops.scale_rows.impl.launches[0].block[0]: unknown constant \"B\" (expected a non-negative integer or a "
            "constant name)");
}

TEST(ParseConstants, ConstantOfTheWrongKindForItsPosition) {
  Json doc = with_constants(toy(), {{"EPS", 0.5}, {"NEG", -1}, {"WIDE", 3000000000ll}});
  toy_launch(doc)["block"][0] = "EPS";
  EXPECT_EQ(parse_error(doc),
            "ops.scale_rows.impl.launches[0].block[0]: expected a non-negative integer, got constant \"EPS\" (= 0.5)");
  doc = with_constants(toy(), {{"EPS", 0.5}, {"NEG", -1}, {"WIDE", 3000000000ll}});
  toy_launch(doc)["grid"][0] = "NEG";
  EXPECT_THAT(parse_error(doc), HasSubstr("got constant \"NEG\" (= -1)"));
  doc = with_constants(toy(), {{"EPS", 0.5}, {"NEG", -1}, {"WIDE", 3000000000ll}});
  toy_call(doc)["args"][4] = {{"i32", "WIDE"}};
  EXPECT_THAT(parse_error(doc), StartsWith("programs.step.calls[0].args[4].i32: 3000000000 does not fit in i32"));
  doc = with_constants(toy(), {{"EPS", 0.5}, {"NEG", -1}, {"WIDE", 3000000000ll}});
  toy_call(doc)["args"][4] = {{"u8", "EPS"}};
  EXPECT_THAT(parse_error(doc),
              StartsWith("programs.step.calls[0].args[4].u8: expected an integer, got constant \"EPS\" (= 0.5)"));
}

TEST(ParseConstants, NamePositionsNeverResolve) {
  // A var arg, when.var, batch.span and names stay names even when a constant has that name.
  Json doc = with_constants(toy(), {{"HIDDEN", 32}});
  toy_call(doc)["args"][4] = {{"var", "HIDDEN"}};
  toy_launch(doc)["when"] = {{"var", "HIDDEN"}};
  Manifest m = parse_manifest(doc.dump());
  EXPECT_EQ(m.programs.at("step").calls[0].args[4].kind, CallArg::Kind::Var);
  EXPECT_EQ(m.programs.at("step").calls[0].args[4].name, "HIDDEN");
  EXPECT_EQ(m.ops.at("scale_rows").impl.launches[0].when->var, "HIDDEN");
  // bytes<N> takes a literal N only
  doc["ops"]["scale_rows"]["params"][4] = "bytes<HIDDEN>";
  EXPECT_THAT(parse_error(doc), StartsWith("ops.scale_rows.params[4]: malformed param type \"bytes<HIDDEN>\""));
}
