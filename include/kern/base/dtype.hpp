// Element types: the manifest's dtypes (schema v5) plus the extra ones safetensors files carry.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kern::base {

enum class DType : std::uint8_t {
  // manifest dtypes (schema v5)
  BF16,
  F16,
  F32,
  I32,
  U32,
  I64,
  U64,
  FP8E4M3,
  FP8E8M0,
  I8,
  U8,
  // only seen in checkpoints
  F64,
  I16,
  U16,
  BOOL,
  FP8E5M2,
};

std::uint64_t dtype_size(DType t);
// Manifest spelling: "bf16", "fp8e4m3", ... ; nullopt for a non-manifest dtype.
std::optional<DType> dtype_from_manifest(std::string_view s);
std::string_view manifest_name(DType t);  // "bf16"; for checkpoint-only types their lowercase name
// Safetensors spelling: "BF16", "F8_E4M3", ...
std::optional<DType> dtype_from_safetensors(std::string_view s);
std::string_view safetensors_name(DType t);
bool is_manifest_dtype(DType t);
bool is_integer(DType t);
bool is_float(DType t);

}  // namespace kern::base

// base is the vocabulary every layer speaks: its names are visible as kern::NAME.
namespace kern {
using namespace base;  // NOLINT(google-build-using-namespace)
}  // namespace kern
