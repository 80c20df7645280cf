// R10: every declaration (buffer, state, op, module, var, topology group) is used.
#include <set>

#include "core/verify_context.hpp"

namespace kern::core::verifier {
namespace {

struct Used {
  std::set<std::string> buffers, states, ops, modules, vars, groups;

  void expr(const Expr& e) {
    std::vector<std::string> v;
    e.collect_vars(v);
    vars.insert(v.begin(), v.end());
  }
  void shape(const std::vector<Dim>& s) {
    for (const auto& d : s)
      if (d.is_var()) vars.insert(d.var);
  }
  void bound(const std::optional<core::Bound>& b) {
    if (b && b->kind == core::Bound::Kind::Expr) expr(b->expr);
  }
  void tensor(const TensorRef& t) {
    if (t.rank_selected()) groups.insert(t.group);
  }
  void range(const std::optional<RangeRef>& r) {
    if (r && r->rank_selected()) groups.insert(r->group);
  }
  void pack(const Pack& p) {
    for (const auto& f : p.fields) {
      if (f.kind == PackField::Kind::Var) vars.insert(f.name);
      if (f.kind == PackField::Kind::Expr) expr(f.expr);
      if (f.kind == PackField::Kind::Rank) groups.insert(f.name);
    }
  }
};

void report(Context& c, const char* section, const char* what, const std::string& name,
            const std::set<std::string>& used) {
  if (!used.count(name)) c.add(key(section, name), "R10.unused", std::string(what) + " '" + name + "' is never used");
}

}  // namespace

void check_usage(Context& c) {
  const Manifest& m = c.m;
  Used u;
  for (const auto& [name, b] : m.buffers) {
    u.shape(b.shape);
    if (!b.of.empty()) {
      u.buffers.insert(b.of);
      u.states.insert(b.of);
    }
    if (!b.group.empty()) u.groups.insert(b.group);
    if (b.domain) {
      u.bound(b.domain->min);
      u.bound(b.domain->max);
      if (b.domain->index_into) {
        u.buffers.insert(b.domain->index_into->target);
        u.states.insert(b.domain->index_into->target);
      }
    }
    for (const auto& s : b.bind) {
      u.tensor(s.tensor);
      u.range(s.rows);
      u.range(s.cols);
      if (s.interleave) u.tensor(s.interleave->with);
    }
  }
  for (const auto& [name, op] : m.ops) {
    for (const auto& [sn, s] : op.impl.scratch) u.shape(s.shape);
    for (const auto& l : op.impl.launches) {
      if (!l.module.empty()) u.modules.insert(l.module);
      for (const auto& g : l.grid) u.expr(g);
      if (l.shared_mem) u.expr(*l.shared_mem);
      if (l.when) u.vars.insert(l.when->var);
      if (l.args)
        for (const auto& a : *l.args) {
          if (a.kind == LaunchArg::Kind::Rank) u.groups.insert(a.name);
          if (a.kind == LaunchArg::Kind::Pack && a.pack) u.pack(*a.pack);
        }
    }
  }
  for (const auto& [name, p] : m.programs) {
    if (p.batch) {
      if (p.batch->rows.is_var()) u.vars.insert(p.batch->rows.var);
      if (!p.batch->span.empty()) u.vars.insert(p.batch->span);
      if (!p.batch->context.empty()) u.vars.insert(p.batch->context);
      if (!p.batch->decode.empty()) u.vars.insert(p.batch->decode);
    }
    for (const auto& call : p.calls) {
      u.ops.insert(call.op);
      for (const auto& a : call.args) {
        switch (a.kind) {
          case CallArg::Kind::Buf: u.buffers.insert(a.name); break;
          case CallArg::Kind::State: u.states.insert(a.name); break;
          case CallArg::Kind::Var: u.vars.insert(a.name); break;
          case CallArg::Kind::Expr: u.expr(a.expr); break;
          case CallArg::Kind::Rank: u.groups.insert(a.name); break;
          case CallArg::Kind::Literal: break;
        }
      }
    }
  }
  for (const auto& [n, v] : m.vars) report(c, "vars", "var", n, u.vars);
  for (const auto& [n, s] : m.states) report(c, "states", "state", n, u.states);
  for (const auto& [n, b] : m.buffers) report(c, "buffers", "buffer", n, u.buffers);
  for (const auto& [n, mod] : m.modules) report(c, "modules", "module", n, u.modules);
  for (const auto& [n, op] : m.ops) report(c, "ops", "op", n, u.ops);
  for (const auto& [n, g] : m.topology) report(c, "topology.groups", "topology group", n, u.groups);
}

}  // namespace kern::core::verifier
