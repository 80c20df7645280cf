// Malformed manifests: every error is ManifestParse and its message starts with the JSON path.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "parse_support.hpp"

using namespace kern;
using namespace kern::core;
using namespace kern::core::testing;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(ParseErrors, SyntaxErrorNamesLineAndColumn) {
  std::string text = "{\n  \"schema_version\": 5,\n  \"model\": \"x\",\n  \"vars\": {\"tokens\": {\"max\": 4,}}\n}";
  std::string m = parse_error_text(text);
  EXPECT_THAT(m, HasSubstr("syntax error at line 4, column 32")) << m;
  EXPECT_THAT(m, StartsWith("manifest: syntax error")) << m;  // no path: the text is not JSON
  EXPECT_THAT(parse_error_text(""), HasSubstr("line 1, column 1"));
  // nesting too deep names where it happened
  std::string deep = "{\"model\": " + std::string(200, '[') + std::string(200, ']') + "}";
  EXPECT_THAT(parse_error_text(deep), StartsWith("model[0][0]"));
  EXPECT_THAT(parse_error_text("[1, 2"), HasSubstr("syntax error"));
}

TEST(ParseErrors, DuplicateKeysAnywhere) {
  std::string text(kToyManifest);
  // a nested duplicate inside a launch
  std::string dup = text;
  dup.replace(dup.find("\"entry\": \"demo_scale\""), 21, "\"entry\": \"demo_scale\", \"entry\": \"x\"");
  EXPECT_EQ(parse_error_text(dup), "ops.scale_rows.impl.launches[0].entry: duplicate key \"entry\"");
  // a duplicate map name (two buffers called inp)
  dup = text;
  dup.replace(dup.find("\"res\":"), 6, "\"inp\":");
  EXPECT_EQ(parse_error_text(dup), "buffers.inp: duplicate key \"inp\"");
  // duplicate constants are caught before expansion
  dup = text;
  dup.replace(dup.find("\"model\""), 7, "\"constants\": {\"A\": 1, \"A\": 2}, \"model\"");
  EXPECT_EQ(parse_error_text(dup), "constants.A: duplicate key \"A\"");
  // a duplicate inside an arg object
  dup = text;
  dup.replace(dup.find("{\"buf\": \"gain\"}"), 15, "{\"buf\": \"gain\", \"buf\": \"res\"}");
  EXPECT_EQ(parse_error_text(dup), "programs.step.calls[0].args[1].buf: duplicate key \"buf\"");
}

TEST(ParseErrors, RootMustBeAnObject) {
  EXPECT_THAT(parse_error_text("[]"), StartsWith("<root>: expected manifest (a JSON object), got an array"));
  EXPECT_THAT(parse_error_text("5"), StartsWith("<root>:"));
}

TEST(ParseErrors, UnknownFieldInEveryObjectKind) {
  struct Case {
    std::string expected_path;
    std::function<void(Json&)> mutate;
  };
  auto put = [](Json& where) { where["bogus"] = 1; };
  std::vector<Case> cases{
      {"bogus", [&](Json& d) { put(d); }},
      {"vars.tokens.bogus", [&](Json& d) { put(d["vars"]["tokens"]); }},
      {"states.cache.bogus", [&](Json& d) { put(d["states"]["cache"]); }},
      {"states.h.host.bogus",
       [&](Json& d) {
         d["states"]["h"] = {{"host", {{"dtype", "u8"}, {"shape", {0}}, {"strides", {1}}, {"bogus", 1}}}};
       }},
      {"buffers.inp.bogus", [&](Json& d) { put(d["buffers"]["inp"]); }},
      {"buffers.inp.domain.bogus",
       [&](Json& d) {
         d["buffers"]["inp"]["domain"] = {{"min", 0}, {"bogus", 1}};
       }},
      {"buffers.gain.bind[0].bogus", [&](Json& d) { put(d["buffers"]["gain"]["bind"][0]); }},
      {"buffers.gain.bind[0].tensor.bogus",
       [&](Json& d) {
         d["buffers"]["gain"]["bind"][0]["tensor"] = {{"group", "tp"}, {"tensors", {"a"}}, {"bogus", 1}};
       }},
      {"buffers.gain.bind[0].rows.bogus",
       [&](Json& d) {
         d["buffers"]["gain"]["bind"][0]["rows"] = {{"group", "tp"}, {"ranges", {{0, 1}}}, {"bogus", 1}};
       }},
      {"buffers.gain.bind[0].interleave.bogus",
       [&](Json& d) {
         d["buffers"]["gain"]["bind"][0]["interleave"] = {{"with", "b"}, {"rows", 2}, {"bogus", 1}};
       }},
      {"modules.demo.bogus", [&](Json& d) { put(d["modules"]["demo"]); }},
      {"ops.scale_rows.bogus", [&](Json& d) { put(d["ops"]["scale_rows"]); }},
      {"ops.scale_rows.impl.bogus", [&](Json& d) { put(d["ops"]["scale_rows"]["impl"]); }},
      {"ops.scale_rows.impl.scratch.s.bogus",
       [&](Json& d) {
         d["ops"]["scale_rows"]["impl"]["scratch"]["s"] = {{"dtype", "f32"}, {"shape", {4}}, {"bogus", 1}};
       }},
      {"ops.scale_rows.impl.launches[0].bogus", [&](Json& d) { put(toy_launch(d)); }},
      {"ops.scale_rows.impl.launches[0].when.bogus",
       [&](Json& d) {
         toy_launch(d)["when"] = {{"var", "tokens"}, {"bogus", 1}};
       }},
      {"ops.scale_rows.impl.launches[0].args[0].bogus",
       [&](Json& d) {
         toy_launch(d)["args"] = {{{"param", 0}, {"bogus", 1}}};
       }},
      {"ops.scale_rows.impl.launches[0].args[0].pack.bogus",
       [&](Json& d) {
         toy_launch(d)["args"] = {{{"pack", {{"size", 8}, {"fields", Json::array()}, {"bogus", 1}}}}};
       }},
      {"ops.scale_rows.impl.launches[0].args[0].pack.fields[0].bogus",
       [&](Json& d) {
         toy_launch(d)["args"] = {{{"pack", {{"size", 8}, {"fields", {{{"at", 0}, {"i32", 1}, {"bogus", 1}}}}}}}};
       }},
      {"ops.scale_rows.impl.launches[0].args[0].pack.fields[0].tensormap.bogus",
       [&](Json& d) {
         Json tm = {{"param", 0},  {"dtype", "bf16"}, {"dims", {64}}, {"strides", Json::array()},
                    {"box", {64}}, {"bogus", 1}};
         toy_launch(d)["args"] = {{{"pack", {{"size", 128}, {"fields", {{{"at", 0}, {"tensormap", tm}}}}}}}};
       }},
      {"ops.ext.impl.launches[0].algo.bogus",
       [&](Json& d) {
         Json algo = {{"id", 1},      {"tile", 0},   {"stages", 0},      {"split_k", 1},       {"reduction", 0},
                      {"swizzle", 0}, {"custom", 0}, {"inner_shape", 0}, {"cluster_shape", 0}, {"bogus", 1}};
         d["ops"]["ext"] = {{"params", Json::array()},
                            {"impl", {{"launches", {{{"entry", "extern:cublaslt_bf16_tn"}, {"algo", algo}}}}}}};
       }},
      {"ops.ext.impl.launches[0].bogus",
       [&](Json& d) {
         d["ops"]["ext"] = {{"params", Json::array()},
                            {"impl", {{"launches", {{{"entry", "extern:x"}, {"bogus", 1}}}}}}};
       }},
      {"programs.step.bogus", [&](Json& d) { put(d["programs"]["step"]); }},
      {"programs.step.batch.bogus",
       [&](Json& d) {
         d["programs"]["step"]["batch"] = {{"groups", 1}, {"rows", 1}, {"bogus", 1}};
       }},
      {"programs.step.calls[0].bogus", [&](Json& d) { put(toy_call(d)); }},
      {"programs.step.calls[0].args[0].bogus", [&](Json& d) { put(toy_call(d)["args"][0]); }},
      {"programs.step.calls[0].args[4].bogus", [&](Json& d) { put(toy_call(d)["args"][4]); }},
      {"cut.bogus",
       [&](Json& d) {
         d["cut"] = {{"id", "pp"}, {"stage", 0}, {"stages", 2}, {"bogus", 1}};
       }},
      {"topology.bogus",
       [&](Json& d) {
         d["topology"] = {{"groups", {{"tp", 2}}}, {"bogus", 1}};
       }},
  };
  for (const Case& c : cases) {
    Json doc = toy();
    c.mutate(doc);
    std::string m = parse_error(doc);
    EXPECT_THAT(m, StartsWith(c.expected_path + ": unknown field \"bogus\"")) << m;
  }
}

TEST(ParseErrors, UnknownFieldMessageListsAllowedFields) {
  Json doc = toy();
  doc["vars"]["tokens"]["min"] = 1;
  EXPECT_EQ(parse_error(doc), "vars.tokens.min: unknown field \"min\" in var (allowed: max)");
}

TEST(ParseErrors, MissingRequiredFields) {
  struct Case {
    std::string path, field;
    std::function<void(Json&)> mutate;
  };
  std::vector<Case> cases{
      {"<root>", "schema_version", [](Json& d) { d.erase("schema_version"); }},
      {"<root>", "model", [](Json& d) { d.erase("model"); }},
      {"<root>", "buffers", [](Json& d) { d.erase("buffers"); }},
      {"<root>", "modules", [](Json& d) { d.erase("modules"); }},
      {"<root>", "ops", [](Json& d) { d.erase("ops"); }},
      {"<root>", "programs", [](Json& d) { d.erase("programs"); }},
      {"vars.tokens", "max", [](Json& d) { d["vars"]["tokens"].erase("max"); }},
      {"buffers.inp", "dtype", [](Json& d) { d["buffers"]["inp"].erase("dtype"); }},
      {"buffers.inp", "shape", [](Json& d) { d["buffers"]["inp"].erase("shape"); }},
      {"buffers.inp", "kind", [](Json& d) { d["buffers"]["inp"].erase("kind"); }},
      {"buffers.gain.bind[0]", "tensor", [](Json& d) { d["buffers"]["gain"]["bind"][0].erase("tensor"); }},
      {"modules.demo", "sha256", [](Json& d) { d["modules"]["demo"].erase("sha256"); }},
      {"ops.scale_rows", "impl", [](Json& d) { d["ops"]["scale_rows"].erase("impl"); }},
      {"ops.scale_rows", "params", [](Json& d) { d["ops"]["scale_rows"].erase("params"); }},
      {"ops.scale_rows.impl", "launches", [](Json& d) { d["ops"]["scale_rows"]["impl"].erase("launches"); }},
      {"ops.scale_rows.impl.launches[0]", "entry", [](Json& d) { toy_launch(d).erase("entry"); }},
      {"ops.scale_rows.impl.launches[0]", "block", [](Json& d) { toy_launch(d).erase("block"); }},
      {"ops.scale_rows.impl.launches[0]", "grid", [](Json& d) { toy_launch(d).erase("grid"); }},
      {"ops.scale_rows.impl.launches[0].when", "var",
       [](Json& d) {
         toy_launch(d)["when"] = {{"min", 1}};
       }},
      {"programs.step", "calls", [](Json& d) { d["programs"]["step"].erase("calls"); }},
      {"programs.step.calls[0]", "op", [](Json& d) { toy_call(d).erase("op"); }},
      {"programs.step.calls[0]", "args", [](Json& d) { toy_call(d).erase("args"); }},
      {"programs.step.batch", "rows",
       [](Json& d) {
         d["programs"]["step"]["batch"] = {{"groups", 1}};
       }},
      {"cut", "stages",
       [](Json& d) {
         d["cut"] = {{"id", "pp"}, {"stage", 0}};
       }},
  };
  for (const Case& c : cases) {
    Json doc = toy();
    c.mutate(doc);
    std::string m = parse_error(doc);
    EXPECT_THAT(m, StartsWith(c.path + ": missing required field \"" + c.field + "\"")) << m;
  }
  // In a pack field, "at" is reported at the field's own path.
  Json doc = toy();
  toy_launch(doc)["args"] = {{{"pack", {{"size", 4}, {"fields", {{{"i32", 1}}}}}}}};
  EXPECT_THAT(parse_error(doc),
              StartsWith("ops.scale_rows.impl.launches[0].args[0].pack.fields[0]: missing required field \"at\""));
}

TEST(ParseErrors, WrongJsonTypes) {
  struct Case {
    std::string path;
    std::function<void(Json&)> mutate;
  };
  std::vector<Case> cases{
      {"model", [](Json& d) { d["model"] = 5; }},
      {"vars", [](Json& d) { d["vars"] = Json::array(); }},
      {"vars.tokens", [](Json& d) { d["vars"]["tokens"] = 512; }},
      {"vars.tokens.max", [](Json& d) { d["vars"]["tokens"]["max"] = Json::array({512}); }},
      {"vars.tokens.max", [](Json& d) { d["vars"]["tokens"]["max"] = true; }},
      {"vars.tokens.max", [](Json& d) { d["vars"]["tokens"]["max"] = nullptr; }},
      {"buffers.inp.shape", [](Json& d) { d["buffers"]["inp"]["shape"] = "tokens"; }},
      {"buffers.inp.shape[1]", [](Json& d) { d["buffers"]["inp"]["shape"][1] = Json::object(); }},
      {"buffers.inp.dtype", [](Json& d) { d["buffers"]["inp"]["dtype"] = 2; }},
      {"buffers.inp.export", [](Json& d) { d["buffers"]["inp"]["export"] = 1; }},
      {"buffers.inp.domain", [](Json& d) { d["buffers"]["inp"]["domain"] = Json::array(); }},
      {"buffers.inp.domain.monotone",
       [](Json& d) {
         d["buffers"]["inp"]["domain"] = {{"monotone", "yes"}};
       }},
      {"buffers.inp.domain.min",
       [](Json& d) {
         d["buffers"]["inp"]["domain"] = {{"min", Json::array()}};
       }},
      {"buffers.gain.bind",
       [](Json& d) {
         d["buffers"]["gain"]["bind"] = {{"tensor", "x"}};
       }},
      {"buffers.gain.bind[0].tensor", [](Json& d) { d["buffers"]["gain"]["bind"][0]["tensor"] = 3; }},
      {"buffers.gain.bind[0].rows", [](Json& d) { d["buffers"]["gain"]["bind"][0]["rows"] = "0:4"; }},
      {"buffers.gain.bind[0].rows",
       [](Json& d) {
         d["buffers"]["gain"]["bind"][0]["rows"] = {0, 1, 2};
       }},
      {"ops.scale_rows.params[4]", [](Json& d) { d["ops"]["scale_rows"]["params"][4] = 4; }},
      {"ops.scale_rows.impl.launches", [](Json& d) { d["ops"]["scale_rows"]["impl"]["launches"] = Json::object(); }},
      {"ops.scale_rows.impl.launches[0].block",
       [](Json& d) {
         toy_launch(d)["block"] = {32, 1};
       }},
      {"ops.scale_rows.impl.launches[0].grid",
       [](Json& d) {
         toy_launch(d)["grid"] = {1, 1, 1, 1};
       }},
      {"ops.scale_rows.impl.launches[0].grid[0]", [](Json& d) { toy_launch(d)["grid"][0] = true; }},
      {"ops.scale_rows.impl.launches[0].pdl", [](Json& d) { toy_launch(d)["pdl"] = "true"; }},
      {"ops.scale_rows.impl.launches[0].args", [](Json& d) { toy_launch(d)["args"] = Json::object(); }},
      {"ops.scale_rows.impl.launches[0].args[0]", [](Json& d) { toy_launch(d)["args"] = {0}; }},
      {"programs.step.graph", [](Json& d) { d["programs"]["step"]["graph"] = 1; }},
      {"programs.step.calls[0].label", [](Json& d) { toy_call(d)["label"] = 7; }},
      {"programs.step.calls[0].args[0].buf", [](Json& d) { toy_call(d)["args"][0]["buf"] = 1; }},
      {"programs.step.calls[0].args[4].var", [](Json& d) { toy_call(d)["args"][4]["var"] = ""; }},
  };
  for (const Case& c : cases) {
    Json doc = toy();
    c.mutate(doc);
    std::string m = parse_error(doc);
    EXPECT_THAT(m, StartsWith(c.path + ": ")) << m;
    EXPECT_THAT(m, HasSubstr("expected")) << m;
  }
}

TEST(ParseErrors, SchemaVersion) {
  Json doc = toy();
  doc["schema_version"] = 4;  // rule 1 is the verifier's: the parser accepts any integer
  EXPECT_EQ(parse_manifest(doc.dump()).schema_version, 4u);
  doc["schema_version"] = 5.0;
  EXPECT_THAT(parse_error(doc), StartsWith("schema_version: expected a non-negative integer schema version, got 5.0"));
  doc["schema_version"] = -5;
  EXPECT_THAT(parse_error(doc), StartsWith("schema_version: expected a non-negative integer"));
  doc["schema_version"] = "5";
  EXPECT_THAT(parse_error(doc), StartsWith("schema_version: "));
  doc["constants"] = {{"V", 5}};
  doc["schema_version"] = "V";
  EXPECT_THAT(parse_error(doc),
              StartsWith("schema_version: schema_version must be a literal integer, never a constant name"));
}

TEST(ParseErrors, IntegerRanges) {
  struct Case {
    std::string path;
    Json value;
    std::string message_part;
  };
  // call arg literals
  std::vector<Case> literal_cases{
      {"i32", 2147483648ll, "does not fit in i32"},
      {"i32", -2147483649ll, "does not fit in i32"},
      {"i32", 1.5, "expected an integer"},
      {"i32", 2.0, "expected an integer"},
      {"u8", 256, "does not fit in u8"},
      {"u8", -1, "does not fit in u8"},
      {"i64", 9223372036854775808ull, "does not fit in i64"},
      {"i64", 1e3, "expected an integer"},
      {"f32", 1e39, "does not fit in f32"},
      {"i32", "x", "unknown constant \"x\""},
      {"i32", Json::array(), "expected an integer or a constant name"},
  };
  for (const Case& c : literal_cases) {
    Json doc = toy();
    toy_call(doc)["args"][4] = {{c.path, c.value}};
    std::string m = parse_error(doc);
    EXPECT_THAT(m, StartsWith("programs.step.calls[0].args[4]." + c.path + ": ")) << m;
    EXPECT_THAT(m, HasSubstr(c.message_part)) << m;
  }
  // Edges that fit.
  for (auto [tag, v] : std::vector<std::pair<std::string, Json>>{{"i32", 2147483647},
                                                                 {"i32", -2147483648ll},
                                                                 {"u8", 255},
                                                                 {"u8", 0},
                                                                 {"i64", -9223372036854775807ll - 1},
                                                                 {"i64", 9223372036854775807ll},
                                                                 {"f32", 3.4e38},
                                                                 {"f32", -1}}) {
    Json doc = toy();
    toy_call(doc)["args"][4] = {{tag, v}};
    Manifest m = parse_manifest(doc.dump());
    const CallArg& a = m.programs.at("step").calls[0].args[4];
    EXPECT_EQ(a.kind, CallArg::Kind::Literal);
    if (tag == "f32")
      EXPECT_EQ(a.literal.f, v.get<double>());
    else
      EXPECT_EQ(a.literal.i, v.get<std::int64_t>());
  }
  // u64 positions: negatives and floats are errors; the full u64 range fits.
  Json doc = toy();
  doc["vars"]["tokens"]["max"] = -1;
  EXPECT_THAT(parse_error(doc), StartsWith("vars.tokens.max: expected a non-negative integer, got -1"));
  doc["vars"]["tokens"]["max"] = 512.0;
  EXPECT_THAT(parse_error(doc), StartsWith("vars.tokens.max: expected a non-negative integer, got 512"));
  doc["vars"]["tokens"]["max"] = 18446744073709551615ull;
  EXPECT_EQ(parse_manifest(doc.dump()).vars.at("tokens").max, 18446744073709551615ull);
  // u32 positions (block, cluster, param index)
  doc = toy();
  toy_launch(doc)["block"][0] = 4294967296ull;
  EXPECT_THAT(parse_error(doc), StartsWith("ops.scale_rows.impl.launches[0].block[0]: 4294967296 does not fit in u32"));
}

TEST(ParseErrors, UnknownEnumWords) {
  struct Case {
    std::string path, part;
    std::function<void(Json&)> mutate;
  };
  std::vector<Case> cases{
      {"buffers.inp.dtype", "unknown dtype \"bfloat16\"", [](Json& d) { d["buffers"]["inp"]["dtype"] = "bfloat16"; }},
      {"buffers.inp.dtype", "unknown dtype \"f64\"", [](Json& d) { d["buffers"]["inp"]["dtype"] = "f64"; }},
      {"buffers.inp.kind", "unknown buffer kind \"scratch\"", [](Json& d) { d["buffers"]["inp"]["kind"] = "scratch"; }},
      {"buffers.inp.fill", "unknown fill role \"tokenz\"", [](Json& d) { d["buffers"]["inp"]["fill"] = "tokenz"; }},
      {"buffers.inp.placement", "unknown placement \"gpu\"", [](Json& d) { d["buffers"]["inp"]["placement"] = "gpu"; }},
      {"states.h.host.dtype", "unknown dtype",
       [](Json& d) {
         d["states"]["h"] = {{"host", {{"dtype", "x"}, {"shape", {0}}, {"strides", {1}}}}};
       }},
      {"ops.scale_rows.impl.scratch.s.dtype", "unknown dtype",
       [](Json& d) {
         d["ops"]["scale_rows"]["impl"]["scratch"]["s"] = {{"dtype", "F32"}, {"shape", {4}}};
       }},
      {"ops.scale_rows.impl.launches[0].args[0].pack.fields[0].tensormap.dtype", "unknown tensormap dtype \"fp8e4m3\"",
       [](Json& d) {
         Json tm = {{"param", 0}, {"dtype", "fp8e4m3"}, {"dims", {64}}, {"strides", Json::array()}, {"box", {64}}};
         toy_launch(d)["args"] = {{{"pack", {{"size", 128}, {"fields", {{{"at", 0}, {"tensormap", tm}}}}}}}};
       }},
  };
  for (const Case& c : cases) {
    Json doc = toy();
    c.mutate(doc);
    std::string m = parse_error(doc);
    EXPECT_THAT(m, StartsWith(c.path + ": " + c.part)) << m;
  }
}

TEST(ParseErrors, MalformedParamTypes) {
  struct Case {
    std::string text, part;
  };
  for (const Case& c : std::vector<Case>{{"buffer<bf16>", "needs a direction"},
                                         {"state", "needs a direction"},
                                         {"in i32", "take no direction"},
                                         {"out bytes<8>", "take no direction"},
                                         {"in buffer<bf17>", "unknown dtype \"bf17\""},
                                         {"bytes<0>", "N >= 1"},
                                         {"bytes<08>", "leading zero"},
                                         {"in  buffer<bf16>", "canonical spelling"},
                                         {" i32", "canonical spelling"},
                                         {"in buffer< bf16>", "canonical spelling"},
                                         {"", "empty"},
                                         {"float", "expected i32 | i64"}}) {
    Json doc = toy();
    doc["ops"]["scale_rows"]["params"][1] = c.text;
    std::string m = parse_error(doc);
    EXPECT_THAT(m, StartsWith("ops.scale_rows.params[1]: malformed param type \"" + c.text + "\": ")) << m;
    EXPECT_THAT(m, HasSubstr(c.part)) << m;
  }
  // launch params use the same grammar
  Json doc = toy();
  toy_launch(doc)["params"] = {"in buffer<bf16>", "inout"};
  EXPECT_THAT(parse_error(doc),
              StartsWith("ops.scale_rows.impl.launches[0].params[1]: malformed param type \"inout\""));
}

TEST(ParseErrors, ExpressionForms) {
  struct Case {
    Json grid0;
    std::string path_suffix, part;
  };
  const std::string g = "ops.scale_rows.impl.launches[0].grid[0]";
  for (const Case& c : std::vector<Case>{
           {-1, "", "expected a non-negative integer, a var name or an expression object, got -1"},
           {1.5, "", "expected a non-negative integer, a var name or an expression object, got 1.5"},
           {true, "", "expected a non-negative integer, a var name or an expression object, got a boolean"},
           {"", "", "got an empty string"},
           {Json::object(), "", "empty expression object"},
           {{{"div", {"tokens", 2}}}, ".div", "unknown expression operator \"div\""},
           {{{"mul", {"tokens", 2}}, {"add", {1, 2}}}, "", "exactly one key"},
           {{{"mul", {"tokens"}}}, ".mul", "two operands, got 1 operands"},
           {{{"mul", "tokens"}}, ".mul", "two operands, got a string"},
           {{{"ceil_div", {"tokens", "tokens"}}}, ".ceil_div[1]", "cannot be a var"},
           {{{"mul", {"tokens", -2}}}, ".mul[1]", "expected a non-negative integer"},
           {{{"add", {"tokens", {{"mul", {1, 2.5}}}}}}, ".add[1].mul[1]", "expected a non-negative integer, got 2.5"},
       }) {
    Json doc = toy();
    toy_launch(doc)["grid"][0] = c.grid0;
    std::string m = parse_error(doc);
    EXPECT_THAT(m, StartsWith(g + c.path_suffix + ": ")) << m;
    EXPECT_THAT(m, HasSubstr(c.part)) << m;
  }
  EXPECT_EQ(
      [] {
        Json doc = toy();
        toy_launch(doc)["grid"][0] = 1.5;
        return parse_error(doc);
      }(),
      g + ": expected a non-negative integer, a var name or an expression object, got 1.5");
}

TEST(ParseErrors, ExternAndKernelLaunchShapes) {
  // A kernel entry needs block and grid, with or without a module (module-less kernels are R6).
  Json doc = toy();
  toy_launch(doc).erase("module");
  EXPECT_EQ(parse_manifest(doc.dump()).ops.at("scale_rows").impl.launches[0].block[0], 32u);
  toy_launch(doc).erase("block");
  EXPECT_THAT(parse_error(doc),
              StartsWith("ops.scale_rows.impl.launches[0]: missing required field \"block\" in launch"));
  // Field/kind mismatches are the verifier's (R6 / R12): the parser keeps them in the model.
  doc = toy();
  doc["ops"]["scale_rows"]["impl"]["launches"][0] = {
      {"entry", "extern:cublaslt_bf16_tn"}, {"pdl", true}, {"block", {1, 1, 1}}};
  const Launch x = parse_manifest(doc.dump()).ops.at("scale_rows").impl.launches[0];
  EXPECT_TRUE(x.is_extern());
  EXPECT_TRUE(x.pdl);
  EXPECT_EQ(x.block[0], 1u);
  EXPECT_EQ(x.grid[0].value, 0u);
  doc = toy();
  doc["ops"]["scale_rows"]["impl"]["launches"][0] = {{"entry", "extern:cublaslt_bf16_tn"}, {"algo", {{"id", 3}}}};
  EXPECT_THAT(parse_error(doc), StartsWith("ops.scale_rows.impl.launches[0].algo: missing required field \"tile\""));
  doc = toy();
  toy_launch(doc)["algo"] = {{"id", 1},      {"tile", 0},   {"stages", 0},      {"split_k", 1},      {"reduction", 0},
                             {"swizzle", 0}, {"custom", 0}, {"inner_shape", 0}, {"cluster_shape", 0}};
  EXPECT_EQ(parse_manifest(doc.dump()).ops.at("scale_rows").impl.launches[0].algo->split_k, 1);
  doc = toy();
  doc["ops"]["scale_rows"]["impl"]["launches"][0] = {{"entry", "extern:cublaslt_bf16_tn"}, {"algo_m", 64}};
  EXPECT_EQ(parse_manifest(doc.dump()).ops.at("scale_rows").impl.launches[0].algo_m, 64u);
  doc["ops"]["scale_rows"]["impl"]["launches"][0]["algo_m"] = "64";
  EXPECT_THAT(parse_error(doc), StartsWith("ops.scale_rows.impl.launches[0].algo_m"));
}

namespace {

// Each case's `arg`, put into the toy manifest by `put`, fails to parse at `path` with `part` in the message.
struct ArgCase {
  Json arg;
  std::string path, part;
};
void expect_arg_errors(const std::function<void(Json& doc, const Json& arg)>& put, const std::vector<ArgCase>& cases) {
  for (const ArgCase& c : cases) {
    Json doc = toy();
    put(doc, c.arg);
    std::string m = parse_error(doc);
    EXPECT_THAT(m, StartsWith(c.path + ": ")) << m;
    EXPECT_THAT(m, HasSubstr(c.part)) << m;
  }
}

}  // namespace

TEST(ParseErrors, UntaggedCallArgs) {
  const std::string a = "programs.step.calls[0].args[0]";
  expect_arg_errors(
      [](Json& doc, const Json& arg) { toy_call(doc)["args"][0] = arg; },
      {
          {{{"buf", "x"}, {"i32", 1}}, a, "ambiguous call arg: it has both \"buf\" and \"i32\""},
          {{{"var", "x"}, {"expr", 1}}, a, "ambiguous call arg: it has both \"expr\" and \"var\""},
          {{{"state", "x"}, {"buf", "y"}}, a, "ambiguous call arg"},
          {{{"buffer", "x"}}, a, "unrecognized call arg with keys \"buffer\""},
          {Json::object(), a, "empty call arg"},
          {{{"offset", 4}}, a, "unrecognized call arg with keys \"offset\""},
          {{{"var", "tokens"}, {"offset", 4}}, a + ".offset", "unknown field \"offset\" in \"var\" call arg"},
          {{{"i32", 1}, {"offset", 4}}, a + ".offset", "unknown field \"offset\""},
          {{{"buf", "x"}, {"offset", -4}}, a + ".offset", "expected a non-negative integer"},
          {{{"param", 0}}, a, "unrecognized call arg"},  // a launch-arg form is not a call arg
          {"inp", a, "expected call arg (a JSON object), got a string"},
      });
}

TEST(ParseErrors, UntaggedLaunchArgsAndPackFields) {
  const std::string a = "ops.scale_rows.impl.launches[0].args[0]";
  expect_arg_errors(
      [](Json& doc, const Json& arg) { toy_launch(doc)["args"] = Json::array({arg}); },
      {
          {{{"param", 0}, {"scratch", "s"}}, a, "ambiguous launch arg: it has both \"param\" and \"scratch\""},
          {{{"buf", "x"}}, a, "unrecognized launch arg with keys \"buf\""},  // a call-arg form is not a launch arg
          {{{"var", "tokens"}}, a, "unrecognized launch arg"},
          {{{"param", -1}}, a + ".param", "expected a non-negative integer"},
          {{{"pack", {{"size", 8}, {"fields", {{{"at", 0}, {"var", "tokens"}, {"i32", 1}}}}}}},
           a + ".pack.fields[0]",
           "ambiguous pack field: it has both \"i32\" and \"var\""},
          {{{"pack", {{"size", 8}, {"fields", {{{"at", 0}}}}}}},
           a + ".pack.fields[0]",
           "unrecognized pack field with keys \"at\""},
          {{{"pack", {{"size", 8}, {"fields", {{{"at", 0}, {"buf", "x"}}}}}}},
           a + ".pack.fields[0]",
           "unrecognized pack field"},
          {{{"pack", {{"size", 8}, {"fields", {{{"at", 0}, {"u8", 300}}}}}}},
           a + ".pack.fields[0].u8",
           "does not fit in u8"},
      });
}

TEST(ParseErrors, DomainAndBindShapes) {
  Json doc = toy();
  doc["buffers"]["inp"]["domain"] = {{"stride", 16}};
  EXPECT_THAT(parse_error(doc),
              StartsWith("buffers.inp.domain.stride: \"stride\" is only allowed together with \"index_into\""));
  doc = toy();
  doc["buffers"]["gain"]["bind"][0]["tensor"] = {{"group", ""}, {"tensors", {"a"}}};
  EXPECT_THAT(parse_error(doc), StartsWith("buffers.gain.bind[0].tensor.group: group name must not be empty"));
  doc = toy();
  doc["buffers"]["gain"]["bind"][0]["cols"] = {{"group", "tp"}, {"ranges", {{0, 1}, {1}}}};
  EXPECT_THAT(parse_error(doc),
              StartsWith("buffers.gain.bind[0].cols.ranges[1]: expected a range [from, to], got 1 entries"));
  doc = toy();
  doc["buffers"]["inp"]["of"] = "";
  EXPECT_THAT(parse_error(doc), StartsWith("buffers.inp.of: \"of\" must not be empty"));
  doc = toy();
  doc["buffers"]["inp"]["shape"][0] = "";
  EXPECT_THAT(parse_error(doc), StartsWith("buffers.inp.shape[0]: "));
}
