"""Tool-call formats per template family, through the official `openai` client: SmolLM2 served with other
families' real templates (--chat-template-file from tests/ref/chat-templates); the server picks the family's
tool-call format from the template (its start-up log names it), a named or required tool_choice makes the
grammar force that format, and the calls come back as tool_calls with the right name and JSON arguments:
exactly one for a named choice whatever the seed, streamed equal to non-streamed, and complete calls before
a max_tokens cut returned with finish_reason "length" and no call markup in content."""
import json
import os

import pytest

openai = pytest.importorskip("openai")

from conftest import BIN, ROOT, SMOL, Server  # noqa: E402

TEMPLATES = os.path.join(ROOT, "tests", "ref", "chat-templates")
FAMILIES = {  # format name -> template file
    "hermes": "Qwen-Qwen2.5-7B-Instruct.jinja",
    "llama3": "meta-llama-Llama-3.1-8B-Instruct.jinja",
    "mistral": "mistralai-Mistral-Nemo-Instruct-2407.jinja",
    "qwen3-coder": "Qwen3-Coder.jinja",
    "gpt-oss": "openai-gpt-oss-120b.jinja",
    "granite": "ibm-granite-granite-3.3-2B-Instruct.jinja",
    "functionary-v3.2": "meetkai-functionary-medium-v3.2.jinja",
    "command-r7b": "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
}
MARKERS = ("<tool_call>", "<function=", "[TOOL_CALLS]", "<|channel|>", "<|python_tag|>", "<|tool_call|>", ">>>",
           "<|START_ACTION|>", "\"name\"", "\"tool_name\"")
LIST_FORMATS = ("mistral", "granite", "command-r7b")  # the calls of a turn are one JSON array
EOG_BAN = {"0": -100, "2": -100}  # SmolLM2's <|endoftext|> and <|im_end|>: calls go on until max_tokens

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                   "required": ["city"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Current time in a time zone",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 20}},
                   "required": ["zone"]}}}
PING = {"type": "function", "function": {"name": "ping", "description": "Checks the connection"}}
ASK = [{"role": "user", "content": "What is the weather in Paris right now?"}]
NAMED = {"type": "function", "function": {"name": "get_weather"}}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def fam(request):
    if not os.path.exists(BIN):
        pytest.skip("no binary at %s" % BIN)
    if not os.path.exists(SMOL):
        pytest.skip("SmolLM2 model not present (run make models)")
    srv = Server(SMOL, "--ctx-size", 2048, "--chat-template-file", os.path.join(TEMPLATES, FAMILIES[request.param]))
    client = openai.OpenAI(base_url=srv.base + "/v1", api_key="unused", max_retries=0)
    client.model_name = client.models.list().data[0].id
    yield request.param, srv, client
    srv.stop()


def chat(client, **kw):
    kw.setdefault("max_tokens", 120)
    kw.setdefault("messages", ASK)
    return client.chat.completions.create(model=client.model_name, **kw)


def streamed(client, **kw):
    calls, content, finish = {}, "", None
    for ch in chat(client, stream=True, **kw):
        for c in ch.choices:
            finish = c.finish_reason or finish
            content += c.delta.content or ""
            for d in c.delta.tool_calls or []:
                e = calls.setdefault(d.index, {"id": None, "name": "", "args": ""})
                e["id"] = d.id or e["id"]
                if d.function:
                    e["name"] += d.function.name or ""
                    e["args"] += d.function.arguments or ""
    return [(calls[i]["name"], calls[i]["args"]) for i in sorted(calls)], content, finish


def check_weather_call(tc):
    assert tc.type == "function" and tc.id
    assert tc.function.name == "get_weather"
    args = json.loads(tc.function.arguments)
    assert isinstance(args, dict) and isinstance(args.get("city"), str), tc.function.arguments


def test_format_chosen_from_template(fam):
    name, srv, _ = fam
    assert "tool calls %s," % name in srv.read_log()


def test_named_choice_is_one_call(fam):
    _, _, client = fam
    for seed in (1, 2, 3):
        r = chat(client, tools=[WEATHER, TIME], tool_choice=NAMED, temperature=1, seed=seed)
        c = r.choices[0]
        assert c.finish_reason == "tool_calls", c
        assert c.message.content is None
        assert len(c.message.tool_calls) == 1, c.message.tool_calls
        check_weather_call(c.message.tool_calls[0])


def test_required_stream_equals_nonstream(fam):
    _, _, client = fam
    kw = dict(tools=[WEATHER, TIME], tool_choice="required", temperature=1, seed=7)
    full = chat(client, **kw).choices[0]
    assert full.finish_reason == "tool_calls" and len(full.message.tool_calls) == 1
    assert full.message.tool_calls[0].function.name in ("get_weather", "get_time")
    json.loads(full.message.tool_calls[0].function.arguments)
    calls, content, finish = streamed(client, **kw)
    assert finish == "tool_calls" and content == ""
    assert calls == [(t.function.name, t.function.arguments) for t in full.message.tool_calls]


def check_cut(client, kw, want_calls=None):
    c = chat(client, **kw).choices[0]
    calls = [(t.function.name, t.function.arguments) for t in c.message.tool_calls or []]
    if want_calls is not None:
        assert calls == want_calls
    for tc in c.message.tool_calls or []:
        check_weather_call(tc)
    assert not c.message.content or not any(m in c.message.content for m in MARKERS), c.message.content
    s_calls, s_content, s_finish = streamed(client, **kw)
    assert (s_calls, s_content, s_finish) == (calls, c.message.content or "", c.finish_reason)
    return c


def test_length_cut_keeps_complete_calls(fam):
    """A max_tokens cut right after a complete call (before the end-of-generation token) returns the call with
    finish_reason "length"; parallel calls with the end-of-generation tokens banned go on until max_tokens:
    the calls complete before the cut are tool_calls, the one cut short is dropped, never content."""
    name, _, client = fam
    one = chat(client, tools=[WEATHER], tool_choice=NAMED, temperature=0)
    n1 = one.usage.completion_tokens  # the call: the end-of-generation token that followed is not counted
    want = [(t.function.name, t.function.arguments) for t in one.choices[0].message.tool_calls]
    kw = dict(tools=[WEATHER], tool_choice=NAMED, temperature=0, parallel_tool_calls=True)
    c = check_cut(client, dict(kw, max_tokens=n1), want)
    assert c.finish_reason == "length" and c.message.content is None
    c = check_cut(client, dict(kw, logit_bias=EOG_BAN, max_tokens=n1 + n1 // 2))
    assert len(c.message.tool_calls) >= 1
    # a list format ([TOOL_CALLS][…], <|tool_call|>[…]) may close its list; the grammar then allows only the end
    assert c.finish_reason == "length" or name in LIST_FORMATS, c


def test_no_parameters_is_empty_object(fam):
    name, _, client = fam
    if name == "command-r7b":
        pytest.skip("the template renders parameters|tojson, which raises without parameters (jinja2 too)")
    r = chat(client, tools=[WEATHER, PING], tool_choice={"type": "function", "function": {"name": "ping"}},
             temperature=1, seed=3)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls" and len(c.message.tool_calls) == 1
    assert c.message.tool_calls[0].function.name == "ping"
    assert json.loads(c.message.tool_calls[0].function.arguments) == {}
