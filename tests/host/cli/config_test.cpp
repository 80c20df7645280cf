// kern.toml: schema, relative paths, defaults, unknown keys, discovery by walking up.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "config.hpp"
#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "temp_dir.hpp"

namespace kern::cli {
namespace {

namespace fs = std::filesystem;

std::string api_error(const std::string& text, const std::string& path = "/cfg/kern.toml") {
  try {
    parse_config(text, path);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Api) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted:\n" << text;
  return {};
}

constexpr const char* kFull = R"(
gpu = 1
[targets.tiny]
manifest = "build/tiny.json"
kernels = "/abs/kernels"
weights = ["models/tiny", "../shared/extra.safetensors"]
tokenizer = "models/tiny/tokenizer.json"
[targets.big]
weights = "models/big"
[run]
prompt = "Hello"
steps = 7
target = "tiny"
)";

TEST(Config, ReadsEveryKeyAndResolvesPathsAgainstTheFile) {
  Config c = parse_config(kFull, "/proj/sub/kern.toml");
  EXPECT_EQ(c.path, "/proj/sub/kern.toml");
  EXPECT_EQ(c.gpu, 1);
  ASSERT_EQ(c.targets.size(), 2u);
  const Target& t = c.targets.at("tiny");
  EXPECT_EQ(t.manifest, "/proj/sub/build/tiny.json");
  EXPECT_EQ(t.kernels, "/abs/kernels");
  EXPECT_EQ(t.weights, (std::vector<std::string>{"/proj/sub/models/tiny", "/proj/shared/extra.safetensors"}));
  EXPECT_EQ(t.tokenizer, "/proj/sub/models/tiny/tokenizer.json");
  EXPECT_EQ(c.targets.at("big").weights, std::vector<std::string>{"/proj/sub/models/big"});
  EXPECT_TRUE(c.targets.at("big").manifest.empty());
  EXPECT_EQ(c.run.prompt, "Hello");
  EXPECT_EQ(c.run.steps, 7);
}

TEST(Config, TargetSelection) {
  Config c = parse_config(kFull, "/p/kern.toml");
  EXPECT_EQ(c.target("")->name, "tiny");  // [run] target
  EXPECT_EQ(c.target("big")->name, "big");
  try {
    c.target("huge");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Api);
    EXPECT_NE(std::string(e.what()).find("no target `huge` (targets: big, tiny)"), std::string::npos) << e.what();
  }
  Config one = parse_config("[targets.only]\nkernels = \"k\"\n", "/p/kern.toml");
  EXPECT_EQ(one.target("")->name, "only");
  Config two = parse_config("[targets.a]\n[targets.b]\n", "/p/kern.toml");
  EXPECT_FALSE(two.target("").has_value());
  Config none;
  EXPECT_FALSE(none.target("").has_value());
}

TEST(Config, UnknownKeysAreNamed) {
  EXPECT_NE(api_error("gpus = 0\n").find("`gpus` is not a kern.toml key"), std::string::npos);
  EXPECT_NE(api_error("[targets.t]\nmanifests = \"m\"\n").find("`targets.t.manifests`"), std::string::npos);
  EXPECT_NE(api_error("[run]\nprompts = \"x\"\n").find("`run.prompts`"), std::string::npos);
  EXPECT_NE(api_error("[test]\nseed = 1\n").find("`test`"), std::string::npos);
}

TEST(Config, WrongTypesAreNamed) {
  EXPECT_NE(api_error("gpu = \"0\"\n").find("`gpu` must be an integer"), std::string::npos);
  EXPECT_NE(api_error("gpu = -1\n").find("`gpu` must be at least 0"), std::string::npos);
  EXPECT_NE(api_error("[targets.t]\nweights = [1]\n").find("`targets.t.weights[0]` must be a string"),
            std::string::npos);
  EXPECT_NE(api_error("[targets.t]\nkernels = \"\"\n").find("must not be empty"), std::string::npos);
  EXPECT_NE(api_error("targets = 3\n").find("`targets` must be a table"), std::string::npos);
  EXPECT_NE(api_error("[run]\nsteps = 1.5\n").find("`run.steps` must be an integer"), std::string::npos);
  EXPECT_NE(api_error("[run]\ntarget = \"nope\"\n").find("`run.target` names no target"), std::string::npos);
}

TEST(Config, SyntaxErrorsCarryLine) {
  std::string msg = api_error("gpu = 0\n[targets.t\n", "/x/kern.toml");
  EXPECT_NE(msg.find("/x/kern.toml:2:"), std::string::npos) << msg;
}

TEST(Config, FoundByWalkingUp) {
  test::TempDir dir;
  const fs::path root = fs::canonical(dir.path());  // find_config and the cwd see the real path
  fs::create_directories(root / "a/b/c");
  write_file((root / "a/kern.toml").string(), "[targets.t]\nkernels = \"kern-dir\"\n");
  EXPECT_EQ(find_config((root / "a/b/c").string()), (root / "a/kern.toml").string());
  EXPECT_EQ(find_config((root / "a").string()), (root / "a/kern.toml").string());

  auto cwd = fs::current_path();
  fs::current_path(root / "a/b/c");
  Config c = load_config("");
  fs::current_path(cwd);
  EXPECT_EQ(c.path, (root / "a/kern.toml").string());
  EXPECT_EQ(c.targets.at("t").kernels, (root / "a/kern-dir").string());
}

TEST(Config, ExplicitPathMustExist) {
  try {
    load_config("/nonexistent/kern.toml");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
  }
}

}  // namespace
}  // namespace kern::cli
