#include "chat/jinja_render.hpp"

#include <fmt/format.h>

#include "chat/jinja_builtins.hpp"
#include "chat/jinja_parser.hpp"
#include "kern/base/error.hpp"

namespace kern::chat::jinja {

const Value* Scope::find(std::string_view name) const {
  for (const Scope* s = this; s; s = s->parent.get())
    for (const auto& kv : s->vars)
      if (kv.first == name) return &kv.second;
  return nullptr;
}

void Scope::set(const std::string& name, Value v) {
  for (auto& kv : vars) {
    if (kv.first == name) {
      kv.second = std::move(v);
      return;
    }
  }
  vars.emplace_back(name, std::move(v));
}

namespace {

class Macro : public Callable {
 public:
  Macro(const Stmt& stmt, std::weak_ptr<Scope> scope) : stmt_(stmt), scope_(std::move(scope)) {}
  std::string_view name() const override { return stmt_.text; }
  Value call(const CallArgs& args, Interp& interp) const override { return interp.call_macro(stmt_, scope_, args); }

 private:
  const Stmt& stmt_;
  std::weak_ptr<Scope> scope_;
};

class Cycle : public Callable {
 public:
  explicit Cycle(std::size_t index) : index_(index) {}
  std::string_view name() const override { return "loop.cycle"; }
  Value call(const CallArgs& args, Interp&) const override {
    if (args.positional.empty() || !args.keyword.empty()) fault("loop.cycle() takes one or more positional arguments");
    return args.positional[index_ % args.positional.size()];
  }

 private:
  std::size_t index_;
};

// Jinja's loop variable for item `i` of `items`.
Value loop_object(const ValueList& items, std::size_t i) {
  const auto n = static_cast<std::int64_t>(items.size());
  const auto k = static_cast<std::int64_t>(i);
  Dict d;
  d.set("index0", Value::integer(k));
  d.set("index", Value::integer(k + 1));
  d.set("revindex0", Value::integer(n - k - 1));
  d.set("revindex", Value::integer(n - k));
  d.set("first", Value::boolean(i == 0));
  d.set("last", Value::boolean(k == n - 1));
  d.set("length", Value::integer(n));
  d.set("depth", Value::integer(1));
  d.set("depth0", Value::integer(0));
  if (i > 0) d.set("previtem", items[i - 1]);
  if (k + 1 < n) d.set("nextitem", items[i + 1]);
  d.set("cycle", Value::callable(std::make_shared<Cycle>(i)));
  return Value::dict(std::move(d));
}

// Swaps the current scope for the duration of a block, also when it throws.
class ScopeSwap {
 public:
  ScopeSwap(std::shared_ptr<Scope>& slot, std::shared_ptr<Scope> next) : slot_(slot), saved_(std::move(slot)) {
    slot_ = std::move(next);
  }
  ~ScopeSwap() { slot_ = std::move(saved_); }
  ScopeSwap(const ScopeSwap&) = delete;
  ScopeSwap& operator=(const ScopeSwap&) = delete;

 private:
  std::shared_ptr<Scope>& slot_;
  std::shared_ptr<Scope> saved_;
};

std::shared_ptr<Scope> child_of(const std::shared_ptr<Scope>& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

}  // namespace

Interp::Interp(const Program& program, const RenderLimits& limits) : program_(program), limits_(limits) {}

Interp::~Interp() {
  for (auto& ns : namespaces_) ns->clear();
}

void Interp::charge(std::uint64_t steps) {
  steps_ += steps;
  if (steps_ > limits_.max_steps) fault(fmt::format("the render took more than {} steps", limits_.max_steps));
}

void Interp::charge_size(std::size_t size) {
  if (size > limits_.max_output) fault(fmt::format("a value grew past the {}-byte output limit", limits_.max_output));
}

std::shared_ptr<Dict> Interp::new_namespace() {
  charge(1);
  namespaces_.push_back(std::make_shared<Dict>());
  return namespaces_.back();
}

void Interp::fail_at(Pos p, const std::string& message) const {
  throw Error(ErrorKind::Template, fmt::format("{} line {} column {}: {}", program_.name, p.line, p.column, message));
}

std::string Interp::render(const Value& globals) {
  auto top = std::make_shared<Scope>();
  if (!globals.is_dict()) fail_at(Pos{}, "template globals must be a dict");
  for (const auto& kv : globals.dict().items()) top->vars.push_back(kv);
  scope_ = child_of(top);
  std::string out;
  exec_body(program_.body, out);
  scope_.reset();
  return out;
}

void Interp::emit(std::string& out, std::string_view text) {
  out += text;
  if (out.size() > limits_.max_output) fault(fmt::format("the output grew past {} bytes", limits_.max_output));
}

Interp::Flow Interp::exec_body(const Body& body, std::string& out) {
  for (const StmtPtr& s : body) {
    const Flow f = exec(*s, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Interp::Flow Interp::exec(const Stmt& s, std::string& out) {
  try {
    switch (s.kind) {
      case StmtKind::Text: emit(out, s.text); return Flow::Normal;
      case StmtKind::Output: emit(out, to_str(eval(*s.expr))); return Flow::Normal;
      case StmtKind::If:
        for (const auto& [cond, body] : s.branches)
          if (truthy(eval(*cond))) return exec_body(body, out);
        return exec_body(s.else_body, out);
      case StmtKind::For: return exec_for(s, out);
      case StmtKind::Set: exec_set(s); return Flow::Normal;
      case StmtKind::SetBlock: {
        std::string captured;
        const Flow f = exec_body(s.body, captured);
        scope_->set(s.targets[0], Value::string(std::move(captured)));
        return f;
      }
      case StmtKind::Macro:
        scope_->set(s.text, Value::callable(std::make_shared<Macro>(s, std::weak_ptr<Scope>(scope_))));
        return Flow::Normal;
      case StmtKind::Break: return Flow::Break;
      case StmtKind::Continue: return Flow::Continue;
      case StmtKind::Scoped: {
        auto inner = child_of(scope_);
        for (std::size_t i = 0; i < s.targets.size(); ++i) inner->set(s.targets[i], eval(*s.values[i]));
        ScopeSwap swap(scope_, inner);
        return exec_body(s.body, out);
      }
    }
  } catch (const Fault& f) {
    fail_at(s.pos, f.message);
  }
  return Flow::Normal;
}

void Interp::assign(const std::vector<std::string>& targets, const Value& v) {
  if (targets.size() == 1) {
    scope_->set(targets[0], v);
    return;
  }
  const ValueList parts = iterate(v);
  if (parts.size() != targets.size()) {
    fault(parts.size() < targets.size()
              ? fmt::format("not enough values to unpack (expected {}, got {})", targets.size(), parts.size())
              : fmt::format("too many values to unpack (expected {})", targets.size()));
  }
  for (std::size_t i = 0; i < targets.size(); ++i) scope_->set(targets[i], parts[i]);
}

void Interp::exec_set(const Stmt& s) {
  Value v = eval(*s.expr);
  if (s.text.empty()) {
    assign(s.targets, v);
    return;
  }
  const Value* ns = scope_->find(s.targets[0]);
  if (!ns || ns->kind() != Value::Kind::Namespace)
    fault(fmt::format("cannot assign attribute '{}' on '{}': it is not a namespace()", s.text, s.targets[0]));
  ns->attrs().set(s.text, std::move(v));
}

Interp::Flow Interp::exec_for(const Stmt& s, std::string& out) {
  ValueList items = iterate(eval(*s.expr));
  charge(1 + items.size());
  if (s.cond) {
    ValueList kept;
    for (Value& item : items) {
      ScopeSwap swap(scope_, child_of(scope_));
      assign(s.targets, item);
      if (truthy(eval(*s.cond))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    ScopeSwap swap(scope_, child_of(scope_));
    return exec_body(s.else_body, out);
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    charge(1);
    ScopeSwap swap(scope_, child_of(scope_));
    assign(s.targets, items[i]);
    scope_->set("loop", loop_object(items, i));
    if (exec_body(s.body, out) == Flow::Break) break;
  }
  return Flow::Normal;
}

Value Interp::call_macro(const Stmt& m, const std::weak_ptr<Scope>& defined_in, const CallArgs& args) {
  std::shared_ptr<Scope> parent = defined_in.lock();
  if (!parent) fault(fmt::format("macro '{}' called after the block that defined it ended", m.text));
  if (call_depth_ >= limits_.max_call_depth)
    fault(fmt::format("macro calls nested deeper than {}", limits_.max_call_depth));
  charge(1);
  if (args.positional.size() > m.params.size())
    fault(fmt::format("macro '{}' takes not more than {} argument(s)", m.text, m.params.size()));
  for (const auto& kv : args.keyword) {
    bool known = false;
    for (const MacroParam& p : m.params) known = known || p.name == kv.first;
    if (!known) fault(fmt::format("macro '{}' takes no keyword argument '{}'", m.text, kv.first));
  }
  ScopeSwap swap(scope_, child_of(parent));
  for (std::size_t i = 0; i < m.params.size(); ++i) {
    const MacroParam& p = m.params[i];
    const Value* kw = nullptr;
    for (const auto& kv : args.keyword)
      if (kv.first == p.name) kw = &kv.second;
    if (i < args.positional.size()) {
      if (kw) fault(fmt::format("macro '{}' got multiple values for argument '{}'", m.text, p.name));
      scope_->set(p.name, args.positional[i]);
    } else if (kw) {
      scope_->set(p.name, *kw);
    } else {
      scope_->set(p.name, p.default_value ? eval(*p.default_value) : Value::undefined(p.name));
    }
  }
  ++call_depth_;
  std::string out;
  try {
    exec_body(m.body, out);
  } catch (...) {
    --call_depth_;
    throw;
  }
  --call_depth_;
  return Value::string(std::move(out));
}

}  // namespace kern::chat::jinja
