// Prints encoding throughput on ~1 MiB of mixed text (no timing assertion: CI machines vary).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <ctime>

#include "qwen3_fixture.hpp"
#include "tokenizer/nfc.hpp"

namespace kern::test {
namespace {

TEST(TokenizerThroughput, EncodeOneMegabyteOfMixedText) {
  KERN_REQUIRE_QWEN3(tok);
  const Json& cases = qwen3_reference()["cases"];
  std::string text;
  for (std::size_t i = 0; text.size() < (1u << 20); i = (i + 1) % cases.size()) {
    text += cases[i]["text"].get_ref<const std::string&>();
    text += '\n';
  }
  using Clock = std::chrono::steady_clock;
  const std::clock_t c0 = std::clock();
  const auto t0 = Clock::now();
  const std::vector<tokenizer::TokenId> ids = tok->encode(text);  // cold word cache
  const auto t1 = Clock::now();
  const std::clock_t c1 = std::clock();
  const std::vector<tokenizer::TokenId> again = tok->encode(text);  // warm word cache
  const auto t2 = Clock::now();
  const double cpu = static_cast<double>(c1 - c0) / CLOCKS_PER_SEC;
  const double mb = static_cast<double>(text.size()) / 1e6;
  const double cold = std::chrono::duration<double>(t1 - t0).count();
  const double warm = std::chrono::duration<double>(t2 - t1).count();
  std::printf("tokenizer throughput: %.2f MB (%zu ids) encoded in %.3f s cold = %.1f MB/s, %.3f s warm = %.1f MB/s\n",
              mb, ids.size(), cold, mb / cold, warm, mb / warm);
  std::printf(
      "tokenizer throughput: cold pass used %.3f s of CPU = %.1f MB/s per core (wall differs on a busy machine)\n", cpu,
      mb / cpu);
  RecordProperty("cold_MBps", std::to_string(mb / cold));
  RecordProperty("warm_MBps", std::to_string(mb / warm));
  EXPECT_EQ(ids, again);
  EXPECT_GT(ids.size(), text.size() / 8);
  EXPECT_EQ(tok->decode(ids), tokenizer::nfc(text));
}

}  // namespace
}  // namespace kern::test
