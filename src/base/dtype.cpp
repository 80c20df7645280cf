#include "kern/base/dtype.hpp"

#include <array>

namespace kern::base {

namespace {
struct Row {
  DType t;
  std::uint64_t size;
  std::string_view manifest;     // empty: not a manifest dtype
  std::string_view safetensors;  // empty: no safetensors spelling
  bool integer;
};
constexpr std::array<Row, 16> kRows{{
    {DType::BF16, 2, "bf16", "BF16", false},
    {DType::F16, 2, "f16", "F16", false},
    {DType::F32, 4, "f32", "F32", false},
    {DType::I32, 4, "i32", "I32", true},
    {DType::U32, 4, "u32", "U32", true},
    {DType::I64, 8, "i64", "I64", true},
    {DType::U64, 8, "u64", "U64", true},
    {DType::FP8E4M3, 1, "fp8e4m3", "F8_E4M3", false},
    {DType::FP8E8M0, 1, "fp8e8m0", "F8_E8M0", false},
    {DType::I8, 1, "i8", "I8", true},
    {DType::U8, 1, "u8", "U8", true},
    {DType::F64, 8, "", "F64", false},
    {DType::I16, 2, "", "I16", true},
    {DType::U16, 2, "", "U16", true},
    {DType::BOOL, 1, "", "BOOL", true},
    {DType::FP8E5M2, 1, "", "F8_E5M2", false},
}};
const Row& row(DType t) { return kRows[static_cast<std::size_t>(t)]; }
}  // namespace

std::uint64_t dtype_size(DType t) { return row(t).size; }

std::optional<DType> dtype_from_manifest(std::string_view s) {
  for (const auto& r : kRows)
    if (!r.manifest.empty() && r.manifest == s) return r.t;
  return std::nullopt;
}

std::string_view manifest_name(DType t) {
  switch (t) {
    case DType::F64: return "f64";
    case DType::I16: return "i16";
    case DType::U16: return "u16";
    case DType::BOOL: return "bool";
    case DType::FP8E5M2: return "fp8e5m2";
    default: return row(t).manifest;
  }
}

std::optional<DType> dtype_from_safetensors(std::string_view s) {
  for (const auto& r : kRows)
    if (r.safetensors == s) return r.t;
  return std::nullopt;
}

std::string_view safetensors_name(DType t) { return row(t).safetensors; }
bool is_manifest_dtype(DType t) { return !row(t).manifest.empty(); }
bool is_integer(DType t) { return row(t).integer; }
bool is_float(DType t) { return !row(t).integer; }

}  // namespace kern::base
