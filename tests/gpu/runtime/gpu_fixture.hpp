// Shared helpers of the runtime GPU suite: the test kernels' location and hashes, manifest
// text with the hash substituted, byte/bf16 conversions, deterministic random data.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kern/base/error.hpp"
#include "kern/core/manifest.hpp"
#include "kern/runtime/runtime.hpp"
#include "kern/core/verify.hpp"

namespace kern::gputest {

std::string kernels_dir();
// kern's own fatbins (<build>/kernels, or $KERN_KERNELS_DIR).
std::string production_kernels_dir();
std::string cubin_path();
std::string fatbin_path();
std::string cubin_sha();
std::string fatbin_sha();

// Replaces every "@SHA@" in `json` with `sha` (the cubin's by default), parses and verifies.
core::Verified verified(std::string json, const std::string& sha = cubin_sha());

std::unique_ptr<runtime::Runtime> load(const core::Verified& v, runtime::RuntimeOptions options = {},
                                       const std::string& dir = kernels_dir());

template <typename T>
std::span<const std::byte> as_bytes(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}
template <typename T>
std::vector<T> from_bytes(const std::vector<std::byte>& b) {
  std::vector<T> out(b.size() / sizeof(T));
  std::memcpy(out.data(), b.data(), out.size() * sizeof(T));
  return out;
}

std::uint16_t to_bf16(float f);
float from_bf16(std::uint16_t h);
// Random bf16 values uniform in [-1, 1) (never all zero), deterministic per seed.
std::vector<std::uint16_t> random_bf16(std::size_t n, std::uint64_t seed);
std::vector<float> random_f32(std::size_t n, std::uint64_t seed);

// Expects `f` to throw a kern::Error whose root kind is `kind` and whose text contains `needle`.
template <typename F>
void expect_error(F&& f, ErrorKind kind, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an error of kind " << to_string(kind) << " containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.root_kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace kern::gputest
