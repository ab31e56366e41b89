// The Jinja interpreter through its public interface (jinja_parse / jinja_render): each statement, expression,
// filter, test and method kind against the text jinja2 renders for it (with transformers' settings:
// trim_blocks, lstrip_blocks, loop controls), the errors jinja2 raises, and every resource limit.
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jinja/jinja.h"
#include "test_util.h"

// Renders src with vars (JSON text or NULL) under lim; returns the text (owned) or NULL with err filled.
static char *render(const char *src, const char *vars, const jinja_limits *lim, tc_err *err) {
    jinja_template *t = NULL;
    json_t *v = vars ? json_loads(vars, 0, NULL) : NULL;
    char *out = NULL;
    size_t n;
    if (jinja_parse(src, strlen(src), lim, &t, err) == 0) jinja_render(t, v, lim, 1735732800, &out, &n, err);
    jinja_free(t);
    json_decref(v);
    return out;
}

#define EXPECT(src, vars, want)                                                                              \
    do {                                                                                                     \
        tc_err e_ = {0};                                                                                     \
        char *got_ = render(src, vars, NULL, &e_);                                                           \
        CHECK_MSG(got_ && !strcmp(got_, want), "%s\n  want [%s]\n  got  [%s] %s", src, want,                 \
                  got_ ? got_ : "(error)", got_ ? "" : e_.msg);                                              \
        free(got_);                                                                                          \
    } while (0)

#define EXPECT_ERR(src, vars, lim, needle)                                                                   \
    do {                                                                                                     \
        tc_err e_ = {0};                                                                                     \
        char *got_ = render(src, vars, lim, &e_);                                                            \
        CHECK_MSG(!got_ && strstr(e_.msg, needle), "%s: want an error with '%s', got [%s] / [%s]", src,      \
                  needle, got_ ? got_ : "(error)", e_.msg);                                                  \
        free(got_);                                                                                          \
    } while (0)

static void test_whitespace(void) {
    EXPECT("a  {%- if true -%}  b  {%- endif -%}  c", NULL, "abc");
    EXPECT("{% if true %}\nx\n{% endif %}\ny", NULL, "x\ny");          // trim_blocks
    EXPECT("  {% if true %}x{% endif %}", NULL, "x");                  // lstrip_blocks
    EXPECT("a  {{ 1 }}  b", NULL, "a  1  b");                          // no lstrip for {{
    EXPECT("  {%+ if true %}x{% endif %}", NULL, "  x");               // + keeps the indentation
    EXPECT("{# note #}\nz", NULL, "z");                                // comments trim too
    EXPECT("x\r\ny\n", NULL, "x\ny");                                  // newlines normalised, last dropped
    EXPECT("{% raw %}{{ x }}{% endraw %}", NULL, "{{ x }}");
    EXPECT("{{ {'a': 1}}}", NULL, "{'a': 1}");
}

static void test_statements(void) {
    EXPECT("{% for x in [1,2,3] %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}", NULL,
           "11,22,33");
    EXPECT("{% for x in [] %}a{% else %}empty{% endfor %}", NULL, "empty");
    EXPECT("{% for x in [1,2,3,4] if x is even %}{{ x }}/{{ loop.length }} {% endfor %}", NULL, "2/2 4/2 ");
    EXPECT("{% for x in range(10) %}{% if x == 3 %}{% break %}{% endif %}{% if x == 1 %}{% continue %}{% endif %}"
           "{{ x }}{% endfor %}", NULL, "02");
    EXPECT("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", "{\"d\": {\"b\": 1, \"a\": 2}}", "b=1;a=2;");
    EXPECT("{% for x in 'ab' %}{{ loop.revindex0 }}{{ loop.previtem is defined }}{% endfor %}", NULL, "1False0True");
    EXPECT("{% for x in [1,2] %}{% if loop.first %}{% set y = 5 %}{% endif %}[{{ y }}]{% endfor %}", NULL, "[5][]");
    EXPECT("{% set y = 1 %}{% for x in [1] %}{% set y = 2 %}{% endfor %}{{ y }}", NULL, "1");
    EXPECT("{% set ns = namespace(n=0) %}{% for x in [1,2,3] %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}",
           NULL, "6");
    EXPECT("{% set a, b = [1, 2] %}{{ b }}{{ a }}", NULL, "21");
    EXPECT("{% set t %} Block {{ 1 + 1 }} {% endset %}[{{ t }}]", NULL, "[ Block 2 ]");
    EXPECT("{% set t | upper %}x{% endset %}{{ t }}", NULL, "X");
    EXPECT("{% macro m(a, b='d') %}{{ a }}-{{ b }}{% endmacro %}{{ m(1) }} {{ m(1, b=2) }} {{ m('x', 'y') }}", NULL,
           "1-d 1-2 x-y");
    EXPECT("{% macro m() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, k=2) }}", NULL, "[1]{'k': 2}");
    EXPECT("{% macro w() %}<{{ caller() }}>{% endmacro %}{% call w() %}in{% endcall %}", NULL, "<in>");
    EXPECT("{% filter upper %}ab{{ 'c' }}{% endfilter %}", NULL, "ABC");
    EXPECT("{% generation %}gen{% endgeneration %}", NULL, "gen");
    EXPECT("{% if false %}a{% elif 0 %}b{% elif 'x' %}c{% else %}d{% endif %}", NULL, "c");
}

static void test_expressions(void) {
    EXPECT("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }}", NULL, "7 9 64 4");
    EXPECT("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 4 / 2 }} {{ 0.1 + 0.2 }}", NULL,
           "3 -4 2 3.5 2.0 0.30000000000000004");
    EXPECT("{{ 1e20 }} {{ 1.5e-7 }} {{ 123456789.0 }} {{ 'a' ~ 1 ~ none }}", NULL, "1e+20 1.5e-07 123456789.0 a1None");
    EXPECT("{{ 'a' 'b' }}{{ \"\\n\\t\\u00e9\" }}", NULL, "ab\n\té");
    EXPECT("{{ [1, 'a', none, true, 1.5, {'k': [2]}] }} {{ (1,) }}", NULL, "[1, 'a', None, True, 1.5, {'k': [2]}] (1,)");
    EXPECT("{{ \"it's\" }} {{ [\"it's\", 'say \"x\"', 'a\\\\b\\n'] }}", NULL,
           "it's [\"it's\", 'say \"x\"', 'a\\\\b\\n']");
    EXPECT("{{ 'yes' if 1 in [1, 2] else 'no' }}{{ 'b' not in 'abc' }}{{ 'k' in {'k': 1} }}", NULL, "yesFalseTrue");
    EXPECT("{{ 1 < 2 and 2 <= 2 and 3 > 2 >= 2 and 1 != 2 and 1 == 1.0 }}{{ 0 or '' or 'z' }}{{ [] and 1 }}", NULL,
           "Truez[]");
    EXPECT("{{ 1 < 2 < 1 }}{{ 3 > 2 >= 2 }}", NULL, "FalseTrue");
    EXPECT("{{ s[1:3] }} {{ s[-2:] }} {{ s[::-1] }} {{ s[1] }} {{ [1,2,3,4][::2] }}", "{\"s\": \"h\\u00e9llo\"}",
           "él lo olléh é [1, 3]");
    EXPECT("{{ m.content }}{{ m['role'] }}{{ m.missing }}{{ m.missing is defined }}{{ l.0 }}",
           "{\"m\": {\"role\": \"user\", \"content\": \"hi\"}, \"l\": [7]}", "hiuserFalse7");
    EXPECT("{{ x }}{{ x is defined }}{{ x is undefined }}{% for a in x %}1{% endfor %}{{ x | length }}", NULL,
           "FalseTrue0");
    EXPECT("{{ none is none }}{{ 1 is number }}{{ 's' is string }}{{ {} is mapping }}{{ [] is iterable }}"
           "{{ true is boolean }}{{ 3 is odd }}{{ 6 is divisibleby 3 }}{{ 'a' is equalto 'a' }}{{ 1 is not sameas true }}",
           NULL, "TrueTrueTrueTrueTrueTrueTrueTrueTrueTrue");
    EXPECT("{{ 'ab' * 3 }}{{ [0] * 2 }}{{ [1] + [2] }}", NULL, "ababab[0, 0][1, 2]");
    EXPECT("{{ '%s-%d' % ('a', 3) }}{{ '{}+{x}'.format(1, x=2) }}{{ '%s!' | format('hi') }}", NULL, "a-31+2hi!");
    EXPECT("{{ 'x'|safe + '<&>\"' }}|{{ '<' ~ 'x'|safe }}", NULL, "x&lt;&amp;&gt;&#34;|<x");
}

static void test_filters(void) {
    const char *v = "{\"t\": [{\"name\": \"b\", \"on\": true}, {\"name\": \"a\", \"on\": false}], \"d\": {\"b\": 2, \"a\": 1}}";
    EXPECT("{{ t | tojson }}", v, "[{\"name\": \"b\", \"on\": true}, {\"name\": \"a\", \"on\": false}]");
    EXPECT("{{ d | tojson(indent=2) }}", v, "{\n  \"b\": 2,\n  \"a\": 1\n}");
    EXPECT("{{ d | tojson(separators=(',', ':'), sort_keys=true) }}", v, "{\"a\":1,\"b\":2}");
    EXPECT("{{ '\\u00e9\"\\n' | tojson }}{{ '\\u00e9' | tojson(true) }}", NULL, "\"é\\\"\\n\"\"\\u00e9\"");
    EXPECT("{{ t | map(attribute='name') | join(', ') }}|{{ t | selectattr('on') | map(attribute='name') | list }}"
           "|{{ t | rejectattr('on') | list | length }}|{{ t | selectattr('name', 'equalto', 'a') | first }}",
           v, "b, a|['b']|1|{'name': 'a', 'on': False}");
    EXPECT("{{ [1, 2, 3, 4] | select('odd') | list }}{{ ['a', 'B'] | map('upper') | list }}{{ x | select | list }}",
           NULL, "[1, 3]['A', 'B'][]");
    EXPECT("{% if [] | select %}generator is true{% endif %}", NULL, "generator is true");
    EXPECT("{{ x | default('d') }}{{ '' | default('e', true) }}{{ 0 | d(1) }}", NULL, "de0");
    EXPECT("[{{ '  a b  ' | trim }}] {{ 'xxaxx' | trim('x') }} {{ 'héllo' | length }} {{ [3,1] | first }}"
           "{{ [3,1] | last }}", NULL, "[a b] a 5 31");
    EXPECT("{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n' | indent }}", NULL,
           "a\n  b\n\n  c|  a\n  b|a\n");
    EXPECT("{{ '3' | int + 1 }}{{ '2.7' | int }}{{ 'x' | int }}{{ 2 | float }}{{ 'a' | string }}{{ 1 | string }}",
           NULL, "4202.0a1");
    EXPECT("{{ 'hello WORLD' | capitalize }} {{ 'hello world' | title }} {{ 'Ab' | upper }}{{ 'Ab' | lower }}",
           NULL, "Hello world Hello World ABab");
    EXPECT("{{ 'aXbXc' | replace('X', '-') }} {{ ['a', 'A', 'b', 'a'] | unique | list }} {{ d | dictsort }}", v,
           "a-b-c ['a', 'b'] [('a', 1), ('b', 2)]");
    EXPECT("{{ d | items | list }}{{ [3, 1, 2] | sort }}{{ [1, 2] | reverse | list }}{{ [1, 2] | sum }}", v,
           "[('b', 2), ('a', 1)][1, 2, 3][2, 1]3");
    EXPECT("{{ [3, 1] | max }}{{ [3, 1] | min }}{{ -3 | abs }}{{ 2.567 | round(2) }}{{ '<a>' | e }}", NULL,
           "3132.57&lt;a&gt;");
}

static void test_methods(void) {
    EXPECT("{{ '  x  '.strip() }}|{{ 'xay'.lstrip('x') }}|{{ 'a b  c'.split() }}|{{ 'a,b,,c'.split(',') }}"
           "|{{ 'a,b,c'.split(',', 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}", NULL,
           "x|ay|['a', 'b', 'c']|['a', 'b', '', 'c']|['a', 'b,c']|['a,b', 'c']");
    EXPECT("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}{{ 'aaa'.replace('a', 'b', 2) }}"
           "{{ 'abc'.upper() }}{{ 'a-b'.title() }}{{ 'abcb'.find('b') }}{{ 'abcb'.rfind('b') }}{{ 'abab'.count('ab') }}",
           NULL, "TrueTruebbaABCA-B132");
    EXPECT("{{ d.get('a') }}{{ d.get('z', 'no') }}{{ d.get('z') }}{{ d.keys() | list }}{{ d.values() | list }}",
           "{\"d\": {\"a\": 1}}", "1noNone['a'][1]");
    EXPECT("{{ '-'.join(['a', 'b']) }}{{ 'x\\ny'.splitlines() }}{{ 'ab'.removeprefix('a') }}{{ '12'.isdigit() }}",
           NULL, "a-b['x', 'y']bTrue");
    EXPECT("{% for x in [1,2,3] %}{{ loop.cycle('a', 'b') }}{% endfor %}", NULL, "aba");
    EXPECT("{{ strftime_now('%Y-%m-%d') }}", NULL, "2025-01-01");
}

static void test_errors(void) {
    EXPECT_ERR("{{ raise_exception('Only user and assistant roles!') }}", NULL, NULL, "Only user and assistant roles!");
    EXPECT_ERR("{{ x.y }}", NULL, NULL, "'x' is undefined");
    EXPECT_ERR("{{ 'a' + 1 }}", NULL, NULL, "unsupported operand");
    EXPECT_ERR("{{ x + 'a' }}", NULL, NULL, "undefined");
    EXPECT_ERR("{{ [1].append(2) }}", NULL, NULL, "unsafe");
    EXPECT_ERR("{{ 1 / 0 }}", NULL, NULL, "division by zero");
    EXPECT_ERR("{{ x | nosuchfilter }}", NULL, NULL, "no filter named");
    EXPECT_ERR("{% if x %}", NULL, NULL, "endif");
    EXPECT_ERR("{% for %}", NULL, NULL, "syntax error");
    EXPECT_ERR("{{ 'abc }}", NULL, NULL, "unterminated string");
    EXPECT_ERR("{% include 'x' %}", NULL, NULL, "unsupported tag");
    EXPECT_ERR("{{ [1] | select | tojson }}", NULL, NULL, "not JSON serializable");
    EXPECT_ERR("{{ [1] | select | length }}", NULL, NULL, "has no len");
}

static void test_limits(void) {
    jinja_limits small = {.max_output = 1000, .max_steps = 100000, .max_depth = 50, .max_memory = 8u << 20,
                          .max_template = 4096};
    EXPECT_ERR("{% set r = range(1000) %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}", NULL, &small,
               "steps");
    EXPECT_ERR("{% for i in range(10000000) %}{% endfor %}", NULL, &small, "range too big");
    EXPECT_ERR("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL, &small, "too deep");
    EXPECT_ERR("{{ 'x' * 100000 }}", NULL, &small, "too long");
    EXPECT_ERR("{% for i in range(2000) %}xx{% endfor %}", NULL, &small, "output exceeds");
    EXPECT_ERR("{% set ns = namespace(s='x') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s[:200000] %}"
               "{% endfor %}", NULL, &small, "bytes");
    char deep[2100];
    memcpy(deep, "{{ ", 3);
    memset(deep + 3, '(', 1000);
    deep[1003] = '1';
    memset(deep + 1004, ')', 1000);
    strcpy(deep + 2004, " }}");
    EXPECT_ERR(deep, NULL, &small, "nested too deeply");
    char big[5000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    EXPECT_ERR(big, NULL, &small, "limit");
}

// Parsed once, a 20-turn conversation renders in well under a millisecond.
static void test_speed(void) {
    const char *src = "{% for m in messages %}{% if loop.first and m.role == 'system' %}{{ bos_token }}{% endif %}"
                      "<|im_start|>{{ m.role }}\n{{ m.content | trim }}<|im_end|>\n{% endfor %}"
                      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
    json_t *msgs = json_array();
    for (int i = 0; i < 20; i++)
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", i % 2 ? "assistant" : "user", "content",
                                              "Some message text of a typical length, a sentence or two long."));
    json_t *vars = json_pack("{s:o, s:b, s:s}", "messages", msgs, "add_generation_prompt", 1, "bos_token", "<s>");
    jinja_template *t = NULL;
    tc_err err = {0};
    CHECK(jinja_parse(src, strlen(src), NULL, &t, &err) == 0);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    int n = 200, ok = 1;
    for (int i = 0; i < n; i++) {
        char *out = NULL;
        size_t len;
        ok &= jinja_render(t, vars, NULL, -1, &out, &len, &err) == 0 && len > 20 * 60;
        free(out);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ms = ((double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6) / n;
    printf("20-turn render: %.3f ms\n", ms);
    CHECK(ok);
    CHECK_MSG(ms < 1.0, "%.3f ms per render", ms);
    jinja_free(t);
    json_decref(vars);
}

int main(void) {
    test_whitespace();
    test_statements();
    test_expressions();
    test_filters();
    test_methods();
    test_errors();
    test_limits();
    test_speed();
    TEST_MAIN_END();
}
