// Wire spellings of the manifest's closed enums (buffer kinds, placements, fill roles, TMA
// dtypes, literal tags), both directions.
#include <array>
#include <utility>

#include "kern/core/manifest.hpp"

namespace kern::core {

namespace {

template <typename E, std::size_t N>
std::optional<E> find_by_name(const std::array<std::pair<E, std::string_view>, N>& table, std::string_view s) {
  for (const auto& [e, name] : table)
    if (name == s) return e;
  return std::nullopt;
}

template <typename E, std::size_t N>
std::string_view find_name(const std::array<std::pair<E, std::string_view>, N>& table, E e) {
  for (const auto& [x, name] : table)
    if (x == e) return name;
  return "?";
}

constexpr std::array<std::pair<BufferKind, std::string_view>, 7> kBufferKinds{{
    {BufferKind::Input, "input"},
    {BufferKind::Output, "output"},
    {BufferKind::Weight, "weight"},
    {BufferKind::Source, "source"},
    {BufferKind::Workspace, "workspace"},
    {BufferKind::Carry, "carry"},
    {BufferKind::Peer, "peer"},
}};

constexpr std::array<std::pair<Placement, std::string_view>, 2> kPlacements{{
    {Placement::Device, "device"},
    {Placement::Host, "host"},
}};

constexpr std::array<std::pair<Fill, std::string_view>, 17> kFills{{
    {Fill::Token, "token"},
    {Fill::Position, "position"},
    {Fill::Valid, "valid"},
    {Fill::Slot, "slot"},
    {Fill::SeqLen, "seq_len"},
    {Fill::CuSeqlens, "cu_seqlens"},
    {Fill::SpanAt, "span_at"},
    {Fill::Blocks, "blocks"},
    {Fill::Tokens, "tokens"},
    {Fill::Count, "count"},
    {Fill::Error, "error"},
    {Fill::Clock, "clock"},
    {Fill::Sampling, "sampling"},
    {Fill::SamplingKeys, "sampling_keys"},
    {Fill::History, "history"},
    {Fill::Logprobs, "logprobs"},
    {Fill::LogprobIds, "logprob_ids"},
}};

constexpr std::array<std::pair<TmaDType, std::string_view>, 12> kTmaDTypes{{
    {TmaDType::U8, "u8"},
    {TmaDType::U16, "u16"},
    {TmaDType::U32, "u32"},
    {TmaDType::I32, "i32"},
    {TmaDType::U64, "u64"},
    {TmaDType::I64, "i64"},
    {TmaDType::F16, "f16"},
    {TmaDType::BF16, "bf16"},
    {TmaDType::F32, "f32"},
    {TmaDType::TF32, "tf32"},
    {TmaDType::U4, "u4"},
    {TmaDType::U4Packed, "u4packed"},
}};

constexpr std::array<std::pair<Literal::Kind, std::string_view>, 4> kLiteralKinds{{
    {Literal::Kind::I32, "i32"},
    {Literal::Kind::I64, "i64"},
    {Literal::Kind::F32, "f32"},
    {Literal::Kind::U8, "u8"},
}};

}  // namespace

std::string_view to_string(BufferKind k) { return find_name(kBufferKinds, k); }
std::string_view to_string(Placement p) { return find_name(kPlacements, p); }
std::string_view to_string(Fill f) { return find_name(kFills, f); }
std::string_view to_string(TmaDType t) { return find_name(kTmaDTypes, t); }
std::string_view to_string(Literal::Kind k) { return find_name(kLiteralKinds, k); }

std::optional<BufferKind> buffer_kind_from_string(std::string_view s) { return find_by_name(kBufferKinds, s); }
std::optional<Placement> placement_from_string(std::string_view s) { return find_by_name(kPlacements, s); }
std::optional<Fill> fill_from_string(std::string_view s) { return find_by_name(kFills, s); }
std::optional<TmaDType> tma_dtype_from_string(std::string_view s) { return find_by_name(kTmaDTypes, s); }

std::uint64_t tma_global_bits(TmaDType t) {
  switch (t) {
    case TmaDType::U8: return 8;
    case TmaDType::U16:
    case TmaDType::F16:
    case TmaDType::BF16: return 16;
    case TmaDType::U32:
    case TmaDType::I32:
    case TmaDType::F32:
    case TmaDType::TF32: return 32;
    case TmaDType::U64:
    case TmaDType::I64: return 64;
    case TmaDType::U4:
    case TmaDType::U4Packed: return 4;
  }
  return 8;
}

std::optional<Literal::Kind> literal_kind_from_string(std::string_view s) { return find_by_name(kLiteralKinds, s); }

bool is_input_fill(Fill f) {
  switch (f) {
    case Fill::Token:
    case Fill::Position:
    case Fill::Valid:
    case Fill::Slot:
    case Fill::SeqLen:
    case Fill::CuSeqlens:
    case Fill::SpanAt:
    case Fill::Blocks:
    case Fill::Sampling:
    case Fill::SamplingKeys:
    case Fill::History: return true;
    case Fill::Tokens:
    case Fill::Count:
    case Fill::Error:
    case Fill::Clock:
    case Fill::Logprobs:
    case Fill::LogprobIds: return false;
  }
  return false;
}

bool fill_admits(Fill f, DType dtype) {
  switch (f) {
    case Fill::Sampling:
    case Fill::Logprobs: return dtype == DType::F32;
    case Fill::SamplingKeys: return dtype == DType::I64;
    case Fill::History:
    case Fill::LogprobIds: return dtype == DType::I32;
    default: return dtype == DType::I32 || dtype == DType::I64;
  }
}

}  // namespace kern::core
