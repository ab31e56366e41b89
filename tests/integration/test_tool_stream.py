"""Streaming with tools in play (tool_choice auto), through the official `openai` client against SmolLM2
(ChatML: the hermes format): text the model writes before or instead of a call goes out as content deltas as
it is generated, call markup never reaches content, and the streamed content + tool_calls equal the
non-streamed message, over several seeds and with a grammar that makes the model write text and then a call."""
import json
import os

import pytest

openai = pytest.importorskip("openai")

from conftest import SMOL  # noqa: E402

MODEL = os.path.basename(SMOL)[: -len(".gguf")]
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                   "required": ["city"]}}}
ASK = [{"role": "user", "content": "What is the weather in Paris? Say what you will do first."}]
# text, then a call: the interesting case, made certain with a grammar (the call is then parsed as usual)
TEXT_THEN_CALL = ('root ::= "Let me check the weather in Paris for you. " "<tool_call>\\n" '
                  '"{\\"name\\": \\"get_weather\\", \\"arguments\\": {\\"city\\": \\"Paris\\"}}" "\\n</tool_call>"')


def client(srv):
    return openai.OpenAI(base_url=srv.base + "/v1", api_key="unused", max_retries=0, timeout=120)


def both(c, **kw):
    """(non-streamed message, finish) and (streamed content chunks, calls, finish) of the same request."""
    kw = dict(model=MODEL, messages=ASK, tools=[WEATHER], tool_choice="auto", max_tokens=60, **kw)
    full = c.chat.completions.create(**kw).choices[0]
    pieces, calls, finish = [], {}, None
    for ch in c.chat.completions.create(stream=True, **kw):
        if not ch.choices:
            continue
        d = ch.choices[0].delta
        if d.content:
            assert not calls, "content after the tool calls began"
            pieces.append(d.content)
        for tc in d.tool_calls or []:
            slot = calls.setdefault(tc.index, {"id": None, "name": "", "args": ""})
            slot["id"] = tc.id or slot["id"]
            slot["name"] += (tc.function.name or "") if tc.function else ""
            slot["args"] += (tc.function.arguments or "") if tc.function else ""
        finish = ch.choices[0].finish_reason or finish
    return full, pieces, [calls[i] for i in sorted(calls)], finish


def same(full, pieces, calls, finish):
    msg = full.message
    assert "".join(pieces) == (msg.content or ""), (pieces, msg.content)
    assert not any("<tool_call" in p for p in pieces)
    want = [(t.function.name, json.loads(t.function.arguments)) for t in msg.tool_calls or []]
    assert [(c["name"], json.loads(c["args"])) for c in calls] == want
    assert finish == full.finish_reason


def test_text_streams_before_the_call(smol):
    full, pieces, calls, finish = both(client(smol), temperature=0, extra_body={"grammar": TEXT_THEN_CALL})
    same(full, pieces, calls, finish)
    assert full.message.content == "Let me check the weather in Paris for you."
    assert finish == "tool_calls" and len(calls) == 1 and calls[0]["name"] == "get_weather"
    # sent as it was generated: several deltas, not one block when the choice ended
    assert len(pieces) >= 3, pieces


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_stream_equals_nonstream(smol, seed):
    full, pieces, calls, finish = both(client(smol), temperature=1.0, seed=seed)
    same(full, pieces, calls, finish)
