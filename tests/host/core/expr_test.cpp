#include <gtest/gtest.h>

#include <limits>

#include "kern/base/error.hpp"
#include "kern/core/manifest.hpp"

using namespace kern;
using namespace kern::core;

namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

EvalError error_of(const Expr& e, const std::map<std::string, std::uint64_t>& vars) {
  auto r = try_eval(e, lookup_in(vars));
  EXPECT_TRUE(std::holds_alternative<EvalError>(r)) << e.to_string() << " evaluated to " << std::get<std::uint64_t>(r);
  return std::holds_alternative<EvalError>(r) ? std::get<EvalError>(r) : EvalError{EvalError::Kind::Overflow, "none"};
}

}  // namespace

TEST(Expr, EvaluatesEveryForm) {
  std::map<std::string, std::uint64_t> vars{{"tokens", 10}, {"seqs", 3}};
  auto v = lookup_in(vars);
  EXPECT_EQ(eval(Expr::constant(7), v), 7u);
  EXPECT_EQ(eval(Expr::variable("tokens"), v), 10u);
  EXPECT_EQ(eval(Expr::ceil_div(Expr::variable("tokens"), 4), v), 3u);  // 10/4 rounds up
  EXPECT_EQ(eval(Expr::ceil_div(Expr::constant(8), 4), v), 2u);         // exact: no round up
  EXPECT_EQ(eval(Expr::ceil_div(Expr::constant(0), 4), v), 0u);
  EXPECT_EQ(eval(Expr::mul(Expr::variable("seqs"), 5), v), 15u);
  EXPECT_EQ(eval(Expr::add(Expr::variable("tokens"), Expr::variable("seqs")), v), 13u);
  // ceil_div(mul(tokens, 5), 4) = ceil(50 / 4) = 13
  EXPECT_EQ(eval(Expr::ceil_div(Expr::mul(Expr::variable("tokens"), 5), 4), v), 13u);
}

TEST(Expr, CeilDivAtTheTopOfTheRange) {
  // ceil_div must not compute (a + d - 1) / d, which overflows near u64 max.
  EXPECT_EQ(eval(Expr::ceil_div(Expr::constant(kMax), 2), {}), kMax / 2 + 1);
  EXPECT_EQ(eval(Expr::ceil_div(Expr::constant(kMax), kMax), {}), 1u);
}

TEST(Expr, MulOverflowIsAnError) {
  EvalError e = error_of(Expr::mul(Expr::variable("x"), 2), {{"x", kMax / 2 + 1}});
  EXPECT_EQ(e.kind, EvalError::Kind::Overflow);
  EXPECT_NE(e.message().find("mul(x, 2)"), std::string::npos) << e.message();
  // The largest product that fits is fine.
  EXPECT_EQ(eval(Expr::mul(Expr::variable("x"), 2), lookup_in({{"x", kMax / 2}})), kMax - 1);
}

TEST(Expr, AddOverflowIsAnError) {
  EvalError e = error_of(Expr::add(Expr::constant(kMax), Expr::constant(1)), {});
  EXPECT_EQ(e.kind, EvalError::Kind::Overflow);
  EXPECT_EQ(eval(Expr::add(Expr::constant(kMax - 1), Expr::constant(1)), {}), kMax);
}

TEST(Expr, OverflowInsideANestedOperandPropagates) {
  Expr e = Expr::ceil_div(Expr::add(Expr::mul(Expr::variable("x"), 3), Expr::constant(1)), 2);
  EXPECT_EQ(error_of(e, {{"x", kMax / 3 + 1}}).kind, EvalError::Kind::Overflow);
  EXPECT_EQ(eval(e, lookup_in({{"x", 3}})), 5u);
}

TEST(Expr, DivideByZero) {
  EvalError e = error_of(Expr::ceil_div(Expr::variable("tokens"), 0), {{"tokens", 5}});
  EXPECT_EQ(e.kind, EvalError::Kind::DivByZero);
  EXPECT_NE(e.message().find("ceil_div(tokens, 0)"), std::string::npos) << e.message();
}

TEST(Expr, UnknownVar) {
  EvalError e = error_of(Expr::add(Expr::variable("tokens"), Expr::variable("nope")), {{"tokens", 1}});
  EXPECT_EQ(e.kind, EvalError::Kind::UnknownVar);
  EXPECT_EQ(e.detail, "nope");
  EXPECT_EQ(e.message(), "unknown var \"nope\"");
  // No lookup at all: every var is unknown.
  auto r = try_eval(Expr::variable("tokens"), VarLookup{});
  ASSERT_TRUE(std::holds_alternative<EvalError>(r));
  EXPECT_EQ(std::get<EvalError>(r).kind, EvalError::Kind::UnknownVar);
}

TEST(Expr, EvalThrowsApiErrorWithWhere) {
  try {
    eval(Expr::ceil_div(Expr::constant(1), 0), {}, "ops.a.impl.launches[0].grid[1]");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Api);
    EXPECT_EQ(e.message(), "ops.a.impl.launches[0].grid[1]: division by zero in ceil_div(1, 0)");
  }
}

TEST(Expr, ToStringAndCollectVars) {
  Expr e = Expr::add(Expr::ceil_div(Expr::mul(Expr::variable("tokens"), 5), 4),
                     Expr::add(Expr::variable("seqs"), Expr::variable("tokens")));
  EXPECT_EQ(e.to_string(), "add(ceil_div(mul(tokens, 5), 4), add(seqs, tokens))");
  std::vector<std::string> vars{"seqs"};  // appends, keeping what is there and skipping repeats
  e.collect_vars(vars);
  EXPECT_EQ(vars, (std::vector<std::string>{"seqs", "tokens"}));
  std::vector<std::string> none;
  Expr::constant(3).collect_vars(none);
  EXPECT_TRUE(none.empty());
}

TEST(ShapeElements, MultipliesExtentsWithChecks) {
  std::vector<Dim> shape{Dim{0, "tokens"}, Dim{32, ""}};
  EXPECT_EQ(shape_elements(shape, lookup_in({{"tokens", 512}})), 512u * 32u);
  EXPECT_EQ(shape_elements({}, {}), 1u);
  try {
    shape_elements(shape, lookup_in({{"tokens", kMax / 16}}), "buffers.x");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Manifest);
    EXPECT_NE(e.message().find("buffers.x.shape[1]"), std::string::npos) << e.message();
  }
  EXPECT_THROW(shape_elements(shape, lookup_in({})), Error);
}
