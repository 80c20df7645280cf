// Tags: if / for / set / macro / with / generation / break / continue. Every other tag is an
// error at load, as is a call to a function or method the interpreter does not provide.
#include <fmt/format.h>

#include <algorithm>

#include "chat/jinja_builtins.hpp"
#include "chat/jinja_parser.hpp"
#include "chat/jinja_unicode.hpp"
#include "kern/base/error.hpp"
#include "kern/base/json.hpp"

namespace kern::chat::jinja {

Parser::Parser(std::string name, std::string source) : name_(std::move(name)), source_(std::move(source)) {
  line_starts_.push_back(0);
  for (std::size_t i = 0; i < source_.size(); ++i)
    if (source_[i] == '\n') line_starts_.push_back(i + 1);
}

Pos Parser::pos_of(const Token& t) const {
  const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), t.offset);
  const std::size_t line = static_cast<std::size_t>(it - line_starts_.begin());
  const std::size_t start = line_starts_[line - 1];
  const std::size_t end = std::min(t.offset, source_.size());
  return Pos{static_cast<std::uint32_t>(line),
             static_cast<std::uint32_t>(code_point_count(std::string_view(source_).substr(start, end - start)) + 1)};
}

std::string Parser::describe(const Token& t) const {
  switch (t.type) {
    case Tok::End: return "end of template";
    case Tok::VarEnd: return "'}}'";
    case Tok::BlockEnd: return "'%}'";
    case Tok::String: return "a string";
    case Tok::Text: return "text";
    default: return fmt::format("'{}'", t.text);
  }
}

void Parser::fail_at(const Token& t, const std::string& message) const {
  const Pos p = pos_of(t);
  throw Error(ErrorKind::Template, fmt::format("{} line {} column {}: {}", name_, p.line, p.column, message));
}

bool Parser::skip_op(std::string_view op) {
  if (!is_op(op)) return false;
  ++at_;
  return true;
}
bool Parser::skip_name(std::string_view n) {
  if (!is_name(n)) return false;
  ++at_;
  return true;
}
void Parser::expect_op(std::string_view op) {
  if (!skip_op(op)) fail(fmt::format("expected '{}', found {}", op, describe(cur())));
}
std::string Parser::expect_name(std::string_view what) {
  if (cur().type != Tok::Name) fail(fmt::format("expected {}, found {}", what, describe(cur())));
  return toks_[at_++].text;
}
void Parser::expect_block_end(std::string_view tag) {
  if (cur().type != Tok::BlockEnd) fail(fmt::format("expected '%}}' to end '{}', found {}", tag, describe(cur())));
  ++at_;
}

std::shared_ptr<const Program> Parser::run() {
  try {
    toks_ = lex(source_);
  } catch (const LexError& e) {
    fail_at(Token{Tok::End, {}, e.offset}, e.message);
  }
  auto program = std::make_shared<Program>();
  program->name = name_;
  std::string ended;
  try {
    program->body = parse_body({}, ended);
  } catch (const ExprTooDeep&) {
    fail(fmt::format("an expression nested deeper than {} levels", kMaxExprHeight));
  }
  check_pending();
  return program;
}

Body Parser::parse_body(std::initializer_list<std::string_view> ends, std::string& ended) {
  DepthGuard guard(*this);
  Body body;
  while (true) {
    const Token& t = cur();
    if (t.type == Tok::End) {
      if (ends.size() == 0) return body;
      fail(fmt::format("unexpected end of template: expected {{% {} %}}", *ends.begin()));
    }
    if (t.type == Tok::Text) {
      auto s = std::make_unique<Stmt>(StmtKind::Text, pos());
      s->text = t.text;
      ++at_;
      body.push_back(std::move(s));
    } else if (t.type == Tok::VarBegin) {
      auto s = std::make_unique<Stmt>(StmtKind::Output, pos());
      ++at_;
      s->expr = parse_tuple(true);
      if (cur().type != Tok::VarEnd) fail(fmt::format("expected '}}}}', found {}", describe(cur())));
      ++at_;
      body.push_back(std::move(s));
    } else {
      const Token& word = peek();
      if (word.type == Tok::Name && std::find(ends.begin(), ends.end(), word.text) != ends.end()) {
        ended = word.text;
        at_ += 2;
        return body;
      }
      ++at_;
      body.push_back(parse_statement());
    }
  }
}

StmtPtr Parser::parse_statement() {
  const Pos p = pos();
  if (cur().type != Tok::Name) fail(fmt::format("expected a tag name, found {}", describe(cur())));
  const std::string tag = toks_[at_].text;
  if (tag == "if") return ++at_, parse_if(p);
  if (tag == "for") return ++at_, parse_for(p);
  if (tag == "set") return ++at_, parse_set(p);
  if (tag == "macro") return ++at_, parse_macro(p);
  if (tag == "with") return ++at_, parse_with(p);
  if (tag == "generation") {
    ++at_;
    expect_block_end(tag);
    auto s = std::make_unique<Stmt>(StmtKind::Scoped, p);
    std::string ended;
    s->body = parse_body({"endgeneration"}, ended);
    expect_block_end("endgeneration");
    return s;
  }
  if (tag == "break" || tag == "continue") {
    if (loop_depth_ == 0) fail(fmt::format("'{}' outside a for loop", tag));
    ++at_;
    expect_block_end(tag);
    return std::make_unique<Stmt>(tag == "break" ? StmtKind::Break : StmtKind::Continue, p);
  }
  static constexpr std::string_view kUnsupported[] = {"filter", "call",  "include", "import",     "from", "extends",
                                                      "block",  "trans", "do",      "autoescape", "print"};
  if (std::find(std::begin(kUnsupported), std::end(kUnsupported), tag) != std::end(kUnsupported))
    fail(fmt::format("the '{}' tag is not supported", tag));
  if (tag.rfind("end", 0) == 0 || tag == "elif" || tag == "else") fail(fmt::format("unexpected '{}'", tag));
  fail(fmt::format("unknown tag '{}'", tag));
}

StmtPtr Parser::parse_if(Pos p) {
  auto s = std::make_unique<Stmt>(StmtKind::If, p);
  while (true) {
    ExprPtr cond = parse_tuple(false);
    expect_block_end("if");
    std::string ended;
    Body body = parse_body({"elif", "else", "endif"}, ended);
    s->branches.emplace_back(std::move(cond), std::move(body));
    if (ended == "elif") continue;
    if (ended == "else") {
      expect_block_end("else");
      s->else_body = parse_body({"endif"}, ended);
    }
    expect_block_end("endif");
    return s;
  }
}

std::vector<std::string> Parser::parse_targets(std::string_view tag) {
  std::vector<std::string> names;
  const bool paren = skip_op("(");
  do {
    if (paren && is_op(")")) break;
    names.push_back(expect_name(fmt::format("a variable name in '{}'", tag)));
    assigned_.insert(names.back());
  } while (skip_op(","));
  if (paren) expect_op(")");
  return names;
}

StmtPtr Parser::parse_for(Pos p) {
  auto s = std::make_unique<Stmt>(StmtKind::For, p);
  s->targets = parse_targets("for");
  if (!skip_name("in")) fail(fmt::format("expected 'in', found {}", describe(cur())));
  s->expr = parse_tuple(false);
  if (skip_name("if")) s->cond = parse_expression();
  if (is_name("recursive")) fail("recursive for loops are not supported");
  expect_block_end("for");
  std::string ended;
  ++loop_depth_;
  s->body = parse_body({"else", "endfor"}, ended);
  --loop_depth_;
  if (ended == "else") {
    expect_block_end("else");
    s->else_body = parse_body({"endfor"}, ended);
  }
  expect_block_end("endfor");
  return s;
}

StmtPtr Parser::parse_set(Pos p) {
  auto s = std::make_unique<Stmt>(StmtKind::Set, p);
  if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == ".") {
    s->targets.push_back(toks_[at_].text);
    at_ += 2;
    s->text = expect_name("an attribute name after '.'");
    assigned_.insert(s->text);
  } else {
    s->targets = parse_targets("set");
  }
  if (skip_op("=")) {
    s->expr = parse_tuple(true);
    expect_block_end("set");
    return s;
  }
  if (cur().type != Tok::BlockEnd) {
    if (is_op("|")) fail("filters on a {% set %} block are not supported");
    fail(fmt::format("expected '=' or '%}}' in 'set', found {}", describe(cur())));
  }
  if (s->targets.size() != 1 || !s->text.empty()) fail("a {% set %} block assigns exactly one name");
  ++at_;
  s->kind = StmtKind::SetBlock;
  std::string ended;
  s->body = parse_body({"endset"}, ended);
  expect_block_end("endset");
  return s;
}

StmtPtr Parser::parse_macro(Pos p) {
  auto s = std::make_unique<Stmt>(StmtKind::Macro, p);
  s->text = expect_name("a macro name");
  assigned_.insert(s->text);
  expect_op("(");
  while (!skip_op(")")) {
    if (!s->params.empty()) expect_op(",");
    if (skip_op(")")) break;
    MacroParam param{expect_name("a parameter name"), nullptr};
    assigned_.insert(param.name);
    if (skip_op("=")) param.default_value = parse_expression();
    s->params.push_back(std::move(param));
  }
  expect_block_end("macro");
  const int loops = loop_depth_;
  loop_depth_ = 0;
  ++macro_depth_;
  std::string ended;
  s->body = parse_body({"endmacro"}, ended);
  --macro_depth_;
  loop_depth_ = loops;
  if (cur().type == Tok::Name && cur().text == s->text) ++at_;
  expect_block_end("endmacro");
  return s;
}

StmtPtr Parser::parse_with(Pos p) {
  auto s = std::make_unique<Stmt>(StmtKind::Scoped, p);
  while (cur().type != Tok::BlockEnd) {
    if (!s->targets.empty()) expect_op(",");
    s->targets.push_back(expect_name("a variable name in 'with'"));
    assigned_.insert(s->targets.back());
    expect_op("=");
    s->values.push_back(parse_expression());
  }
  ++at_;
  std::string ended;
  s->body = parse_body({"endwith"}, ended);
  expect_block_end("endwith");
  return s;
}

void Parser::check_pending() const {
  for (const PendingCall& c : pending_) {
    if (assigned_.count(c.name)) continue;
    if (c.method ? is_supported_method(c.name) : is_global_function(c.name)) continue;
    throw Error(ErrorKind::Template, fmt::format("{} line {} column {}: {} '{}' is not supported", name_, c.pos.line,
                                                 c.pos.column, c.method ? "method" : "function", c.name));
  }
}

std::shared_ptr<const Program> parse_program(std::string_view source, std::string name) {
  const std::size_t bad = find_invalid_utf8(source);
  if (bad != std::string_view::npos) {
    const TextPosition p = text_position(source, bad);
    throw Error(ErrorKind::Template,
                fmt::format("{} line {} column {}: the template is not valid UTF-8", name, p.line, p.column));
  }
  return Parser(std::move(name), normalize_source(source)).run();
}

}  // namespace kern::chat::jinja
