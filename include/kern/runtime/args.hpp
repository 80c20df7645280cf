// Launch-argument resolution and staging (pure; no CUDA).
//
// At load, every launch of every call is resolved ONCE into an ArgImage: the kernel's
// parameters laid out at the driver-reported offsets as little-endian bytes (pointers =
// base + call offset, literals, ranks, packs with encoded tensor maps), plus the few
// var-dependent slots (vars, expressions, pack var/expr fields) as patches. A run only
// re-evaluates patches, and only when the var assignment changed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kern/cuda/cuda.hpp"
#include "kern/core/manifest.hpp"
#include "kern/runtime/vars.hpp"

namespace kern::runtime {

// A device address and how many bytes are valid from it (for extern size checks and
// tensormap spans).
struct Pointer {
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
};

// A var-dependent slot: `expr` evaluated and stored little-endian in `width` bytes at `offset`
// (as an IEEE f32 when `as_f32`).
struct Patch {
  std::uint32_t offset = 0;
  std::uint8_t width = 4;
  bool as_f32 = false;
  CompiledExpr expr;
};

// One resolved argument value.
struct ArgValue {
  std::vector<std::byte> bytes;    // the static image (zeros where patches go)
  std::vector<Patch> patches;      // offsets relative to the value
  std::optional<Pointer> pointer;  // set when the value is a device pointer
  bool is_float = false;           // an f32 scalar
};

// Where the resolver gets addresses from (the runtime supplies real ones; tests fake them).
struct ResolveContext {
  const VarTable* vars = nullptr;
  // A buffer or state call argument (kind Buf / State, with its offset) -> pointer.
  std::function<Pointer(const core::CallArg&)> pointer;
  // Scratch of the op being resolved.
  std::function<Pointer(std::string_view)> scratch;
  // Rank index in a topology group.
  std::function<std::uint64_t(std::string_view)> rank;
  std::function<std::array<std::byte, 128>(const cuda::TensormapSpec&)> encode_tensormap;
};

// Resolves launch `launch` of `op` as called by `call`: one value per launch param.
// Errors: Manifest (arity, unknown names, a pack field over an unsuitable param).
std::vector<ArgValue> resolve_launch_args(const core::Op& op, const core::Launch& launch, const core::Call& call,
                                          const ResolveContext& ctx);

// Little-endian encoding of the low `width` bytes of v.
void store_le(std::byte* dst, std::uint64_t v, std::size_t width);
std::uint64_t load_le(const std::byte* src, std::size_t width);
// An integer scalar value at `vars` (its literal bytes, or its one patch's expression evaluated);
// nullopt when the expression overflows.
std::optional<std::uint64_t> int_value_at(const ArgValue& v, const std::uint64_t* vars);

// The staged parameter block of one kernel launch.
class ArgImage {
 public:
  ArgImage() = default;
  // Lays `values` out at `offsets` (one per param; the driver's layout).
  ArgImage(std::span<const ArgValue> values, std::span<const std::uint64_t> offsets);
  // Movable, not copyable: params() points into the object's own bytes.
  ArgImage(ArgImage&&) noexcept = default;
  ArgImage& operator=(ArgImage&&) noexcept = default;
  ArgImage(const ArgImage&) = delete;
  ArgImage& operator=(const ArgImage&) = delete;
  // Re-evaluates every patch; false (and `failed` names it) on overflow.
  bool apply(const std::uint64_t* vars, const Patch** failed = nullptr);
  void** params() { return pointers_.data(); }
  std::span<const std::byte> bytes() const { return bytes_; }
  bool dynamic() const { return !patches_.empty(); }

 private:
  std::vector<std::byte> bytes_;
  std::vector<void*> pointers_;
  std::vector<Patch> patches_;
};

// Writes one patch into `dst` (the value's base). False on overflow.
bool apply_patch(const Patch& p, std::byte* base, const std::uint64_t* vars);

// The natural layout of declared params (C ABI: each scalar aligned to its size; bytes<N>
// aligned to 8): what offsets tests use when there is no driver.
std::vector<std::uint64_t> natural_offsets(std::span<const core::ParamType> params);

// Compares declared params with the driver's layout (count, sizes, offsets). nullopt when
// they agree, else one sentence naming the first disagreement ("param 2: declared i32 (4 bytes
// at offset 16), the kernel has 8 bytes at offset 16"). bytes<N> may sit at any power-of-two
// boundary up to 128 after the previous param.
std::optional<std::string> abi_mismatch(std::span<const core::ParamType> declared,
                                        std::span<const cuda::ParamInfo> found);

}  // namespace kern::runtime
