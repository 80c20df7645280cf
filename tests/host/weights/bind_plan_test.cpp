#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "kern/weights/bind_plan.hpp"
#include "kern/base/error.hpp"
#include "kern/weights/safetensors_writer.hpp"
#include "random_bytes.hpp"
#include "temp_dir.hpp"

using namespace kern;
using core::BindSegment;
using core::Range;
using core::RangeRef;
using core::TensorRef;

namespace {

TensorRef named(std::string name) { return TensorRef{std::move(name), {}, {}}; }
TensorRef per_rank(std::string group, std::vector<std::string> names) {
  return TensorRef{{}, std::move(group), std::move(names)};
}
RangeRef range(std::uint64_t a, std::uint64_t b) { return RangeRef{Range{a, b}, {}, {}}; }
RangeRef range_per_rank(std::string group, std::vector<Range> r) {
  return RangeRef{{}, std::move(group), std::move(r)};
}

BindSegment whole(std::string t) { return BindSegment{named(std::move(t)), {}, {}, {}}; }
BindSegment rows(std::string t, std::uint64_t a, std::uint64_t b) {
  return BindSegment{named(std::move(t)), range(a, b), {}, {}};
}
BindSegment cols(std::string t, std::uint64_t a, std::uint64_t b) {
  return BindSegment{named(std::move(t)), {}, range(a, b), {}};
}
BindSegment interleave(std::string a, std::string b, std::uint64_t n) {
  return BindSegment{named(std::move(a)), {}, {}, core::Interleave{named(std::move(b)), n}};
}

core::Buffer weight(DType dtype, std::vector<BindSegment> bind) {
  core::Buffer b;
  b.dtype = dtype;
  b.kind = core::BufferKind::Weight;
  b.bind = std::move(bind);
  return b;
}

// Tensors with random contents; shapes as given.
struct Fixture {
  weights::HostTensors tensors;
  std::uint32_t seed = 100;
  void add(const std::string& name, DType dtype, std::vector<std::uint64_t> shape) {
    std::uint64_t n = dtype_size(dtype);
    for (auto d : shape) n *= d;
    tensors.add(name, dtype, std::move(shape), test::random_bytes(n, seed++));
  }
};

// The test's own executor: reads host tensors through their pointers and checks every
// destination byte is written exactly once.
std::vector<std::byte> execute(const weights::BindPlan& plan, const weights::HostTensors& tensors) {
  std::vector<std::byte> out(plan.buffer_bytes);
  std::vector<int> writes(plan.buffer_bytes, 0);
  for (const auto& c : plan.copies) {
    const weights::TensorInfo* t = tensors.find(c.tensor);
    EXPECT_NE(t, nullptr) << c.tensor;
    if (t == nullptr) continue;
    for (std::uint64_t r = 0; r < c.height; ++r) {
      const std::uint64_t s = c.src_offset + r * c.src_pitch, d = c.dst_offset + r * c.dst_pitch;
      EXPECT_LE(s + c.width, t->bytes) << c.to_string();
      EXPECT_LE(d + c.width, out.size()) << c.to_string();
      if (s + c.width > t->bytes || d + c.width > out.size()) continue;
      std::memcpy(out.data() + d, t->location.host + s, c.width);
      for (std::uint64_t i = 0; i < c.width; ++i) ++writes[d + i];
    }
  }
  for (std::size_t i = 0; i < writes.size(); ++i) {
    EXPECT_EQ(writes[i], 1) << "byte " << i << " of " << plan.buffer;
    if (writes[i] != 1) break;
  }
  return out;
}

// Independent reference: element by element from the semantics.
struct Reference {
  const weights::HostTensors& tensors;
  std::vector<std::byte> out;
  static std::pair<std::uint64_t, std::uint64_t> matrix(const weights::TensorInfo& t) {
    std::uint64_t r = t.shape.empty() ? 1 : t.shape[0], c = 1;
    for (std::size_t i = 1; i < t.shape.size(); ++i) c *= t.shape[i];
    return {r, c};
  }
  void element(const weights::TensorInfo& t, std::uint64_t row, std::uint64_t col) {
    const auto [r, c] = matrix(t);
    const std::uint64_t es = dtype_size(t.dtype);
    const std::byte* p = t.location.host + (row * c + col) * es;
    out.insert(out.end(), p, p + es);
  }
  void slice(const std::string& name, std::uint64_t r0, std::uint64_t r1, std::uint64_t c0, std::uint64_t c1) {
    const weights::TensorInfo& t = *tensors.find(name);
    for (std::uint64_t r = r0; r < r1; ++r)
      for (std::uint64_t c = c0; c < c1; ++c) element(t, r, c);
  }
  void whole(const std::string& name) {
    const auto [r, c] = matrix(*tensors.find(name));
    slice(name, 0, r, 0, c);
  }
  void interleave(const std::string& a, const std::string& b, std::uint64_t n) {
    const auto [r, c] = matrix(*tensors.find(a));
    for (std::uint64_t blk = 0; blk < r; blk += n) {
      slice(a, blk, blk + n, 0, c);
      slice(b, blk, blk + n, 0, c);
    }
  }
};

std::string plan_error(const core::Buffer& buf, std::uint64_t bytes, const weights::Tensors& t,
                       const std::map<std::string, std::uint32_t>& ranks = {},
                       ErrorKind kind = ErrorKind::WeightArtifact) {
  try {
    weights::plan_bind("w", buf, bytes, t, ranks);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.message();
  }
  return "no error";
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "message: " << (haystack)

}  // namespace

TEST(BindPlan, WholeTensorsAreContiguousCopiesEndToEnd) {
  Fixture f;
  f.add("a", DType::BF16, {4, 6});
  f.add("b", DType::BF16, {10});
  const auto plan = weights::plan_bind("w", weight(DType::BF16, {whole("a"), whole("b")}), 68, f.tensors, {});
  ASSERT_EQ(plan.copies.size(), 2u);
  EXPECT_EQ(plan.copies[0], (weights::BindCopy{weights::BindCopy::Kind::Contiguous, "a", 0, 0, 48, 1, 48, 48}));
  EXPECT_EQ(plan.copies[1], (weights::BindCopy{weights::BindCopy::Kind::Contiguous, "b", 0, 48, 20, 1, 20, 20}));
  EXPECT_EQ(plan.tensors(), (std::vector<std::string>{"a", "b"}));
  Reference ref{f.tensors, {}};
  ref.whole("a");
  ref.whole("b");
  EXPECT_EQ(execute(plan, f.tensors), ref.out);
}

// `plan` is the one copy `want`, and running it gives rows [r0, r1) x cols [c0, c1) of tensor "a".
void expect_one_slice_copy(const weights::BindPlan& plan, const weights::HostTensors& tensors,
                           const weights::BindCopy& want, std::uint64_t r0, std::uint64_t r1, std::uint64_t c0,
                           std::uint64_t c1) {
  ASSERT_EQ(plan.copies.size(), 1u);
  EXPECT_EQ(plan.copies[0], want);
  Reference ref{tensors, {}};
  ref.slice("a", r0, r1, c0, c1);
  EXPECT_EQ(execute(plan, tensors), ref.out);
}

TEST(BindPlan, RowSliceIsOneContiguousCopy) {
  Fixture f;
  f.add("a", DType::F32, {5, 2, 3});  // matrix [5, 6]
  const auto plan = weights::plan_bind("w", weight(DType::F32, {rows("a", 1, 4)}), 72, f.tensors, {});
  expect_one_slice_copy(plan, f.tensors,
                        weights::BindCopy{weights::BindCopy::Kind::Contiguous, "a", 24, 0, 72, 1, 72, 72}, 1, 4, 0, 6);
}

TEST(BindPlan, ColumnSliceIsOneStridedCopy) {
  Fixture f;
  f.add("a", DType::BF16, {4, 6});
  const auto plan = weights::plan_bind("w", weight(DType::BF16, {cols("a", 2, 5)}), 24, f.tensors, {});
  expect_one_slice_copy(plan, f.tensors, weights::BindCopy{weights::BindCopy::Kind::Strided, "a", 4, 0, 6, 4, 12, 6}, 0,
                        4, 2, 5);
  // rows and cols together: a 2-D block starting inside the tensor.
  BindSegment both{named("a"), range(1, 3), range(1, 4), {}};
  const auto plan2 = weights::plan_bind("w", weight(DType::BF16, {both}), 12, f.tensors, {});
  expect_one_slice_copy(plan2, f.tensors, weights::BindCopy{weights::BindCopy::Kind::Strided, "a", 14, 0, 6, 2, 12, 6},
                        1, 3, 1, 4);
}

TEST(BindPlan, InterleaveAlternatesRowBlocks) {
  Fixture f;
  f.add("gate", DType::F16, {6, 4});
  f.add("up", DType::F16, {6, 4});
  const auto plan = weights::plan_bind("w", weight(DType::F16, {interleave("gate", "up", 2)}), 96, f.tensors, {});
  ASSERT_EQ(plan.copies.size(), 2u);
  EXPECT_EQ(plan.copies[0], (weights::BindCopy{weights::BindCopy::Kind::Strided, "gate", 0, 0, 16, 3, 16, 32}));
  EXPECT_EQ(plan.copies[1], (weights::BindCopy{weights::BindCopy::Kind::Strided, "up", 0, 16, 16, 3, 16, 32}));
  Reference ref{f.tensors, {}};
  ref.interleave("gate", "up", 2);
  EXPECT_EQ(execute(plan, f.tensors), ref.out);
  // One block each: plain concatenation.
  const auto plan6 = weights::plan_bind("w", weight(DType::F16, {interleave("gate", "up", 6)}), 96, f.tensors, {});
  ASSERT_EQ(plan6.copies.size(), 2u);
  EXPECT_EQ(plan6.copies[0].kind, weights::BindCopy::Kind::Contiguous);
  EXPECT_EQ(plan6.copies[1].dst_offset, 48u);
}

TEST(BindPlan, PerRankTensorAndRangeSelection) {
  Fixture f;
  f.add("q.0", DType::BF16, {4, 8});
  f.add("q.1", DType::BF16, {4, 8});
  f.add("o", DType::BF16, {4, 8});
  BindSegment by_rank{per_rank("tp", {"q.0", "q.1"}), {}, {}, {}};
  BindSegment col_shard{named("o"), {}, range_per_rank("tp", {Range{0, 4}, Range{4, 8}}), {}};
  BindSegment row_shard{named("o"), range_per_rank("tp", {Range{0, 2}, Range{2, 4}}), {}, {}};
  const auto buf = weight(DType::BF16, {by_rank, col_shard, row_shard});
  for (std::uint32_t rank : {0u, 1u}) {
    const auto plan = weights::plan_bind("w", buf, 64 + 32 + 32, f.tensors, {{"tp", rank}});
    Reference ref{f.tensors, {}};
    ref.whole(rank == 0 ? "q.0" : "q.1");
    ref.slice("o", 0, 4, rank * 4, rank * 4 + 4);
    ref.slice("o", rank * 2, rank * 2 + 2, 0, 8);
    EXPECT_EQ(execute(plan, f.tensors), ref.out) << "rank " << rank;
    EXPECT_EQ(plan.copies[0].tensor, rank == 0 ? "q.0" : "q.1");
  }
  EXPECT_CONTAINS(plan_error(buf, 128, f.tensors, {{"tp", 2}}),
                  "buffer w bind[0]: tensor: rank 2 in group tp is outside the per-rank tensor table (2 entries)");
  EXPECT_CONTAINS(plan_error(weight(DType::BF16, {col_shard}), 32, f.tensors, {{"tp", 5}}),
                  "tensor o: cols: rank 5 in group tp is outside the per-rank range table");
  EXPECT_CONTAINS(plan_error(buf, 128, f.tensors, {{"pp", 0}}, ErrorKind::Api), "no rank given for topology group tp");
}

TEST(BindPlan, AdjacentSlicesOfOneTensorMerge) {
  Fixture f;
  f.add("a", DType::U8, {6, 5});
  const auto plan = weights::plan_bind("w", weight(DType::U8, {rows("a", 0, 2), rows("a", 2, 6)}), 30, f.tensors, {});
  ASSERT_EQ(plan.copies.size(), 1u);
  EXPECT_EQ(plan.copies[0], (weights::BindCopy{weights::BindCopy::Kind::Contiguous, "a", 0, 0, 30, 1, 30, 30}));
  // Not adjacent in the source: two copies.
  const auto plan2 = weights::plan_bind("w", weight(DType::U8, {rows("a", 2, 6), rows("a", 0, 2)}), 30, f.tensors, {});
  EXPECT_EQ(plan2.copies.size(), 2u);
}

TEST(BindPlan, CoverageShortOrLong) {
  Fixture f;
  f.add("a", DType::F32, {4, 4});
  f.add("b", DType::F32, {4});
  EXPECT_CONTAINS(plan_error(weight(DType::F32, {whole("a")}), 80, f.tensors),
                  "buffer w: bind segments cover 64 of its 80 bytes (16 bytes short; last tensor a)");
  EXPECT_CONTAINS(plan_error(weight(DType::F32, {whole("a"), whole("b")}), 70, f.tensors),
                  "buffer w bind[1]: tensor b ends at byte 80, past the buffer's 70 bytes");
  EXPECT_CONTAINS(plan_error(weight(DType::F32, {}), 4, f.tensors), "buffer w: has no bind segments");
}

TEST(BindPlan, DTypeMismatchAndMissingTensor) {
  Fixture f;
  f.add("a", DType::F32, {4});
  EXPECT_CONTAINS(plan_error(weight(DType::BF16, {whole("a")}), 16, f.tensors),
                  "buffer w bind[0]: tensor a is f32 but the buffer is bf16");
  EXPECT_CONTAINS(plan_error(weight(DType::F32, {whole("a"), whole("model.missing")}), 16, f.tensors),
                  "buffer w bind[1]: tensor model.missing (tensor) is not in the checkpoint");
}

TEST(BindPlan, BadRanges) {
  Fixture f;
  f.add("a", DType::U8, {4, 6});
  EXPECT_CONTAINS(plan_error(weight(DType::U8, {rows("a", 2, 2)}), 6, f.tensors),
                  "tensor a: rows [2, 2) is empty or reversed");
  EXPECT_CONTAINS(plan_error(weight(DType::U8, {rows("a", 3, 1)}), 6, f.tensors), "rows [3, 1) is empty or reversed");
  EXPECT_CONTAINS(plan_error(weight(DType::U8, {rows("a", 2, 5)}), 18, f.tensors),
                  "tensor a: rows [2, 5) is outside the tensor's 4 rows");
  EXPECT_CONTAINS(plan_error(weight(DType::U8, {cols("a", 0, 7)}), 28, f.tensors),
                  "tensor a: cols [0, 7) is outside the tensor's 6 cols");
}

TEST(BindPlan, InterleaveErrors) {
  Fixture f;
  f.add("a", DType::U8, {4, 6});
  f.add("b", DType::U8, {4, 3, 2});
  f.add("c", DType::U8, {4, 6});
  f.add("h", DType::F16, {4, 6});
  EXPECT_CONTAINS(plan_error(weight(DType::U8, {interleave("a", "b", 2)}), 48, f.tensors),
                  "tensor a and interleave.with tensor b differ in shape (4x6 vs 4x3x2)");
  EXPECT_CONTAINS(plan_error(weight(DType::U8, {interleave("a", "c", 3)}), 48, f.tensors),
                  "interleave block of 3 rows does not divide its 4 rows");
  EXPECT_CONTAINS(plan_error(weight(DType::U8, {interleave("a", "c", 0)}), 48, f.tensors),
                  "interleave rows must be positive");
  EXPECT_CONTAINS(plan_error(weight(DType::U8, {interleave("a", "h", 2)}), 48, f.tensors),
                  "tensor h is f16 but the buffer is u8");
  EXPECT_CONTAINS(plan_error(weight(DType::U8, {interleave("a", "zz", 2)}), 48, f.tensors),
                  "tensor zz (interleave.with) is not in the checkpoint");
  BindSegment with_rows = interleave("a", "c", 2);
  with_rows.rows = range(0, 2);
  EXPECT_CONTAINS(plan_error(weight(DType::U8, {with_rows}), 48, f.tensors), "interleave does not allow rows or cols");
}

TEST(BindPlan, PrintsOneLinePerCopy) {
  Fixture f;
  f.add("a", DType::BF16, {4, 6});
  const auto plan =
      weights::plan_bind("w_up", weight(DType::BF16, {cols("a", 2, 5), rows("a", 0, 1)}), 36, f.tensors, {});
  EXPECT_EQ(plan.to_string(),
            "bind w_up (36 bytes, 2 copies)\n"
            "  copy2d a src 4 pitch 12 -> dst 0 pitch 6: 4 rows x 6 bytes\n"
            "  copy   a [0, +12) -> [24, +12)\n");
}

// Random bind lists over random tensors: the plan, executed two ways (the test's executor over
// host memory, the library's over a safetensors file), equals the reference built element by
// element.
TEST(BindPlan, RandomPlansReproduceTheReferenceBuffer) {
  std::mt19937 rng(20261129);
  auto pick = [&](std::uint64_t lo, std::uint64_t hi) {
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
  };
  const DType dtypes[] = {DType::U8, DType::BF16, DType::F32, DType::I64};
  test::TempDir dir;
  for (int iter = 0; iter < 60; ++iter) {
    const DType dt = dtypes[iter % 4];
    Fixture f;
    f.seed = 1000 + iter * 17;
    std::vector<weights::TensorSpec> specs;
    const int ntensors = static_cast<int>(pick(1, 4));
    for (int i = 0; i < ntensors; ++i) {
      std::vector<std::uint64_t> shape{pick(1, 8)};
      for (std::uint64_t extra = pick(0, 2); extra > 0; --extra) shape.push_back(pick(1, 5));
      specs.push_back({"t" + std::to_string(i), dt, shape});
      f.add(specs.back().name, dt, shape);
    }
    // A twin of t0 for interleaves.
    specs.push_back({"twin", dt, specs[0].shape});
    f.add("twin", dt, specs[0].shape);

    Reference ref{f.tensors, {}};
    std::vector<BindSegment> bind;
    for (std::uint64_t s = pick(1, 5); s > 0; --s) {
      const std::string name = "t" + std::to_string(pick(0, ntensors - 1));
      const auto [r, c] = Reference::matrix(*f.tensors.find(name));
      switch (pick(0, 3)) {
        case 0:
          bind.push_back(whole(name));
          ref.whole(name);
          break;
        case 1: {
          std::uint64_t a = pick(0, r - 1), b = pick(a + 1, r);
          bind.push_back(rows(name, a, b));
          ref.slice(name, a, b, 0, c);
          break;
        }
        case 2: {
          std::uint64_t r0 = pick(0, r - 1), r1 = pick(r0 + 1, r), c0 = pick(0, c - 1), c1 = pick(c0 + 1, c);
          bind.push_back(BindSegment{named(name), range(r0, r1), range(c0, c1), {}});
          ref.slice(name, r0, r1, c0, c1);
          break;
        }
        default: {
          const auto [r0, c0] = Reference::matrix(*f.tensors.find("t0"));
          std::vector<std::uint64_t> divisors;
          for (std::uint64_t d = 1; d <= r0; ++d)
            if (r0 % d == 0) divisors.push_back(d);
          const std::uint64_t n = divisors[pick(0, divisors.size() - 1)];
          bind.push_back(interleave("t0", "twin", n));
          ref.interleave("t0", "twin", n);
        }
      }
    }
    const auto buf = weight(dt, bind);
    const auto plan = weights::plan_bind("w", buf, ref.out.size(), f.tensors, {});
    ASSERT_EQ(execute(plan, f.tensors), ref.out) << plan.to_string();

    // The same tensors in a safetensors file, executed by the library.
    const auto path = dir.file("r" + std::to_string(iter) + ".safetensors");
    {
      weights::SafetensorsWriter w(path, specs);
      for (const auto& s : specs) {
        const weights::TensorInfo* t = f.tensors.find(s.name);
        w.append(s.name, std::span(t->location.host, t->bytes));
      }
      w.finish();
    }
    auto file_tensors = weights::SafetensorsTensors::open(path);
    const auto file_plan = weights::plan_bind("w", buf, ref.out.size(), file_tensors, {});
    EXPECT_EQ(file_plan.copies, plan.copies);
    std::vector<std::byte> got(ref.out.size());
    weights::execute_bind_plan_on_host(file_plan, file_tensors, got);
    ASSERT_EQ(got, ref.out) << file_plan.to_string();
  }
}

TEST(BindPlan, VectorsAndScalarsAreSingleColumnMatrices) {
  Fixture f;
  f.add("v", DType::F32, {6});
  f.add("s", DType::F32, {});
  const auto plan = weights::plan_bind("w", weight(DType::F32, {rows("v", 2, 5), whole("s")}), 16, f.tensors, {});
  Reference ref{f.tensors, {}};
  ref.slice("v", 2, 5, 0, 1);
  ref.whole("s");
  EXPECT_EQ(execute(plan, f.tensors), ref.out);
  ASSERT_EQ(plan.copies.size(), 2u);
  EXPECT_EQ(plan.copies[0], (weights::BindCopy{weights::BindCopy::Kind::Contiguous, "v", 8, 0, 12, 1, 12, 12}));
  EXPECT_CONTAINS(plan_error(weight(DType::F32, {cols("v", 0, 2)}), 48, f.tensors),
                  "tensor v: cols [0, 2) is outside the tensor's 1 cols");
}
