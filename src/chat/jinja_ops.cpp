// Python's arithmetic and concatenation on template values. Integers are 64-bit: where Python
// would grow a big integer, this is an error rather than a silently wrong number.
#include <fmt/format.h>

#include <cmath>

#include "chat/jinja_render.hpp"

namespace kern::chat::jinja {

namespace {

[[noreturn]] void unsupported(std::string_view op, const Value& a, const Value& b) {
  if (a.is_undefined() || b.is_undefined()) {
    const Value& u = a.is_undefined() ? a : b;
    fault(fmt::format("'{}' is undefined", u.undefined_name().empty() ? "value" : u.undefined_name()));
  }
  if (op == "+" && (a.is_string() || a.is_sequence()) && !b.is_undefined())
    fault(fmt::format("can only concatenate {} (not \"{}\") to {}", type_name(a), type_name(b), type_name(a)));
  fault(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, type_name(a), type_name(b)));
}

// Python integers do not overflow; ours refuse to instead of wrapping.
template <typename Op>
std::int64_t checked(Op op, std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (op(a, b, &r)) fault("integer result does not fit in 64 bits");
  return r;
}
constexpr auto kAdd = [](std::int64_t a, std::int64_t b, std::int64_t* r) { return __builtin_add_overflow(a, b, r); };
constexpr auto kSub = [](std::int64_t a, std::int64_t b, std::int64_t* r) { return __builtin_sub_overflow(a, b, r); };
constexpr auto kMul = [](std::int64_t a, std::int64_t b, std::int64_t* r) { return __builtin_mul_overflow(a, b, r); };

Value repeat(Interp& in, const Value& seq, std::int64_t times) {
  if (times <= 0)
    return seq.is_string() ? Value::string("") : seq.kind() == Value::Kind::Tuple ? Value::tuple({}) : Value::list({});
  const std::size_t unit = seq.is_string() ? seq.str().size() : seq.items().size();
  if (unit != 0 && static_cast<std::uint64_t>(times) > (std::uint64_t{1} << 40) / unit)
    fault("repetition result is too large");
  const std::size_t total = unit * static_cast<std::size_t>(times);
  in.charge_size(total);
  in.charge(1 + total / 64);
  if (seq.is_string()) {
    std::string out;
    out.reserve(total);
    for (std::int64_t i = 0; i < times; ++i) out += seq.str();
    return Value::string(std::move(out));
  }
  ValueList out;
  out.reserve(total);
  for (std::int64_t i = 0; i < times; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return seq.kind() == Value::Kind::Tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

Value add(Interp& in, const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) {
    return Value::integer(checked(kAdd, a.as_int(), b.as_int()));
  }
  if (a.is_number() && b.is_number()) return Value::real(a.as_float() + b.as_float());
  if (a.is_string() && b.is_string()) {
    in.charge_size(a.str().size() + b.str().size());
    in.charge(1 + (a.str().size() + b.str().size()) / 64);
    return Value::string(a.str() + b.str());
  }
  if (a.is_sequence() && a.kind() == b.kind()) {
    in.charge_size(a.items().size() + b.items().size());
    in.charge(1 + a.items().size() + b.items().size());
    ValueList out = a.items();
    out.insert(out.end(), b.items().begin(), b.items().end());
    return a.kind() == Value::Kind::Tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
  }
  unsupported("+", a, b);
}

Value floor_div_mod(std::string_view op, const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) {
    const std::int64_t x = a.as_int(), y = b.as_int();
    if (y == 0) fault("integer division or modulo by zero");
    if (x == INT64_MIN && y == -1) fault("integer result does not fit in 64 bits");
    std::int64_t q = x / y, r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) --q, r += y;  // Python floors toward negative infinity
    return Value::integer(op == "//" ? q : r);
  }
  const double x = a.as_float(), y = b.as_float();
  if (y == 0) fault("float division by zero");
  if (op == "//") return Value::real(std::floor(x / y));
  double r = std::fmod(x, y);
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return Value::real(r);
}

Value power(const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral() && b.as_int() >= 0) {
    std::int64_t base = a.as_int(), e = b.as_int(), r = 1;
    while (e > 0) {
      if (e & 1) r = checked(kMul, r, base);
      e >>= 1;
      if (e > 0) base = checked(kMul, base, base);
    }
    return Value::integer(r);
  }
  if (a.as_float() == 0 && b.as_float() < 0) fault("0.0 cannot be raised to a negative power");
  return Value::real(std::pow(a.as_float(), b.as_float()));
}

}  // namespace

Value binary_op(Interp& in, std::string_view op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = to_str(a);
    s += to_str(b);
    in.charge_size(s.size());
    in.charge(1 + s.size() / 64);
    return Value::string(std::move(s));
  }
  if (op == "+") return add(in, a, b);
  if (op == "*") {
    if ((a.is_string() || a.is_sequence()) && b.is_integral()) return repeat(in, a, b.as_int());
    if ((b.is_string() || b.is_sequence()) && a.is_integral()) return repeat(in, b, a.as_int());
  }
  if (!a.is_number() || !b.is_number()) {
    if (op == "%" && a.is_string()) fault("printf-style string formatting ('...' % args) is not supported");
    unsupported(op, a, b);
  }
  if (op == "-") {
    if (a.is_integral() && b.is_integral()) {
      return Value::integer(checked(kSub, a.as_int(), b.as_int()));
    }
    return Value::real(a.as_float() - b.as_float());
  }
  if (op == "*") {
    if (a.is_integral() && b.is_integral()) {
      return Value::integer(checked(kMul, a.as_int(), b.as_int()));
    }
    return Value::real(a.as_float() * b.as_float());
  }
  if (op == "/") {
    if (b.as_float() == 0) fault("division by zero");
    return Value::real(a.as_float() / b.as_float());
  }
  if (op == "//" || op == "%") return floor_div_mod(op, a, b);
  if (op == "**") return power(a, b);
  fault(fmt::format("unknown operator {}", op));
}

}  // namespace kern::chat::jinja
