"""The Jinja interpreter against jinja2, the way transformers' apply_chat_template renders: every real chat
template in tests/ref/chat-templates/ (llama.cpp's models/templates) and ../shared/testdata/chat-templates/ x
conversations (system, multi-turn, unicode and template-like text in content, tools, tool calls with arguments as
objects, parallel calls with results, reasoning), compared byte for byte with `tachyon chat-template`. Where
jinja2 raises, tachyon must fail too. All renderings go through one `chat-template --batch` process."""
import json
import os
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import jinja2
import jinja2.ext
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = Path(__file__).resolve().parents[2]
DIRS = [ROOT / "tests" / "ref" / "chat-templates", ROOT / ".." / "shared" / "testdata" / "chat-templates"]
BIN = os.environ.get("TACHYON_BIN", str(ROOT / "build" / "tachyon"))
NOW = 1735732800  # 2025-01-01 12:00 UTC: strftime_now on both sides
TARGET = 0.98     # the share of jinja2's renderings that must be byte-identical


class AssistantTracker(jinja2.ext.Extension):
    """transformers' {% generation %} tag: renders its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def _raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.fromtimestamp(NOW, timezone.utc).strftime(fmt)
    return env


def S(c): return {"role": "system", "content": c}
def U(c): return {"role": "user", "content": c}
def A(c, **kw): return {"role": "assistant", "content": c, **kw}
def T(c, id_, name): return {"role": "tool", "content": c, "tool_call_id": id_, "name": name}


def CALL(id_, name, args):
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": args}}


TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather in a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name, e.g. Paris"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the web.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"},
                                                        "max_results": {"type": "integer", "default": 5}},
                       "required": ["query"]}}},
]

WEATHER = {"city": "Paris", "unit": "celsius"}
# (messages, tools, add_generation_prompt)
CONVS = {
    "user": ([U("Hello!")], None, True),
    "sys_user": ([S("You are terse."), U("What is 2+2?")], None, True),
    "multi_turn": ([S("Be kind."), U(" Hi there \n"), A("Hello! How can I help?"), U("Tell me a joke.")], None, True),
    "ends_assistant": ([U("Hi"), A("Hello.")], None, False),
    "unicode_tags": ([U("héllo wörld — 日本語 🎉 {{ not_a_var }} {% if x %}y{% endif %} {# c #}"),
                      A("Ça va? \"quoted\" 'single' \\ back\nslash"), U("ok {{ bos_token }}")], None, True),
    "tools": ([S("You can call tools."), U("Weather in Paris?")], TOOLS, True),
    "tool_call": ([U("Weather in Paris?"), A(None, tool_calls=[CALL("call_1", "get_weather", WEATHER)]),
                   T('{"temperature": 21, "sky": "clear"}', "call_1", "get_weather")], TOOLS, True),
    "parallel_calls": ([S("Use tools."), U("Weather in Paris and London, and search news."),
                        A("", tool_calls=[CALL("call_1", "get_weather", WEATHER),
                                          CALL("call_2", "get_weather", {"city": "London"}),
                                          CALL("call_3", "search", {"query": "news", "max_results": 3})]),
                        T("21C clear", "call_1", "get_weather"), T("15C rain", "call_2", "get_weather"),
                        T("[\"headline\"]", "call_3", "search"), A("Paris 21C, London 15C."), U("Thanks!")],
                       TOOLS, True),
    "tool_call_ids9": ([S("Use tools."), U("Weather in Paris?"),
                        A("", tool_calls=[CALL("a1b2c3d4e", "get_weather", WEATHER)]),
                        T("21C", "a1b2c3d4e", "get_weather"), A("It is 21C."), U("Thanks")], TOOLS, True),
    "reasoning": ([U("What is 17*3?"), A("51", reasoning_content="17*3 = 51."), U("And 18*3?")], None, True),
}


def templates():
    seen, out = set(), {}
    for d in DIRS:
        for p in sorted(d.glob("*.jinja")):
            text = p.read_text()
            if text in seen:
                continue
            seen.add(text)
            out[("shared/" if d != DIRS[0] else "") + p.name] = text
    return out


def jinja_render(env_cache, name, text, conv):
    msgs, tools, gen = CONVS[conv]
    if name not in env_cache:
        try:
            env_cache[name] = _env().from_string(text)
        except Exception as e:  # a template jinja2 cannot compile: every rendering is an error
            env_cache[name] = e
    t = env_cache[name]
    if isinstance(t, Exception):
        raise t
    return t.render(**VARS(msgs, tools, gen))


def VARS(msgs, tools, gen):
    return {"messages": msgs, "tools": tools, "documents": None, "add_generation_prompt": gen,
            "bos_token": "<s>", "eos_token": "</s>"}


def batch(tmp_path, tmpls, cases):
    f = tmp_path / "batch.json"
    f.write_text(json.dumps({"templates": tmpls, "cases": cases}))
    env = dict(os.environ, TACHYON_JINJA_NOW=str(NOW), TZ="UTC")
    p = subprocess.run([BIN, "chat-template", "--batch", str(f)], capture_output=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)


def test_templates_match_jinja2(tmp_path):
    tmpls = templates()
    assert len(tmpls) >= 70, sorted(tmpls)
    cases, want = [], []
    cache = {}
    for name, text in tmpls.items():
        for conv, (msgs, tools, gen) in CONVS.items():
            try:
                want.append(jinja_render(cache, name, text, conv))
            except Exception as e:
                want.append(e)
            cases.append({"template": name, "vars": VARS(msgs, tools, gen)})
    got = batch(tmp_path, tmpls, cases)
    per, same, rendered, missed_errors, diffs = {}, 0, 0, [], []
    for case, w, g in zip(cases, want, got):
        name = case["template"]
        ok_n, tot_n = per.get(name, (0, 0))
        if isinstance(w, Exception):
            ok = "error" in g
            if not ok:
                missed_errors.append(f"{name}: jinja2 raised {type(w).__name__}: {w}")
        else:
            rendered += 1
            ok = g.get("out") == w
            same += ok
            if not ok:
                diffs.append((name, case, w, g))
        per[name] = (ok_n + ok, tot_n + 1)
    for name in sorted(per):
        print(f"{name:60s} {per[name][0]}/{per[name][1]}")
    rate = same / rendered
    print(f"identical: {same}/{rendered} = {rate:.4f} of the pairs jinja2 renders; "
          f"{len(missed_errors)} pairs jinja2 raises that tachyon rendered")
    for name, case, w, g in diffs[:8]:
        print(f"--- {name} {json.dumps(case['vars']['messages'])[:120]}\n want {w!r}\n got  {g!r}")
    assert not missed_errors, missed_errors
    assert rate >= TARGET


def test_cli_prints_exactly_and_fails_with_the_message(tmp_path):
    t = tmp_path / "t.jinja"
    t.write_text("{% for m in messages %}{{ bos_token }}[{{ m.role }}] {{ m.content | trim }}{{ eos_token }}\n"
                 "{% endfor %}{% if tools %}{{ tools | tojson }}{% endif %}"
                 "{% if add_generation_prompt %}>{% endif %}{% if boom %}{{ raise_exception('no: ' ~ boom) }}{% endif %}\n")
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS[:1]))
    msgs = json.dumps([U(" hi ")])
    run = lambda *a: subprocess.run([BIN, "chat-template", "--template-file", str(t), *a], capture_output=True)
    p = run("--bos", "<s>", "--eos", "</s>", msgs)
    assert p.returncode == 0 and p.stdout.decode() == "<s>[user] hi</s>\n>", p
    p = run("--no-gen-prompt", "--tools", str(tools), msgs)
    want = _env().from_string(t.read_text()).render(**VARS([U(" hi ")], TOOLS[:1], False) | {"bos_token": "",
                                                                                             "eos_token": ""})
    assert p.returncode == 0 and p.stdout.decode() == want
    p = run("--kwargs", '{"boom": "bad role"}', msgs)
    assert p.returncode != 0 and b"no: bad role" in p.stderr and not p.stdout
    t.write_text("{% if x %}")
    p = run(msgs)
    assert p.returncode != 0 and b"endif" in p.stderr


def test_cli_no_thinking_and_kwargs_reach_the_template():
    """--no-thinking is enable_thinking=false, as --kwargs '{"enable_thinking": false}' is (Qwen3's switch)."""
    path = DIRS[0] / "Qwen-Qwen3-0.6B.jinja"
    msgs = [U("hi")]
    want = _env().from_string(path.read_text()).render(**VARS(msgs, None, True), enable_thinking=False)
    assert want.endswith("<think>\n\n</think>\n\n")
    for flag in (["--no-thinking"], ["--kwargs", '{"enable_thinking": false}']):
        p = subprocess.run([BIN, "chat-template", "--template-file", str(path), "--bos", "<s>", "--eos", "</s>",
                            *flag, json.dumps(msgs)], capture_output=True)
        assert p.returncode == 0 and p.stdout.decode() == want, (flag, p)
