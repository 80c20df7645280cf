// The interpreter on its own: load errors with positions, whitespace rules, Python printing,
// tojson, scoping, undefined values, and the limits that keep hostile templates bounded.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <utility>

#include "kern/base/error.hpp"
#include "kern/chat/jinja.hpp"

namespace kern::chat::jinja {
namespace {

using OJson = nlohmann::ordered_json;

std::string render(std::string_view tmpl, const char* globals = "{}", const RenderLimits& limits = {}) {
  return Template::parse(tmpl, "t").render(from_json(OJson::parse(globals)), limits);
}

// The message of the Error(Template) that loading or rendering throws ("" when neither throws).
std::string error_of(std::string_view tmpl, const char* globals = "{}", const RenderLimits& limits = {}) {
  try {
    render(tmpl, globals, limits);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Template) << e.what();
    return e.what();
  }
  return "";
}

std::string load_error(std::string_view tmpl) {
  try {
    Template::parse(tmpl, "t");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Template);
    return e.what();
  }
  return "";
}

#define EXPECT_CONTAINS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

// Each template (no globals) renders to the text beside it.
void expect_renders(std::initializer_list<std::pair<const char*, const char*>> cases) {
  for (const auto& [tmpl, text] : cases) EXPECT_EQ(render(tmpl), text) << tmpl;
}

// Each template renders to an Error(Template) whose message contains the text beside it.
void expect_render_errors(std::initializer_list<std::pair<const char*, const char*>> cases) {
  for (const auto& [tmpl, words] : cases) EXPECT_CONTAINS(error_of(tmpl), words);
}

TEST(JinjaLoad, UnsupportedThingsFailAtLoadWithLineAndColumn) {
  // (template, words of the load error)
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"a\n{{ x | nope }}", "t line 2 column 8: unknown filter 'nope'"},
      {"{% if x is prime %}{% endif %}", "line 1 column 12: unknown test 'prime'"},
      {"\n\n  {% frobnicate %}", "line 3 column 6: unknown tag 'frobnicate'"},
      {"{% include 'x' %}", "the 'include' tag is not supported"},
      {"{% do x.append(1) %}", "the 'do' tag is not supported"},
      {"{{ messages.append(1) }}", "line 1 column 12: method 'append' is not supported"},
      {"{{ lipsum(3) }}", "function 'lipsum' is not supported"},
      {"{{ xs | map('nope') | list }}", "unknown filter 'nope'"},
      {"{{ xs | selectattr('a', 'nope') | list }}", "unknown test 'nope'"},
      {"{{ '%s' % x }}", "printf-style"},
      {"{% for x in y recursive %}{% endfor %}", "recursive"},
      {"{% if x %}unclosed", "unexpected end of template: expected {% elif %}"},
      {"{% endfor %}", "unexpected 'endfor'"},
      {"{% break %}", "'break' outside a for loop"},
      {"{{ 'abc }}", "line 1 column 4: unterminated string literal"},
      {"{# never closed", "missing end of comment"},
      {"{{ x $ y }}", "unexpected character '$'"},
      {"{% raw %}x", "missing {% endraw %}"},
      {"{{ 99999999999999999999 }}", "out of range"},
      {"x\xff", "not valid UTF-8"},
      {"{% macro m() %}{{ varargs }}{% endmacro %}", "'varargs' in macros is not supported"},
  };
  for (const auto& [tmpl, words] : cases) EXPECT_CONTAINS(load_error(tmpl), words);
  // Calls to names the template itself binds are fine: macros and namespace attributes.
  EXPECT_EQ(load_error("{% macro m() %}{% endmacro %}{{ m() }}"), "");
  EXPECT_EQ(load_error("{{ loop.cycle(1) if loop is defined }}"), "");
}

TEST(JinjaLoad, ColumnsCountCodePoints) {
  EXPECT_CONTAINS(load_error("日本 {{ x | nope }}"), "line 1 column 11: unknown filter");
}

TEST(JinjaLoad, NestingIsBounded) {
  EXPECT_CONTAINS(load_error("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"),
                  "nesting deeper than");
  EXPECT_CONTAINS(load_error("{{ " + std::string(5000, '[') + std::string(5000, ']') + " }}"), "nesting deeper than");
  std::string ifs;
  for (int i = 0; i < 500; ++i) ifs += "{% if x %}";
  EXPECT_CONTAINS(load_error(ifs), "nesting deeper than");
  EXPECT_CONTAINS(load_error("{{ " + std::string(5000, '-') + "1 }}"), "nesting deeper than");
  EXPECT_EQ(load_error("{{ " + std::string(20000, 'n') + " }}"), "");  // long names are fine
  // Chains deepen the tree without parser recursion; they are bounded as well.
  std::string attrs = "{{ x", sums = "{{ 1", pipes = "{{ x";
  for (int i = 0; i < 100000; ++i) attrs += ".a", sums += " + 1", pipes += " | trim";
  EXPECT_CONTAINS(load_error(attrs + " }}"), "an expression nested deeper than 400 levels");
  EXPECT_CONTAINS(load_error(sums + " }}"), "an expression nested deeper than 400 levels");
  EXPECT_CONTAINS(load_error(pipes + " }}"), "an expression nested deeper than 400 levels");
}

TEST(JinjaWhitespace, TrimAndLstripBlocksAsTransformersConfiguresThem) {
  EXPECT_EQ(render("{% if true %}\nyes\n{% endif %}\nafter"), "yes\nafter");
  EXPECT_EQ(render("  {% if true %}x{% endif %}  \n"), "x  ");  // one trailing newline is dropped
  EXPECT_EQ(render("a\n    {% if true %}b{% endif %}"), "a\nb");
  EXPECT_EQ(render("a  {% if true %}b{% endif %}"), "a  b");  // not at line start: kept
  EXPECT_EQ(render("a\n  {{ 'v' }}"), "a\n  v");              // lstrip does not touch {{
  EXPECT_EQ(render("a\n  {%+ if true %}b{% endif %}"), "a\n  b");
  EXPECT_EQ(render("{% if true +%}\nb{% endif %}"), "\nb");
  EXPECT_EQ(render("a \n {%- if true -%} \n b{% endif %}"), "ab");
  EXPECT_EQ(render("a {{- 'b' -}} \n c"), "abc");
  EXPECT_EQ(render("a\n  {# note #}\nb"), "a\nb");
  EXPECT_EQ(render("a {#- note -#} b"), "ab");
  EXPECT_EQ(render("{% raw %}{{ x }}{% if %}{% endraw %}"), "{{ x }}{% if %}");
  EXPECT_EQ(render("{%- raw -%}  a  {%- endraw %}\nb"), "ab");
  EXPECT_EQ(render("a\r\nb\rc\n\n"), "a\nb\nc\n");
  EXPECT_EQ(render("{{ {'a': {'b': 1}} }}"), "{'a': {'b': 1}}");  // }} inside a dict literal
}

TEST(JinjaPrint, PythonStrAndRepr) {
  expect_renders({
      {"{{ true }} {{ false }} {{ none }} {{ undefined_thing }}|", "True False None |"},
      {"{{ 2.0 }} {{ 3.5 }} {{ 1e20 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ -0.0 }}",
       "2.0 3.5 1e+20 1e+16 1000000000000000.0 0.0001 1e-05 -0.0"},
      {"{{ 0.1 + 0.2 }} {{ 1 / 3 }} {{ 10 / 2 }}", "0.30000000000000004 0.3333333333333333 5.0"},
      {"{{ ['a', \"it's\", 'q\"', 1, 2.5, none, true] }}", "['a', \"it's\", 'q\"', 1, 2.5, None, True]"},
      {"{{ ('b', 1) }} {{ (1,) }} {{ () }} {{ {} }} {{ [] }}", "('b', 1) (1,) () {} []"},
      {"{{ ['tab\\there', 'nl\\n', 'back\\\\', '\\x01', 'é日本', '\\u00a0', '\\u200b'] }}",
       "['tab\\there', 'nl\\n', 'back\\\\', '\\x01', 'é日本', '\\xa0', '\\u200b']"},
      {"{% set ns = namespace(a=1) %}{{ ns }}", "<Namespace {'a': 1}>"},
      {"{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }}",
       "3 -4 2 -2 1024 0.5 3.0"},
      {"{{ true + 1 }} {{ 'ab' * 3 }} {{ [0] * 2 }} {{ 'x' ~ 1.0 ~ none ~ true }}", "2 ababab [0, 0] x1.0NoneTrue"},
  });
  EXPECT_EQ(render("{{ m }}", R"({"m": {"role": "user", "n": [1, {"x": null}]}})"),
            "{'role': 'user', 'n': [1, {'x': None}]}");
}

TEST(JinjaJson, TojsonIsPythonJsonDumps) {
  EXPECT_EQ(
      render("{{ v | tojson }}", R"({"v": {"z": 1, "a": [1.0, 2.5, 1e20, true, null, "é\"\\\n\t\u0001\u007f"]}})"),
      "{\"z\": 1, \"a\": [1.0, 2.5, 1e+20, true, null, \"é\\\"\\\\\\n\\t\\u0001\x7f\"]}");
  EXPECT_EQ(render("{{ '日本😀' | tojson(ensure_ascii=true) }}"), "\"\\u65e5\\u672c\\ud83d\\ude00\"");
  EXPECT_EQ(render("{{ {'b': [1, []], 'a': {}} | tojson(indent=2) }}"),
            "{\n  \"b\": [\n    1,\n    []\n  ],\n  \"a\": {}\n}");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2} | tojson(separators=(',', ':'), sort_keys=true) }}"), "{\"a\":2,\"b\":1}");
  EXPECT_EQ(render("{{ ('x', 1) | tojson }}"), "[\"x\", 1]");
  EXPECT_CONTAINS(error_of("{{ undefined_thing | tojson }}"), "not JSON serializable");
}

TEST(JinjaUndefined, BehavesLikeJinjaDefaultUndefined) {
  EXPECT_EQ(render("[{{ x }}]{% for a in x %}no{% endfor %}{{ x | length }}{{ x is defined }}{{ x | default('d') }}"),
            "[]0Falsed");
  EXPECT_EQ(render("{{ m.missing is defined }} {{ none.attr is defined }} {{ 5.attr is defined }}", R"({"m": {}})"),
            "False False False");
  expect_render_errors({{"{{ x.y }}", "t line 1 column 5: 'x' is undefined"},
                        {"{{ x['y'] }}", "'x' is undefined"},
                        {"{{ x + 1 }}", "'x' is undefined"},
                        {"{{ x < 1 }}", "'x' is undefined"},
                        {"{% set x = none %}{{ x() }}", "'NoneType' object is not callable"}});
  EXPECT_EQ(render("{{ 'a' in x }} {{ x == x }} {{ x == none }}"), "False True False");
}

TEST(JinjaErrors, PythonTypeErrorsAreRenderErrors) {
  expect_render_errors({
      {"{{ 'a' + 1 }}", "can only concatenate str (not \"int\") to str"},
      {"{{ 1 in 'abc' }}", "'in <string>' requires string as left operand"},
      {"{{ 'x' in none }}", "argument of type 'NoneType' is not iterable"},
      {"{% for x in 3 %}{% endfor %}", "'int' object is not iterable"},
      {"{{ 1 / 0 }}", "division by zero"},
      {"{{ 9223372036854775807 + 1 }}", "does not fit in 64 bits"},
      {"{{ raise_exception('no ' ~ 'way') }}", "t line 1 column 4: no way"},
      {"{% for a, b in [[1]] %}{% endfor %}", "not enough values to unpack"},
      {"{{ 'abc'[::0] }}", "slice step cannot be zero"},
      {"{{ none < 1 }}", "'<' not supported between instances of 'NoneType' and 'int'"},
      {"{{ range(200000) | length }}", "range too big"},
  });
}

TEST(JinjaScope, SetInLoopsStaysInTheIterationNamespacesDoNot) {
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = i * 10 %}{{ x }} {% endfor %}{{ x }}"),
            "110 120 1");
  EXPECT_EQ(render("{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}"), "2");
  EXPECT_EQ(
      render("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"),
      "6");
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(render("{% set t %}x{{ 1 + 1 }}{% endset %}[{{ t }}]"), "[x2]");
  EXPECT_EQ(render("{% with a = 5 %}{{ a }}{% endwith %}[{{ a }}]"), "5[]");
  EXPECT_CONTAINS(error_of("{% set s = 'x' %}{% set s.a = 1 %}"), "not a namespace()");
}

TEST(JinjaLoops, LoopVariableAndControls) {
  EXPECT_EQ(
      render("{% for x in 'ab日' %}{{ loop.index }}{{ x }}{{ loop.revindex0 }}{{ loop.cycle('o', 'e') }} {% endfor %}"),
      "1a2o 2b1e 3日0o ");
  EXPECT_EQ(
      render(
          "{% for x in [1, 2, 3] %}{{ loop.previtem | default('-') }}{{ loop.nextitem | default('-') }} {% endfor %}"),
      "-2 13 2- ");
  EXPECT_EQ(render("{% for i in range(3) %}{% for j in range(3) %}{% if j > i %}{% break %}{% endif %}{{ i }}{{ j }} "
                   "{% endfor %}{% endfor %}"),
            "00 10 11 20 21 22 ");
  EXPECT_EQ(render("{% for k, v in d | dictsort %}{{ k }}{{ v }}{% endfor %}", R"({"d": {"b": 1, "A": 2}})"), "A2b1");
  EXPECT_EQ(render("{% for x in [3, 1, 2] if x > 1 %}{{ loop.length }}{{ x }}{% endfor %}"), "2322");
}

TEST(JinjaMacros, ArgumentsDefaultsAndRecursion) {
  EXPECT_EQ(render("{% macro f(a, b=a ~ '!', c=none) %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ f(1) }}|{{ f(1, c=3) }}|"
                   "{{ f(b=2, a=0) | trim }}"),
            "11!None|11!3|02None");
  EXPECT_CONTAINS(error_of("{% macro f(a) %}{% endmacro %}{{ f(1, 2) }}"), "takes not more than 1 argument");
  EXPECT_CONTAINS(error_of("{% macro f(a) %}{% endmacro %}{{ f(z=1) }}"), "no keyword argument 'z'");
  EXPECT_EQ(render("{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% endmacro %}"
                   "{{ fact(10) }}"),
            "3628800");
  EXPECT_CONTAINS(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"), "macro calls nested deeper than 64");
}

TEST(JinjaBuiltins, StringsAreCodePointsAndMethodsArePython) {
  EXPECT_EQ(
      render("{{ s | length }} {{ s[1] }} {{ s[-1] }} {{ s[1:3] }} {{ s[::-1] }} {{ s | upper }} {{ s | reverse }}",
             R"({"s": "aé日b"})"),
      "4 é b é日 b日éa AÉ日B b日éa");
  EXPECT_EQ(
      render(
          "{{ '  x  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '\\u3000a'.strip() }}|{{ 'a-b-c'.split('-', 1) }}|"
          "{{ ' a  b '.split() }}|{{ 'a\\nb\\r\\nc'.splitlines() }}|{{ ', '.join(['a', 'b']) }}|{{ 'abc'.find('c') }}"),
      "x|a|a|['a', 'b-c']|['a', 'b']|['a', 'b', 'c']|a, b|2");
  EXPECT_EQ(render("{{ 'abc'.replace('', '-') }} {{ 'aaa'.replace('a', 'b', 2) }} {{ \"they're bill's\".title() }} "
                   "{{ \"they're bill's\" | title }} {{ 'hELLO wORLD' | capitalize }}"),
            "-a-b-c- bba They'Re Bill'S They're Bill's Hello world");
  EXPECT_EQ(
      render("{{ 2.5 | round }} {{ 3.5 | round }} {{ 2.675 | round(2) }} {{ 3 | round }} {{ 2.1 | round(0, 'ceil') }}"),
      "2.0 4.0 2.67 3 3.0");
  EXPECT_EQ(render("{{ '42.23' | int }} {{ ' 7 ' | int }} {{ 'x' | int(5) }} {{ '1_000' | int }} {{ '2.5' | float }} "
                   "{{ none | float }} {{ -3 | abs }}"),
            "42 7 5 1000 2.5 0.0 3");
  EXPECT_EQ(
      render(
          "{{ ['b', 'A', 'c'] | sort }} {{ ['b', 'A'] | sort(case_sensitive=true) }} {{ [3, 1] | sort(reverse=true) }} "
          "{{ ['a', 'A', 'b'] | unique | list }} {{ [1, 5, 2] | max }} {{ [{'n': 2}, {'n': 1}] | sort(attribute='n') "
          "}}"),
      "['A', 'b', 'c'] ['A', 'b'] [3, 1] ['a', 'b'] 5 [{'n': 1}, {'n': 2}]");
  EXPECT_EQ(render("{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}"), "a\n  b\n\n  c|  a\n  b");
  EXPECT_EQ(render("{{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 2, 3] | reject('equalto', 2) | list }} "
                   "{{ ['a', 'b'] | map('upper') | join }} {{ [{'a': {'b': 1}}] | map(attribute='a.b') | list }}"),
            "[1, 3] [1, 3] AB [1]");
  EXPECT_EQ(
      render("{{ d.get('k') }} {{ d.get('z', 0) }} {{ d.items() | list }} {{ d.keys() | list }} {{ d | items | list }}",
             R"({"d": {"k": "v"}})"),
      "v 0 [('k', 'v')] ['k'] [('k', 'v')]");
  EXPECT_EQ(
      render("{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'b' > 'a' }} {{ [1, 2] < [1, 3] }} {{ 1 == 1.0 }} {{ true == 1 }}"),
      "True False True True True True");
  EXPECT_EQ(render("{{ x is string }} {{ 1 is integer }} {{ true is integer }} {{ true is number }} {{ 1.5 is float }} "
                   "{{ 4 is divisibleby 2 }} {{ none is not none }} {{ d is mapping }} {{ 'A' is upper }}",
                   R"({"x": "s", "d": {}})"),
            "True True False True True True False True True");
  EXPECT_EQ(render("{{ dict(a=1) }} {{ namespace({'a': 1}, b=2).b }} {{ range(5)[1:3] }} {{ d['items'] is callable }}",
                   R"({"d": {"items": 1}})"),
            "{'a': 1} 2 [1, 2] False");
}

TEST(JinjaLimits, StepsOutputAndCyclesAreBounded) {
  RenderLimits small;
  small.max_steps = 10000;
  small.max_output = 4096;
  EXPECT_CONTAINS(
      error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "{}", small),
      "more than 10000 steps");
  EXPECT_CONTAINS(error_of("{% for i in range(1000) %}xxxxxxxxxx{% endfor %}", "{}", small),
                  "output grew past 4096 bytes");
  EXPECT_CONTAINS(error_of("{{ 'x' * 100000 }}", "{}", small), "output limit");
  EXPECT_CONTAINS(error_of("{{ 'x' * 9223372036854775807 }}"), "too large");
  EXPECT_CONTAINS(
      error_of("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "{}",
               small),
      "output limit");
  EXPECT_CONTAINS(
      error_of("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}"),
      "lists and dicts nested deeper than 200");
  // A namespace holding itself: printing stops at the depth bound, and nothing leaks (ASan).
  EXPECT_CONTAINS(error_of("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"), "nesting deeper than");
  EXPECT_CONTAINS(error_of("{% set ns = namespace() %}{% set ns.l = [ns] %}{{ ns | tojson }}"),
                  "not JSON serializable");
}

}  // namespace
}  // namespace kern::chat::jinja
