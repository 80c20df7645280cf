#include "kern/runtime/args.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "kern/base/error.hpp"

namespace kern::runtime {

using core::CallArg;
using core::LaunchArg;
using core::Literal;
using core::PackField;
using core::ParamType;
using PK = core::ParamType::Kind;

void store_le(std::byte* dst, std::uint64_t v, std::size_t width) {
  for (std::size_t i = 0; i < width; ++i) dst[i] = static_cast<std::byte>(i < 8 ? (v >> (8 * i)) & 0xff : 0);
}

std::uint64_t load_le(const std::byte* src, std::size_t width) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < width && i < 8; ++i) v |= static_cast<std::uint64_t>(src[i]) << (8 * i);
  return v;
}

std::optional<std::uint64_t> int_value_at(const ArgValue& v, const std::uint64_t* vars) {
  if (v.patches.empty()) return load_le(v.bytes.data(), v.bytes.size());
  return v.patches[0].expr.eval(vars);
}

namespace {

std::uint64_t f32_bits(double d) { return std::bit_cast<std::uint32_t>(static_cast<float>(d)); }

// The bits of a literal stored as a scalar of kind `as` (the destination type).
std::uint64_t literal_bits(const Literal& l, bool as_float) {
  if (as_float) return f32_bits(l.kind == Literal::Kind::F32 ? l.f : static_cast<double>(l.i));
  if (l.kind == Literal::Kind::F32) return static_cast<std::uint64_t>(static_cast<std::int64_t>(l.f));
  return static_cast<std::uint64_t>(l.i);
}

std::uint64_t literal_width(const Literal& l) {
  switch (l.kind) {
    case Literal::Kind::I32: return 4;
    case Literal::Kind::I64: return 8;
    case Literal::Kind::F32: return 4;
    case Literal::Kind::U8: return 1;
  }
  return 4;
}

ArgValue static_value(std::uint64_t bits, std::size_t width) {
  ArgValue v;
  v.bytes.resize(width);
  store_le(v.bytes.data(), bits, width);
  return v;
}

ArgValue pointer_value(const Pointer& p) {
  ArgValue v = static_value(p.address, 8);
  v.pointer = p;
  return v;
}

ArgValue expr_value(CompiledExpr e, std::size_t width, bool as_f32) {
  if (e.is_constant()) {
    std::uint64_t c = *e.eval(nullptr);
    ArgValue v = static_value(as_f32 ? f32_bits(static_cast<double>(c)) : c, width);
    v.is_float = as_f32;
    return v;
  }
  ArgValue v;
  v.bytes.assign(width, std::byte{0});
  v.patches.push_back(Patch{0, static_cast<std::uint8_t>(width), as_f32, std::move(e)});
  v.is_float = as_f32;
  return v;
}

// The value of call argument `a` handed to a parameter of type `t`.
ArgValue from_call_arg(const CallArg& a, const ParamType& t, const ResolveContext& ctx, std::size_t width) {
  const bool f = t.kind == PK::F32;
  switch (a.kind) {
    case CallArg::Kind::Buf:
    case CallArg::Kind::State:
      if (!t.is_pointer())
        fail(ErrorKind::Manifest, "{} '{}' passed to scalar param {}",
             a.kind == CallArg::Kind::Buf ? "buffer" : "state", a.name, t.to_string());
      return pointer_value(ctx.pointer(a));
    case CallArg::Kind::Var: {
      core::Expr e = core::Expr::variable(a.name);
      return expr_value(CompiledExpr::compile(e, *ctx.vars), width, f);
    }
    case CallArg::Kind::Expr: return expr_value(CompiledExpr::compile(a.expr, *ctx.vars), width, f);
    case CallArg::Kind::Literal: {
      ArgValue v = static_value(literal_bits(a.literal, f), width);
      v.is_float = f;
      return v;
    }
    case CallArg::Kind::Rank: return static_value(ctx.rank(a.name), width);
  }
  fail(ErrorKind::Manifest, "unknown call argument form");
}

const CallArg& interface_arg(const core::Op& op, const core::Call& call, std::uint32_t i) {
  if (i >= op.params.size() || i >= call.args.size())
    fail(ErrorKind::Manifest, "launch forwards interface param {} but the op has {} params and the call {} args", i,
         op.params.size(), call.args.size());
  return call.args[i];
}

std::array<std::byte, 128> tensormap_image(const core::Tensormap& tm, const Pointer& p, const ResolveContext& ctx) {
  cuda::TensormapSpec s;
  s.dtype = static_cast<std::uint32_t>(tm.dtype);
  s.address = p.address;
  s.dims = tm.dims;
  s.strides = tm.strides;
  for (auto b : tm.box) s.box.push_back(static_cast<std::uint32_t>(b));
  s.swizzle = tm.swizzle;
  s.l2_promotion = tm.l2_promotion;
  s.oob_nan = tm.oob_nan;
  if (!s.dims.empty() && s.dims.back() == 0) {  // outermost spans the rest of the buffer after the offset
    std::uint64_t outer_stride = s.dims.size() == 1 ? 0 : s.strides.back();
    if (s.dims.size() == 1)
      s.dims.back() = p.bytes * 8 / core::tma_global_bits(tm.dtype);
    else
      s.dims.back() = outer_stride ? p.bytes / outer_stride : 0;
    if (s.dims.back() == 0)
      fail(ErrorKind::Manifest, "tensormap over param {} spans no whole row of the {} bytes after its offset", tm.param,
           p.bytes);
  }
  return ctx.encode_tensormap(s);
}

ArgValue pack_value(const core::Pack& pack, const core::Op& op, const core::Call& call, const ResolveContext& ctx) {
  ArgValue v;
  v.bytes.assign(pack.size, std::byte{0});
  for (const PackField& f : pack.fields) {
    ArgValue fv;
    std::uint64_t def = 4;
    switch (f.kind) {
      case PackField::Kind::Param: {
        const CallArg& a = interface_arg(op, call, f.param);
        const ParamType& t = op.params[f.param];
        def = t.abi_size();
        fv = from_call_arg(a, t, ctx, f.width.value_or(def));
        break;
      }
      case PackField::Kind::Scratch:
        def = 8;
        fv = pointer_value(ctx.scratch(f.name));
        break;
      case PackField::Kind::Literal:
        def = literal_width(f.literal);
        fv = static_value(literal_bits(f.literal, f.literal.kind == Literal::Kind::F32), f.width.value_or(def));
        break;
      case PackField::Kind::Var:
        fv = expr_value(CompiledExpr::compile(core::Expr::variable(f.name), *ctx.vars), f.width.value_or(4), false);
        break;
      case PackField::Kind::Expr:
        fv = expr_value(CompiledExpr::compile(f.expr, *ctx.vars), f.width.value_or(4), false);
        break;
      case PackField::Kind::Rank: fv = static_value(ctx.rank(f.name), f.width.value_or(4)); break;
      case PackField::Kind::Tensormap: {
        def = 128;
        const CallArg& a = interface_arg(op, call, f.tensormap.param);
        if (a.kind != CallArg::Kind::Buf && a.kind != CallArg::Kind::State)
          fail(ErrorKind::Manifest, "tensormap over param {} which is not a buffer or state", f.tensormap.param);
        auto img = tensormap_image(f.tensormap, ctx.pointer(a), ctx);
        fv.bytes.assign(img.begin(), img.end());
        break;
      }
    }
    const std::uint64_t width = f.width.value_or(def);
    if (fv.bytes.size() != width) {  // a static value re-sized to an explicit width
      std::uint64_t bits = load_le(fv.bytes.data(), fv.bytes.size());
      fv.bytes.assign(width, std::byte{0});
      store_le(fv.bytes.data(), bits, width);
    }
    if (f.at > pack.size || width > pack.size - f.at)
      fail(ErrorKind::Manifest, "pack field at {} width {} outside the {}-byte pack", f.at, width, pack.size);
    std::memcpy(v.bytes.data() + f.at, fv.bytes.data(), width);
    for (Patch& p : fv.patches) {
      p.offset += static_cast<std::uint32_t>(f.at);
      v.patches.push_back(std::move(p));
    }
  }
  return v;
}

}  // namespace

std::vector<ArgValue> resolve_launch_args(const core::Op& op, const core::Launch& launch, const core::Call& call,
                                          const ResolveContext& ctx) {
  const std::vector<ParamType>& params = launch.params ? *launch.params : op.params;
  std::vector<LaunchArg> defaults;
  if (!launch.args) {
    for (std::uint32_t i = 0; i < params.size(); ++i) {
      LaunchArg a;
      a.kind = LaunchArg::Kind::Param;
      a.param = i;
      defaults.push_back(a);
    }
  }
  const std::vector<LaunchArg>& args = launch.args ? *launch.args : defaults;
  if (args.size() != params.size())
    fail(ErrorKind::Manifest, "launch {} has {} params but {} args", launch.entry, params.size(), args.size());
  if (call.args.size() != op.params.size())
    fail(ErrorKind::Manifest, "call passes {} args to an op of {} params", call.args.size(), op.params.size());
  std::vector<ArgValue> out;
  out.reserve(args.size());
  for (std::size_t j = 0; j < args.size(); ++j) {
    const LaunchArg& a = args[j];
    const ParamType& t = params[j];
    const std::size_t width = t.abi_size();
    switch (a.kind) {
      case LaunchArg::Kind::Param: out.push_back(from_call_arg(interface_arg(op, call, a.param), t, ctx, width)); break;
      case LaunchArg::Kind::Scratch: out.push_back(pointer_value(ctx.scratch(a.name))); break;
      case LaunchArg::Kind::Literal: {
        ArgValue v = static_value(literal_bits(a.literal, t.kind == PK::F32), width);
        v.is_float = t.kind == PK::F32;
        out.push_back(std::move(v));
        break;
      }
      case LaunchArg::Kind::Rank: out.push_back(static_value(ctx.rank(a.name), width)); break;
      case LaunchArg::Kind::Pack:
        if (!a.pack) fail(ErrorKind::Manifest, "pack argument without a pack");
        if (t.kind != PK::Bytes || a.pack->size != t.bytes)
          fail(ErrorKind::Manifest, "pack of {} bytes passed to param {} ({})", a.pack->size, j, t.to_string());
        out.push_back(pack_value(*a.pack, op, call, ctx));
        break;
    }
  }
  return out;
}

bool apply_patch(const Patch& p, std::byte* base, const std::uint64_t* vars) {
  auto v = p.expr.eval(vars);
  if (!v) return false;
  std::uint64_t bits = p.as_f32 ? f32_bits(static_cast<double>(*v)) : *v;
  store_le(base + p.offset, bits, p.width);
  return true;
}

ArgImage::ArgImage(std::span<const ArgValue> values, std::span<const std::uint64_t> offsets) {
  std::size_t end = 0;
  for (std::size_t i = 0; i < values.size(); ++i) end = std::max<std::size_t>(end, offsets[i] + values[i].bytes.size());
  bytes_.assign(end, std::byte{0});
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::memcpy(bytes_.data() + offsets[i], values[i].bytes.data(), values[i].bytes.size());
    for (const Patch& p : values[i].patches) {
      Patch q = p;
      q.offset += static_cast<std::uint32_t>(offsets[i]);
      patches_.push_back(std::move(q));
    }
  }
  for (std::size_t i = 0; i < values.size(); ++i) pointers_.push_back(bytes_.data() + offsets[i]);
}

bool ArgImage::apply(const std::uint64_t* vars, const Patch** failed) {
  for (const Patch& p : patches_) {
    if (!apply_patch(p, bytes_.data(), vars)) {
      if (failed) *failed = &p;
      return false;
    }
  }
  return true;
}

std::vector<std::uint64_t> natural_offsets(std::span<const ParamType> params) {
  std::vector<std::uint64_t> out;
  std::uint64_t end = 0;
  for (const ParamType& t : params) {
    std::uint64_t size = t.abi_size();
    std::uint64_t align = t.kind == PK::Bytes ? 8 : std::max<std::uint64_t>(size, 1);
    end = (end + align - 1) / align * align;
    out.push_back(end);
    end += size;
  }
  return out;
}

std::optional<std::string> abi_mismatch(std::span<const ParamType> declared, std::span<const cuda::ParamInfo> found) {
  if (declared.size() != found.size())
    return fmt::format("declares {} params, the kernel has {}", declared.size(), found.size());
  std::uint64_t end = 0;
  for (std::size_t i = 0; i < declared.size(); ++i) {
    const ParamType& t = declared[i];
    const std::uint64_t size = t.abi_size();
    bool offset_ok = false;
    std::uint64_t expected = end;
    if (t.kind == PK::Bytes) {
      for (std::uint64_t a = 1; a <= 128 && !offset_ok; a *= 2) offset_ok = (end + a - 1) / a * a == found[i].offset;
      if (offset_ok) expected = found[i].offset;
    } else {
      const std::uint64_t a = std::max<std::uint64_t>(size, 1);
      expected = (end + a - 1) / a * a;
      offset_ok = expected == found[i].offset;
    }
    if (found[i].size != size || !offset_ok)
      return fmt::format("param {}: declared {} ({} bytes at offset {}), the kernel has {} bytes at offset {}", i,
                         t.to_string(), size, expected, found[i].size, found[i].offset);
    end = found[i].offset + found[i].size;
  }
  return std::nullopt;
}

}  // namespace kern::runtime
