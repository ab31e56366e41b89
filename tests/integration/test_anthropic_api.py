"""The Anthropic Messages API (/v1/messages, /v1/messages/count_tokens) through the official `anthropic` SDK
against `tachyon serve` of SmolLM2: text, streaming (== non-streamed at temperature 0, Anthropic's event
order), a forced tool, a tool_result round trip, stop_sequences, max_tokens, errors mapped to the SDK's
exception classes, x-api-key / Bearer keys, count_tokens."""
import json
import os

import pytest

from conftest import SMOL, STORIES

anthropic = pytest.importorskip("anthropic")

MODEL = os.path.basename(SMOL)[: -len(".gguf")]
ASK = [{"role": "user", "content": "Write one sentence about the sea."}]
WEATHER = {"name": "get_weather", "description": "Get the current weather in a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


# The SDK's method signatures do not take temperature / top_p / top_k; the API does (extra_body).
T0 = {"temperature": 0}


def client(srv, key="unused"):
    return anthropic.Anthropic(base_url=srv.base, api_key=key, max_retries=0, timeout=120)


def text_of(msg):
    return "".join(b.text for b in msg.content if b.type == "text")


def events_of(raw):
    """(event name, data) of each SSE event of a raw /v1/messages stream."""
    out = []
    for block in raw.split("\n\n"):
        if not block.strip() or block.startswith(":"):
            continue
        lines = block.split("\n")
        assert lines[0].startswith("event: ") and lines[1].startswith("data: "), "bad SSE block %r" % block
        out.append((lines[0][7:], json.loads(lines[1][6:])))
    return out


def test_text(smol):
    m = client(smol).messages.create(model=MODEL, max_tokens=24, extra_body=T0, messages=ASK,
                                     system="You are terse.", metadata={"user_id": "u1"})
    assert m.type == "message" and m.role == "assistant" and m.id.startswith("msg_")
    assert m.model == MODEL
    assert [b.type for b in m.content] == ["text"] and text_of(m).strip()
    assert m.stop_reason in ("end_turn", "max_tokens") and m.stop_sequence is None
    assert m.usage.input_tokens + (m.usage.cache_read_input_tokens or 0) > 5 and 0 < m.usage.output_tokens <= 24


def test_stream_equals_nonstream(smol):
    c = client(smol)
    kw = dict(model=MODEL, max_tokens=40, extra_body=T0, messages=ASK)
    full = c.messages.create(**kw)
    with c.messages.stream(**kw) as s:
        streamed = "".join(s.text_stream)
        final = s.get_final_message()
    assert streamed == text_of(full), "streamed %r != non-streamed %r" % (streamed, text_of(full))
    assert text_of(final) == streamed
    assert final.stop_reason == full.stop_reason and final.usage.output_tokens == full.usage.output_tokens
    assert final.usage.input_tokens + (final.usage.cache_read_input_tokens or 0) == \
        full.usage.input_tokens + (full.usage.cache_read_input_tokens or 0)


def test_stream_event_order(smol):
    st, _, data = smol.request("POST", "/v1/messages", {"model": MODEL, "max_tokens": 12, "temperature": 0,
                                                        "stream": True, "messages": ASK},
                               headers={"anthropic-version": "2023-06-01"})
    assert st == 200
    ev = events_of(data.decode())
    names = [n for n, _ in ev]
    assert names[:3] == ["message_start", "content_block_start", "ping"], names
    assert names[-2:] == ["message_delta", "message_stop"], names
    assert set(names[3:-3]) == {"content_block_delta"} and names[-3] == "content_block_stop", names
    assert all(d["type"] == n for n, d in ev)
    start = ev[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None and start["id"].startswith("msg_")
    md = ev[-2][1]
    assert md["delta"] == {"stop_reason": "max_tokens", "stop_sequence": None} and md["usage"]["output_tokens"] == 12


def test_message_start_usage(smol):
    """message_start reports the prompt's size (the non-streamed input tokens), not zero."""
    body = {"model": MODEL, "max_tokens": 4, "temperature": 0, "messages": ASK}
    st, _, full = smol.post("/v1/messages", body)
    assert st == 200
    want = full["usage"]["input_tokens"] + full["usage"]["cache_read_input_tokens"]
    st, _, data = smol.request("POST", "/v1/messages", dict(body, stream=True))
    ev = events_of(data.decode())
    u = ev[0][1]["message"]["usage"]
    assert ev[0][0] == "message_start" and u["input_tokens"] + u["cache_read_input_tokens"] == want > 5, u
    assert u["output_tokens"] == 0


def test_lenient(make_server):
    """--lenient drops the fields /v1/messages does not accept (unknown, refused) as on the chat path."""
    srv = make_server(SMOL, "--ctx-size", 1024, "--lenient")
    body = {"model": MODEL, "max_tokens": 4, "messages": ASK, "bogus_field": 1, "container": "c1"}
    st, _, j = srv.post("/v1/messages", body)
    assert st == 200 and j["type"] == "message", j
    st, _, j = srv.post("/v1/messages/count_tokens", {"model": MODEL, "messages": ASK, "bogus_field": 1})
    assert st == 200 and j["input_tokens"] > 5, j
    st, _, j = srv.post("/v1/responses", {"model": MODEL, "input": "Hi", "max_output_tokens": 4, "bogus": 1,
                                          "previous_response_id": "resp_1"})
    assert st == 200 and j["object"] == "response", j
    st, _, j = srv.post("/v1/messages", dict(body, max_tokens="x"))  # values are still checked
    assert st == 400, j
    assert "bogus_field" in srv.read_log() and "bogus" in srv.read_log()


def test_forced_tool(smol):
    c = client(smol)
    kw = dict(model=MODEL, max_tokens=64, extra_body=T0, tools=[WEATHER],
              tool_choice={"type": "tool", "name": "get_weather"},
              messages=[{"role": "user", "content": "What is the weather like in Paris?"}])
    m = c.messages.create(**kw)
    uses = [b for b in m.content if b.type == "tool_use"]
    assert len(uses) == 1, m.content
    assert uses[0].name == "get_weather" and isinstance(uses[0].input, dict) and "city" in uses[0].input
    assert m.stop_reason == "tool_use" and uses[0].id
    with c.messages.stream(**kw) as s:  # input_json_delta events accumulate into the same input
        final = s.get_final_message()
    suses = [b for b in final.content if b.type == "tool_use"]
    assert len(suses) == 1 and suses[0].input == uses[0].input and final.stop_reason == "tool_use"


def test_tool_result_round_trip(smol):
    c = client(smol)

    def convo(result):
        return [{"role": "user", "content": "What is the weather like in Paris?"},
                {"role": "assistant", "content": [{"type": "text", "text": "Let me check."},
                                                  {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                                   "input": {"city": "Paris"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": result}]}]
    msgs = convo([{"type": "text", "text": "Sunny, 22 degrees Celsius."}])
    m = c.messages.create(model=MODEL, max_tokens=32, extra_body=T0, tools=[WEATHER], messages=msgs)
    assert m.stop_reason in ("end_turn", "max_tokens", "tool_use") and m.content
    # the result's text reaches the prompt: a longer result is more input tokens
    n1 = c.messages.count_tokens(model=MODEL, tools=[WEATHER], messages=msgs).input_tokens
    n2 = c.messages.count_tokens(model=MODEL, tools=[WEATHER],
                                 messages=convo("Sunny, 22 degrees Celsius, light wind from the west.")).input_tokens
    assert n2 > n1 > 0


def test_stop_sequences(smol):
    c = client(smol)
    kw = dict(model=MODEL, max_tokens=40, extra_body=T0, messages=ASK)
    plain = text_of(c.messages.create(**kw))
    words = plain.split()
    # a word from the middle that does not occur earlier: the output stops just before it
    stop = next(w for i, w in enumerate(words) if i >= 2 and plain.find(w) == plain.find(" " + w) + 1)
    m = c.messages.create(stop_sequences=[stop, "\u0001never"], **kw)
    assert m.stop_reason == "stop_sequence" and m.stop_sequence == stop, (m, stop)
    assert text_of(m) == plain[: plain.find(" " + stop) + 1]
    with c.messages.stream(stop_sequences=[stop], **kw) as s:
        final = s.get_final_message()
    assert final.stop_reason == "stop_sequence" and final.stop_sequence == stop
    assert text_of(final) == text_of(m)


def test_max_tokens(smol):
    m = client(smol).messages.create(model=MODEL, max_tokens=3, extra_body=T0, messages=ASK)
    assert m.stop_reason == "max_tokens" and m.usage.output_tokens == 3


def test_errors(smol):
    c = client(smol)
    with pytest.raises(anthropic.NotFoundError) as ei:
        c.messages.create(model="no-such-model", max_tokens=4, messages=ASK)
    assert ei.value.body["type"] == "error" and ei.value.body["error"]["type"] == "not_found_error"
    with pytest.raises(anthropic.BadRequestError) as ei:
        c.messages.create(model=MODEL, max_tokens=4, messages=ASK, extra_body={"frobnicate": 1})
    assert "frobnicate" in ei.value.body["error"]["message"]
    assert ei.value.body["error"]["type"] == "invalid_request_error"
    with pytest.raises(anthropic.BadRequestError):  # a chat-path check: top_k below its range
        c.messages.create(model=MODEL, max_tokens=4, messages=ASK, extra_body={"top_k": -5})
    st, _, j = smol.post("/v1/messages", {"model": MODEL, "messages": ASK})  # max_tokens is required
    assert st == 400 and j["type"] == "error" and "max_tokens" in j["error"]["message"], j
    st, _, j = smol.post("/v1/messages", {"model": MODEL, "max_tokens": 4, "messages": [
        {"role": "user", "content": [{"type": "image", "source": {}}]}]})
    assert st == 400 and "image" in j["error"]["message"], j
    # SmolLM2's template has no thinking switch: thinking is accepted and changes nothing (the template's variables
    # are transformers' keyword arguments: an unused one is ignored)
    m = c.messages.create(model=MODEL, max_tokens=4, messages=ASK, thinking={"type": "enabled", "budget_tokens": 1024})
    assert m.stop_reason == "max_tokens" and not [b for b in m.content if b.type == "thinking"], m


def test_api_keys(make_server):
    srv = make_server(SMOL, "--ctx-size", 1024, "--api-key", "sekret")
    with pytest.raises(anthropic.AuthenticationError) as ei:
        client(srv, "wrong").messages.create(model=MODEL, max_tokens=2, messages=ASK)
    assert ei.value.body["error"]["type"] == "authentication_error"
    m = client(srv, "sekret").messages.create(model=MODEL, max_tokens=2, messages=ASK)  # the SDK sends x-api-key
    assert m.usage.output_tokens == 2
    body = {"model": MODEL, "max_tokens": 2, "messages": ASK}
    st, _, j = srv.post("/v1/messages", body, headers={"Authorization": "Bearer sekret"})
    assert st == 200, j
    st, _, j = srv.post("/v1/chat/completions", body, headers={"x-api-key": "sekret"})
    assert st == 200, j  # the same keys on every endpoint
    st, _, j = srv.post("/v1/messages/count_tokens", body, headers={"x-api-key": "nope"})
    assert st == 401 and j["error"]["type"] == "authentication_error", j


def test_tenant_keys(make_server, tmp_path):
    """x-api-key finds the tenant as Bearer does: its requests are counted under its name."""
    kf = tmp_path / "keys.txt"
    kf.write_text("sk-a acme\n")
    srv = make_server(STORIES, "--served-model-name", "x", "--ctx-size", 256, "--api-key-file", str(kf))
    m = client(srv, "sk-a").messages.create(model="x", max_tokens=2, messages=ASK)
    assert m.usage.output_tokens >= 1
    with pytest.raises(anthropic.AuthenticationError):
        client(srv, "sk-b").messages.create(model="x", max_tokens=2, messages=ASK)
    st, _, data = srv.request("GET", "/stats", headers={"x-api-key": "sk-a"})
    assert st == 200 and json.loads(data)["tenants"]["acme"]["requests"] == 1, data[:500]


def test_count_tokens(smol):
    c = client(smol)
    n = c.messages.count_tokens(model=MODEL, system="You are terse.", messages=ASK).input_tokens
    m = c.messages.create(model=MODEL, max_tokens=2, extra_body=T0, system="You are terse.", messages=ASK)
    assert n == m.usage.input_tokens + (m.usage.cache_read_input_tokens or 0)
    st, _, tok = smol.post("/tokenize", {"messages": [{"role": "system", "content": "You are terse."}] + ASK})
    assert st == 200 and len(tok["tokens"]) == n
    with pytest.raises(anthropic.NotFoundError):
        c.messages.count_tokens(model="no-such-model", messages=ASK)


def test_output_config_json_schema(smol):
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
              "additionalProperties": False}
    m = client(smol).messages.create(model=MODEL, max_tokens=48, extra_body=T0, messages=[
        {"role": "user", "content": "Name a city in France as JSON."}],
        output_config={"format": {"type": "json_schema", "schema": schema}}, cache_control={"type": "ephemeral"})
    assert m.stop_reason == "end_turn", m
    assert set(json.loads(text_of(m))) == {"city"}


def test_thinking_blocks(make_server):
    """Reasoning text becomes a thinking block (and thinking_delta events). No reasoning model is available:
    SmolLM2 runs with the Qwen3 template forced and a GBNF grammar makes it write a fixed
    "<think>…</think>answer" (as test_reasoning.py does)."""
    srv = make_server(SMOL, "--ctx-size", 512, "--threads", 2, "--chat-template", "qwen3")
    c = client(srv)
    grammar = 'root ::= "<think>\\nI add two and two.\\n</think>\\n\\nFour."'
    kw = dict(model=MODEL, max_tokens=60, messages=[{"role": "user", "content": "What is 2+2?"}],
              thinking={"type": "enabled", "budget_tokens": 1024}, extra_body={"temperature": 0, "grammar": grammar})
    m = c.messages.create(**kw)
    assert [b.type for b in m.content] == ["thinking", "text"], m.content
    assert m.content[0].thinking == "I add two and two.\n" and m.content[0].signature == ""
    assert text_of(m) == "Four." and m.stop_reason == "end_turn"
    with c.messages.stream(**kw) as s:
        events = list(s)
        final = s.get_final_message()
    deltas = [e.delta.thinking for e in events if e.type == "content_block_delta" and e.delta.type == "thinking_delta"]
    assert len(deltas) > 1 and "".join(deltas) == "I add two and two.\n"
    assert [b.type for b in final.content] == ["thinking", "text"] and text_of(final) == "Four."
