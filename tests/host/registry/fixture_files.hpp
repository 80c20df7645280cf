// Locating the nvcc-built registry fixtures and reading them as bytes.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "kern/base/file.hpp"

namespace kern::test {

inline std::string fixture(const std::string& name) {
#ifdef KERN_REGISTRY_FIXTURES
  return std::string(KERN_REGISTRY_FIXTURES) + "/" + name;
#else
  return {};
#endif
}

// Skips the test when the build had no nvcc (the fixtures are nvcc output).
#ifdef KERN_REGISTRY_FIXTURES
#define KERN_NEED_NVCC_FIXTURES() (void)0
#else
#define KERN_NEED_NVCC_FIXTURES() GTEST_SKIP() << "built without nvcc: no registry fixtures"
#endif

inline std::vector<std::byte> fixture_bytes(const std::string& name) {
  std::string s = read_file(fixture(name));
  auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

}  // namespace kern::test
