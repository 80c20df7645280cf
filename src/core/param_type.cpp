// The param-type grammar:
//   i32 | i64 | f32 | u8 | bytes<N> (N >= 1) | (in|out|inout) state | (in|out|inout) buffer<DTYPE>
//
// Only the canonical spelling is accepted: lowercase, exactly one space between direction and
// kind, no space anywhere else (not inside <...>, not leading or trailing), N in decimal with
// no leading zero or sign. So parse_param_type(s)->to_string() == s for every accepted s.
#include <fmt/format.h>

#include <string_view>
#include <utility>

#include "kern/core/manifest.hpp"
#include "manifest_wire.hpp"

namespace kern::core {

namespace {

constexpr bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// "<...>" suffix content: the text between the brackets, or nullopt when `s` is not exactly "<x>".
std::optional<std::string_view> bracketed(std::string_view s) {
  if (s.size() < 3 || s.front() != '<' || s.back() != '>') return std::nullopt;
  return s.substr(1, s.size() - 2);
}

std::optional<std::uint64_t> parse_decimal(std::string_view s) {
  if (s.empty() || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    if (__builtin_mul_overflow(v, 10u, &v) || __builtin_add_overflow(v, static_cast<std::uint64_t>(c - '0'), &v))
      return std::nullopt;
  }
  return v;
}

std::string_view direction_word(Direction d) {
  switch (d) {
    case Direction::In: return "in";
    case Direction::Out: return "out";
    case Direction::InOut: return "inout";
    case Direction::None: break;
  }
  return "";
}

}  // namespace

std::optional<ParamType> parse_param_type(std::string_view s) {
  ParamType t;
  constexpr std::pair<std::string_view, ParamType::Kind> kScalars[] = {{"i32", ParamType::Kind::I32},
                                                                       {"i64", ParamType::Kind::I64},
                                                                       {"f32", ParamType::Kind::F32},
                                                                       {"u8", ParamType::Kind::U8}};
  for (const auto& [name, kind] : kScalars) {
    if (s == name) {
      t.kind = kind;
      return t;
    }
  }
  if (starts_with(s, "bytes")) {
    auto inner = bracketed(s.substr(5));
    if (!inner) return std::nullopt;
    auto n = parse_decimal(*inner);
    if (!n || *n == 0) return std::nullopt;
    t.kind = ParamType::Kind::Bytes;
    t.bytes = *n;
    return t;
  }
  // (in|out|inout) <kind>
  std::string_view rest;
  if (starts_with(s, "inout ")) {
    t.dir = Direction::InOut;
    rest = s.substr(6);
  } else if (starts_with(s, "in ")) {
    t.dir = Direction::In;
    rest = s.substr(3);
  } else if (starts_with(s, "out ")) {
    t.dir = Direction::Out;
    rest = s.substr(4);
  } else {
    return std::nullopt;
  }
  if (rest == "state") {
    t.kind = ParamType::Kind::State;
    return t;
  }
  if (starts_with(rest, "buffer")) {
    auto inner = bracketed(rest.substr(6));
    if (!inner) return std::nullopt;
    auto dt = dtype_from_manifest(*inner);
    if (!dt) return std::nullopt;
    t.kind = ParamType::Kind::Buffer;
    t.dtype = *dt;
    return t;
  }
  return std::nullopt;
}

std::uint64_t ParamType::abi_size() const {
  switch (kind) {
    case Kind::I32:
    case Kind::F32: return 4;
    case Kind::I64: return 8;
    case Kind::U8: return 1;
    case Kind::Bytes: return bytes;
    case Kind::State:
    case Kind::Buffer: return 8;
  }
  return 0;
}

std::string ParamType::to_string() const {
  switch (kind) {
    case Kind::I32: return "i32";
    case Kind::I64: return "i64";
    case Kind::F32: return "f32";
    case Kind::U8: return "u8";
    case Kind::Bytes: return fmt::format("bytes<{}>", bytes);
    case Kind::State: return fmt::format("{} state", direction_word(dir));
    case Kind::Buffer: return fmt::format("{} buffer<{}>", direction_word(dir), manifest_name(dtype));
  }
  return "?";
}

}  // namespace kern::core

namespace kern::core::wire {

std::string param_type_problem(std::string_view s) {
  static constexpr std::string_view kGrammar =
      "expected i32 | i64 | f32 | u8 | bytes<N> | (in|out|inout) state | (in|out|inout) buffer<DTYPE>";
  auto has_space_issue = [&] {
    if (s.empty()) return false;
    if (s.front() == ' ' || s.back() == ' ') return true;
    if (s.find("  ") != std::string_view::npos) return true;
    if (s.find_first_of("\t\n\r") != std::string_view::npos) return true;
    auto lt = s.find('<');
    return lt != std::string_view::npos && s.find(' ', lt) != std::string_view::npos;
  };
  if (s.empty()) return fmt::format("empty string ({})", kGrammar);
  if (has_space_issue())
    return fmt::format(
        "only the canonical spelling is accepted: one space between direction and kind, none elsewhere ({})", kGrammar);
  for (std::string_view dir : {"in ", "out ", "inout "}) {
    if (s.substr(0, dir.size()) != dir) continue;
    std::string_view rest = s.substr(dir.size());
    if (rest == "i32" || rest == "i64" || rest == "f32" || rest == "u8" || rest.substr(0, 5) == "bytes")
      return fmt::format("scalars and bytes<N> take no direction ({})", kGrammar);
  }
  if (s == "state" || s.substr(0, 6) == "buffer")
    return fmt::format("a state or buffer needs a direction: in, out or inout ({})", kGrammar);
  if (auto lt = s.find("buffer<"); lt != std::string_view::npos && s.back() == '>') {
    std::string_view dt = s.substr(lt + 7, s.size() - lt - 8);
    if (!dtype_from_manifest(dt))
      return fmt::format(
          "unknown dtype \"{}\" (expected one of bf16, f16, f32, i32, u32, i64, u64, fp8e4m3, fp8e8m0, i8, u8)", dt);
  }
  if (s.substr(0, 6) == "bytes<" && s.back() == '>') {
    std::string_view n = s.substr(6, s.size() - 7);
    if (n == "0") return "bytes<N> needs N >= 1";
    return fmt::format("N in bytes<N> must be a decimal integer >= 1 without sign or leading zero, got \"{}\"", n);
  }
  return std::string(kGrammar);
}

}  // namespace kern::core::wire
