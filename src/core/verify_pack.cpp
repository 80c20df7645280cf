// Pack images (size, field widths, bounds, overlap, sources) and tensormap descriptors (R12).
#include "core/verify_pack.hpp"

#include <algorithm>
#include <limits>

namespace kern::core::verifier {

// u4 (16 nibbles per 8 bytes, align16) lands in shared memory padded to a byte per element.
std::uint64_t tma_box_bits(TmaDType t) { return t == TmaDType::U4 ? 8 : tma_global_bits(t); }

namespace {

constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();

std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) { return a > kU64Max - b ? kU64Max : a + b; }
std::uint64_t sat_mul(std::uint64_t a, std::uint64_t b) { return (a != 0 && b > kU64Max / a) ? kU64Max : a * b; }

// Checks one descriptor; returns its footprint in bytes (spanning dim excluded) when well formed.
std::optional<std::uint64_t> check_tensormap(Context& c, const Tensormap& t, const std::string& path) {
  const std::size_t n = t.dims.size();
  if (n < 1 || n > 5) {
    c.add(key(path, "dims"), "R12.tensormap_dims", "a tensormap has 1 to 5 dims, not " + std::to_string(n));
    return std::nullopt;
  }
  bool ok = true;
  if (t.strides.size() != n - 1) {
    c.add(key(path, "strides"), "R12.tensormap_strides",
          std::to_string(t.strides.size()) + " strides for " + std::to_string(n) + " dims (need dims - 1)");
    ok = false;
  } else {
    for (std::size_t i = 0; i < t.strides.size(); ++i)
      if (t.strides[i] == 0 || t.strides[i] % 16 != 0) {
        c.add(idx(key(path, "strides"), i), "R12.tensormap_strides", "a stride is a positive multiple of 16 bytes");
        ok = false;
      }
  }
  if (t.box.size() != n) {
    c.add(key(path, "box"), "R12.tensormap_box",
          std::to_string(t.box.size()) + " box entries for " + std::to_string(n) + " dims");
    ok = false;
  } else {
    bool entries_ok = true;
    for (std::size_t i = 0; i < n; ++i)
      if (t.box[i] < 1 || t.box[i] > 256) {
        c.add(idx(key(path, "box"), i), "R12.tensormap_box", "box entries are 1..256");
        entries_ok = ok = false;
      }
    if (entries_ok) {
      const std::uint64_t inner_bits = t.box[0] * tma_box_bits(t.dtype);
      if (inner_bits % 128 != 0) {
        c.add(idx(key(path, "box"), 0), "R12.tensormap_box", "inner box bytes must be a multiple of 16");
        ok = false;
      } else if (t.swizzle != 0 && inner_bits / 8 > t.swizzle) {
        c.add(idx(key(path, "box"), 0), "R12.tensormap_swizzle",
              "inner box " + std::to_string(inner_bits / 8) + " bytes exceeds the " + std::to_string(t.swizzle) +
                  "-byte swizzle span");
        ok = false;
      }
    }
  }
  if (t.swizzle != 0 && t.swizzle != 32 && t.swizzle != 64 && t.swizzle != 128) {
    c.add(key(path, "swizzle"), "R12.tensormap_swizzle", "swizzle is 0, 32, 64 or 128");
    ok = false;
  }
  if (t.l2_promotion != 0 && t.l2_promotion != 64 && t.l2_promotion != 128 && t.l2_promotion != 256) {
    c.add(key(path, "l2_promotion"), "R12.tensormap", "l2_promotion is 0, 64, 128 or 256");
    ok = false;
  }
  if (sat_mul(t.dims[0], tma_global_bits(t.dtype)) % 128 != 0) {
    c.add(idx(key(path, "dims"), 0), "R12.tensormap_dims", "dims[0] bytes must be a multiple of 16");
    ok = false;
  }
  for (std::size_t i = 0; i + 1 < n; ++i)
    if (t.dims[i] == 0) {
      c.add(idx(key(path, "dims"), i), "R12.tensormap_dims", "only the outermost dim may be 0");
      ok = false;
    }
  if (!ok) return std::nullopt;
  // Footprint: inner row bytes plus (extent - 1) * stride for each outer dim; a 0 (spanning) dim adds nothing.
  std::uint64_t fp = (sat_mul(t.dims[0], tma_global_bits(t.dtype)) + 7) / 8;
  for (std::size_t i = 1; i < n; ++i)
    if (t.dims[i] != 0) fp = sat_add(fp, sat_mul(t.dims[i] - 1, t.strides[i - 1]));
  return fp;
}

std::uint64_t natural_width(const Op& op, const PackField& f) {
  switch (f.kind) {
    case PackField::Kind::Param: return f.param < op.params.size() ? op.params[f.param].abi_size() : 8;
    case PackField::Kind::Scratch: return 8;
    case PackField::Kind::Literal:
      switch (f.literal.kind) {
        case Literal::Kind::I64: return 8;
        case Literal::Kind::U8: return 1;
        default: return 4;
      }
    case PackField::Kind::Var:
    case PackField::Kind::Expr:
    case PackField::Kind::Rank: return 4;
    case PackField::Kind::Tensormap: return 128;
  }
  return 8;
}

bool is_pointer_field(const Op& op, const PackField& f) {
  if (f.kind == PackField::Kind::Scratch) return true;
  return f.kind == PackField::Kind::Param && f.param < op.params.size() && op.params[f.param].is_pointer();
}

}  // namespace

PackUses check_pack(Context& c, const Op& op, const Pack& pack, std::uint64_t declared_size, const std::string& path) {
  PackUses uses;
  if (pack.size != declared_size)
    c.add(key(path, "size"), "R12.pack_size",
          "pack size " + std::to_string(pack.size) + " differs from the param's bytes<" +
              std::to_string(declared_size) + ">");
  struct Span {
    std::uint64_t at, end;
    std::size_t index;
  };
  std::vector<Span> spans;
  const std::string fp = key(path, "fields");
  for (std::size_t i = 0; i < pack.fields.size(); ++i) {
    const PackField& f = pack.fields[i];
    const std::string p = idx(fp, i);
    std::uint64_t w = natural_width(op, f);
    if (f.width) {
      const std::uint64_t ew = *f.width;
      if (f.kind == PackField::Kind::Tensormap && ew != 128)
        c.add(key(p, "width"), "R12.pack_width", "a tensormap field is 128 bytes wide");
      else if (is_pointer_field(op, f) && ew != 8)
        c.add(key(p, "width"), "R12.pack_width", "a pointer field is 8 bytes wide");
      else if (f.kind != PackField::Kind::Tensormap && ew != 1 && ew != 2 && ew != 4 && ew != 8)
        c.add(key(p, "width"), "R12.pack_width", "a scalar field is 1, 2, 4 or 8 bytes wide");
      w = ew;
    }
    if (f.at > pack.size || w > pack.size - f.at)
      c.add(p, "R12.pack_bounds",
            "field [" + std::to_string(f.at) + ", +" + std::to_string(w) + ") lies outside the " +
                std::to_string(pack.size) + "-byte image");
    spans.push_back({f.at, sat_add(f.at, w), i});

    auto value_fits = [&](std::optional<std::uint64_t> v) {
      if (v && w < 8 && *v >= (std::uint64_t{1} << (8 * w)))
        c.add(p, "R12.pack_width",
              "value " + std::to_string(*v) + " at var max does not fit " + std::to_string(w) + " bytes");
    };
    switch (f.kind) {
      case PackField::Kind::Param:
        if (f.param >= op.params.size()) {
          c.add(key(p, "param"), "R12.pack_source", "param " + std::to_string(f.param) + " is not an interface param");
        } else if (op.params[f.param].kind == ParamType::Kind::Bytes) {
          c.add(key(p, "param"), "R12.pack_source", "a pack field cannot carry a bytes<N> param");
        } else if (op.params[f.param].is_pointer()) {
          const auto& q = op.params[f.param];
          uses.params.push_back({f.param, q.reads(), q.writes(), p});
        }
        break;
      case PackField::Kind::Scratch:
        if (!op.impl.scratch.count(f.name))
          c.add(key(p, "scratch"), "R12.pack_source", "undeclared scratch '" + f.name + "'");
        uses.scratch.push_back(f.name);
        break;
      case PackField::Kind::Literal: break;
      case PackField::Kind::Var:
        if (!c.has_var(f.name))
          c.add(key(p, "var"), "R12.pack_source", "undeclared var '" + f.name + "'");
        else
          value_fits(c.var_at(f.name, At::Max));
        break;
      case PackField::Kind::Expr:
        if (c.check_expr_vars(f.expr, key(p, "expr"), "R12.pack_source")) {
          if (c.eval_at(f.expr, At::Min, key(p, "expr"), "R12.pack_source"))
            value_fits(c.eval_at(f.expr, At::Max, key(p, "expr"), "R12.pack_source"));
        }
        break;
      case PackField::Kind::Rank:
        if (!c.has_group(f.name)) c.add(key(p, "rank"), "R11.group", "undeclared topology group '" + f.name + "'");
        break;
      case PackField::Kind::Tensormap: {
        const Tensormap& t = f.tensormap;
        const std::string tp = key(p, "tensormap");
        if (f.at % 64 != 0) c.add(key(p, "at"), "R12.tensormap_align", "a tensormap field's offset must be 64-aligned");
        bool param_ok = true;
        if (t.param >= op.params.size() || !op.params[t.param].is_pointer()) {
          c.add(key(tp, "param"), "R12.tensormap", "a tensormap is encoded over a buffer or state interface param");
          param_ok = false;
        }
        auto footprint = check_tensormap(c, t, tp);
        if (param_ok) {
          const auto& q = op.params[t.param];
          uses.params.push_back({t.param, q.reads(), q.writes(), tp});
          if (footprint) uses.tensormaps.push_back({t.param, *footprint, t.wrap, tp});
        }
        break;
      }
    }
  }
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.at != b.at ? a.at < b.at : a.index < b.index; });
  std::uint64_t reach = 0;
  std::size_t reach_index = 0;
  for (std::size_t k = 0; k < spans.size(); ++k) {
    if (k > 0 && spans[k].at < reach)
      c.add(idx(fp, spans[k].index), "R12.pack_overlap", "field overlaps field " + std::to_string(reach_index));
    if (spans[k].end > reach) {
      reach = spans[k].end;
      reach_index = spans[k].index;
    }
  }
  return uses;
}

}  // namespace kern::core::verifier
