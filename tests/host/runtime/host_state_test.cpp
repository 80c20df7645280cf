// Host states' pure layer (kern/runtime/host_state.hpp): span arithmetic, the layout proof a
// bound tensor must give, which states must be bound, and the binding decision from the
// driver's pointer facts.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kern/base/error.hpp"
#include "kern/core/manifest.hpp"
#include "kern/core/verify.hpp"
#include "kern/runtime/host_state.hpp"

namespace kern::runtime {
namespace {

using U = std::vector<std::uint64_t>;
constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

template <typename F>
void expect_api(F&& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing " << needles.front();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Api) << e.what();
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

void* at(std::uintptr_t a) { return reinterpret_cast<void*>(a); }

TEST(RuntimeHostState, SpanElements) {
  EXPECT_EQ(span_elements(U{4, 8}, U{8, 1}), 32u);          // contiguous
  EXPECT_EQ(span_elements(U{4, 8}, U{16, 1}), 56u);         // padded rows: 3·16 + 7 + 1
  EXPECT_EQ(span_elements(U{2, 3, 5}, U{100, 10, 1}), 125u);  // 100 + 20 + 4 + 1
  EXPECT_EQ(span_elements(U{4, 8}, U{0, 1}), 8u);           // a broadcast outer dim
  EXPECT_EQ(span_elements(U{8, 4}, U{1, 8}), 32u);          // column-major
  EXPECT_EQ(span_elements(U{1}, U{12345}), 1u);             // an extent of 1 never reaches its stride
  EXPECT_EQ(span_elements(U{}, U{}), 1u);                   // rank 0: one element
  EXPECT_EQ(span_elements(U{0, 8}, U{8, 1}), std::nullopt);  // no element
  EXPECT_EQ(span_elements(U{4, 8}, U{8}), std::nullopt);     // rank differs from the strides
}

TEST(RuntimeHostState, SpanOverflow) {
  // (2^63 - 1)·2 + 1·1 = 2^64 - 1 is the last index: the count, 2^64, no longer fits.
  EXPECT_EQ(span_elements(U{1ull << 63, 2}, U{2, 1}), std::nullopt);
  EXPECT_EQ(span_elements(U{1ull << 63, 1}, U{2, 1}), kMax);  // last index 2^64 - 2
  EXPECT_EQ(span_elements(U{(1ull << 32) + 1, 2}, U{1ull << 32, 1}), std::nullopt);  // 2^32 · 2^32 overflows
  EXPECT_EQ(span_elements(U{1ull << 32, 2}, U{1ull << 32, 1}), (1ull << 32) * ((1ull << 32) - 1) + 2);
  EXPECT_EQ(span_elements(U{kMax, 2}, U{1, kMax}), std::nullopt);              // the sum overflows
  EXPECT_EQ(span_bytes(DType::F32, U{1ull << 62}, U{1}), std::nullopt);        // ×4 bytes overflows
  EXPECT_EQ(span_bytes(DType::BF16, U{1ull << 62}, U{1}), 1ull << 63);
  EXPECT_EQ(span_bytes(DType::BF16, U{4, 8}, U{16, 1}), 112u);
  EXPECT_EQ(span_bytes(DType::I64, U{3}, U{2}), 40u);  // 5 elements
}

core::HostState decl(DType d, U shape, U strides) { return core::HostState{d, std::move(shape), std::move(strides)}; }

HostTensor tensor(std::uintptr_t a, DType d, U shape, U strides) {
  return HostTensor{at(a), d, std::move(shape), std::move(strides)};
}

TEST(RuntimeHostState, MatchingTensorGivesItsSpan) {
  const auto open = decl(DType::BF16, {0, 8, 128}, {1024, 128, 1});
  EXPECT_EQ(check_host_tensor("kv", open, tensor(0x10000, DType::BF16, {1, 8, 128}, {1024, 128, 1})), 2048u);
  // The open outer extent is the caller's: 5 rows → 4·1024 + 7·128 + 127 + 1 elements.
  EXPECT_EQ(check_host_tensor("kv", open, tensor(0x10000, DType::BF16, {5, 8, 128}, {1024, 128, 1})),
            (4 * 1024 + 7 * 128 + 128) * 2u);
  const auto closed = decl(DType::F32, {4, 8}, {16, 1});
  EXPECT_EQ(check_host_tensor("t", closed, tensor(0x10000, DType::F32, {4, 8}, {16, 1})), 56u * 4);
}

TEST(RuntimeHostState, MismatchesAreRefusedNamingStateAndDifference) {
  const auto d = decl(DType::BF16, {0, 8, 128}, {1024, 128, 1});
  auto ok = [] { return tensor(0x10000, DType::BF16, {2, 8, 128}, {1024, 128, 1}); };
  auto t = ok();
  t.strides = {1024, 129, 1};
  expect_api([&] { check_host_tensor("kv", d, t); }, {"host state kv", "dim 1", "stride 129", "declares 128"});
  t = ok();
  t.strides = {2048, 128, 1};  // the open dim's stride is still fixed
  expect_api([&] { check_host_tensor("kv", d, t); }, {"host state kv", "dim 0", "stride 2048", "declares 1024"});
  t = ok();
  t.shape[0] = 0;
  expect_api([&] { check_host_tensor("kv", d, t); }, {"host state kv", "open outer extent", "is 0", "at least 1"});
  t = ok();
  t.dtype = DType::F16;
  expect_api([&] { check_host_tensor("kv", d, t); }, {"host state kv", "is f16", "declares bf16"});
  t = ok();
  t.shape = {2, 1024};
  t.strides = {1024, 1};
  expect_api([&] { check_host_tensor("kv", d, t); }, {"host state kv", "2 dims", "declares 3"});
  t = ok();
  t.strides = {1024, 128};
  expect_api([&] { check_host_tensor("kv", d, t); }, {"host state kv", "2 strides for its 3 dims"});
  t = ok();
  t.shape[2] = 64;
  expect_api([&] { check_host_tensor("kv", d, t); }, {"host state kv", "dim 2", "extent 64", "declares 128"});
  t = ok();
  t.data = nullptr;
  expect_api([&] { check_host_tensor("kv", d, t); }, {"host state kv", "null address"});
  t = ok();
  t.data = at(0x10001);
  expect_api([&] { check_host_tensor("kv", d, t); }, {"host state kv", "not aligned", "2-byte"});
  // A closed outer extent must be equal too.
  const auto closed = decl(DType::F32, {4, 8}, {8, 1});
  expect_api([&] { check_host_tensor("c", closed, tensor(0x10000, DType::F32, {5, 8}, {8, 1})); },
             {"host state c", "dim 0", "extent 5", "declares 4"});
}

TEST(RuntimeHostState, SpanOverflowAndAddressWrapAreRefused) {
  const auto d = decl(DType::F32, {0}, {1});
  expect_api([&] { check_host_tensor("big", d, tensor(0x10000, DType::F32, {1ull << 62}, {1})); },
             {"host state big", "overflows"});
  // 16 bytes below the top of the address space: 16 bytes or more wrap past it, 12 do not.
  const std::uint64_t top = kMax - 15;
  expect_api([&] { check_host_tensor("top", d, tensor(top, DType::F32, {4}, {1})); }, {"host state top", "overflows"});
  EXPECT_EQ(check_host_tensor("top", d, tensor(top, DType::F32, {3}, {1})), 12u);
  expect_api([&] { check_host_tensor("top", d, tensor(top + 2, DType::F32, {1}, {1})); },
             {"host state top", "not aligned", "4-byte f32"});
}

const char* kManifest = R"({
  "schema_version": 5, "model": "host-states",
  "states": {
    "kv": {"host": {"dtype": "bf16", "shape": [0, 8], "strides": [8, 1]}},
    "tbl": {"host": {"dtype": "f32", "shape": [4, 4], "strides": [4, 1]}},
    "fixed": {"bytes": 64}
  },
  "buffers": {}, "modules": {}, "ops": {}, "programs": {}
})";

TEST(RuntimeHostState, EveryHostStateIsBoundAndNothingElse) {
  const core::Manifest m = core::parse_manifest(kManifest);
  ASSERT_TRUE(m.states.at("kv").host);
  std::map<std::string, HostTensor> bound = {{"kv", tensor(0x1000, DType::BF16, {3, 8}, {8, 1})},
                                             {"tbl", tensor(0x2000, DType::F32, {4, 4}, {4, 1})}};
  check_host_bindings(m, bound);
  auto missing = bound;
  missing.erase("tbl");
  expect_api([&] { check_host_bindings(m, missing); }, {"host state tbl is not bound", "RuntimeOptions::host_states"});
  auto extra = bound;
  extra.emplace("fixed", tensor(0x3000, DType::U8, {64}, {1}));
  expect_api([&] { check_host_bindings(m, extra); }, {"state fixed", "not a host state"});
  auto unknown = bound;
  unknown.emplace("nope", tensor(0x3000, DType::U8, {64}, {1}));
  expect_api([&] { check_host_bindings(m, unknown); }, {"state nope", "does not declare"});
  // The declared layouts check the bound tensors.
  EXPECT_EQ(check_host_tensor("kv", *m.states.at("kv").host, bound.at("kv")), 48u);
  EXPECT_EQ(check_host_tensor("tbl", *m.states.at("tbl").host, bound.at("tbl")), 64u);
}

TEST(RuntimeHostState, BindingDecision) {
  using K = HostMemoryFacts::Kind;
  EXPECT_EQ(plan_host_binding("s", 0x1000, 64, {K::Unregistered, -1, 0, 0}, 0), HostBinding::Register);
  EXPECT_EQ(plan_host_binding("s", 0x1000, 64, {K::Pinned, 0, 0x1000, 64}, 0), HostBinding::MapPinned);
  EXPECT_EQ(plan_host_binding("s", 0x1040, 64, {K::Pinned, 0, 0x1000, 128}, 1), HostBinding::MapPinned);
  EXPECT_EQ(plan_host_binding("s", 0x1000, 64, {K::Pinned, 0, 0, 0}, 0), HostBinding::MapPinned);  // range unknown
  EXPECT_EQ(plan_host_binding("s", 0x1000, 64, {K::Device, 2, 0x1000, 4096}, 2), HostBinding::Direct);
  EXPECT_EQ(plan_host_binding("s", 0x1000, 64, {K::Managed, -1, 0x1000, 4096}, 3), HostBinding::Direct);
  expect_api([] { plan_host_binding("s", 0x1000, 64, {K::Device, 1, 0x1000, 4096}, 0); },
             {"host state s", "device memory of GPU 1", "runs on GPU 0"});
  expect_api([] { plan_host_binding("s", 0x1041, 64, {K::Pinned, 0, 0x1000, 128}, 0); },
             {"host state s", "64 bytes", "run past its pinned allocation", "128 bytes"});
  expect_api([] { plan_host_binding("s", 0x2000, 64, {K::Device, 0, 0x1000, 4096}, 0); },
             {"host state s", "run past its device allocation"});
  expect_api([] { plan_host_binding("s", 0x0800, 64, {K::Device, 0, 0x1000, 4096}, 0); },
             {"run past its device allocation"});
}

}  // namespace
}  // namespace kern::runtime
