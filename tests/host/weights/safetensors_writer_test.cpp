#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/base/json.hpp"
#include "kern/weights/safetensors_writer.hpp"
#include "random_bytes.hpp"
#include "temp_dir.hpp"

using namespace kern;

namespace {

std::uint64_t le64(const std::string& s) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(s[i]);
  return n;
}

ErrorKind kind_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind();
  }
  ADD_FAILURE() << "no error";
  return ErrorKind::Domain;
}

}  // namespace

TEST(SafetensorsWriter, HeaderLayoutMatchesTheFormat) {
  test::TempDir dir;
  std::vector<weights::TensorSpec> specs{
      {"b.weight", DType::BF16, {3, 5}}, {"a", DType::F32, {7}}, {"s", DType::I64, {}}};
  const std::string path = dir.file("x.safetensors");
  auto wa = test::random_bytes(30, 1), wb = test::random_bytes(28, 2), ws = test::random_bytes(8, 3);
  {
    weights::SafetensorsWriter w(path, specs, {{"format", "pt"}});
    w.append("b.weight", wa);
    w.append("a", wb);
    w.append("s", ws);
    w.finish();
  }
  const std::string bytes = read_file(path);
  ASSERT_GE(bytes.size(), 8u);
  const std::uint64_t n = le64(bytes);
  EXPECT_EQ(n % 8, 0u);
  ASSERT_EQ(bytes.size(), 8 + n + 30 + 28 + 8);
  EXPECT_EQ(bytes.size(), weights::SafetensorsWriter::file_size(specs, {{"format", "pt"}}));
  Json h = parse_json_strict(std::string_view(bytes).substr(8, n));
  EXPECT_EQ(h["__metadata__"]["format"], "pt");
  EXPECT_EQ(h["b.weight"]["dtype"], "BF16");
  EXPECT_EQ(h["b.weight"]["shape"], Json::array({3, 5}));
  EXPECT_EQ(h["b.weight"]["data_offsets"], Json::array({0, 30}));
  EXPECT_EQ(h["a"]["dtype"], "F32");
  EXPECT_EQ(h["a"]["data_offsets"], Json::array({30, 58}));
  EXPECT_EQ(h["s"]["shape"], Json::array());
  EXPECT_EQ(h["s"]["data_offsets"], Json::array({58, 66}));
  EXPECT_EQ(std::memcmp(bytes.data() + 8 + n, wa.data(), 30), 0);
  EXPECT_EQ(std::memcmp(bytes.data() + 8 + n + 30, wb.data(), 28), 0);
  EXPECT_EQ(std::memcmp(bytes.data() + 8 + n + 58, ws.data(), 8), 0);
}

TEST(SafetensorsWriter, ChunkedAppendsAndLargeWritesKeepTheBytes) {
  test::TempDir dir;
  // 12 MiB tensor: bigger than the write buffer, written in uneven chunks.
  std::vector<weights::TensorSpec> specs{
      {"small", DType::U8, {3}}, {"big", DType::F16, {3, 2 << 20}}, {"tail", DType::I32, {5}}};
  auto small = test::random_bytes(3, 4), big = test::random_bytes(12u << 20, 5), tail = test::random_bytes(20, 6);
  const std::string path = dir.file("c.safetensors");
  weights::SafetensorsWriter w(path, specs);
  w.append("small", std::span(small).first(1));
  w.append("small", std::span(small).subspan(1));
  std::size_t at = 0;
  for (std::size_t chunk : {std::size_t{1}, std::size_t{4095}, std::size_t{9u << 20}, std::size_t{17}}) {
    w.append("big", std::span(big).subspan(at, chunk));
    at += chunk;
  }
  w.append("big", std::span(big).subspan(at));
  w.append("tail", tail);
  w.finish();
  const std::string bytes = read_file(path);
  const std::uint64_t data = w.header_size();
  ASSERT_EQ(bytes.size(), data + 3 + big.size() + 20);
  EXPECT_EQ(std::memcmp(bytes.data() + data, small.data(), 3), 0);
  EXPECT_EQ(std::memcmp(bytes.data() + data + 3, big.data(), big.size()), 0);
  EXPECT_EQ(std::memcmp(bytes.data() + data + 3 + big.size(), tail.data(), 20), 0);
}

TEST(SafetensorsWriter, FinishDetectsShortTensors) {
  test::TempDir dir;
  std::vector<weights::TensorSpec> specs{{"a", DType::F32, {4}}, {"b", DType::F32, {2}}};
  auto a = test::random_bytes(16, 7);
  weights::SafetensorsWriter w(dir.file("s.safetensors"), specs);
  w.append("a", std::span(a).first(12));
  try {
    w.finish();
    FAIL() << "finish accepted a short tensor";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Api);
    EXPECT_NE(e.message().find("tensor a got 12 of its 16 bytes"), std::string::npos) << e.message();
  }
  weights::SafetensorsWriter w2(dir.file("s2.safetensors"), specs);
  w2.append("a", a);
  try {
    w2.finish();
    FAIL() << "finish accepted a missing tensor";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("tensor b got 0 of its 8 bytes"), std::string::npos) << e.message();
  }
}

TEST(SafetensorsWriter, RejectsOutOfOrderOverrunsAndBadSpecs) {
  test::TempDir dir;
  std::vector<weights::TensorSpec> specs{{"a", DType::U8, {4}}, {"b", DType::U8, {2}}};
  auto bytes = test::random_bytes(8, 8);
  {
    weights::SafetensorsWriter w(dir.file("o.safetensors"), specs);
    EXPECT_EQ(kind_of([&] { w.append("b", std::span(bytes).first(2)); }), ErrorKind::Api);  // a first
    w.append("a", std::span(bytes).first(3));
    EXPECT_EQ(kind_of([&] { w.append("a", std::span(bytes).first(2)); }), ErrorKind::Api);  // past 4
    w.append("a", std::span(bytes).first(1));
    EXPECT_EQ(kind_of([&] { w.append("a", std::span(bytes).first(1)); }), ErrorKind::Api);  // a is full
    EXPECT_EQ(kind_of([&] { w.append("zzz", std::span(bytes).first(1)); }), ErrorKind::Api);
    w.append("b", std::span(bytes).first(2));
    w.finish();
    EXPECT_EQ(kind_of([&] { w.append("b", {}); }), ErrorKind::Api);
  }
  const auto p = dir.file("bad.safetensors");
  EXPECT_EQ(kind_of([&] {
              weights::SafetensorsWriter w(p, {{"a", DType::U8, {1}}, {"a", DType::U8, {1}}});
            }),
            ErrorKind::Api);
  EXPECT_EQ(kind_of([&] { weights::SafetensorsWriter w(p, {{"", DType::U8, {1}}}); }), ErrorKind::Api);
  EXPECT_EQ(kind_of([&] { weights::SafetensorsWriter w(p, {{"__metadata__", DType::U8, {1}}}); }), ErrorKind::Api);
  EXPECT_EQ(kind_of([&] { weights::SafetensorsWriter w(p, {{"x", DType::U64, {1ull << 62, 4}}}); }), ErrorKind::Api);
  EXPECT_EQ(kind_of([&] { weights::SafetensorsWriter w(dir.file("no/such/dir.safetensors"), specs); }), ErrorKind::Io);
}

TEST(SafetensorsWriter, ZeroSizedTensorsNeedNoAppend) {
  test::TempDir dir;
  std::vector<weights::TensorSpec> specs{{"e", DType::F32, {0, 4}}, {"a", DType::U8, {2}}, {"z", DType::U8, {0}}};
  auto bytes = test::random_bytes(2, 9);
  weights::SafetensorsWriter w(dir.file("z.safetensors"), specs);
  w.append("a", bytes);
  w.finish();
  EXPECT_EQ(read_file(dir.file("z.safetensors")).size(), w.header_size() + 2);
}

TEST(SafetensorsWriter, IndexFileListsEveryTensor) {
  test::TempDir dir;
  const auto p = dir.file("model.safetensors.index.json");
  weights::write_safetensors_index(
      p, {{"a", "model-00001-of-00002.safetensors"}, {"b", "model-00002-of-00002.safetensors"}}, 1234);
  Json j = parse_json_strict(read_file(p));
  EXPECT_EQ(j["metadata"]["total_size"], 1234);
  EXPECT_EQ(j["weight_map"]["a"], "model-00001-of-00002.safetensors");
  EXPECT_EQ(j["weight_map"]["b"], "model-00002-of-00002.safetensors");
  EXPECT_EQ(kind_of([&] { weights::write_safetensors_index(p, {{"a", "../x.safetensors"}}, 1); }), ErrorKind::Api);
}
