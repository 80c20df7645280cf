#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kern/base/error.hpp"
#include "kern/runtime/domain.hpp"

namespace kern::runtime {
namespace {

const char* kDomainManifest = R"({
  "schema_version": 5, "model": "dom",
  "vars": {"tokens": {"max": 100}, "seqs": {"max": 4}},
  "states": {"kv": {"bytes_per_token": 64}, "conv": {"bytes_per_seq": 1024}},
  "buffers": {
    "ids": {"dtype": "i64", "shape": ["tokens"], "kind": "input", "domain": {"index_into": "emb"}},
    "emb": {"dtype": "bf16", "shape": [1000, 8], "kind": "weight", "bind": [{"tensor": "e"}]},
    "slots": {"dtype": "i64", "shape": ["tokens"], "kind": "input", "domain": {"index_into": "kv"}},
    "pages": {"dtype": "i32", "shape": ["seqs", 8], "kind": "input", "domain": {"index_into": "kv", "stride": 16}},
    "lines": {"dtype": "i32", "shape": ["seqs"], "kind": "input", "domain": {"index_into": "conv", "stride": 256}},
    "cu": {"dtype": "i32", "shape": [5], "kind": "input", "domain": {"min": 0, "max": "tokens", "monotone": true}},
    "temp": {"dtype": "f32", "shape": [1], "kind": "input", "domain": {"min": 0.0, "max": 2.0}},
    "h": {"dtype": "bf16", "shape": [4], "kind": "input"},
    "u": {"dtype": "u64", "shape": [2], "kind": "input", "domain": {"max": 5}}
  },
  "modules": {}, "ops": {}, "programs": {}
})";

template <typename T>
std::vector<std::byte> raw(std::vector<T> v) {
  std::vector<std::byte> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

struct Doms {
  core::Manifest m = core::parse_manifest(kDomainManifest);
  Capacity cap{4096, 4};
  DomainRule rule(const char* name) { return resolve_domain(m, name, m.buffers.at(name), cap); }
};

void expect_domain_error(const DomainRule& r, const std::vector<std::byte>& b, const std::string& needle) {
  try {
    check_domain(r, b);
    ADD_FAILURE() << "no error; expected " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Domain) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(RuntimeDomain, IndexIntoBufferRows) {
  Doms d;
  auto r = d.rule("ids");
  check_domain(r, raw<std::int64_t>({0, 999, 5}));
  expect_domain_error(r, raw<std::int64_t>({0, 1000}), "element 1 = 1000 is above its domain maximum 999");
  expect_domain_error(r, raw<std::int64_t>({-1}), "element 0 = -1 is below its domain minimum 0");
}

TEST(RuntimeDomain, IndexIntoStatesUsesCapacity) {
  Doms d;
  check_domain(d.rule("slots"), raw<std::int64_t>({4095}));
  expect_domain_error(d.rule("slots"), raw<std::int64_t>({4096}), "maximum 4095");
  check_domain(d.rule("pages"), raw<std::int32_t>({255, 0}));
  expect_domain_error(d.rule("pages"), raw<std::int32_t>({256}), "maximum 255");
  // per-seq: (seqs + 1 slots) × (1024 / 256 lines) = 20 lines
  check_domain(d.rule("lines"), raw<std::int32_t>({19}));
  expect_domain_error(d.rule("lines"), raw<std::int32_t>({20}), "maximum 19");
}

TEST(RuntimeDomain, BoundsAndMonotone) {
  Doms d;
  auto cu = d.rule("cu");
  check_domain(cu, raw<std::int32_t>({0, 3, 3, 50, 100}));
  expect_domain_error(cu, raw<std::int32_t>({0, 3, 2}), "non-decreasing: element 2 = 2 follows 3");
  expect_domain_error(cu, raw<std::int32_t>({0, 101}), "above its domain maximum 100");
  auto t = d.rule("temp");
  check_domain(t, raw<float>({1.5f}));
  expect_domain_error(t, raw<float>({2.5f}), "above");
  expect_domain_error(t, raw<float>({NAN}), "not a finite value");
  auto u = d.rule("u");
  check_domain(u, raw<std::uint64_t>({5, 0}));
  expect_domain_error(u, raw<std::uint64_t>({~0ull}), "18446744073709551615");
}

TEST(RuntimeDomain, FloatsWithoutDomainMustBeFinite) {
  Doms d;
  auto h = d.rule("h");
  check_domain(h, raw<std::uint16_t>({0x3f80, 0xbf80}));  // 1, -1
  expect_domain_error(h, raw<std::uint16_t>({0x3f80, 0x7f80}), "element 1 is inf");
  try {
    check_domain(h, std::vector<std::byte>(3));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Api);
  }
}

}  // namespace
}  // namespace kern::runtime
