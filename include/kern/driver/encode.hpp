// Little-endian encoding of fill values and decoding of outputs, per the buffer's dtype.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kern/base/dtype.hpp"

namespace kern::driver {

// i32 or i64 elements; Error(Api) for a value an i32 cannot hold, Error(Manifest) for another dtype.
std::vector<std::byte> encode_ints(DType dtype, std::span<const std::int64_t> values, std::string_view buffer);
// f32 elements (the `sampling` fill).
std::vector<std::byte> encode_f32(std::span<const float> values);
// Every element of an i32 / i64 buffer.
std::vector<std::int64_t> decode_ints(DType dtype, std::span<const std::byte> bytes, std::string_view buffer);
// The first `count` elements of a bf16 / f16 / f32 buffer as floats; Error(Api) when it is shorter.
std::vector<float> decode_floats(DType dtype, std::span<const std::byte> bytes, std::uint64_t count,
                                 std::string_view buffer);

float bf16_to_float(std::uint16_t bits);
float f16_to_float(std::uint16_t bits);

}  // namespace kern::driver
