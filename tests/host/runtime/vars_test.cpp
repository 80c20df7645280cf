#include <gtest/gtest.h>

#include "kern/base/error.hpp"
#include "kern/runtime/vars.hpp"

namespace kern::runtime {
namespace {

core::Manifest two_vars() {
  core::Manifest m;
  m.vars["tokens"].max = 2048;
  m.vars["seqs"].max = 256;
  return m;
}

TEST(RuntimeVars, AssignChecksNamesAndBounds) {
  VarTable t(two_vars());
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t.name(*t.index("seqs")), "seqs");  // name order
  std::vector<std::uint64_t> out(2, 99);
  t.assign({{"tokens", 7}}, out, "decode");
  EXPECT_EQ(out[*t.index("tokens")], 7u);
  EXPECT_EQ(out[*t.index("seqs")], 0u);  // not given: unset
  t.assign({{"tokens", 2048}, {"seqs", 1}}, out, "decode");
  try {
    t.assign({{"tokens", 2049}}, out, "decode");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Api);
    EXPECT_EQ(e.message(), "program decode: var tokens = 2049 is outside its bounds [1, 2048]");
  }
  EXPECT_THROW(t.assign({{"tokens", 0}}, out, "decode"), Error);
  try {
    t.assign({{"batch", 1}}, out, "decode");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Api);
    EXPECT_NE(std::string(e.what()).find("unknown var 'batch'"), std::string::npos);
  }
}

TEST(RuntimeVars, CompiledExprMatchesCheckedEval) {
  core::Manifest m = two_vars();
  VarTable t(m);
  using core::Expr;
  Expr e = Expr::add(Expr::ceil_div(Expr::mul(Expr::variable("tokens"), 5), 4), Expr::variable("seqs"));
  auto c = CompiledExpr::compile(e, t);
  EXPECT_FALSE(c.is_constant());
  for (std::uint64_t tok : {1ull, 3ull, 4ull, 2047ull, 2048ull})
    for (std::uint64_t s : {1ull, 255ull}) {
      std::vector<std::uint64_t> v(2);
      v[*t.index("tokens")] = tok;
      v[*t.index("seqs")] = s;
      std::map<std::string, std::uint64_t> named{{"tokens", tok}, {"seqs", s}};
      EXPECT_EQ(*c.eval(v.data()), core::eval(e, core::lookup_in(named)));
    }
  EXPECT_TRUE(CompiledExpr::constant(5).is_constant());
  EXPECT_THROW(CompiledExpr::compile(Expr::variable("nope"), t), Error);
  Expr div0 = Expr::ceil_div(Expr::variable("tokens"), 0);
  std::vector<std::uint64_t> v{1, 1};
  EXPECT_FALSE(CompiledExpr::compile(div0, t).eval(v.data()).has_value());
  std::vector<std::uint32_t> read;
  c.collect_vars(read);
  EXPECT_EQ(read.size(), 2u);
}

}  // namespace
}  // namespace kern::runtime
