#include "kern/driver/encode.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "kern/base/error.hpp"

namespace kern::driver {

std::vector<std::byte> encode_ints(DType dtype, std::span<const std::int64_t> values, std::string_view buffer) {
  std::vector<std::byte> out;
  if (dtype == DType::I64) {
    out.resize(values.size() * 8);
    for (std::size_t i = 0; i < values.size(); ++i) {
      const std::uint64_t v = static_cast<std::uint64_t>(values[i]);
      for (int b = 0; b < 8; ++b) out[i * 8 + b] = static_cast<std::byte>(v >> (8 * b));
    }
    return out;
  }
  if (dtype == DType::I32) {
    out.resize(values.size() * 4);
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (values[i] < std::numeric_limits<std::int32_t>::min() || values[i] > std::numeric_limits<std::int32_t>::max())
        fail(ErrorKind::Api, "value {} for {}[{}] does not fit i32", values[i], buffer, i);
      const std::uint32_t v = static_cast<std::uint32_t>(static_cast<std::int32_t>(values[i]));
      for (int b = 0; b < 4; ++b) out[i * 4 + b] = static_cast<std::byte>(v >> (8 * b));
    }
    return out;
  }
  fail(ErrorKind::Manifest, "buffer {} is {}: a fill input must be i32 or i64", buffer, manifest_name(dtype));
}

std::vector<std::byte> encode_f32(std::span<const float> values) {
  std::vector<std::byte> out(values.size() * 4);
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

std::vector<std::int64_t> decode_ints(DType dtype, std::span<const std::byte> bytes, std::string_view buffer) {
  const std::size_t size = dtype == DType::I64 ? 8 : dtype == DType::I32 ? 4 : 0;
  if (size == 0)
    fail(ErrorKind::Manifest, "buffer {} is {}: a fill output must be i32 or i64", buffer, manifest_name(dtype));
  if (bytes.size() % size)
    fail(ErrorKind::Api, "buffer {}: {} bytes is not a whole number of {}", buffer, bytes.size(), manifest_name(dtype));
  std::vector<std::int64_t> out(bytes.size() / size);
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::uint64_t v = 0;
    for (std::size_t b = 0; b < size; ++b) v |= static_cast<std::uint64_t>(bytes[i * size + b]) << (8 * b);
    out[i] = size == 8 ? static_cast<std::int64_t>(v)
                       : static_cast<std::int64_t>(static_cast<std::int32_t>(static_cast<std::uint32_t>(v)));
  }
  return out;
}

float bf16_to_float(std::uint16_t bits) {
  const std::uint32_t w = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}

float f16_to_float(std::uint16_t h) {
  const int sign = (h >> 15) ? -1 : 1;
  const int exp = (h >> 10) & 31;
  const int mant = h & 1023;
  if (exp == 0) return static_cast<float>(sign * std::ldexp(static_cast<double>(mant), -24));
  if (exp == 31) return mant ? std::numeric_limits<float>::quiet_NaN() : sign * std::numeric_limits<float>::infinity();
  return static_cast<float>(sign * std::ldexp(1024.0 + mant, exp - 25));
}

std::vector<float> decode_floats(DType dtype, std::span<const std::byte> bytes, std::uint64_t count,
                                 std::string_view buffer) {
  const std::uint64_t size = dtype == DType::F32 ? 4 : (dtype == DType::BF16 || dtype == DType::F16) ? 2 : 0;
  if (size == 0) fail(ErrorKind::Manifest, "buffer {} is {}, not a float buffer", buffer, manifest_name(dtype));
  if (bytes.size() < count * size)
    fail(ErrorKind::Api, "buffer {} holds {} bytes; {} {} values need {}", buffer, bytes.size(), count,
         manifest_name(dtype), count * size);
  std::vector<float> out(count);
  for (std::uint64_t i = 0; i < count; ++i) {
    if (size == 4) {
      std::memcpy(&out[i], bytes.data() + i * 4, 4);
    } else {
      const std::uint16_t bits = static_cast<std::uint16_t>(static_cast<unsigned>(bytes[i * 2]) |
                                                            (static_cast<unsigned>(bytes[i * 2 + 1]) << 8));
      out[i] = dtype == DType::BF16 ? bf16_to_float(bits) : f16_to_float(bits);
    }
  }
  return out;
}

}  // namespace kern::driver
