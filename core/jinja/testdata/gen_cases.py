#!/usr/bin/env python3
"""Render small templates with jinja2 as apply_chat_template configures it
(hfenv.py).

Each case is a template and its variables; cases.json gets what jinja2
renders, or the error it raises, and the Go tests (cases_test.go) compare
the interpreter with it. Regenerate after changing CASES with

    /tmp/jinja-venv/bin/python core/jinja/testdata/gen_cases.py
"""

import json
import os
import sys

import datetime

import hfenv

HERE = os.path.dirname(os.path.abspath(__file__))

MSGS = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi <there> & 'you'"},
    {"role": "assistant", "content": "Hello!", "tool_calls": [{"function": {"name": "f", "arguments": {"b": 1, "a": [1, 2.5, None, True]}}}]},
]

# (name, template, variables)
CASES = [
    # whitespace control
    ("ws_trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter", {}),
    ("ws_lstrip", "  {% if true %}\n  x\n  {% endif %}\n  y", {}),
    ("ws_lstrip_var_not", "  {{ 1 }}\n  {% if true %}z{% endif %}", {}),
    ("ws_minus", "a  \n  {%- if true -%}  \n  b  \n  {%- endif -%}  \n  c", {}),
    ("ws_plus", "  {%+ if true +%}\nx\n  {%+ endif %}", {}),
    ("ws_var_minus", "a \n {{- 1 -}} \n b", {}),
    ("ws_comment", "a\n  {# note #}\nb {#- x -#} c\n{# y #}\nd", {}),
    ("ws_comment_plus", "a\n  {#+ note +#}\nb", {}),
    ("ws_trailing_newline", "x\n", {}),
    ("ws_two_trailing_newlines", "x\n\n", {}),
    ("ws_crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\n", {}),
    ("ws_after_var_line", "{{ 1 }}\n  {% if true %}x{% endif %}", {}),
    ("ws_raw", "{% raw %}{{ not }}{% x %}{% endraw %}|  {%- raw -%}  a  {%- endraw -%}  |", {}),
    ("ws_lstrip_after_block", "{% if true %}\n    {% if true %}deep{% endif %}\n{% endif %}", {}),
    ("ws_block_eats_one_newline", "{% set x = 1 %}\n\nA", {}),
    ("ws_lstrip_tab", "\t {% if true %}x{% endif %}", {}),
    ("ws_unicode_space_strip", "a\u3000{%- if true %}b{% endif %}", {}),
    # literals and printing
    ("lit_numbers", "{{ 1 }} {{ 1.5 }} {{ 1e3 }} {{ 1_000 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 2.5e-7 }} {{ 1e16 }} {{ 123456789.0 }} {{ 0.1 + 0.2 }}", {}),
    ("lit_strings", "{{ 'a\\nb' }}|{{ \"q'\" }}|{{ 'x' 'y' }}|{{ '\\u00e9\\x41\\t' }}|{{ '\\d' }}", {}),
    ("lit_print_containers", "{{ [1, 'a', none, true, 1.5] }} {{ {'k': 'v', 1: [2]} }} {{ (1,) }} {{ () }} {{ (1, 'b') }}", {}),
    ("lit_repr_quotes", "{{ [\"it's\", 'say \"hi\"', 'both \\'\"', 'nl\\n', '\\x00\\x7f\\u200b'] }}", {}),
    ("lit_none_bool", "{{ none }} {{ None }} {{ true }} {{ False }}", {}),
    ("lit_tuple_print", "{{ 1, 2 }}", {}),
    ("lit_nested_dict", "{{ {'a': {'b': [1, {'c': none}]}} }}", {}),
    # arithmetic
    ("math_basic", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 2 ** -2 }} {{ -2 ** 2 }} {{ 2 ** 3 ** 2 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}", {}),
    ("math_mixed", "{{ 1 + 2.0 }} {{ true + 1 }} {{ 3 * 'ab' }} {{ 'ab' * 2 }} {{ [1] * 3 }} {{ 'x' * -1 }} {{ 10 - 2.5 }}", {}),
    ("math_concat", "{{ 'a' ~ 1 ~ none ~ true ~ 1.0 ~ [1] ~ undefined_var }}", {}),
    ("concat_views", "{% set a = 'x' * 300 %}{% set b = a ~ 'y' %}{% set c = a ~ 'z' %}{% set d = b ~ 'w' %}{% set e = b + 'v' %}{{ b[-1] }}{{ c[-1] }}{{ d[-2:] }}{{ e[-2:] }}{{ b|length }}{{ c|length }}{{ a|length }}", {}),
    ("concat_loop", "{% set ns = namespace(s='', parts=[]) %}{% for i in range(300) %}{% set ns.parts = ns.parts + [ns.s] %}{% set ns.s = ns.s ~ i ~ ',' %}{% endfor %}{{ ns.s|length }} {{ ns.parts[100]|length }} {{ ns.parts[299][-8:] }} {{ ns.parts|map('length')|sum }}", {}),
    ("math_str_plus_int", "{{ 'a' + 1 }}", {}),
    ("math_int_plus_str", "{{ 1 + 'a' }}", {}),
    ("math_div_zero", "{{ 1 / 0 }}", {}),
    ("math_floordiv_zero", "{{ 1 // 0 }}", {}),
    ("math_undefined", "{{ x + 1 }}", {}),
    ("math_neg_str", "{{ -'a' }}", {}),
    ("math_list_plus", "{{ [1] + [2] }} {{ (1,) + (2,) }}", {}),
    ("math_list_plus_tuple", "{{ [1] + (2,) }}", {}),
    ("math_precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 * 3 ~ 4 }} {{ 1 ~ 2 + 3 }} {{ not 1 == 2 }} {{ -3|abs }} {{ 1 - -1 }}", {}),
    ("math_percent_format", "{{ '%s and %s' % ('a', 1) }} {{ '%d%%' % 50 }} {{ '%5.1f|%-4s|%03d|%x|%r' % (3.14159, 'a', 7, 255, 'q') }} {{ '%(a)s-%(b)d' % {'a': 'x', 'b': 2} }}", {}),
    ("math_percent_too_few", "{{ '%s %s' % ('a',) }}", {}),
    ("math_percent_too_many", "{{ '%s' % ('a', 'b') }}", {}),
    # comparison and logic
    ("cmp_chain", "{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ none == none }} {{ 1 != '1' }} {{ true == 1 }}", {}),
    ("cmp_unorderable", "{{ 1 < 'a' }}", {}),
    ("cmp_in", "{{ 'a' in 'cat' }} {{ 1 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }} {{ 'x' in undefined_thing }}", {}),
    ("cmp_in_bad", "{{ 1 in 'abc' }}", {}),
    ("cmp_in_none", "{{ 1 in none }}", {}),
    ("logic_values", "{{ 0 or 'x' }} {{ 1 and 'y' }} {{ '' and 'z' }} {{ none or none }} {{ [] or {} }} {{ not [] }}", {}),
    ("logic_condexpr", "{{ 'a' if true else 'b' }} {{ 'a' if false else 'b' }} [{{ 'a' if false }}] {{ 1 if 0 else 2 if 0 else 3 }}", {}),
    ("cmp_undefined_eq", "{{ x == y }} {{ x == none }} {{ x is defined }}", {}),
    ("cmp_undefined_lt", "{{ x < 1 }}", {}),
    ("cmp_list_tuple", "{{ [1] == (1,) }} {{ {'a': 1, 'b': 2} == {'b': 2, 'a': 1} }}", {}),
    # undefined
    ("undef_print", "[{{ x }}][{{ x is defined }}][{{ d.missing }}][{{ d['missing'] }}][{{ n.attr }}][{{ l[5] }}]", {"d": {}, "n": None, "l": [1]}),
    ("undef_attr_of_undef", "{{ x.y.z }}", {}),
    ("undef_call", "{{ x() }}", {}),
    ("undef_iter", "{% for a in x %}{{ a }}{% else %}empty{% endfor %}|{{ x|length }}|{{ x|list }}|{{ x|default('d') }}|{{ x|join(',') }}", {}),
    ("undef_tojson", "{{ x|tojson }}", {}),
    ("undef_item_of_none", "{{ n[0] }}|{{ n.a }}", {"n": None}),
    ("undef_message_in_error", "{{ d.missing.x }}", {"d": {}}),
    ("undef_list_elem", "{{ l[5].x }}", {"l": [1]}),
    ("undef_default_chain", "{{ d.missing|default('dflt') }} {{ ''|default('e', true) }} {{ none|default('n') }}", {"d": {}}),
    # attribute / item lookup
    ("lookup_dict_method_vs_key", "{{ d.items is defined }} {{ d['items'] }} {{ d.get('items') }} {{ d.x }} {{ d['_p'] }} {{ d._p }}", {"d": {"items": "key", "x": 1, "_p": 2}}),
    ("lookup_str_index", "{{ s[0] }}{{ s[-1] }}{{ s[1:3] }}{{ s[::-1] }}{{ s[::2] }}{{ s[-2:] }}{{ s[10:] }}|{{ s[100] }}|", {"s": "héllo"}),
    ("lookup_list_slices", "{{ l[1:] }} {{ l[:-1] }} {{ l[::-1] }} {{ l[-1] }} {{ l[1:10:2] }} {{ l[5:1:-2] }}", {"l": [0, 1, 2, 3, 4, 5, 6]}),
    ("lookup_dot_int", "{{ l.0 }} {{ l.1 }} {{ d.a.0 }}", {"l": [5, 6], "d": {"a": "xyz"}}),
    ("lookup_unsafe_append", "{{ l.append(1) }}", {"l": []}),
    ("lookup_unsafe_print", "[{{ l.append }}][{{ l.append is defined }}]", {"l": []}),
    ("lookup_dict_pop", "{{ d.pop('a') }}", {"d": {"a": 1}}),
    ("lookup_dict_update", "{{ d.update({'b': 2}) }}", {"d": {"a": 1}}),
    ("lookup_str_attr_missing", "[{{ s.nope }}]", {"s": "x"}),
    ("lookup_messages", "{% for m in messages %}{{ m.role }}:{{ m['content'] }}:{{ m.tool_calls is defined }};{% endfor %}", {"messages": MSGS}),
    ("lookup_bool_index", "{{ l[true] }}", {"l": ["a", "b"]}),
    ("lookup_float_index", "[{{ l[1.0] }}]", {"l": ["a", "b"]}),
    ("lookup_unhashable_key", "[{{ d[[1]] }}]", {"d": {}}),
    # statements: set, scoping
    ("set_scope_loop", "{% set x = 0 %}{% for i in range(3) %}{{ x }}{% set x = x + 1 %}{{ x }},{% endfor %}{{ x }}", {}),
    ("set_scope_if", "{% if true %}{% set y = 5 %}{% endif %}{{ y }}", {}),
    ("set_tuple", "{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set (c, d), e = [(3, 4), 5] %}{{ c }}{{ d }}{{ e }}{% set t = 1, 2 %}{{ t }}", {}),
    ("set_unpack_wrong", "{% set a, b = [1, 2, 3] %}", {}),
    ("set_block", "{% set x %}a {{ 1 + 1 }} b{% endset %}[{{ x }}]{% set y | upper %}low{% endset %}{{ y }}", {}),
    ("set_block_trim", "{% set x -%}\n  text  \n{%- endset %}[{{ x }}]", {}),
    ("set_namespace", "{% set ns = namespace(a=1, b='x') %}{% for i in range(3) %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}{{ ns.b }}{{ ns.c }}|{{ ns }}", {}),
    ("set_namespace_dict", "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}", {}),
    ("set_attr_non_namespace", "{% set d = {} %}{% set d.x = 1 %}", {}),
    ("set_override_var", "{% set bos_token = 'B' %}{{ bos_token }}", {"bos_token": "<s>"}),
    ("with_block", "{% set x = 1 %}{% with x = 2, y = x %}{{ x }}{{ y }}{% endwith %}{{ x }}", {}),
    ("block_tag", "a{% block b %}inner{{ 1 }}{% endblock %}c{% block d %}x{% endblock d %}", {}),
    ("filter_block", "{% filter upper %}hello {{ 'x' }}{% endfilter %}|{% filter replace('a', 'b') | upper %}aaa{% endfilter %}", {}),
    ("generation_tag", "{% generation %}gen {{ 1 }}{% endgeneration %}", {}),
    # loops
    ("loop_vars", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.depth }}{{ loop.previtem }}{{ loop.nextitem }};{% endfor %}", {}),
    ("loop_cycle_changed", "{% for x in [1, 1, 2] %}{{ loop.cycle('a', 'b') }}{{ loop.changed(x) }}{% endfor %}", {}),
    ("loop_filter", "{% for x in range(10) if x is odd %}{{ x }}{{ loop.length }}{% if loop.last %}!{% endif %}{% endfor %}", {}),
    ("loop_else", "{% for x in [] %}no{% else %}else{% endfor %}{% for x in [1] if false %}no{% else %}else2{% endfor %}", {}),
    ("loop_dict", "{% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %}{% for k, v in {'b': 1, 'a': 2}.items() %}{{ k }}={{ v }}{% endfor %}{% for k, v in {'b': 1}|items %}{{ k }}{{ v }}{% endfor %}", {}),
    ("loop_break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("loop_nested", "{% for a in [1, 2] %}{% for b in 'xy' %}{{ a }}{{ b }}{{ loop.index }}{% endfor %}{{ loop.index }}{% endfor %}", {}),
    ("loop_recursive", "{% for item in tree recursive %}[{{ item.n }}{{ loop.depth }}{% if item.c %}{{ loop(item.c) }}{% endif %}]{% endfor %}", {"tree": [{"n": "a", "c": [{"n": "b", "c": [{"n": "c"}]}]}, {"n": "d"}]}),
    ("loop_none", "{% for x in none %}{% endfor %}", {}),
    ("loop_int", "{% for x in 3 %}{% endfor %}", {}),
    ("loop_unpack", "{% for a, b in [[1, 2], [3, 4]] %}{{ a }}{{ b }}{% endfor %}{% for (a, b) in [(5, 6)] %}{{ a + b }}{% endfor %}", {}),
    ("loop_string_var_after", "{% for x in [1] %}{% set inner = 1 %}{% endfor %}[{{ inner }}]", {}),
    ("loop_outer_loop", "{% for a in [1, 2] %}{% set outer = loop %}{% for b in [1] %}{{ outer.index }}{% endfor %}{% endfor %}", {}),
    ("loop_range", "{{ range(5)|list }} {{ range(2, 8, 3)|list }} {{ range(5, 0, -2)|list }} {{ range(3) }} {{ range(3)|length }}", {}),
    ("loop_range_big", "{{ range(1000000)|length }}", {}),
    ("loop_range_zero_step", "{{ range(1, 2, 0) }}", {}),
    # macros
    ("macro_basic", "{% macro m(a, b='B', c=none) %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ m(1) }}|{{ m(1, 2) }}|{{ m(1, c=3) }}|{{ m(a=4) }}", {}),
    ("macro_default_uses_arg", "{% macro m(a, b=a) %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}", {}),
    ("macro_varargs_kwargs", "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }}", {}),
    ("macro_too_many", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", {}),
    ("macro_unknown_kw", "{% macro m(a) %}{% endmacro %}{{ m(b=1) }}", {}),
    ("macro_missing_arg", "{% macro m(a) %}[{{ a }}]{% endmacro %}{{ m() }}", {}),
    ("macro_missing_arg_used", "{% macro m(a) %}{{ a.x }}{% endmacro %}{{ m() }}", {}),
    ("macro_caller", "{% macro m(x) %}<{{ caller(x * 2) }}>{% endmacro %}{% call(y) m(3) %}got {{ y }}{% endcall %}", {}),
    ("macro_caller_none", "{% macro m() %}<{{ caller() }}>{% endmacro %}{% call m() %}body{% endcall %}", {}),
    ("macro_closure", "{% set x = 1 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 2 %}{{ m() }}", {}),
    ("macro_set_local", "{% set x = 1 %}{% macro m() %}{% set x = 2 %}{{ x }}{% endmacro %}{{ m() }}{{ x }}", {}),
    ("macro_recursive", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n }}*{{ fact(n - 1) }}{% endif %}{% endmacro %}{{ fact(5) }}", {}),
    ("macro_returns_str", "{% macro m() %}<b>{% endmacro %}{{ m() + '&' }}|{{ m()|length }}|{{ m() is string }}", {}),
    ("macro_attrs", "{% macro m(a, b) %}{{ varargs }}{% endmacro %}{{ m.name }} {{ m.arguments }} {{ m.catch_varargs }} {{ m.catch_kwargs }}", {}),
    ("macro_before_def", "{{ m() }}{% macro m() %}x{% endmacro %}", {}),
    ("macro_in_loop", "{% for i in range(2) %}{% macro m() %}{{ i }}{% endmacro %}{{ m() }}{% endfor %}", {}),
    ("macro_json_schema", "{% macro render(s, indent=0) %}{% for k, v in s.items() %}{{ ' ' * indent }}{{ k }}:{% if v is mapping %}\n{{ render(v, indent + 2) }}{% else %} {{ v }}\n{% endif %}{% endfor %}{% endmacro %}{{ render({'a': {'b': {'c': 1}}, 'd': 2}) }}", {}),
    # filters
    ("f_strings", "{{ '  x  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ 'hello world'|title }}|{{ 'hELLO'|capitalize }}|{{ 'a'|upper }}|{{ 'B'|lower }}|{{ 'aXbX'|replace('X', '-') }}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ 'abc'|reverse }}|{{ 'x'|center(7) }}|{{ 'ab'|center(7, ) }}|{{ \"it's o'neil\"|title }}", {}),
    ("f_length", "{{ 'héllo'|length }} {{ [1, 2]|count }} {{ {'a': 1}|length }} {{ none|length if false else 0 }}", {}),
    ("f_length_int", "{{ 5|length }}", {}),
    ("f_first_last", "{{ [1, 2, 3]|first }} {{ [1, 2, 3]|last }} {{ 'abc'|first }} {{ 'abc'|last }} [{{ []|first }}] {{ {'k': 1}|first }}", {}),
    ("f_join", "{{ [1, 2, 3]|join }} {{ ['a', 'b']|join(', ') }} {{ [{'n': 'x'}, {'n': 'y'}]|join('-', attribute='n') }} {{ 'abc'|join('.') }}", {}),
    ("f_list", "{{ 'ab'|list }} {{ {'a': 1}|list }} {{ (1, 2)|list }}", {}),
    ("f_map_select", "{{ [{'a': 1}, {'a': 2}]|map(attribute='a')|list }} {{ ['a', 'B']|map('upper')|list }} {{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('even')|list }} {{ [0, 1, '', 'x']|select|list }} {{ [{'t': 'a'}, {'t': 'b'}, {}]|selectattr('t', 'equalto', 'a')|list }} {{ [{'t': 'a'}, {'x': 1}]|selectattr('t', 'defined')|list }} {{ [{'t': 1}, {'t': 0}]|rejectattr('t')|list }}", {}),
    ("f_map_default", "{{ [{'a': 1}, {}]|map(attribute='a', default='D')|list }} {{ [[1, 2], [3]]|map('length')|list }} {{ [{'a': {'b': 7}}]|map(attribute='a.b')|list }}", {}),
    ("f_select_tests", "{{ [1, 'a', none, 2.5, [1]]|select('string')|list }} {{ [1, 'a', none]|select('none')|list }} {{ [1, 5, 10]|select('gt', 4)|list }} {{ [1, 5, 10]|select('divisibleby', 5)|list }} {{ ['a', 'b']|select('in', ['b', 'c'])|list }} {{ [1, 2]|select('==', 2)|list }}", {}),
    ("f_generator_print", "{{ [1]|map('string')|list|length }} {{ [1, 2]|select|first }}", {}),
    ("f_generator_tojson", "{{ [1]|map('string')|tojson }}", {}),
    ("f_generator_length", "{{ [1]|select|length }}", {}),
    ("f_default", "{{ x|default('d') }} {{ x|d('d2') }} {{ none|default('n') }} {{ 0|default(5, true) }} {{ x|default }}|", {}),
    ("f_dictsort", "{{ {'b': 1, 'A': 3, 'a': 2}|dictsort }} {{ {'b': 1, 'A': 3, 'a': 2}|dictsort(true) }} {{ {'b': 2, 'a': 1}|dictsort(by='value', reverse=true) }}", {}),
    ("f_sort", "{{ [3, 1, 2]|sort }} {{ ['b', 'A', 'c']|sort }} {{ ['b', 'A', 'c']|sort(case_sensitive=true) }} {{ [3, 1]|sort(reverse=true) }} {{ [{'n': 2, 'm': 'b'}, {'n': 1, 'm': 'a'}, {'n': 2, 'm': 'a'}]|sort(attribute='n,m') }}", {}),
    ("f_sort_mixed", "{{ [1, 'a']|sort }}", {}),
    ("f_unique", "{{ ['a', 'A', 'b', 'a']|unique|list }} {{ ['a', 'A']|unique(case_sensitive=true)|list }} {{ [{'x': 1}, {'x': 1}, {'x': 2}]|unique(attribute='x')|list }}", {}),
    ("f_minmax_sum", "{{ [3, 1, 2]|min }} {{ [3, 1, 2]|max }} {{ ['b', 'A']|min }} {{ [1, 2.5]|sum }} {{ [{'v': 1}, {'v': 2}]|sum(attribute='v') }} {{ [1, 2]|sum(start=10) }} [{{ []|max }}]", {}),
    ("f_numbers", "{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ '0x1f'|int }} {{ '0x1f'|int(base=16) }} {{ 3.9|int }} {{ '3.5'|float }} {{ 'x'|float }} {{ 2|float }} {{ -3|abs }} {{ -2.5|abs }} {{ ' 12 '|int }} {{ '1_000'|int }} {{ true|int }}", {}),
    ("f_round", "{{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 7|round }} {{ 1.55|round(1) }} {{ 42.55|round(1, 'floor') }} {{ 42.51|round(0, 'ceil') }} {{ -0.5|round }}", {}),
    ("f_indent", "[{{ 'a\\nb\\n\\nc'|indent }}][{{ 'a\\nb'|indent(2, true) }}][{{ 'a\\n\\nb'|indent(2, blank=true) }}][{{ ''|indent }}][{{ 'x\\n'|indent(1) }}][{{ 'a\\nb'|indent('> ') }}]", {}),
    ("f_string", "{{ 1|string }} {{ none|string }} {{ [1]|string }} {{ (1|string) is string }}", {}),
    ("f_safe_escape", "{{ '<a>'|safe }} {{ '<a>'|escape }} {{ '<a>'|e }} {{ ('<'|safe) + '<' }} {{ '<' + ('<'|safe) }} {{ ('<'|safe) ~ '<' }} {{ ('%s'|safe) % '<' }} {{ ('<'|safe)|escape }} {{ ['<'|safe]|join }}", {}),
    ("f_batch_slice", "{{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ [1, 2, 3]|batch(2, 'x')|list }} {{ [1, 2, 3, 4, 5]|slice(2)|list }} {{ [1, 2, 3, 4]|slice(3, 0)|list }}", {}),
    ("f_truncate_wordcount", "{{ 'foo bar baz qux'|truncate(9) }}|{{ 'foo bar baz qux'|truncate(9, true) }}|{{ 'foo bar baz qux'|truncate(11) }}|{{ 'foo bar baz qux'|truncate(11, false, '...', 0) }}|{{ 'a b_c, d!'|wordcount }}", {}),
    ("f_format", "{{ '%s-%s'|format('a', 2) }} {{ '%(x)s'|format(x=1) }}", {}),
    ("f_attr", "{{ d|attr('items') is defined }} {{ d|attr('x') }}|", {"d": {"x": 1}}),
    ("f_items_nonmapping", "{{ [1]|items|list }}", {}),
    ("f_unknown_filter_soft", "{% if false %}{{ x|nosuchfilter }}{% endif %}ok", {}),
    ("f_unknown_filter_soft_used", "{% if true %}{{ x|nosuchfilter }}{% endif %}", {}),
    ("f_unknown_filter", "{{ x|nosuchfilter }}", {}),
    ("f_unknown_test", "{{ x is nosuchtest }}", {}),
    ("f_unknown_filter_in_loop_in_if", "{% if false %}{% for x in [] %}{{ x|nosuch }}{% endfor %}{% endif %}", {}),
    ("f_reverse_list", "{{ [1, 2]|reverse|list }} {{ [1, 2]|reverse|join }}", {}),
    # tojson
    ("json_basic", "{{ {'a': [1, 2.5, none, true, 'é\"\\\\\\n\\t\\u0001'], 'b': {}} | tojson }}", {}),
    ("json_indent", "{{ {'a': [1, {'b': []}], 'c': 'x'} | tojson(indent=2) }}|{{ [1] | tojson(indent=0) }}|{{ {'a': 1} | tojson(indent='\\t') }}", {}),
    ("json_options", "{{ {'b': 1, 'a': 'é'} | tojson(sort_keys=true, ensure_ascii=true) }} {{ {'a': [1, 2]} | tojson(separators=(',', ':')) }} {{ '😀'|tojson(ensure_ascii=true) }}", {}),
    ("json_keys", "{{ {1: 'a', none: 'b', true: 'c', 1.5: 'd'} | tojson }}", {}),
    ("json_messages", "{{ messages | tojson }}", {"messages": MSGS}),
    ("json_tuple_namespace", "{{ (1, 2)|tojson }}", {}),
    ("json_namespace", "{{ namespace(a=1)|tojson }}", {}),
    ("json_float_values", "{{ [1.0, 0.1, 1e20, 1e-7, 100.0, -0.0] | tojson }}", {}),
    ("json_markup", "{{ ('<'|safe) | tojson }}", {}),
    # tests
    ("tests_types", "{{ 1 is number }} {{ 1.0 is float }} {{ 1 is integer }} {{ true is integer }} {{ true is boolean }} {{ 'a' is string }} {{ [] is sequence }} {{ {} is mapping }} {{ [] is mapping }} {{ 'x' is iterable }} {{ 1 is iterable }} {{ none is none }} {{ x is undefined }} {{ range is callable }} {{ 'a' is callable }} {{ {} is sequence }} {{ x is sequence }}", {}),
    ("tests_values", "{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 1 is eq 1 }} {{ 2 is gt 1 }} {{ 1 is lt(2) }} {{ 'a' is in 'abc' }} {{ true is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }} {{ 1 is sameas 1 }} {{ none is sameas none }} {{ 'upper' is filter }} {{ 'odd' is test }} {{ 'nope' is filter }}", {}),
    ("tests_not", "{{ x is not defined }} {{ 1 is not string }} {{ not 1 is string }}", {}),
    ("tests_escaped", "{{ ('a'|safe) is escaped }} {{ 'a' is escaped }}", {}),
    # string methods
    ("m_strip_split", "{{ ' a b '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ ' a '.lstrip() }}|{{ ' a '.rstrip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a,b,c'.split(',', 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ ' a b c '.split(none, 1) }}|{{ ' a b c '.rsplit(none, 1) }}|{{ 'a\\nb\\r\\nc'.splitlines() }}", {}),
    ("m_affix", "{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'abc'.startswith('b', 1) }} {{ 'abc'.removeprefix('a') }} {{ 'abc'.removesuffix('c') }}", {}),
    ("m_find", "{{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.find('z') }} {{ 'héllo'.find('l') }} {{ 'hello'.index('e') }} {{ 'hello'.count('l') }} {{ 'hello'.find('l', 3) }}", {}),
    ("m_index_missing", "{{ 'hello'.index('z') }}", {}),
    ("m_case", "{{ 'hello World'.upper() }} {{ 'Hello'.lower() }} {{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ 'Hi'.swapcase() }} {{ 'abc'.isalpha() }} {{ '12'.isdigit() }} {{ ' '.isspace() }} {{ 'ab'.islower() }} {{ 'AB'.isupper() }} {{ 'a1'.isalnum() }}", {}),
    ("m_format", "{{ '{}-{}'.format('a', 'b') }} {{ '{0}{1}{0}'.format('x', 'y') }} {{ '{name}!'.format(name='n') }} {{ '{:>5}|{:<5}|{:^5}|{:*^7}'.format('a', 'b', 'c', 'd') }} {{ '{:05d}|{:.2f}|{:,}|{:x}|{:+d}'.format(42, 3.14159, 1234567, 255, 5) }} {{ '{{}}{}'.format(1) }} {{ '{0[a]}{1.real}'.format({'a': 'A'}, 1) }} {{ '{!r}'.format('q') }}", {}),
    ("m_format_mix", "{{ '{}{0}'.format(1) }}", {}),
    ("m_join_replace", "{{ ', '.join(['a', 'b']) }} {{ 'a-b'.replace('-', '+') }} {{ 'aaa'.replace('a', 'b', 1) }} {{ 'ab'.replace('', '.') }} {{ '-'.join('xyz') }}", {}),
    ("m_join_nonstr", "{{ ', '.join([1, 2]) }}", {}),
    ("m_pad", "{{ 'a'.center(5) }}|{{ 'a'.ljust(3, '*') }}|{{ 'a'.rjust(3) }}|{{ '7'.zfill(3) }}|{{ '-7'.zfill(4) }}|{{ 'ab'.center(5, '-') }}", {}),
    ("m_partition", "{{ 'a=b=c'.partition('=') }} {{ 'a=b=c'.rpartition('=') }} {{ 'abc'.partition('x') }}", {}),
    ("m_dict", "{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 5) }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} {{ d.items() }} {{ d.keys() }} {{ d|length }}", {"d": {"a": 1, "b": [2]}}),
    ("m_list", "{{ l.index(2) }} {{ l.count(1) }} {{ l.copy() }}", {"l": [1, 2, 1]}),
    # globals
    ("g_dict", "{{ dict(a=1, b=2) }} {{ dict([('x', 1)]) }} {{ dict({'a': 1}, b=2) }}", {}),
    ("g_raise", "{{ raise_exception('Bad role: ' ~ 'x') }}", {}),
    ("g_strftime", "{{ strftime_now('%Y-%m-%d %H:%M:%S') }}|{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%B %d, %Y') }}|{{ strftime_now('%A %a %j %p %I %y %e') }}|{{ strftime_now('%-d/%-m') }}", {}),
    ("g_namespace_repr", "{{ namespace() }}", {}),
    ("g_calling_non_callable", "{{ 'a'() }}", {}),
    # syntax
    ("syn_unclosed_if", "{% if true %}x", {}),
    ("syn_unknown_tag", "{% frobnicate %}", {}),
    ("syn_break_outside", "{% break %}", {}),
    ("syn_bad_expr", "{{ 1 + }}", {}),
    ("syn_unbalanced", "{{ (1 }}", {}),
    ("syn_endfor_extra", "{% for x in [] %}{% endfor x %}", {}),
    ("syn_set_const", "{% set true = 1 %}", {}),
    ("syn_dict_in_var", "{{ {'a': {'b': 1}} }}", {}),
    ("syn_trailing_commas", "{{ [1, 2,] }} {{ {'a': 1,} }} {{ (1, 2,) }} {{ range(3,)|list }}", {}),
    ("syn_is_chain", "{{ 1 is number is number }}", {}),
    ("syn_filter_on_neg", "{{ -1|abs }} {{ -(1|abs) }}", {}),
    ("syn_test_arg_noparen", "{{ 'b' is in ['a', 'b'] }} {{ 3 is divisibleby 3 and true }}", {}),
    ("syn_call_kwargs_spread", "{% macro m(a, b) %}{{ a }}{{ b }}{% endmacro %}{{ m(*[1, 2]) }}{{ m(**{'a': 3, 'b': 4}) }}", {}),
    ("syn_comment_unclosed", "{# oops", {}),
    ("syn_include", "{% include 'x' %}", {}),
    ("syn_extends", "{% extends 'x' %}", {}),
    ("syn_import", "{% import 'x' as y %}", {}),
    ("syn_do_tag", "{% do x %}", {}),
    ("syn_elif_chain", "{% if false %}a{% elif none %}b{% elif 1 %}c{% else %}d{% endif %}", {}),
    ("syn_if_colon", "{% if true: %}x{% endif %}", {}),
    ("syn_print_keyword_names", "{% set in_x = 1 %}{{ in_x }}", {}),
    ("syn_string_escape_bad", "{{ '\\x4' }}", {}),
]


def main():
    env = hfenv.environment(datetime.datetime(2025, 3, 14, 9, 26, 53))
    out = []
    for name, src, ctx in CASES:
        case = {"name": name, "template": src, "vars": ctx}
        try:
            case["output"] = env.from_string(src).render(**ctx)
        except Exception as e:
            case["error"] = "%s: %s" % (type(e).__name__, e)
            if type(e).__name__ == "TemplateError":
                case["raised"] = str(e)
        out.append(case)
    names = [c["name"] for c in out]
    assert len(names) == len(set(names)), "duplicate case names"
    with open(os.path.join(HERE, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("%d cases, %d errors" % (len(out), sum("error" in c for c in out)), file=sys.stderr)


if __name__ == "__main__":
    main()
