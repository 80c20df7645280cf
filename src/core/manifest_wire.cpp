// Paths, objects with a closed field set, and the scalar readers of the manifest walk.
#include "manifest_wire.hpp"

#include <cmath>
#include <limits>

namespace kern::core::wire {

std::string Number::to_string() const {
  switch (kind) {
    case Kind::Unsigned: return fmt::format("{}", u);
    case Kind::Negative: return fmt::format("{}", i);
    case Kind::Float: return fmt::format("{}", f);
  }
  return "?";
}

std::string Node::path() const {
  std::vector<const Node*> chain;
  for (const Node* n = this; n != nullptr && n->parent_ != nullptr; n = n->parent_) chain.push_back(n);
  if (chain.empty()) return "<root>";
  std::string out;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const Node* n = *it;
    if (n->is_index_) {
      out += fmt::format("[{}]", n->index_);
    } else {
      if (!out.empty()) out += '.';
      out += n->key_;
    }
  }
  return out;
}

void Node::fail_here(std::string message) const { throw Error(ErrorKind::ManifestParse, path() + ": " + message); }

std::string_view json_type_name(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::object: return "an object";
    case Json::value_t::array: return "an array";
    case Json::value_t::string: return "a string";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "an integer";
    case Json::value_t::number_float: return "a float";
    case Json::value_t::binary: return "binary data";
    case Json::value_t::discarded: return "nothing";
  }
  return "?";
}

void expect_array(const Node& n) {
  if (!n.json().is_array()) n.fail("expected an array, got {}", json_type_name(n.json()));
}

void expect_object(const Node& n, std::string_view what) {
  if (!n.json().is_object()) n.fail("expected {} (a JSON object), got {}", what, json_type_name(n.json()));
}

Object::Object(const Node& node, std::string_view what, std::span<const std::string_view> allowed)
    : node_(node), what_(what) {
  expect_object(node, what);
  const Json& o = node.json();
  for (auto it = o.begin(); it != o.end(); ++it) {
    const std::string& key = it.key();
    bool known = false;
    for (std::string_view a : allowed) known = known || a == key;
    if (!known) {
      std::string list;
      for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      node.member(key, it.value()).fail("unknown field \"{}\" in {} (allowed: {})", key, what, list);
    }
  }
}

Node Object::required(std::string_view key) const {
  const Json& o = node_.json();
  auto it = o.find(key);
  if (it == o.end()) node_.fail("missing required field \"{}\" in {}", key, what_);
  return node_.member(key, *it);
}

std::optional<Node> Object::optional(std::string_view key) const {
  const Json& o = node_.json();
  auto it = o.find(key);
  if (it == o.end()) return std::nullopt;
  return node_.member(key, *it);
}

std::string read_string(const Node& n) {
  if (!n.json().is_string()) n.fail("expected a string, got {}", json_type_name(n.json()));
  return n.json().get_ref<const std::string&>();
}

std::string read_var_name(const Node& n) {
  std::string s = read_string(n);
  if (s.empty()) n.fail("expected a var name, got an empty string");
  return s;
}

bool read_bool(const Node& n) {
  if (!n.json().is_boolean()) n.fail("expected true or false, got {}", json_type_name(n.json()));
  return n.json().get<bool>();
}

namespace {

Number number_of(const Json& j) {
  Number x;
  if (j.is_number_unsigned()) {
    x.kind = Number::Kind::Unsigned;
    x.u = j.get<std::uint64_t>();
  } else if (j.is_number_integer()) {
    std::int64_t v = j.get<std::int64_t>();
    if (v >= 0) {
      x.kind = Number::Kind::Unsigned;
      x.u = static_cast<std::uint64_t>(v);
    } else {
      x.kind = Number::Kind::Negative;
      x.i = v;
    }
  } else {
    x.kind = Number::Kind::Float;
    x.f = j.get<double>();
  }
  return x;
}

// "2.5" or "constant \"EPS\" (= 2.5)": how a bad value is named in a message.
std::string describe(const Node& n, const Number& x) {
  if (n.json().is_string())
    return fmt::format("constant \"{}\" (= {})", n.json().get_ref<const std::string&>(), x.to_string());
  return x.to_string();
}

}  // namespace

Number read_number(const Node& n, std::string_view expected) {
  const Json& j = n.json();
  if (j.is_number()) return number_of(j);
  if (j.is_string()) {
    const std::string& name = j.get_ref<const std::string&>();
    if (const Number* c = n.constants().find(name)) return *c;
    n.fail("unknown constant \"{}\" (expected {})", name, expected);
  }
  n.fail("expected {}, got {}", expected, json_type_name(j));
}

std::uint64_t read_u64(const Node& n) {
  static constexpr std::string_view kExpected = "a non-negative integer or a constant name";
  Number x = read_number(n, kExpected);
  if (x.kind != Number::Kind::Unsigned) n.fail("expected a non-negative integer, got {}", describe(n, x));
  return x.u;
}

std::uint32_t read_u32(const Node& n) {
  std::uint64_t v = read_u64(n);
  if (v > std::numeric_limits<std::uint32_t>::max()) n.fail("{} does not fit in u32", v);
  return static_cast<std::uint32_t>(v);
}

std::int64_t read_i64(const Node& n) {
  Number x = read_number(n, "an integer or a constant name");
  if (x.kind == Number::Kind::Negative) return x.i;
  if (x.kind == Number::Kind::Unsigned && x.u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    return static_cast<std::int64_t>(x.u);
  if (x.kind == Number::Kind::Float) n.fail("expected an integer, got {}", describe(n, x));
  n.fail("{} does not fit in i64", describe(n, x));
}

Literal read_literal(Literal::Kind kind, const Node& n) {
  Literal lit;
  lit.kind = kind;
  switch (kind) {
    case Literal::Kind::I32: {
      std::int64_t v = read_i64(n);
      if (v < std::numeric_limits<std::int32_t>::min() || v > std::numeric_limits<std::int32_t>::max())
        n.fail("{} does not fit in i32", v);
      lit.i = v;
      break;
    }
    case Literal::Kind::I64: lit.i = read_i64(n); break;
    case Literal::Kind::U8: {
      std::int64_t v = read_i64(n);
      if (v < 0 || v > 255) n.fail("{} does not fit in u8 (0..255)", v);
      lit.i = v;
      break;
    }
    case Literal::Kind::F32: {
      Number x = read_number(n, "a number or a constant name");
      double f = x.kind == Number::Kind::Float      ? x.f
                 : x.kind == Number::Kind::Unsigned ? static_cast<double>(x.u)
                                                    : static_cast<double>(x.i);
      if (!std::isfinite(f) || std::fabs(f) > static_cast<double>(std::numeric_limits<float>::max()))
        n.fail("{} does not fit in f32", describe(n, x));
      lit.f = f;
      break;
    }
  }
  return lit;
}

namespace {

constexpr std::string_view kExprExpected = "a non-negative integer, a var name or an expression object";

// The u64 operand of ceil_div / mul: a literal or a constant, never a var.
std::uint64_t read_expr_factor(const Node& n) {
  if (n.json().is_string() && n.constants().find(n.json().get_ref<const std::string&>()) == nullptr)
    n.fail(
        "expected a non-negative integer or a constant name (the second operand of ceil_div/mul cannot be a var), got "
        "var \"{}\"",
        n.json().get_ref<const std::string&>());
  return read_u64(n);
}

}  // namespace

Expr read_expr(const Node& n) {
  const Json& j = n.json();
  if (j.is_number()) {
    Number x = number_of(j);
    if (x.kind != Number::Kind::Unsigned) n.fail("expected {}, got {}", kExprExpected, x.to_string());
    return Expr::constant(x.u);
  }
  if (j.is_string()) {
    const std::string& name = j.get_ref<const std::string&>();
    if (const Number* c = n.constants().find(name)) {
      if (c->kind != Number::Kind::Unsigned) n.fail("expected {}, got {}", kExprExpected, describe(n, *c));
      return Expr::constant(c->u);
    }
    if (name.empty()) n.fail("expected {}, got an empty string", kExprExpected);
    return Expr::variable(name);
  }
  if (!j.is_object()) n.fail("expected {}, got {}", kExprExpected, json_type_name(j));
  if (j.size() != 1) {
    std::string keys;
    for (auto it = j.begin(); it != j.end(); ++it) keys += (keys.empty() ? "\"" : ", \"") + it.key() + "\"";
    if (j.empty()) n.fail("empty expression object (expected one of \"ceil_div\", \"mul\", \"add\")");
    n.fail("expression object must have exactly one key (\"ceil_div\", \"mul\" or \"add\"), got {}", keys);
  }
  auto it = j.begin();
  const std::string& op = it.key();
  Node operands = n.member(op, it.value());
  if (op != "ceil_div" && op != "mul" && op != "add")
    operands.fail("unknown expression operator \"{}\" (expected \"ceil_div\", \"mul\" or \"add\")", op);
  if (!it.value().is_array() || it.value().size() != 2)
    operands.fail("expected an array of two operands, got {}", it.value().is_array()
                                                                   ? fmt::format("{} operands", it.value().size())
                                                                   : std::string(json_type_name(it.value())));
  const Json& a = it.value();
  Node first = operands.element(0, a[0]);
  Node second = operands.element(1, a[1]);
  if (op == "add") return Expr::add(read_expr(first), read_expr(second));
  Expr lhs = read_expr(first);
  std::uint64_t rhs = read_expr_factor(second);
  return op == "mul" ? Expr::mul(std::move(lhs), rhs) : Expr::ceil_div(std::move(lhs), rhs);
}

Dim read_dim(const Node& n) {
  Dim d;
  const Json& j = n.json();
  if (j.is_string()) {
    const std::string& name = j.get_ref<const std::string&>();
    if (n.constants().find(name) == nullptr) {
      if (name.empty()) n.fail("expected a non-negative integer, a constant or a var name, got an empty string");
      d.var = name;
      return d;
    }
  } else if (!j.is_number()) {
    n.fail("expected a non-negative integer, a constant or a var name, got {}", json_type_name(j));
  }
  d.value = read_u64(n);
  return d;
}

std::vector<Dim> read_shape(const Node& n) {
  return read_array(n, [](const Node& e) { return read_dim(e); });
}

std::vector<std::uint64_t> read_u64_list(const Node& n) {
  return read_array(n, [](const Node& e) { return read_u64(e); });
}

std::array<std::uint32_t, 3> read_u32x3(const Node& n) {
  expect_array(n);
  if (n.json().size() != 3) n.fail("expected an array of 3 integers, got {} entries", n.json().size());
  std::array<std::uint32_t, 3> out{};
  for (std::size_t i = 0; i < 3; ++i) out[i] = read_u32(n.element(i, n.json()[i]));
  return out;
}

DType read_dtype(const Node& n) {
  return read_named(n, dtype_from_manifest, "dtype",
                    "expected one of bf16, f16, f32, i32, u32, i64, u64, fp8e4m3, fp8e8m0, i8, u8");
}

}  // namespace kern::core::wire

namespace kern::core::wire {

std::string_view untagged_form(const Node& n, std::string_view what, std::initializer_list<std::string_view> tags) {
  expect_object(n, what);
  const Json& o = n.json();
  std::string_view found;
  auto tag_list = [&] {
    std::string list;
    for (std::string_view t : tags) list += (list.empty() ? "\"" : ", \"") + std::string(t) + "\"";
    return list;
  };
  for (auto it = o.begin(); it != o.end(); ++it) {
    for (std::string_view t : tags) {
      if (t != it.key()) continue;
      if (!found.empty())
        n.fail("ambiguous {}: it has both \"{}\" and \"{}\" (exactly one of {})", what, found, t, tag_list());
      found = t;
    }
  }
  if (found.empty()) {
    if (o.empty()) n.fail("empty {} (expected exactly one of {})", what, tag_list());
    std::string keys;
    for (auto it = o.begin(); it != o.end(); ++it) keys += (keys.empty() ? "\"" : ", \"") + it.key() + "\"";
    n.fail("unrecognized {} with keys {} (expected exactly one of {})", what, keys, tag_list());
  }
  return found;
}

ParamType read_param_type(const Node& n) {
  std::string s = read_string(n);
  auto t = parse_param_type(s);
  if (!t) n.fail("malformed param type \"{}\": {}", s, param_type_problem(s));
  return *t;
}

}  // namespace kern::core::wire
