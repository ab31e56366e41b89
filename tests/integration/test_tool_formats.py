"""Tool-call formats per template family, through the official `openai` client: SmolLM2 served with other
families' real templates (--chat-template-file from tests/ref/chat-templates); the server picks the family's
tool-call format from the template (its start-up log names it), a named or required tool_choice makes the
grammar force that format, and the calls come back as tool_calls with the right name and JSON arguments:
exactly one for a named choice whatever the seed, streamed equal to non-streamed, and complete calls before
a max_tokens cut returned with finish_reason "length" and no call markup in content. Every format of
src/server/tool_fmt.c is here; DeepSeek's markers ("｜" U+FF5C, "▁" U+2581) exist in SmolLM2's byte-level
vocabulary only as UTF-8 fragments, which the grammar writes a byte piece at a time."""
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
    "glm-4.5": "GLM-4.6.jinja",
    "kimi-k2": "moonshotai-Kimi-K2.jinja",
    "minimax-m2": "MiniMax-M2.jinja",
    "seed-oss": "ByteDance-Seed-OSS.jinja",
    "lfm2": "LFM2.5-8B-A1B.jinja",
    "functionary-v3.1": "meetkai-functionary-medium-v3.1.jinja",
    "deepseek-r1": "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
    "deepseek-v3.1": "deepseek-ai-DeepSeek-V3.1.jinja",
    "command-r": "CohereForAI-c4ai-command-r-plus-tool_use.jinja",
    "mistral-args": "Mistral-Small-3.2-24B-Instruct-2506.jinja",
}
MARKERS = ("<tool_call>", "<function=", "[TOOL_CALLS]", "<|channel|>", "<|python_tag|>", "<|tool_call|>", ">>>",
           "<|START_ACTION|>", "\"name\"", "\"tool_name\"", "<arg_key>", "<|tool_call", "<invoke", "<minimax:",
           "<seed:tool_call>", "<｜tool", "<|tool_call_start|>")
# the calls of a turn are one JSON array, or one block with a closing marker
LIST_FORMATS = ("mistral", "granite", "command-r7b", "command-r", "kimi-k2", "minimax-m2", "lfm2")
# DeepSeek's markers are 3 to 4 fragment tokens per "｜" or "▁" in SmolLM2's vocabulary: a call takes more tokens
CALL_TOKENS = {"deepseek-r1": 400, "deepseek-v3.1": 400}
# Command R's template adds each parameter's description to a string, which raises without one (jinja2 too)
DESCRIBE_PARAMS = ("command-r",)
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
    client.call_tokens = CALL_TOKENS.get(request.param, 120)
    client.describe_params = request.param in DESCRIBE_PARAMS
    yield request.param, srv, client
    srv.stop()


def described(tools):
    """The tools with a description on each parameter."""
    out = json.loads(json.dumps(tools))
    for t in out:
        for k, p in t["function"].get("parameters", {}).get("properties", {}).items():
            p.setdefault("description", "The " + k)
    return out


def chat(client, **kw):
    kw.setdefault("max_tokens", getattr(client, "call_tokens", 120))
    if getattr(client, "describe_params", False) and "tools" in kw:
        kw["tools"] = described(kw["tools"])
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


def test_length_cut_keeps_complete_calls(fam, request):
    """A max_tokens cut right after a complete call (before the end-of-generation token) returns the call with
    finish_reason "length"; parallel calls with the end-of-generation tokens banned go on until max_tokens:
    the calls complete before the cut are tool_calls, the one cut short is dropped, never content."""
    name, _, client = fam
    # deepseek-r1: the cut falls inside a marker's "｜" (EF BD of EF BD 9C), which the last decode writes as U+FFFD
    one = chat(client, tools=[WEATHER], tool_choice=NAMED, temperature=0)
    n1 = one.usage.completion_tokens  # the call: the end-of-generation token that followed is not counted
    want = [(t.function.name, t.function.arguments) for t in one.choices[0].message.tool_calls]
    kw = dict(tools=[WEATHER], tool_choice=NAMED, temperature=0, parallel_tool_calls=True)
    c = check_cut(client, dict(kw, max_tokens=n1), want)
    assert c.finish_reason == "length" and c.message.content is None
    c = check_cut(client, dict(kw, logit_bias=EOG_BAN, max_tokens=n1 + n1 // 2))
    assert len(c.message.tool_calls) >= 1
    # a list or block format ([TOOL_CALLS][…], <|tool_calls_section_begin|>…) may close it; the grammar then allows
    # only the end
    assert c.finish_reason == "length" or name in LIST_FORMATS, c


def test_no_parameters_is_empty_object(fam):
    name, _, client = fam
    if name in ("command-r7b", "command-r", "seed-oss"):
        pytest.skip("the template reads the function's parameters, which raises without them (jinja2 too)")
    r = chat(client, tools=[WEATHER, PING], tool_choice={"type": "function", "function": {"name": "ping"}},
             temperature=1, seed=3)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls" and len(c.message.tool_calls) == 1
    assert c.message.tool_calls[0].function.name == "ping"
    assert json.loads(c.message.tool_calls[0].function.arguments) == {}


KIMI_MARKERS = ("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                "<|tool_call_argument_begin|>", "<|tool_call_end|>")


def kimi_vocab(tmp_path):
    """SmolLM2 whose control tokens 3..16 (<repo_name> … <empty_output>) become Kimi's five markers and
    fillers of the same total length, patched in place: a vocabulary where the format's markers are single
    control tokens, as in the real model's."""
    gguf = pytest.importorskip("gguf")
    r = gguf.GGUFReader(SMOL)
    f = r.fields["tokenizer.ggml.tokens"]
    base = r.data.ctypes.data
    old = [bytes(f.parts[f.data[i]]) for i in range(3, 17)]
    start = f.parts[f.data[3]].ctypes.data - base - 8  # the first string's uint64 length
    size = sum(8 + len(t) for t in old)
    new = [m.encode() for m in KIMI_MARKERS]
    fill = sum(len(t) for t in old) - sum(len(t) for t in new)
    new += [("<pad_%d>" % i).encode() for i in range(8)]
    new.append(b"<" + b"q" * (fill - 8 * 7 - 2) + b">")
    blob = b"".join(len(t).to_bytes(8, "little") + t for t in new)
    assert len(blob) == size and len(new) == len(old)
    data = bytearray(open(SMOL, "rb").read())
    data[start:start + size] = blob
    out = tmp_path / "smol-kimi-vocab.gguf"
    out.write_bytes(bytes(data))
    return str(out)


def test_control_token_markers(tmp_path):
    """Kimi's markers as control tokens of the vocabulary: a forced call may write them as single tokens (the
    grammar allows control tokens that spell the format's markers; the bias makes the model take them), and
    the parser sees them because text with tools keeps control tokens."""
    if not os.path.exists(BIN) or not os.path.exists(SMOL):
        pytest.skip("no binary or SmolLM2 model")
    srv = Server(kimi_vocab(tmp_path), "--ctx-size", 2048, "--chat-template-file",
                 os.path.join(TEMPLATES, FAMILIES["kimi-k2"]))
    try:
        assert "tool calls kimi-k2," in srv.read_log()
        client = openai.OpenAI(base_url=srv.base + "/v1", api_key="unused", max_retries=0)
        client.model_name = client.models.list().data[0].id
        bias = {str(i): 100 for i in range(3, 8)}
        for stream in (False, True):
            kw = dict(tools=[WEATHER], tool_choice=NAMED, temperature=0, logit_bias=bias)
            if stream:
                calls, content, finish = streamed(client, **kw)
                assert finish == "tool_calls" and content == "" and len(calls) == 1, (calls, content)
                assert calls[0][0] == "get_weather" and isinstance(json.loads(calls[0][1]).get("city"), str)
                continue
            c = chat(client, logprobs=True, **kw).choices[0]
            tokens = [t.token for t in c.logprobs.content]
            assert "<|tool_call_begin|>" in tokens and "<|tool_call_argument_begin|>" in tokens, tokens
            assert c.finish_reason == "tool_calls" and c.message.content is None, c
            assert len(c.message.tool_calls) == 1
            check_weather_call(c.message.tool_calls[0])
    finally:
        srv.stop()


def test_template_error_with_tools_is_400():
    """llama.cpp's DeepSeek R1 template pipes `tools | map(...)` into tojson, which jinja2 refuses (a generator is
    not JSON serializable): with tools the request is a 400 naming the template's error, without them it works."""
    if not os.path.exists(BIN) or not os.path.exists(SMOL):
        pytest.skip("no binary or SmolLM2 model")
    srv = Server(SMOL, "--ctx-size", 2048, "--chat-template-file", os.path.join(TEMPLATES, "llama-cpp-deepseek-r1.jinja"))
    try:
        assert "tool calls deepseek-r1," in srv.read_log()
        client = openai.OpenAI(base_url=srv.base + "/v1", api_key="unused", max_retries=0)
        client.model_name = client.models.list().data[0].id
        for stream in (False, True):
            with pytest.raises(openai.BadRequestError) as e:
                chat(client, tools=[WEATHER], stream=stream)
            assert "chat template: Object of type generator is not JSON serializable" in str(e.value), e.value
        assert chat(client, max_tokens=4).choices[0].finish_reason in ("length", "stop")
    finally:
        srv.stop()
