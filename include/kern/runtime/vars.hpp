// Vars at run time: a dense table indexed like the manifest's (name-ordered) var map, and
// the compiled, allocation-free expression form the hot path evaluates.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kern/core/manifest.hpp"

namespace kern::runtime {

using core::Vars;

class VarTable {
 public:
  VarTable() = default;
  explicit VarTable(const core::Manifest& m);
  std::size_t size() const { return names_.size(); }
  std::optional<std::uint32_t> index(std::string_view name) const;
  const std::string& name(std::uint32_t i) const { return names_[i]; }
  std::uint64_t max(std::uint32_t i) const { return max_[i]; }
  // Every var at its bound (what buffers are sized by).
  std::vector<std::uint64_t> at_max() const { return max_; }

  // Fills `out` (size() entries) from `given`: an unknown name or a value outside [1, max] is
  // Error(Api) naming `program`. Vars not given are 0 ("unset"). Allocates nothing.
  void assign(const Vars& given, std::span<std::uint64_t> out, std::string_view program) const;

 private:
  std::vector<std::string> names_;
  std::vector<std::uint64_t> max_;
};

// An Expr in postfix form over var indices. Checked u64 arithmetic, no allocation.
class CompiledExpr {
 public:
  static constexpr std::size_t kMaxDepth = 32;
  CompiledExpr() = default;
  static CompiledExpr constant(std::uint64_t v);
  // Error(Manifest) for an unknown var or an expression nested deeper than kMaxDepth.
  static CompiledExpr compile(const core::Expr& e, const VarTable& vars);

  bool is_constant() const { return steps_.size() == 1 && steps_[0].op == Op::Push; }
  // nullopt on overflow or division by zero.
  std::optional<std::uint64_t> eval(const std::uint64_t* vars) const;
  void collect_vars(std::vector<std::uint32_t>& out) const;
  std::string text;  // readable form, for messages

 private:
  enum class Op : std::uint8_t { Push, Var, CeilDiv, Mul, Add };
  struct Step {
    Op op;
    std::uint64_t value;  // Push: constant; Var: index; CeilDiv / Mul: operand
  };
  static void emit(const core::Expr& e, const VarTable& vars, std::vector<Step>& out, std::size_t depth,
                   std::size_t& max_depth);
  std::vector<Step> steps_;
};

}  // namespace kern::runtime
