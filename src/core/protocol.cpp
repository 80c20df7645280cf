// The serving-protocol pass (§2.8 rules) and its projection.
#include "kern/core/protocol.hpp"

#include <algorithm>
#include <set>
#include <tuple>

#include "kern/base/error.hpp"
#include "kern/base/json.hpp"
#include "kern/core/state_tables.hpp"

namespace kern::core {

struct ProtocolBuilder {
  const Manifest& m;
  Protocol& p;
  std::vector<Violation> out;

  void add(std::string path, std::string rule, std::string msg) {
    out.push_back(Violation{std::move(path), std::move(rule), std::move(msg)});
  }
  static std::string bpath(const std::string& name) { return json_path_key("buffers", name); }
  std::uint64_t var_max(const std::string& v) const {
    auto it = m.vars.find(v);
    return it == m.vars.end() ? 0 : it->second.max;
  }
  const Buffer& buf(const std::string& n) const { return m.buffers.at(n); }

  void collect_fills() {
    std::map<Fill, std::string> first;
    for (const auto& [name, b] : m.buffers) {
      if (!b.fill) continue;
      if (auto it = first.find(*b.fill); it != first.end()) {
        add(json_path_key(bpath(name), "fill"), "P.fill_unique",
            "fill role '" + std::string(to_string(*b.fill)) + "' is already played by buffer '" + it->second + "'");
        continue;
      }
      first.emplace(*b.fill, name);
      FillSlot s;
      s.role = *b.fill;
      s.buffer = name;
      s.dtype = b.dtype;
      if (!b.shape.empty()) {
        s.axis = b.shape[0].var;
        s.extent = b.shape[0].is_var() ? var_max(b.shape[0].var) : b.shape[0].value;
        for (std::size_t i = 1; i < b.shape.size(); ++i)
          s.width *= b.shape[i].is_var() ? var_max(b.shape[i].var) : b.shape[i].value;
      }
      p.fills_.push_back(std::move(s));
    }
    std::sort(p.fills_.begin(), p.fills_.end(), [](const FillSlot& a, const FillSlot& b) { return a.role < b.role; });
  }

  // A 1-D buffer over one var: that var, else "".
  std::string one_var_axis(const FillSlot* f) const {
    if (!f) return {};
    const Buffer& b = buf(f->buffer);
    return b.shape.size() == 1 && b.shape[0].is_var() ? b.shape[0].var : std::string();
  }

  void derive_axes() {
    const FillSlot* slot = p.fill(Fill::Slot);
    const FillSlot* seq_len = p.fill(Fill::SeqLen);
    p.row_var_ = one_var_axis(slot);
    if (p.row_var_.empty() && !slot) {
      p.row_var_ = one_var_axis(p.fill(Fill::Position));
      if (p.row_var_.empty()) p.row_var_ = one_var_axis(p.fill(Fill::Token));
    }
    if (p.row_var_.empty())
      add("buffers", "P.axes", "no row axis: no 1-D `slot` (or `position`/`token`) fill over a var");
    p.group_var_ = one_var_axis(seq_len);
    if (p.group_var_.empty() && !seq_len) {
      if (const FillSlot* t = p.fill(Fill::Tokens)) p.group_var_ = t->axis;
    }
    if (p.group_var_.empty()) add("buffers", "P.axes", "no group axis: no 1-D `seq_len` (or `tokens`) fill over a var");
    if (!p.row_var_.empty() && p.row_var_ == p.group_var_)
      add("buffers", "P.axes", "row and group axes are the same var '" + p.row_var_ + "'");
  }

  // The tables come from core::state_tables, the definition the pool's layout reads too; its
  // shape findings are this pass's, in the order the scan found them.
  void collect_tables() {
    StateTables tables = state_tables(m);
    p.page_tables_ = std::move(tables.page_tables);
    p.line_tables_ = std::move(tables.line_tables);
    for (auto& v : tables.violations) out.push_back(std::move(v));
  }

  void derive_tray() {
    std::set<std::string> seen;
    auto consider = [&](const std::vector<Dim>& shape, const std::string& path) {
      for (const auto& d : shape) {
        if (!d.is_var() || d.var == p.row_var_ || d.var == p.group_var_) continue;
        if (p.tray_var_.empty())
          p.tray_var_ = d.var;
        else if (d.var != p.tray_var_)
          add(path, "P.axes", "a second tray axis var '" + d.var + "' (tray axis is '" + p.tray_var_ + "')");
      }
    };
    for (const auto& f : p.fills_) consider(buf(f.buffer).shape, json_path_key(bpath(f.buffer), "shape"));
    for (const auto& t : p.line_tables_) consider(t.shape, json_path_key(bpath(t.buffer), "shape"));
  }

  bool dim_is(const Dim& d, const std::string& var) const { return !var.empty() && d.is_var() && d.var == var; }

  // [groups, width] with a literal width (`width` 0: any literal).
  bool group_by(const Buffer& b, std::uint64_t width) const {
    return b.shape.size() == 2 && dim_is(b.shape[0], p.group_var_) && !b.shape[1].is_var() &&
           (width == 0 ? b.shape[1].value > 0 : b.shape[1].value == width);
  }

  void check_fill_shapes() {
    std::set<std::uint64_t> const_rows;
    for (const auto& [n, prog] : m.programs)
      if (prog.batch && !prog.batch->rows.is_var()) const_rows.insert(prog.batch->rows.value);
    for (const auto& f : p.fills_) {
      const Buffer& b = buf(f.buffer);
      const std::string sp = json_path_key(bpath(f.buffer), "shape");
      auto bad = [&](const std::string& want) {
        add(sp, "P.fill_shape", "fill '" + std::string(to_string(f.role)) + "' is shaped " + want);
      };
      const bool one_d = b.shape.size() == 1;
      switch (f.role) {
        case Fill::Token:
          if (!(one_d && (dim_is(b.shape[0], p.row_var_) || dim_is(b.shape[0], p.group_var_))))
            bad("[rows] or [groups]");
          break;
        case Fill::Position:
        case Fill::Valid:
        case Fill::Slot:
          if (!(one_d && dim_is(b.shape[0], p.row_var_))) bad("[rows]");
          break;
        case Fill::SeqLen:
          if (!(one_d && dim_is(b.shape[0], p.group_var_))) bad("[groups]");
          break;
        case Fill::CuSeqlens: {
          const std::uint64_t want = var_max(p.group_var_) + 1;
          if (!(one_d && !b.shape[0].is_var() && b.shape[0].value == want))
            bad("[" + std::to_string(want) + "] (groups max + 1)");
          break;
        }
        case Fill::SpanAt:
          if (!(one_d && !b.shape[0].is_var() && b.shape[0].value == 1)) bad("[1]");
          break;
        case Fill::Blocks:
          if (!one_d) bad("1-D (members + 1)");
          break;
        case Fill::Tokens:
          if (b.shape.empty() || b.shape.size() > 2 || !dim_is(b.shape[0], p.group_var_)) {
            bad("[groups] or [groups, r]");
          } else if (b.shape.size() == 2 && (b.shape[1].is_var() || !const_rows.count(b.shape[1].value))) {
            add(sp, "P.fill_shape", "a [groups, r] tokens fill needs r = some batch program's rows");
          }
          break;
        case Fill::Count:
          if (!(one_d && dim_is(b.shape[0], p.group_var_))) bad("[groups]");
          break;
        case Fill::Error:  // kern extension: [n] words (schema v5: [1]), e.g. one per peer barrier
          if (!(one_d && !b.shape[0].is_var() && b.shape[0].value >= 1)) bad("[n] with a literal n");
          break;
        case Fill::Clock:
          if (!(one_d && !b.shape[0].is_var() && b.shape[0].value % 5 == 0) || b.dtype != DType::I64)
            bad("i64 [ring × 5]");
          break;
        case Fill::Sampling:
        case Fill::SamplingKeys:
          if (!group_by(b, kSamplingWidth)) bad("[groups, " + std::to_string(kSamplingWidth) + "]");
          break;
        case Fill::History:
          if (!group_by(b, 0)) bad("[groups, h] with a literal h");
          break;
        case Fill::Logprobs:
          if (!group_by(b, 1 + kMaxLogprobs)) bad("[groups, " + std::to_string(1 + kMaxLogprobs) + "]");
          break;
        case Fill::LogprobIds:
          if (!group_by(b, kMaxLogprobs)) bad("[groups, " + std::to_string(kMaxLogprobs) + "]");
          break;
      }
    }
    if (p.fill(Fill::Count) && !p.fill(Fill::Tokens))
      add(json_path_key(bpath(p.fill(Fill::Count)->buffer), "fill"), "P.count",
          "a `count` fill is only valid with a `tokens` fill");
  }

  // Buffers a program writes (interface out/inout params).
  std::set<std::string> written_by(const Program& prog) const {
    std::set<std::string> w;
    for (const auto& call : prog.calls) {
      auto op = m.ops.find(call.op);
      if (op == m.ops.end()) continue;
      for (std::size_t j = 0; j < call.args.size() && j < op->second.params.size(); ++j)
        if (call.args[j].kind == CallArg::Kind::Buf && op->second.params[j].writes()) w.insert(call.args[j].name);
    }
    return w;
  }

  void collect_programs() {
    const FillSlot* tokens = p.fill(Fill::Tokens);
    const FillSlot* count = p.fill(Fill::Count);
    std::map<std::tuple<std::uint64_t, std::string, std::uint64_t, std::string>, std::string> shapes;
    for (const auto& [name, prog] : m.programs) {
      const std::string pp = json_path_key("programs", name);
      if (prog.once) p.once_.push_back(name);
      if (prog.derive) p.derive_.push_back(name);
      if (!prog.batch) continue;
      const Batch& b = *prog.batch;
      Forward f;
      f.program = name;
      f.groups = b.groups;
      f.rows_var = b.rows.var;
      f.rows = b.rows.is_var() ? var_max(b.rows.var) : b.rows.value;
      f.span = b.span;
      f.graph = prog.graph;
      const auto w = written_by(prog);
      f.writes.assign(w.begin(), w.end());
      if (tokens && w.count(tokens->buffer)) {
        f.emits_tokens = true;
        f.tokens_per_group = tokens->width;
      }
      if (count && w.count(count->buffer)) f.count = count->buffer;
      f.decode_var = b.decode;
      f.packed = b.packed;
      if (b.packed) {
        const std::string kp = json_path_key(json_path_key(pp, "batch"), "packed");
        if (b.rows.var != p.row_var_) add(kp, "P.packed", "packed chunks take the row axis var as their rows");
        if (!p.fill(Fill::CuSeqlens)) add(kp, "P.packed", "packed chunks need a `cu_seqlens` fill");
        if (f.emits_tokens) add(kp, "P.packed", "packed chunks emit no tokens (their first token is a decode row's)");
      }
      if (!b.decode.empty()) {
        f.decode_groups = var_max(b.decode);
        const std::string dp = json_path_key(json_path_key(pp, "batch"), "decode");
        if (b.rows.var != p.row_var_) add(dp, "P.mixed", "a mixed step's rows var must be the row axis var");
        if (b.decode == p.row_var_ || b.decode == p.group_var_)
          add(dp, "P.mixed", "the decode var must differ from the row and group axis vars");
        if (f.decode_groups + 1 > f.groups)
          add(dp, "P.mixed",
              "groups " + std::to_string(f.groups) + " leave no chunk group beside " + std::to_string(f.decode_groups) +
                  " decode groups");
        if (!p.fill(Fill::CuSeqlens)) add(dp, "P.mixed", "a mixed step needs a `cu_seqlens` fill");
        if (!f.emits_tokens) add(dp, "P.mixed", "a mixed step must write the `tokens` fill (its decode rows' tokens)");
        if (!p.mixed_.empty() && p.mixed_ != name) add(dp, "P.mixed", "a second mixed program (one per manifest)");
        if (p.mixed_.empty()) p.mixed_ = name;
      }
      auto key = std::make_tuple(f.groups, f.rows_var, f.rows_var.empty() ? f.rows : 0, f.span);
      if (auto it = shapes.find(key); it != shapes.end())
        add(json_path_key(pp, "batch"), "P.shape_unique", "same step shape as program '" + it->second + "'");
      else
        shapes.emplace(key, name);
      if (!p.row_var_.empty() && b.decode.empty() && !b.packed) {  // mixed / packed: rows is the row axis
        const std::uint64_t cap = var_max(p.row_var_);
        if (f.groups > cap || f.rows > cap / f.groups)
          add(json_path_key(pp, "batch"), "P.capacity",
              "groups × rows = " + std::to_string(f.groups) + " × " + std::to_string(f.rows) +
                  " exceeds the row axis max " + std::to_string(cap));
      }
      if (!p.group_var_.empty() && f.groups > var_max(p.group_var_))
        add(json_path_key(json_path_key(pp, "batch"), "groups"), "P.capacity",
            "groups " + std::to_string(f.groups) + " exceeds the group axis max " +
                std::to_string(var_max(p.group_var_)));
      if (!b.span.empty()) {
        const std::string sp = json_path_key(json_path_key(pp, "batch"), "span");
        if (b.rows.is_var() || b.rows.value != 1) add(sp, "P.span", "span only on rows: 1 programs");
        if (p.span_var_.empty())
          p.span_var_ = b.span;
        else if (p.span_var_ != b.span)
          add(sp, "P.span", "a second span var '" + b.span + "' (one per manifest)");
        if (!p.row_var_.empty() && var_max(b.span) > var_max(p.row_var_))
          add(sp, "P.span", "span max exceeds the row axis max");
        if (b.span == p.row_var_ || b.span == p.group_var_)
          add(sp, "P.span", "the span var is a row or group axis var");
        if (!p.fill(Fill::SpanAt)) add(sp, "P.span", "span requires a `span_at` fill");
      }
      if (!b.context.empty()) {
        const std::string cp = json_path_key(json_path_key(pp, "batch"), "context");
        if (p.context_var_.empty())
          p.context_var_ = b.context;
        else if (p.context_var_ != b.context)
          add(cp, "P.context", "a second context var '" + b.context + "' (one per manifest)");
        if (b.context == p.row_var_ || b.context == p.group_var_ || b.context == b.span || b.context == b.rows.var)
          add(cp, "P.context", "the context var must differ from the row, group and span vars");
      }
      p.forwards_.push_back(std::move(f));
    }
    if (!p.span_var_.empty() && p.span_var_ == p.context_var_)
      add("programs", "P.context", "the context var must differ from the span var");
    if (p.forwards_.empty()) add("programs", "P.batch", "no batch program");
    const bool first_stage = !m.cut || m.cut->stage == 0;
    if (first_stage && !p.fill(Fill::Token))
      add("buffers", "P.token", "a `token` fill is required (no cut, or stage 0 of a cut)");
  }

  void run() {
    collect_fills();
    derive_axes();
    collect_tables();
    derive_tray();
    check_fill_shapes();
    collect_programs();
  }
};

const FillSlot* Protocol::fill(Fill role) const {
  for (const auto& f : fills_)
    if (f.role == role) return &f;
  return nullptr;
}

namespace {
// A call's var table: every var at its max, then the ones a call sets, each within its bounds.
struct VarTable {
  VarTable(const Manifest& manifest, const Forward& forward) : m(manifest), f(forward) {
    for (const auto& [n, v] : m.vars) out[n] = v.max;
  }
  void set(const std::string& var, std::uint64_t value, const char* what) {
    if (var.empty()) return;
    const std::uint64_t max = m.vars.at(var).max;
    if (value < 1 || value > max)
      fail(ErrorKind::Api, "program {}: {} {} outside var {} bounds [1, {}]", f.program, what, value, var, max);
    out[var] = value;
  }
  const Manifest& m;
  const Forward& f;
  std::map<std::string, std::uint64_t> out;
};

bool better(const Forward& a, const Forward& b) {  // a tighter than b
  if (a.groups != b.groups) return a.groups < b.groups;
  if (a.rows_var.empty() != b.rows_var.empty()) return a.rows_var.empty();
  return a.program < b.program;
}
}  // namespace

std::optional<Forward> Protocol::forward(std::uint64_t groups, std::uint64_t rows) const {
  const Forward* best = nullptr;
  if (groups == 0 || rows == 0) return std::nullopt;
  for (const auto& f : forwards_) {
    if (!f.span.empty() || !f.decode_var.empty() || groups > f.groups) continue;
    const bool covers = f.rows_var.empty() ? rows == f.rows : (groups == 1 && rows <= f.rows);
    if (covers && (!best || better(f, *best))) best = &f;
  }
  return best ? std::optional<Forward>(*best) : std::nullopt;
}

std::optional<Forward> Protocol::chunk() const {
  for (const auto& f : forwards_)
    if (!f.rows_var.empty() && f.span.empty() && f.decode_var.empty()) return f;
  return std::nullopt;
}

std::optional<Forward> Protocol::mixed() const {
  for (const auto& f : forwards_)
    if (!f.decode_var.empty()) return f;
  return std::nullopt;
}

std::map<std::string, std::uint64_t> Protocol::chunk_vars(const Forward& f, std::uint64_t chunks, std::uint64_t rows,
                                                          std::uint64_t longest_context) const {
  if (f.rows_var.empty() || !f.span.empty() || !f.decode_var.empty())
    fail(ErrorKind::Api, "program {} is not a prefill chunk program", f.program);
  if (!f.packed) return vars(f, chunks, rows, longest_context);  // one chunk (vars refuses more)
  if (chunks < 1 || chunks > f.groups)
    fail(ErrorKind::Api, "program {}: {} packed chunks outside [1, {}]", f.program, chunks, f.groups);
  if (rows < chunks || rows > f.rows)
    fail(ErrorKind::Api, "program {}: {} rows for {} packed chunks (at most {})", f.program, rows, chunks, f.rows);
  VarTable t(v_.manifest(), f);
  t.set(row_var_, rows, "rows");
  t.set(group_var_, chunks, "groups");
  if (!context_var_.empty()) t.set(context_var_, longest_context, "longest context");
  return std::move(t.out);
}

std::map<std::string, std::uint64_t> Protocol::mixed_vars(const Forward& f, std::uint64_t decode, std::uint64_t chunks,
                                                          std::uint64_t rows, std::uint64_t longest_context) const {
  if (f.decode_var.empty()) fail(ErrorKind::Api, "program {} is not a mixed step", f.program);
  if (decode < 1 || decode > f.decode_groups)
    fail(ErrorKind::Api, "program {}: {} decode groups outside [1, {}]", f.program, decode, f.decode_groups);
  if (chunks < 1 || chunks > f.groups - decode)
    fail(ErrorKind::Api, "program {}: {} chunk groups beside {} decode groups (at most {} groups)", f.program, chunks,
         decode, f.groups);
  if (rows < decode + chunks || rows > f.rows)
    fail(ErrorKind::Api, "program {}: {} rows for {} decode and {} chunk groups (at most {})", f.program, rows, decode,
         chunks, f.rows);
  VarTable t(v_.manifest(), f);
  t.set(row_var_, rows, "rows");
  t.set(group_var_, decode + chunks, "groups");
  t.set(f.decode_var, decode, "decode groups");
  if (!context_var_.empty()) t.set(context_var_, longest_context, "longest context");
  return std::move(t.out);
}

std::optional<Forward> Protocol::spanned(std::uint64_t groups) const {
  const Forward* best = nullptr;
  for (const auto& f : forwards_)
    if (!f.span.empty() && f.decode_var.empty() && groups >= 1 && groups <= f.groups && (!best || better(f, *best)))
      best = &f;
  return best ? std::optional<Forward>(*best) : std::nullopt;
}

std::map<std::string, std::uint64_t> Protocol::vars(const Forward& f, std::uint64_t groups, std::uint64_t rows,
                                                    std::uint64_t longest_context, std::uint64_t span) const {
  const Manifest& m = v_.manifest();
  if (groups < 1 || groups > f.groups)
    fail(ErrorKind::Api, "program {}: {} groups outside [1, {}]", f.program, groups, f.groups);
  if (f.rows_var.empty() ? rows != f.rows : (rows < 1 || rows > f.rows))
    fail(ErrorKind::Api, "program {}: {} rows do not fit its shape", f.program, rows);
  VarTable t(m, f);
  if (!f.span.empty() && span < 1)
    fail(ErrorKind::Api, "program {}: a span call needs a span of at least 1", f.program);
  std::uint64_t total = 0;
  if (__builtin_mul_overflow(groups, rows, &total) ||
      __builtin_add_overflow(total, f.span.empty() ? 0 : span - 1, &total))
    fail(ErrorKind::Api, "program {}: {} groups x {} rows overflows", f.program, groups, rows);
  t.set(row_var_, total, "rows");
  t.set(group_var_, groups, "groups");
  if (!f.rows_var.empty() && f.rows_var != row_var_) t.set(f.rows_var, rows, "rows");
  if (!context_var_.empty()) t.set(context_var_, longest_context, "longest context");
  if (!f.span.empty()) t.set(f.span, span, "span");
  return std::move(t.out);
}

std::vector<Violation> protocol_violations(const Verified& v) {
  Protocol p(v);
  ProtocolBuilder b{v.manifest(), p, {}};
  b.run();
  return std::move(b.out);
}

Protocol check_protocol(const Verified& v) {
  Protocol p(v);
  ProtocolBuilder b{v.manifest(), p, {}};
  b.run();
  if (!b.out.empty()) {
    std::vector<std::string> lines;
    for (const auto& x : b.out) lines.push_back(x.line());
    throw Error(ErrorKind::ManifestVerify,
                std::to_string(b.out.size()) + (b.out.size() == 1 ? " protocol violation" : " protocol violations"),
                std::move(lines));
  }
  return p;
}

}  // namespace kern::core
