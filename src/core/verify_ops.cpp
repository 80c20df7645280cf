// Op rules: launch geometry and wiring (R6), impl vs interface dataflow (R7), `when`,
// the extern catalogue, cluster/pdl/cooperative (R12). Pack and tensormap fields: verify_pack.cpp.
#include <algorithm>
#include <set>

#include "core/verify_context.hpp"
#include "kern/core/externs.hpp"
#include "core/verify_pack.hpp"

namespace kern::core::verifier {

const std::vector<ParamType>& launch_params(const Op& op, const Launch& l) { return l.params ? *l.params : op.params; }

namespace {

constexpr std::uint64_t kMaxGridX = 0x7fffffffULL;
constexpr std::uint64_t kMaxGridYZ = 65535;
constexpr std::uint64_t kMaxSharedMem = 232448;  // 227 KB opt-in

// Var lookups for one launch: a `when` clamps its var's range.
struct LaunchBounds {
  VarLookup at_min, at_max;
};

LaunchBounds launch_bounds(Context& c, const Launch& l) {
  LaunchBounds lb;
  std::string wv;
  std::uint64_t lo = 1, hi = 1;
  if (l.when && c.has_var(l.when->var)) {
    wv = l.when->var;
    lo = std::max<std::uint64_t>(1, l.when->min.value_or(1));
    hi = std::min<std::uint64_t>(c.var_at(wv, At::Max), l.when->max.value_or(UINT64_MAX));
    if (lo > hi) wv.clear();  // empty range is reported; keep the global bounds
  }
  auto make = [&c, wv, lo, hi](At b) -> VarLookup {
    return [&c, wv, lo, hi, b](std::string_view n) -> std::optional<std::uint64_t> {
      if (!c.has_var(n)) return std::nullopt;
      if (!wv.empty() && n == wv) return b == At::Min ? lo : hi;
      return c.var_at(n, b);
    };
  };
  lb.at_min = make(At::Min);
  lb.at_max = make(At::Max);
  return lb;
}

std::optional<std::uint64_t> eval_launch(Context& c, const Expr& e, const VarLookup& vars, const char* bound,
                                         const std::string& path, const std::string& rule) {
  auto r = try_eval(e, vars);
  if (auto* v = std::get_if<std::uint64_t>(&r)) return *v;
  const auto& err = std::get<EvalError>(r);
  if (err.kind != EvalError::Kind::UnknownVar)
    c.add(path, rule, "expression " + e.to_string() + " at var " + bound + ": " + err.message());
  return std::nullopt;
}

bool is_int_scalar(const ParamType& p) { return p.kind == ParamType::Kind::I32 || p.kind == ParamType::Kind::I64; }
bool is_buffer(const ParamType& p, DType dt) { return p.kind == ParamType::Kind::Buffer && p.dtype == dt; }

// ---- extern launches against the catalogue (kern/core/externs.hpp)
// The first type problem of params against the extern's row; empty when they fit. Only for a
// param count within [min_args, max_args].
std::string extern_problem(const ExternSpec& x, const std::vector<ParamType>& p) {
  std::string problem;
  auto need = [&](bool ok, const std::string& what) {
    if (!ok && problem.empty()) problem = what;
  };
  const std::string in_name(manifest_name(x.in));
  if (x.family == ExternSpec::Family::Collective) {
    need(is_buffer(p[0], x.in) && p[0].dir == Direction::In, "arg 0 (send) must be 'in buffer<" + in_name + ">'");
    need(is_buffer(p[1], x.in) && p[1].writes(), "arg 1 (recv) must be 'out buffer<" + in_name + ">'");
    need(is_int_scalar(p[2]), "arg 2 (count) must be i32 or i64");
    need(is_int_scalar(p[3]), "arg 3 (the rank arg naming the group) must be i32 or i64");
    return problem;
  }
  need(is_buffer(p[0], x.in) && p[0].dir == Direction::In, "arg 0 (a) must be 'in buffer<" + in_name + ">'");
  need(is_buffer(p[1], x.in) && p[1].dir == Direction::In, "arg 1 (w) must be 'in buffer<" + in_name + ">'");
  need(is_buffer(p[2], x.out) && p[2].writes() && (!x.accumulate || p[2].dir == Direction::InOut),
       std::string("arg 2 (c) must be '") + (x.accumulate ? "inout" : "out") + " buffer<" +
           std::string(manifest_name(x.out)) + ">'");
  for (std::size_t i = 3; i < 3 + x.scales; ++i)
    need(is_buffer(p[i], DType::F32) && p[i].dir == Direction::In,
         "arg " + std::to_string(i) + " (scale) must be 'in buffer<f32>'");
  for (std::size_t i = 3 + x.scales; i < p.size(); ++i)
    need(is_int_scalar(p[i]), "arg " + std::to_string(i) + " must be i32 or i64");
  return problem;
}

struct ScratchEvent {
  std::string name;
  bool read = false, write = false;
  std::string path;
};

class OpChecker {
 public:
  OpChecker(Context& c, const std::string& name, const Op& op)
      : c_(c), op_(op), path_(key("ops", name)), facts_(c.ops[name]) {
    facts_.params.assign(op.params.size(), Access{});
  }

  void run() {
    for (std::size_t i = 0; i < op_.params.size(); ++i)
      if (op_.params[i].kind == ParamType::Kind::Bytes)
        c_.add(idx(key(path_, "params"), i), "R6.params", "bytes<N> is launch-private, never an op interface param");
    check_scratch_decls();
    const std::string lp = key(key(path_, "impl"), "launches");
    if (op_.impl.launches.empty()) c_.add(lp, "R6.launch", "an op needs at least one launch");
    for (std::size_t k = 0; k < op_.impl.launches.size(); ++k) check_launch(op_.impl.launches[k], idx(lp, k));
    check_dataflow();
  }

 private:
  void check_scratch_decls() {
    for (const auto& [sname, s] : op_.impl.scratch) {
      const std::string sp = key(key(key(path_, "impl"), "scratch"), sname);
      if (!is_manifest_dtype(s.dtype)) c_.add(key(sp, "dtype"), "R7.scratch", "not a manifest dtype");
      if (check_dims(c_, s.shape, key(sp, "shape"), "R7.scratch") && !c_.shape_bytes_at_max(s.dtype, s.shape))
        c_.add(key(sp, "shape"), "R7.scratch", "byte size overflows u64 at var max");
    }
  }

  void note_param(std::uint32_t i, bool read, bool write, const std::string& path) {
    if (i >= op_.params.size()) return;
    if (write && op_.params[i].dir == Direction::In)
      c_.add(path, "R7.write_in", "launch writes interface param " + std::to_string(i) + " declared 'in'");
    facts_.params[i].read |= read;
    facts_.params[i].write |= write;
  }

  void check_launch(const Launch& l, const std::string& lp) {
    const auto& params = launch_params(op_, l);
    const bool ext = l.is_extern();
    if (ext) {
      facts_.has_extern = true;
      if (!l.module.empty()) c_.add(key(lp, "module"), "R6.module", "an extern launch names no module");
      check_extern(l, params, lp);
    } else {
      if (l.module.empty())
        c_.add(lp, "R6.module", "a launch without a module must be an extern ('extern:<name>')");
      else if (c_.m.modules.count(l.module) == 0)
        c_.add(key(lp, "module"), "R6.module", "undeclared module '" + l.module + "'");
      if (l.entry.empty()) c_.add(key(lp, "entry"), "R6.entry", "entry is empty");
      if (l.algo) c_.add(key(lp, "algo"), "R6.extern", "algo only on cuBLASLt GEMM extern launches (cublaslt_*)");
      if (l.algo_m) c_.add(key(lp, "algo_m"), "R6.extern", "algo_m only on cuBLASLt GEMM extern launches (cublaslt_*)");
      if (l.algo_candidate)
        c_.add(key(lp, "algo_candidate"), "R6.extern",
               "algo_candidate only on cuBLASLt GEMM extern launches (cublaslt_*)");
      if (l.algo_per_m)
        c_.add(key(lp, "algo_per_m"), "R6.extern", "algo_per_m only on cuBLASLt bf16 GEMM extern launches");
      check_geometry(l, lp);
      // The load-time co-residency proof counts blocks per SM, not clusters per GPU
      // (cuOccupancyMaxActiveClusters): the two are not supported together.
      if (l.cooperative && l.cluster)
        c_.add(key(lp, "cooperative"), "R12.cooperative", "cooperative is not supported together with cluster");
    }
    if (l.when) check_when(*l.when, key(lp, "when"));
    check_args(l, params, lp, ext);
  }

  void check_when(const When& w, const std::string& wp) {
    if (!c_.has_var(w.var)) {
      c_.add(key(wp, "var"), "R6.when", "undeclared var '" + w.var + "'");
      return;
    }
    const std::uint64_t lo = std::max<std::uint64_t>(1, w.min.value_or(1));
    const std::uint64_t hi = std::min<std::uint64_t>(c_.var_at(w.var, At::Max), w.max.value_or(UINT64_MAX));
    if (lo > hi)
      c_.add(wp, "R6.when",
             "range is empty within the var's bounds [1, " + std::to_string(c_.var_at(w.var, At::Max)) + "]");
  }

  void check_extern(const Launch& l, const std::vector<ParamType>& params, const std::string& lp) {
    const std::string_view name = l.extern_name();
    const bool geometry = l.block != std::array<std::uint32_t, 3>{} || l.shared_mem ||
                          std::any_of(l.grid.begin(), l.grid.end(),
                                      [](const Expr& e) { return e.kind != Expr::Kind::Const || e.value != 0; });
    if (geometry) c_.add(lp, "R6.extern", "an extern launch has no geometry (block, grid, shared_mem)");
    if (l.cluster) c_.add(key(lp, "cluster"), "R12.cluster", "cluster is not allowed on extern launches");
    if (l.pdl) c_.add(key(lp, "pdl"), "R12.cluster", "pdl is not allowed on extern launches");
    if (l.cooperative)
      c_.add(key(lp, "cooperative"), "R12.cooperative", "cooperative is not allowed on extern launches");
    const ExternSpec* x = find_extern(name);
    if (l.algo && !(x && x->takes_algo))
      c_.add(key(lp, "algo"), "R6.extern", "algo only on cuBLASLt GEMM externs (cublaslt_*)");
    if (l.algo_m && !(x && x->takes_algo))
      c_.add(key(lp, "algo_m"), "R6.extern", "algo_m only on cuBLASLt GEMM externs (cublaslt_*)");
    if (l.algo_m && l.algo)
      c_.add(key(lp, "algo_m"), "R6.extern", "algo_m chooses an algorithm and algo pins one: give one of them");
    if (l.algo_m && *l.algo_m == 0) c_.add(key(lp, "algo_m"), "R6.extern", "algo_m is at least 1");
    if (l.algo_candidate && !(x && x->takes_algo))
      c_.add(key(lp, "algo_candidate"), "R6.extern", "algo_candidate only on cuBLASLt GEMM externs (cublaslt_*)");
    if (l.algo_candidate && l.algo)
      c_.add(key(lp, "algo_candidate"), "R6.extern",
             "algo_candidate picks among the heuristic's answers and algo pins one: give one of them");
    if (l.algo_per_m && !(x && x->takes_algo && x->in == DType::BF16 && x->out == DType::BF16))
      c_.add(key(lp, "algo_per_m"), "R6.extern", "algo_per_m only on cuBLASLt bf16 GEMM externs (cublaslt_bf16_tn*)");
    if (l.algo_per_m && l.algo)
      c_.add(key(lp, "algo_per_m"), "R6.extern",
             "algo_per_m lets the runtime run an equivalent answer and algo pins one: give one of them");
    for (std::size_t i = 0; i < params.size(); ++i)
      if (params[i].kind == ParamType::Kind::Bytes)
        c_.add(l.params ? idx(key(lp, "params"), i) : lp, "R6.extern", "bytes<N> is never an extern param");
    if (!x) {
      c_.add(key(lp, "entry"), "R6.extern", "unknown extern '" + std::string(name) + "'");
      return;
    }
    const bool collective = x->family == ExternSpec::Family::Collective;
    facts_.collective |= collective;
    const std::string pp = l.params ? key(lp, "params") : lp;
    if (params.size() < x->min_args || params.size() > x->max_args) {
      c_.add(pp, "R6.extern",
             "extern '" + std::string(name) + "' takes " + std::to_string(x->min_args) +
                 (x->max_args != x->min_args ? "-" + std::to_string(x->max_args) : "") + " args, got " +
                 std::to_string(params.size()));
    } else if (std::string problem = extern_problem(*x, params); !problem.empty()) {
      c_.add(pp, "R6.extern", "extern '" + std::string(name) + "': " + problem);
    }
    if (collective && params.size() == x->max_args) {
      const bool rank_arg = l.args && l.args->size() == params.size() && l.args->back().kind == LaunchArg::Kind::Rank;
      if (!rank_arg) c_.add(key(lp, "args"), "R6.extern", "an nccl extern's last arg is {\"rank\": <group>}");
    }
  }

  void check_geometry(const Launch& l, const std::string& lp) {
    const auto& b = l.block;
    const std::string bp = key(lp, "block");
    if (b[0] == 0 || b[1] == 0 || b[2] == 0)
      c_.add(bp, "R6.block", "every block dim must be at least 1");
    else if (b[0] > 1024 || b[1] > 1024 || b[2] > 64)
      c_.add(bp, "R6.block", "block exceeds CUDA limits (x,y <= 1024, z <= 64)");
    else if (std::uint64_t{b[0]} * b[1] * b[2] > 1024)
      c_.add(bp, "R6.block", "block has more than 1024 threads");

    const LaunchBounds lb = launch_bounds(c_, l);
    std::array<std::optional<std::uint64_t>, 3> gmin, gmax;
    for (int a = 0; a < 3; ++a) {
      const std::string gp = idx(key(lp, "grid"), a);
      if (!c_.check_expr_vars(l.grid[a], gp, "R6.grid")) continue;
      gmin[a] = eval_launch(c_, l.grid[a], lb.at_min, "min", gp, "R6.grid");
      if (!gmin[a]) continue;  // the error is reported once
      gmax[a] = eval_launch(c_, l.grid[a], lb.at_max, "max", gp, "R6.grid");
      if (gmin[a] && *gmin[a] == 0) c_.add(gp, "R6.grid", "grid is 0 at var min");
      const std::uint64_t lim = a == 0 ? kMaxGridX : kMaxGridYZ;
      if (gmax[a] && *gmax[a] > lim)
        c_.add(gp, "R6.grid", "grid " + std::to_string(*gmax[a]) + " at var max exceeds " + std::to_string(lim));
    }
    if (l.shared_mem) {
      const std::string sp = key(lp, "shared_mem");
      if (c_.check_expr_vars(*l.shared_mem, sp, "R6.shared_mem")) {
        auto lo = eval_launch(c_, *l.shared_mem, lb.at_min, "min", sp, "R6.shared_mem");
        auto v = lo ? eval_launch(c_, *l.shared_mem, lb.at_max, "max", sp, "R6.shared_mem") : std::nullopt;
        if (v && *v > kMaxSharedMem)
          c_.add(sp, "R6.shared_mem", "shared_mem " + std::to_string(*v) + " at var max exceeds 232448 bytes (227 KB)");
      }
    }
    if (l.cluster) {
      const auto& cl = *l.cluster;
      const std::string cp = key(lp, "cluster");
      if (cl[0] == 0 || cl[1] == 0 || cl[2] == 0) {
        c_.add(cp, "R12.cluster", "no cluster dim may be 0");
      } else if (cl[0] > 16 || cl[1] > 16 || cl[2] > 16 || std::uint64_t{cl[0]} * cl[1] * cl[2] > 16) {
        c_.add(cp, "R12.cluster", "a cluster has at most 16 blocks");
      } else {
        for (int a = 0; a < 3; ++a) {
          for (auto g : {gmin[a], gmax[a]}) {
            if (g && *g % cl[a] != 0) {
              c_.add(idx(cp, a), "R12.cluster",
                     "grid axis " + std::to_string(a) + " (" + std::to_string(*g) +
                         " at a var bound) is not divisible by " + std::to_string(cl[a]));
              break;
            }
          }
        }
      }
    }
  }

  void check_args(const Launch& l, const std::vector<ParamType>& params, const std::string& lp, bool ext) {
    if (!l.args) {
      // Default wiring: forward the op's params in order.
      if (params.size() != op_.params.size()) {
        wiring_broken_ = true;
        c_.add(lp, "R6.args",
               "launch declares " + std::to_string(params.size()) +
                   " params but has no args; the default forwards the op's " + std::to_string(op_.params.size()));
        return;
      }
      for (std::uint32_t j = 0; j < params.size(); ++j) {
        const std::string ap = l.params ? idx(key(lp, "params"), j) : lp;
        wire_param(params[j], j, ap);
      }
      events_.emplace_back();
      return;
    }
    const auto& args = *l.args;
    const std::string ap = key(lp, "args");
    if (args.size() != params.size()) {
      wiring_broken_ = true;
      c_.add(ap, "R6.args",
             std::to_string(args.size()) + " args for " + std::to_string(params.size()) + " launch params");
    }
    std::vector<ScratchEvent> ev;
    for (std::size_t j = 0; j < args.size(); ++j) {
      const LaunchArg& a = args[j];
      const std::string p = idx(ap, j);
      const ParamType* q = j < params.size() ? &params[j] : nullptr;
      switch (a.kind) {
        case LaunchArg::Kind::Param:
          if (a.param >= op_.params.size()) {
            c_.add(p, "R6.args", "param " + std::to_string(a.param) + " is not an interface param");
          } else if (q) {
            wire_param(*q, a.param, p);
          }
          break;
        case LaunchArg::Kind::Scratch: {
          auto it = op_.impl.scratch.find(a.name);
          if (it == op_.impl.scratch.end()) {
            c_.add(p, "R6.args", "undeclared scratch '" + a.name + "'");
          } else if (q) {
            if (q->kind != ParamType::Kind::Buffer || q->dtype != it->second.dtype)
              c_.add(p, "R6.args",
                     "scratch '" + a.name + "' (" + std::string(manifest_name(it->second.dtype)) + ") passed to a '" +
                         q->to_string() + "' param");
            // The access still counts, so one wrong type does not also report a read of unwritten scratch.
            ev.push_back({a.name, q->reads() || !q->is_pointer(), q->writes(), p});
          }
          used_scratch_.insert(a.name);
          break;
        }
        case LaunchArg::Kind::Literal:
          if (q && literal_param_kind(a.literal.kind) != q->kind)
            c_.add(p, "R6.args",
                   std::string(literal_name(a.literal.kind)) + " literal passed to a '" + q->to_string() + "' param");
          break;
        case LaunchArg::Kind::Rank:
          if (!c_.has_group(a.name)) c_.add(p, "R11.group", "undeclared topology group '" + a.name + "'");
          if (q && !is_int_scalar(*q)) c_.add(p, "R11.rank", "a rank arg only goes to i32/i64 params");
          break;
        case LaunchArg::Kind::Pack: {
          if (ext) {
            c_.add(p, "R6.extern", "a pack is never an extern arg");
            break;
          }
          if (q && q->kind != ParamType::Kind::Bytes) {
            c_.add(p, "R6.args", "a pack goes only to a bytes<N> param, not '" + q->to_string() + "'");
            break;
          }
          if (!a.pack) break;
          PackUses uses = check_pack(c_, op_, *a.pack, q ? q->bytes : a.pack->size, key(p, "pack"));
          for (const auto& pu : uses.params) note_param(pu.param, pu.read, pu.write, pu.path);
          for (auto& s : uses.scratch) {
            used_scratch_.insert(s);
            if (op_.impl.scratch.count(s)) ev.push_back({s, false, true, key(p, "pack")});
          }
          for (auto& t : uses.tensormaps) facts_.tensormaps.push_back(std::move(t));
          break;
        }
      }
    }
    events_.push_back(std::move(ev));
  }

  // A launch param `q` fed by interface param `i`.
  void wire_param(const ParamType& q, std::uint32_t i, const std::string& path) {
    if (i >= op_.params.size()) return;
    const ParamType& p = op_.params[i];
    if (p.kind == ParamType::Kind::Bytes) return;  // reported on the interface
    bool ok = p.kind == q.kind;
    if (ok && p.kind == ParamType::Kind::Buffer) ok = p.dtype == q.dtype;
    if (!ok) {
      c_.add(path, "R6.args",
             "interface param " + std::to_string(i) + " '" + p.to_string() + "' passed to a '" + q.to_string() +
                 "' launch param");
      return;
    }
    if (q.is_pointer()) note_param(i, q.reads(), q.writes(), path);
  }

  void check_dataflow() {
    // A launch whose wiring is broken (reported) says nothing reliable about what it writes.
    for (std::size_t i = 0; i < op_.params.size() && !wiring_broken_; ++i)
      if (op_.params[i].dir == Direction::Out && !facts_.params[i].write)
        c_.add(idx(key(path_, "params"), i), "R7.out_unwritten",
               "interface param " + std::to_string(i) + " is 'out' but no launch writes it");
    std::set<std::string> written;
    for (const auto& ev : events_) {
      for (const auto& e : ev)
        if (e.read && !written.count(e.name))
          c_.add(e.path, "R7.scratch_read", "reads scratch '" + e.name + "' before any launch wrote it");
      for (const auto& e : ev)
        if (e.write) written.insert(e.name);
    }
    for (const auto& [sname, s] : op_.impl.scratch)
      if (!used_scratch_.count(sname))
        c_.add(key(key(key(path_, "impl"), "scratch"), sname), "R7.scratch_unused",
               "scratch '" + sname + "' is never used");
  }

  Context& c_;
  const Op& op_;
  std::string path_;
  OpFacts& facts_;
  std::vector<std::vector<ScratchEvent>> events_;  // per launch
  std::set<std::string> used_scratch_;
  bool wiring_broken_ = false;
};

}  // namespace

void check_ops(Context& c) {
  for (const auto& [name, op] : c.m.ops) OpChecker(c, name, op).run();
}

}  // namespace kern::core::verifier
