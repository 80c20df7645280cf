#include "kern/runtime/program_vars.hpp"

#include <algorithm>

#include "kern/base/error.hpp"

namespace kern::runtime {
namespace {

void add_expr(const core::Expr& e, const VarTable& vars, std::vector<std::uint32_t>& out) {
  std::vector<std::string> names;
  e.collect_vars(names);
  for (const auto& n : names)
    if (auto i = vars.index(n)) out.push_back(*i);
}

void add_call_arg(const core::CallArg& a, const VarTable& vars, std::vector<std::uint32_t>& out) {
  if (a.kind == core::CallArg::Kind::Var) {
    if (auto i = vars.index(a.name)) out.push_back(*i);
  } else if (a.kind == core::CallArg::Kind::Expr) {
    add_expr(a.expr, vars, out);
  }
}

void add_param(const core::Call& c, std::uint32_t i, const VarTable& vars, std::vector<std::uint32_t>& out) {
  if (i < c.args.size()) add_call_arg(c.args[i], vars, out);
}

}  // namespace

std::vector<std::uint32_t> program_read_vars(const core::Manifest& m, const core::Program& p, const VarTable& vars) {
  std::vector<std::uint32_t> out;
  for (const core::Call& c : p.calls) {
    auto op = m.ops.find(c.op);
    if (op == m.ops.end()) continue;
    for (const core::Launch& l : op->second.impl.launches) {
      if (!l.is_extern()) {
        for (const auto& g : l.grid) add_expr(g, vars, out);
        if (l.shared_mem) add_expr(*l.shared_mem, vars, out);
      }
      if (l.when)
        if (auto i = vars.index(l.when->var)) out.push_back(*i);
      if (!l.args) {
        const std::size_t n = l.params ? l.params->size() : op->second.params.size();
        for (std::uint32_t i = 0; i < n; ++i) add_param(c, i, vars, out);
        continue;
      }
      for (const core::LaunchArg& a : *l.args) {
        if (a.kind == core::LaunchArg::Kind::Param) add_param(c, a.param, vars, out);
        if (a.kind != core::LaunchArg::Kind::Pack || !a.pack) continue;
        for (const core::PackField& f : a.pack->fields) {
          using FK = core::PackField::Kind;
          if (f.kind == FK::Param) add_param(c, f.param, vars, out);
          if (f.kind == FK::Var)
            if (auto i = vars.index(f.name)) out.push_back(*i);
          if (f.kind == FK::Expr) add_expr(f.expr, vars, out);
        }
      }
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<std::uint64_t> graph_key(std::span<const std::uint32_t> read, const std::uint64_t* values) {
  std::vector<std::uint64_t> key;
  key.reserve(read.size());
  for (auto i : read) key.push_back(values[i]);
  return key;
}

std::string describe_key(std::span<const std::uint32_t> read, std::span<const std::uint64_t> key,
                         const VarTable& vars) {
  if (read.empty()) return "no vars";
  std::string s;
  for (std::size_t i = 0; i < read.size(); ++i)
    s += fmt::format("{}{}={}", i ? ", " : "", vars.name(read[i]), i < key.size() ? key[i] : 0);
  return s;
}

}  // namespace kern::runtime
