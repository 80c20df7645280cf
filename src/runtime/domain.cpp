#include "kern/runtime/domain.hpp"

#include <cmath>
#include <cstring>

#include "kern/base/error.hpp"

namespace kern::runtime {
namespace {

std::map<std::string, std::uint64_t> var_max(const core::Manifest& m) {
  std::map<std::string, std::uint64_t> v;
  for (const auto& [n, var] : m.vars) v[n] = var.max;
  return v;
}

std::string i128_to_string(__int128 v) {
  if (v == 0) return "0";
  bool neg = v < 0;
  unsigned __int128 u = neg ? static_cast<unsigned __int128>(-(v + 1)) + 1 : static_cast<unsigned __int128>(v);
  std::string s;
  while (u) {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(u % 10)));
    u /= 10;
  }
  return neg ? "-" + s : s;
}

double bf16_to_double(std::uint16_t h) {
  std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

double f16_to_double(std::uint16_t h) {
  const int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exp == 0) return sign * std::ldexp(mant, -24);
  if (exp == 31) return mant ? NAN : sign * INFINITY;
  return sign * std::ldexp(1024 + mant, exp - 25);
}

}  // namespace

DomainRule resolve_domain(const core::Manifest& m, const std::string& name, const core::Buffer& b,
                          const Capacity& capacity) {
  DomainRule r;
  r.buffer = name;
  r.dtype = b.dtype;
  r.is_float = b.dtype == DType::BF16 || b.dtype == DType::F16 || b.dtype == DType::F32 || b.dtype == DType::F64;
  if (!b.domain) return r;
  const core::Domain& d = *b.domain;
  const auto vmax = var_max(m);
  const auto lookup = core::lookup_in(vmax);
  auto set_bound = [&](const core::Bound& bound, bool is_min) {
    double f = 0;
    __int128 i = 0;
    switch (bound.kind) {
      case core::Bound::Kind::Int:
        i = bound.i;
        f = static_cast<double>(bound.i);
        break;
      case core::Bound::Kind::Float:
        f = bound.f;
        i = is_min ? static_cast<__int128>(std::ceil(bound.f)) : static_cast<__int128>(std::floor(bound.f));
        break;
      case core::Bound::Kind::Expr: {
        std::uint64_t v = core::eval(bound.expr, lookup, fmt::format("buffers.{}.domain", name));
        i = v;
        f = static_cast<double>(v);
        break;
      }
    }
    if (is_min) {
      r.imin = i;
      r.fmin = f;
    } else {
      r.imax = i;
      r.fmax = f;
    }
  };
  if (d.min) set_bound(*d.min, true);
  if (d.max) set_bound(*d.max, false);
  r.monotone = d.monotone;
  if (d.index_into) {
    const std::uint64_t stride = d.index_into->stride ? d.index_into->stride : 1;
    const std::string& t = d.index_into->target;
    std::optional<std::uint64_t> count;  // number of valid indices
    if (auto bi = m.buffers.find(t); bi != m.buffers.end()) {
      std::uint64_t dim0 = 1;
      if (!bi->second.shape.empty()) {
        const core::Dim& d0 = bi->second.shape[0];
        dim0 = d0.is_var() ? vmax.at(d0.var) : d0.value;
      }
      count = dim0 / stride;
      r.why_max = fmt::format("rows of {} / {}", t, stride);
    } else if (auto si = m.states.find(t); si != m.states.end()) {
      const core::State& s = si->second;
      if (s.bytes_per_token) {
        count = capacity.tokens / stride;
        r.why_max = fmt::format("token capacity {} / {} of state {}", capacity.tokens, stride, t);
      } else if (s.bytes_per_seq) {
        count = (capacity.seqs + 1) * (s.bytes_per_seq / stride);
        r.why_max = fmt::format("lines of state {} ({} slots)", t, capacity.seqs + 1);
      } else if (s.bytes) {
        count = s.bytes / stride;
        r.why_max = fmt::format("{} bytes of state {} / {}", s.bytes, t, stride);
      }
    } else {
      fail(ErrorKind::Manifest, "buffers.{}.domain.index_into names unknown '{}'", name, t);
    }
    r.imin = 0;
    r.fmin = 0;
    if (count) {
      r.imax = static_cast<__int128>(*count) - 1;
      r.fmax = static_cast<double>(*count) - 1;
    }
  }
  return r;
}

void check_domain(const DomainRule& r, std::span<const std::byte> bytes) {
  const std::uint64_t es = dtype_size(r.dtype);
  if (es == 0 || bytes.size() % es != 0)
    fail(ErrorKind::Api, "write to {}: {} bytes is not a whole number of {} elements", r.buffer, bytes.size(),
         manifest_name(r.dtype));
  const std::size_t n = bytes.size() / es;
  const std::byte* p = bytes.data();
  auto raw = [&](std::size_t i) {
    std::uint64_t v = 0;
    std::memcpy(&v, p + i * es, es);  // little-endian host
    return v;
  };
  if (r.is_float) {
    double prev = -INFINITY;
    for (std::size_t i = 0; i < n; ++i) {
      double v = 0;
      switch (r.dtype) {
        case DType::BF16: v = bf16_to_double(static_cast<std::uint16_t>(raw(i))); break;
        case DType::F16: v = f16_to_double(static_cast<std::uint16_t>(raw(i))); break;
        case DType::F32: {
          float f;
          std::memcpy(&f, p + i * 4, 4);
          v = f;
          break;
        }
        default: {
          std::memcpy(&v, p + i * 8, 8);
          break;
        }
      }
      if (!std::isfinite(v)) fail(ErrorKind::Domain, "input {} element {} is {}, not a finite value", r.buffer, i, v);
      if (r.fmin && v < *r.fmin)
        fail(ErrorKind::Domain, "input {} element {} = {} is below its domain minimum {}", r.buffer, i, v, *r.fmin);
      if (r.fmax && v > *r.fmax)
        fail(ErrorKind::Domain, "input {} element {} = {} is above its domain maximum {}", r.buffer, i, v, *r.fmax);
      if (r.monotone && v < prev)
        fail(ErrorKind::Domain, "input {} must be non-decreasing: element {} = {} follows {}", r.buffer, i, v, prev);
      prev = v;
    }
    return;
  }
  if (!is_integer(r.dtype) && r.dtype != DType::BOOL) return;  // fp8 etc.: no numeric check
  const bool is_signed =
      r.dtype == DType::I8 || r.dtype == DType::I16 || r.dtype == DType::I32 || r.dtype == DType::I64;
  __int128 prev = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t u = raw(i);
    __int128 v;
    if (is_signed) {
      const unsigned shift = static_cast<unsigned>(64 - 8 * es);
      v = static_cast<std::int64_t>(u << shift) >> shift;
    } else {
      v = u;
    }
    if (r.imin && v < *r.imin)
      fail(ErrorKind::Domain, "input {} element {} = {} is below its domain minimum {}", r.buffer, i, i128_to_string(v),
           i128_to_string(*r.imin));
    if (r.imax && v > *r.imax)
      fail(ErrorKind::Domain, "input {} element {} = {} is above its domain maximum {}{}", r.buffer, i,
           i128_to_string(v), i128_to_string(*r.imax), r.why_max.empty() ? "" : " (" + r.why_max + ")");
    if (r.monotone && i > 0 && v < prev)
      fail(ErrorKind::Domain, "input {} must be non-decreasing: element {} = {} follows {}", r.buffer, i,
           i128_to_string(v), i128_to_string(prev));
    prev = v;
  }
}

}  // namespace kern::runtime
