// Encoding, id lists, generation_config.json stop tokens and the logits dump format.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "kern/driver/encode.hpp"
#include "kern/driver/generation_config.hpp"
#include "kern/driver/logits_dump.hpp"
#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/base/json.hpp"

namespace kern::driver {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("kern-driver-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TEST(Encode, IntsRoundTripPerDtype) {
  const std::vector<std::int64_t> v{0, 1, -2, 70000, 2147483647};
  EXPECT_EQ(decode_ints(DType::I32, encode_ints(DType::I32, v, "b"), "b"), v);
  const std::vector<std::int64_t> w{5, -1, 1ll << 40};
  const auto bytes = encode_ints(DType::I64, w, "b");
  ASSERT_EQ(bytes.size(), 24u);
  EXPECT_EQ(static_cast<unsigned>(bytes[0]), 5u);  // little-endian
  EXPECT_EQ(static_cast<unsigned>(bytes[8 + 7]), 0xffu);
  EXPECT_EQ(decode_ints(DType::I64, bytes, "b"), w);
  EXPECT_THROW(encode_ints(DType::I32, std::vector<std::int64_t>{1ll << 31}, "b"), Error);
  EXPECT_THROW(encode_ints(DType::F32, v, "b"), Error);
}

TEST(Encode, FloatsFromBf16F16F32) {
  // bf16 0x3FC0 = 1.5, 0xC020 = -2.5; f16 0x3E00 = 1.5, 0x0001 = 2^-24.
  const std::byte bf[] = {std::byte{0xC0}, std::byte{0x3F}, std::byte{0x20}, std::byte{0xC0}};
  EXPECT_EQ(decode_floats(DType::BF16, bf, 2, "l"), (std::vector<float>{1.5f, -2.5f}));
  const std::byte hf[] = {std::byte{0x00}, std::byte{0x3E}, std::byte{0x01}, std::byte{0x00}};
  const auto h = decode_floats(DType::F16, hf, 2, "l");
  EXPECT_EQ(h[0], 1.5f);
  EXPECT_EQ(h[1], std::ldexp(1.0f, -24));
  float f[3] = {0.25f, -7.0f, 3.0f};
  std::byte raw[12];
  std::memcpy(raw, f, 12);
  EXPECT_EQ(decode_floats(DType::F32, raw, 2, "l"), (std::vector<float>{0.25f, -7.0f}));
  EXPECT_THROW(decode_floats(DType::F32, raw, 4, "l"), Error);
}

TEST(IdList, ParsesAndRejects) {
  EXPECT_EQ(parse_id_list("1,22, 333", "--x"), (std::vector<std::int64_t>{1, 22, 333}));
  EXPECT_EQ(parse_id_list("7", "--x"), (std::vector<std::int64_t>{7}));
  for (const char* bad : {"", "1,,2", "a", "1,2,", "-3", "1.5"}) {
    try {
      parse_id_list(bad, "--prompt-ids");
      FAIL() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Api);
      EXPECT_NE(std::string(e.what()).find("--prompt-ids"), std::string::npos);
    }
  }
}

TEST(GenerationConfig, EosIdIntOrList) {
  EXPECT_EQ(parse_eos_tokens(R"({"eos_token_id": 151645})", "g"), (std::vector<std::int64_t>{151645}));
  EXPECT_EQ(parse_eos_tokens(R"({"eos_token_id": [151645, 151643], "top_k": 20})", "g"),
            (std::vector<std::int64_t>{151645, 151643}));
  EXPECT_TRUE(parse_eos_tokens(R"({"do_sample": true})", "g").empty());
  EXPECT_THROW(parse_eos_tokens(R"({"eos_token_id": "x"})", "g"), Error);
  EXPECT_THROW(parse_eos_tokens(R"({"eos_token_id": [1, 2.5]})", "g"), Error);
  EXPECT_THROW(parse_eos_tokens("[1]", "g"), Error);

  const fs::path d = temp_dir("gencfg");
  EXPECT_TRUE(read_eos_tokens(d.string()).empty());  // no file: no stop tokens
  write_file((d / "generation_config.json").string(), R"({"eos_token_id": [3, 4]})");
  write_file((d / "model.safetensors").string(), "x");
  EXPECT_EQ(read_eos_tokens(d.string()), (std::vector<std::int64_t>{3, 4}));
  EXPECT_EQ(read_eos_tokens((d / "model.safetensors").string()),
            (std::vector<std::int64_t>{3, 4}));  // a shard file: its folder
  fs::remove_all(d);
}

TEST(LogitsDump, WritesNpyAndSidecar) {
  const fs::path d = temp_dir("dump");
  const std::string path = (d / "l.npy").string();
  {
    LogitsDump dump(path, 3);
    const float r0[] = {1.0f, -2.0f, 0.5f};
    const float r1[] = {4.0f, 5.0f, 6.0f};
    dump.append(9, r0);
    dump.append(10, r1);
    EXPECT_THROW(dump.append(11, std::span<const float>(r0, 2)), Error);
    const std::int64_t prompt[] = {1, 2};
    const std::int64_t gen[] = {0, 2};
    dump.finish(prompt, gen, "steps");
  }
  const std::string bytes = read_file(path);
  ASSERT_EQ(bytes.size(), 128u + 6 * 4);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const std::uint16_t hlen = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
  EXPECT_EQ(hlen, 118u);
  EXPECT_NE(bytes.find("'shape': (2, 3)"), std::string::npos);
  EXPECT_EQ(bytes[127], '\n');
  float back[6];
  std::memcpy(back, bytes.data() + 128, 24);
  EXPECT_EQ(back[1], -2.0f);
  EXPECT_EQ(back[5], 6.0f);
  const Json j = Json::parse(read_file(path + ".json"));
  EXPECT_EQ(j["rows"], 2);
  EXPECT_EQ(j["vocab"], 3);
  EXPECT_EQ(j["positions"], Json::array({9, 10}));
  EXPECT_EQ(j["generated"], Json::array({0, 2}));
  EXPECT_EQ(j["stop"], "steps");
  fs::remove_all(d);
}

}  // namespace
}  // namespace kern::driver
