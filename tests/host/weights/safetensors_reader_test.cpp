#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/weights/safetensors.hpp"
#include "kern/weights/safetensors_writer.hpp"
#include "kern/weights/tensors.hpp"
#include "random_bytes.hpp"
#include "temp_dir.hpp"

using namespace kern;

namespace {

std::string le64(std::uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// A file image: length prefix + header text + `data_bytes` bytes of data.
std::string image(const std::string& header, std::size_t data_bytes) {
  std::string s = le64(header.size()) + header;
  for (std::size_t i = 0; i < data_bytes; ++i) s.push_back(static_cast<char>(i * 7 + 3));
  return s;
}

// The WeightArtifact message opening `path`, or "no error".
std::string open_error(const std::string& path) {
  try {
    weights::SafetensorsCheckpoint::open(path);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::WeightArtifact) << e.what();
    return e.message();
  }
  return "no error";
}

std::string file_error(const test::TempDir& dir, const std::string& bytes) {
  const auto p = dir.file("t.safetensors");
  write_file(p, bytes);
  return open_error(p);
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "message: " << (haystack)

}  // namespace

TEST(SafetensorsReader, ValidFileParses) {
  test::TempDir dir;
  const auto p = dir.file("v.safetensors");
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})";
  write_file(p, image(header, 20));
  auto ck = weights::SafetensorsCheckpoint::open(p);
  ASSERT_EQ(ck.shards().size(), 1u);
  const auto& h = ck.shards()[0].header;
  EXPECT_EQ(h.metadata.at("format"), "pt");
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.tensors[0].name, "b");  // sorted by name
  EXPECT_EQ(h.tensors[1].name, "w");
  EXPECT_EQ(h.tensors[1].dtype, DType::BF16);
  EXPECT_EQ(h.tensors[1].shape, (std::vector<std::uint64_t>{2, 3}));
  EXPECT_EQ(h.data_start, 8 + header.size());
  EXPECT_EQ(h.data_size, 20u);
  ASSERT_NE(ck.find("w"), nullptr);
  EXPECT_EQ(ck.find("nope"), nullptr);
}

TEST(SafetensorsReader, FileShorterThanTheLengthPrefix) {
  test::TempDir dir;
  EXPECT_CONTAINS(file_error(dir, "abc"), "too short for the 8-byte header length");
  EXPECT_CONTAINS(file_error(dir, ""), "too short");
}

TEST(SafetensorsReader, HeaderLengthBeyondTheFile) {
  test::TempDir dir;
  std::string s = le64(1000) + R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
  EXPECT_CONTAINS(file_error(dir, s), "header length 1000 runs past the end of the file");
}

TEST(SafetensorsReader, HeaderLengthAbsurd) {
  test::TempDir dir;
  EXPECT_CONTAINS(file_error(dir, le64(0xffffffffffffffffull) + "{}"), "larger than the 100000000-byte limit");
  EXPECT_CONTAINS(file_error(dir, le64(100'000'001) + "{}"), "larger than");
}

TEST(SafetensorsReader, HeaderNotJson) {
  test::TempDir dir;
  const auto msg = file_error(dir, image("{\"a\": [1, 2", 0));
  EXPECT_CONTAINS(msg, "t.safetensors");
  EXPECT_CONTAINS(msg, "safetensors header");
  EXPECT_CONTAINS(file_error(dir, image("[1, 2]", 0)), "header must be a JSON object");
  EXPECT_CONTAINS(file_error(dir, image("", 0)), "safetensors header");
}

TEST(SafetensorsReader, TruncatedData) {
  test::TempDir dir;
  // The header promises 16 bytes; the file holds 10 after it.
  const auto msg = file_error(dir, image(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 10));
  EXPECT_CONTAINS(msg, "tensor w: data_offsets [0, 16] run past the data section (10 bytes)");
}

TEST(SafetensorsReader, OffsetsOutOfRangeOrReversed) {
  test::TempDir dir;
  EXPECT_CONTAINS(file_error(dir, image(R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[100,104]}})", 8)),
                  "tensor w: data_offsets [100, 104] run past the data section (8 bytes)");
  EXPECT_CONTAINS(file_error(dir, image(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[4,2]}})", 8)),
                  "tensor w: data_offsets [4, 2] are reversed");
  EXPECT_CONTAINS(file_error(dir, image(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[4]}})", 8)),
                  "tensor w: data_offsets must be an array [begin, end]");
  EXPECT_CONTAINS(file_error(dir, image(R"({"w":{"dtype":"U8","shape":[2],"data_offsets":[-2,0]}})", 8)),
                  "non-negative integers");
}

// The header entry of a U8 tensor `name` of `n` bytes at data_offsets [begin, begin + n].
std::string u8_tensor(const std::string& name, int n, int begin) {
  return "\"" + name + "\":{\"dtype\":\"U8\",\"shape\":[" + std::to_string(n) + "],\"data_offsets\":[" +
         std::to_string(begin) + "," + std::to_string(begin + n) + "]}";
}
// A header of those entries, in order.
std::string u8_header(const std::vector<std::string>& entries) {
  std::string h = "{";
  for (const std::string& e : entries) h += (h.size() > 1 ? "," : "") + e;
  return h + "}";
}

TEST(SafetensorsReader, OverlappingTensors) {
  test::TempDir dir;
  const auto msg = file_error(dir, image(u8_header({u8_tensor("a", 6, 0), u8_tensor("b", 4, 4)}), 8));
  EXPECT_CONTAINS(msg, "tensors a [0, 6] and b [4, 8] overlap");
  // A zero-sized tensor occupies no bytes: no overlap.
  EXPECT_EQ(file_error(dir, image(u8_header({u8_tensor("a", 6, 0), u8_tensor("z", 0, 3)}), 8)), "no error");
}

TEST(SafetensorsReader, ShapeTimesDTypeMustEqualTheSpan) {
  test::TempDir dir;
  EXPECT_CONTAINS(file_error(dir, image(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", 16)),
                  "tensor w: shape [2,2] of F32 is 16 bytes but data_offsets [0, 12] span 12");
  EXPECT_CONTAINS(
      file_error(dir, image(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4)),
      "overflows");
  EXPECT_CONTAINS(file_error(dir, image(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4)),
                  "tensor w: shape must hold non-negative integers");
}

TEST(SafetensorsReader, UnknownDTypeAndFields) {
  test::TempDir dir;
  EXPECT_CONTAINS(file_error(dir, image(R"({"w":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}})", 16)),
                  "tensor w: unknown dtype \"F128\"");
  EXPECT_CONTAINS(file_error(dir, image(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":1}})", 1)),
                  "tensor w: unknown field \"extra\"");
  EXPECT_CONTAINS(file_error(dir, image(R"({"w":{"dtype":"U8","shape":[1]}})", 1)),
                  "tensor w: missing field \"data_offsets\"");
  EXPECT_CONTAINS(file_error(dir, image(R"({"w":[1]})", 1)), "tensor w: entry must be an object");
  EXPECT_CONTAINS(file_error(dir, image(R"({"__metadata__":{"a":1}})", 0)), "__metadata__.a must be a string");
}

TEST(SafetensorsReader, DuplicateKeyInHeader) {
  test::TempDir dir;
  const auto msg = file_error(dir, image(u8_header({u8_tensor("w", 1, 0), u8_tensor("w", 1, 1)}), 2));
  EXPECT_CONTAINS(msg, "duplicate key \"w\"");
  EXPECT_CONTAINS(msg, "t.safetensors");
}

TEST(SafetensorsReader, InMemoryImageAgreesWithTheFileReader) {
  const std::string s = image(R"({"w":{"dtype":"I16","shape":[3],"data_offsets":[2,8]}})", 8);
  auto h = weights::parse_safetensors_image(std::as_bytes(std::span(s.data(), s.size())), "mem");
  ASSERT_EQ(h.tensors.size(), 1u);
  EXPECT_EQ(h.tensors[0].begin, 2u);
  EXPECT_EQ(h.data_start, s.size() - 8);
  EXPECT_THROW(weights::parse_safetensors_image(std::as_bytes(std::span(s.data(), 5)), "mem"), Error);
}

namespace {

struct Shard {
  std::string file;
  std::vector<weights::TensorSpec> specs;
};

// Writes each shard with random contents; returns tensor -> bytes.
std::map<std::string, std::vector<std::byte>> write_shards(const test::TempDir& dir, const std::vector<Shard>& shards) {
  std::map<std::string, std::vector<std::byte>> out;
  std::uint32_t seed = 1;
  for (const auto& s : shards) {
    weights::SafetensorsWriter w(dir.file(s.file), s.specs, {{"format", "pt"}});
    for (const auto& t : s.specs) {
      auto bytes = test::random_bytes(weights::tensor_spec_bytes(t), seed++);
      w.append(t.name, bytes);
      out[t.name] = std::move(bytes);
    }
    w.finish();
  }
  return out;
}

}  // namespace

TEST(SafetensorsReader, WriterRoundTripThroughAnIndexedCheckpoint) {
  test::TempDir dir;
  std::vector<Shard> shards{
      {"model-00001-of-00002.safetensors",
       {{"embed", DType::BF16, {7, 5}}, {"norm", DType::F32, {5}}, {"scale", DType::FP8E8M0, {3}}}},
      {"model-00002-of-00002.safetensors",
       {{"ids", DType::I64, {4}}, {"w8", DType::FP8E4M3, {2, 3, 4}}, {"flag", DType::BOOL, {}}}},
  };
  const auto data = write_shards(dir, shards);
  std::map<std::string, std::string> weight_map;
  for (const auto& s : shards)
    for (const auto& t : s.specs) weight_map[t.name] = s.file;
  weights::write_safetensors_index(dir.file("model.safetensors.index.json"), weight_map, 123);

  auto tensors = weights::SafetensorsTensors::open(dir.path().string());
  EXPECT_EQ(tensors.names(), (std::vector<std::string>{"embed", "flag", "ids", "norm", "scale", "w8"}));
  EXPECT_EQ(tensors.files().size(), 2u);
  for (const auto& s : shards) {
    for (const auto& spec : s.specs) {
      const weights::TensorInfo* t = tensors.find(spec.name);
      ASSERT_NE(t, nullptr) << spec.name;
      EXPECT_EQ(t->dtype, spec.dtype);
      EXPECT_EQ(t->shape, spec.shape);
      EXPECT_EQ(t->bytes, data.at(spec.name).size());
      EXPECT_EQ(tensors.files()[t->location.file], dir.file(s.file));
      std::vector<std::byte> got(t->bytes);
      tensors.read(*t, 0, t->bytes, got.data());
      EXPECT_EQ(got, data.at(spec.name)) << spec.name;
      if (t->bytes > 3) {  // a partial read from the middle
        std::vector<std::byte> part(2);
        tensors.read(spec.name, 1, 2, part.data());
        EXPECT_EQ(part[0], data.at(spec.name)[1]);
        EXPECT_EQ(part[1], data.at(spec.name)[2]);
      }
    }
  }
  std::byte b[4];
  EXPECT_THROW(tensors.read("norm", 18, 4, b), Error);  // past the end
  EXPECT_THROW(tensors.read("absent", 0, 1, b), Error);

  // The same shards listed explicitly, and the directory without its index.
  auto listed = weights::SafetensorsCheckpoint::open_shards({dir.file(shards[1].file), dir.file(shards[0].file)});
  EXPECT_EQ(listed.tensors().size(), 6u);
  std::filesystem::remove(dir.file("model.safetensors.index.json"));
  EXPECT_EQ(weights::SafetensorsCheckpoint::open(dir.path().string()).tensors().size(), 6u);
}

TEST(SafetensorsReader, DuplicateTensorAcrossShards) {
  test::TempDir dir;
  write_shards(dir, {{"a.safetensors", {{"x", DType::U8, {2}}, {"y", DType::U8, {1}}}},
                     {"b.safetensors", {{"x", DType::U8, {2}}}}});
  const auto msg = open_error(dir.path().string());
  EXPECT_CONTAINS(msg, "tensor x is in two shards");
  EXPECT_CONTAINS(msg, "a.safetensors");
  EXPECT_CONTAINS(msg, "b.safetensors");
}

TEST(SafetensorsReader, IndexNamingAMissingShard) {
  test::TempDir dir;
  write_shards(dir, {{"a.safetensors", {{"x", DType::U8, {2}}}}});
  weights::write_safetensors_index(dir.file("model.safetensors.index.json"),
                                   {{"x", "a.safetensors"}, {"y", "gone.safetensors"}}, 3);
  const auto msg = open_error(dir.path().string());
  EXPECT_CONTAINS(msg, "names shard");
  EXPECT_CONTAINS(msg, "gone.safetensors, which is missing");
}

TEST(SafetensorsReader, IndexAndShardsDisagree) {
  test::TempDir dir;
  write_shards(dir, {{"a.safetensors", {{"x", DType::U8, {2}}, {"extra", DType::U8, {1}}}},
                     {"b.safetensors", {{"y", DType::U8, {1}}}}});
  const auto index = dir.file("model.safetensors.index.json");
  // The index names a tensor its shard lacks.
  weights::write_safetensors_index(
      index, {{"x", "a.safetensors"}, {"extra", "a.safetensors"}, {"y", "b.safetensors"}, {"z", "b.safetensors"}}, 3);
  EXPECT_CONTAINS(open_error(dir.path().string()), "tensor z is mapped to b.safetensors, but");
  // A shard holds a tensor the index does not name.
  weights::write_safetensors_index(index, {{"x", "a.safetensors"}, {"y", "b.safetensors"}}, 3);
  EXPECT_CONTAINS(open_error(dir.path().string()), "tensor extra of");
  EXPECT_CONTAINS(open_error(dir.path().string()), "is missing from the index");
  // The index puts a tensor in the wrong shard.
  weights::write_safetensors_index(index, {{"x", "b.safetensors"}, {"extra", "a.safetensors"}, {"y", "a.safetensors"}},
                                   3);
  EXPECT_CONTAINS(open_error(dir.path().string()), "is mapped to");
  // Malformed index.
  write_file(index, R"({"weight_map": {"x": "a.safetensors"}, "weight_map": {}})");
  EXPECT_CONTAINS(open_error(dir.path().string()), "duplicate key");
  write_file(index, R"({"weight_map": {"x": "../a.safetensors"}})");
  EXPECT_CONTAINS(open_error(dir.path().string()), "not a file name");
  write_file(index, R"({"metadata": {}, "tensors": {}})");
  EXPECT_CONTAINS(open_error(dir.path().string()), "unknown key \"tensors\"");
}

TEST(SafetensorsReader, MissingPathsAndEmptyDirectories) {
  test::TempDir dir;
  EXPECT_CONTAINS(open_error(dir.file("nothing.safetensors")), "no such file or directory");
  EXPECT_CONTAINS(open_error(dir.path().string()), "no model.safetensors.index.json and no .safetensors files");
}

TEST(HostTensors, AddFindAndRead) {
  weights::HostTensors t;
  auto bytes = test::random_bytes(12, 3);
  t.add("w", DType::F16, {2, 3}, bytes);
  EXPECT_THROW(t.add("w", DType::U8, {1}, test::random_bytes(1, 1)), Error);
  EXPECT_THROW(t.add("v", DType::F32, {2}, test::random_bytes(7, 1)), Error);
  const weights::TensorInfo* w = t.find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->location.kind, weights::TensorLocation::Kind::Host);
  EXPECT_EQ(w->bytes, 12u);
  std::byte out[5];
  t.read("w", 7, 5, out);
  EXPECT_EQ(std::memcmp(out, bytes.data() + 7, 5), 0);
  EXPECT_THROW(t.read("w", 8, 5, out), Error);
  EXPECT_EQ(t.names(), std::vector<std::string>{"w"});
}
