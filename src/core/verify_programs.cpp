// Program rules (R9): flags, batch shape, per-program dataflow, and every output and carry
// written by some program.
#include <set>

#include "core/verify_context.hpp"

namespace kern::core::verifier {
namespace {

void check_flags(Context& c, const Program& p, const std::string& path) {
  if (p.once && p.batch) c.add(key(path, "once"), "R9.once_batch", "once and batch are exclusive");
  if (p.graph && !p.batch) c.add(key(path, "graph"), "R9.graph", "graph requires batch");
  if (p.derive && (p.once || p.batch || p.graph))
    c.add(key(path, "derive"), "R9.derive_flags", "derive is exclusive with once, batch and graph");
  if (!p.batch) return;
  const Batch& b = *p.batch;
  const std::string bp = key(path, "batch");
  if (b.groups < 1) c.add(key(bp, "groups"), "R9.batch", "groups must be at least 1");
  if (b.rows.is_var()) {
    if (!c.has_var(b.rows.var))
      c.add(key(bp, "rows"), "R9.batch", "undeclared var '" + b.rows.var + "'");
    else if (b.groups != 1 && b.decode.empty() && !b.packed)
      c.add(key(bp, "groups"), "R9.batch",
            "rows given by a var allow only 1 group (or a mixed step's `decode` var, or `packed` chunks)");
  } else if (b.rows.value < 1) {
    c.add(key(bp, "rows"), "R9.batch", "rows must be at least 1");
  }
  if (!b.span.empty() && !c.has_var(b.span)) c.add(key(bp, "span"), "R9.batch", "undeclared var '" + b.span + "'");
  if (!b.context.empty() && !c.has_var(b.context))
    c.add(key(bp, "context"), "R9.batch", "undeclared var '" + b.context + "'");
  if (!b.decode.empty()) {
    const std::string dp = key(bp, "decode");
    if (!c.has_var(b.decode)) c.add(dp, "R9.batch", "undeclared var '" + b.decode + "'");
    if (!b.rows.is_var()) c.add(dp, "R9.batch", "a mixed step (decode) takes its rows from a var");
    if (!b.span.empty()) c.add(dp, "R9.batch", "decode and span are exclusive");
    if (b.groups < 2) c.add(dp, "R9.batch", "a mixed step has at least one decode group and one chunk group");
    if (b.decode == b.rows.var || b.decode == b.context)
      c.add(dp, "R9.batch", "the decode var must differ from the rows and context vars");
  }
  if (b.packed) {
    const std::string pp = key(bp, "packed");
    if (!b.rows.is_var()) c.add(pp, "R9.batch", "packed chunks take their rows from a var");
    if (!b.span.empty() || !b.decode.empty()) c.add(pp, "R9.batch", "packed is exclusive with span and decode");
  }
}

}  // namespace

void check_programs(Context& c) {
  std::set<std::string> written_somewhere, referenced;
  for (const auto& [pname, prog] : c.m.programs) {
    const std::string path = key("programs", pname);
    check_flags(c, prog, path);
    std::set<std::string> written;
    for (std::size_t i = 0; i < prog.calls.size(); ++i) {
      const Call& call = prog.calls[i];
      auto it = c.m.ops.find(call.op);
      if (it == c.m.ops.end()) continue;
      const Op& op = it->second;
      const std::string cp = idx(key(path, "calls"), i);  // NOLINT: one per call
      if (prog.derive && c.ops[call.op].collective) c.add(cp, "R9.derive", "a derive program runs no collective");
      const std::size_t n = std::min(call.args.size(), op.params.size());
      struct Touch {
        std::string name;
        BufferKind kind;
        bool read, write;
        std::size_t arg;
      };
      std::vector<Touch> touches;
      for (std::size_t j = 0; j < n; ++j) {
        const CallArg& a = call.args[j];
        const ParamType& p = op.params[j];
        if (a.kind == CallArg::Kind::State && p.kind == ParamType::Kind::State) {
          if (prog.derive) c.add(idx(key(cp, "args"), j), "R9.derive", "a derive program touches no state");
          continue;
        }
        if (a.kind != CallArg::Kind::Buf || p.kind != ParamType::Kind::Buffer) continue;
        auto b = c.m.buffers.find(a.name);
        if (b == c.m.buffers.end()) continue;
        referenced.insert(a.name);
        touches.push_back({a.name, b->second.kind, p.reads(), p.writes(), j});
      }
      for (const auto& t : touches) {
        if (prog.derive && (t.kind == BufferKind::Input || t.kind == BufferKind::Output || t.kind == BufferKind::Peer))
          c.add(idx(key(cp, "args"), t.arg), "R9.derive",
                "a derive program touches no " + std::string(to_string(t.kind)) + " buffer");
        if (t.read && t.kind == BufferKind::Source && !prog.derive)
          c.add(idx(key(cp, "args"), t.arg), "R9.source_read",
                "source buffer '" + t.name + "' is read only by derive programs");
        if (t.read && (t.kind == BufferKind::Workspace || t.kind == BufferKind::Output) && !written.count(t.name))
          c.add(idx(key(cp, "args"), t.arg), "R9.read_before_write",
                "reads " + std::string(to_string(t.kind)) + " buffer '" + t.name + "' before this program wrote it");
      }
      for (const auto& t : touches) {
        if (!t.write) continue;
        if (t.kind == BufferKind::Input || t.kind == BufferKind::Weight || t.kind == BufferKind::Source)
          c.add(idx(key(cp, "args"), t.arg), "R9.write_readonly",
                "writes " + std::string(to_string(t.kind)) + " buffer '" + t.name + "'");
        written.insert(t.name);
        written_somewhere.insert(t.name);
      }
    }
  }
  for (const auto& [name, b] : c.m.buffers)
    if ((b.kind == BufferKind::Output || b.kind == BufferKind::Carry) && referenced.count(name) &&
        !written_somewhere.count(name))
      c.add(key("buffers", name), "R9.never_written",
            std::string(to_string(b.kind)) + " buffer '" + name + "' is written by no program");
}

}  // namespace kern::core::verifier
