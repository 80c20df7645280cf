// SHA-256 (OpenSSL) for module identity.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace kern::base {

using Digest = std::array<std::uint8_t, 32>;

Digest sha256(std::string_view bytes);
std::string to_hex(const Digest& d);
// Lowercase hex of the file's SHA-256; throws Error(Io) when it cannot be read.
std::string sha256_file_hex(const std::string& path);
bool is_sha256_hex(std::string_view s);  // 64 hex digits (either case)

}  // namespace kern::base

// base is the vocabulary every layer speaks: its names are visible as kern::NAME.
namespace kern {
using namespace base;  // NOLINT(google-build-using-namespace)
}  // namespace kern
