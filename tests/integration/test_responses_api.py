"""The OpenAI Responses API (/v1/responses) through the official `openai` SDK against `tachyon serve` on
SmolLM2: text, streaming (the documented event order, sequence numbers, streamed text == non-streamed text at
temperature 0, the responses.stream helper), function tools with a required and a named tool_choice, a
function_call_output round trip, text.format json_schema (and responses.parse), max_output_tokens giving an
incomplete response, and the errors (previous_response_id, other tool types, an unknown model) as the SDK's
exception classes."""
import json

import pytest

openai = pytest.importorskip("openai")
jsonschema = pytest.importorskip("jsonschema")

WEATHER = {"type": "function", "name": "get_weather", "description": "Get the current weather in a city",
           "parameters": {"type": "object", "required": ["city"], "additionalProperties": False,
                          "properties": {"city": {"type": "string", "maxLength": 30}}}}
TIME = {"type": "function", "name": "get_time", "description": "Get the local time in a time zone",
        "parameters": {"type": "object", "required": ["zone"], "properties": {"zone": {"type": "string", "maxLength": 30}}}}
PERSON = {"type": "object", "additionalProperties": False, "required": ["name", "age"],
          "properties": {"name": {"type": "string", "maxLength": 24}, "age": {"type": "integer"}}}


@pytest.fixture(scope="module")
def client(smol):
    c = openai.OpenAI(base_url=smol.base + "/v1", api_key="unused", max_retries=0)
    c.model_name = c.models.list().data[0].id
    return c


def create(client, **kw):
    args = dict(model=client.model_name, temperature=0, max_output_tokens=40)
    args.update(kw)
    return client.responses.create(**args)


def test_text(client):
    r = create(client, input="Say something nice about cats.", instructions="You are a friendly assistant.")
    assert r.object == "response" and r.id.startswith("resp_")
    assert r.status in ("completed", "incomplete"), r
    assert isinstance(r.output_text, str) and r.output_text.strip(), r
    msg = [o for o in r.output if o.type == "message"]
    assert len(msg) == 1 and msg[0].role == "assistant" and msg[0].id.startswith("msg_")
    assert msg[0].content[0].type == "output_text"
    assert r.instructions == "You are a friendly assistant." and r.max_output_tokens == 40
    u = r.usage
    assert u.input_tokens > 0 and u.output_tokens > 0 and u.total_tokens == u.input_tokens + u.output_tokens
    assert u.input_tokens_details.cached_tokens >= 0 and u.output_tokens_details.reasoning_tokens == 0


def test_stream_events_and_text(client):
    kw = dict(input=[{"role": "user", "content": [{"type": "input_text", "text": "Tell me a short story about a dog."}]}],
              max_output_tokens=48)
    full = create(client, **kw)
    events = list(create(client, stream=True, **kw))
    types = [e.type for e in events]
    assert types[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"], types
    end = "response.incomplete" if full.status == "incomplete" else "response.completed"
    assert types[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          end], types
    assert set(types[4:-4]) == {"response.output_text.delta"}, types
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == full.output_text, "streamed %r != non-streamed %r" % (text, full.output_text)
    assert events[-1].response.output_text == full.output_text
    assert events[-1].response.status == full.status
    assert events[-1].response.usage.output_tokens == full.usage.output_tokens
    item_ids = {e.item_id for e in events if e.type == "response.output_text.delta"}
    assert item_ids == {events[2].item.id}


def test_stream_helper(client):
    # an answer that ends (12 tokens at every ISA level): the helper's final response needs response.completed
    kw = dict(input="What is 2+2?", max_output_tokens=64, model=client.model_name, temperature=0)
    full = client.responses.create(**kw)
    deltas = []
    with client.responses.stream(**kw) as s:
        for ev in s:
            if ev.type == "response.output_text.delta":
                deltas.append(ev.delta)
        final = s.get_final_response()
    assert "".join(deltas) == full.output_text == final.output_text


@pytest.mark.parametrize("choice", ["required", "named"])
def test_forced_tool_call(client, choice):
    tc = "required" if choice == "required" else {"type": "function", "name": "get_weather"}
    tools = [WEATHER] if choice == "required" else [WEATHER, TIME]
    r = create(client, input="What is the weather in Paris?", tools=tools, tool_choice=tc, max_output_tokens=200)
    calls = [o for o in r.output if o.type == "function_call"]
    assert len(calls) >= 1, r.output
    c = calls[0]
    assert c.name == "get_weather" and c.id.startswith("fc_") and c.call_id and c.status == "completed"
    jsonschema.validate(json.loads(c.arguments), WEATHER["parameters"])
    # streamed: the same call, as output_item.added / arguments deltas / arguments.done / output_item.done
    events = list(create(client, input="What is the weather in Paris?", tools=tools, tool_choice=tc,
                         max_output_tokens=200, stream=True))
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert done and done[0].arguments == c.arguments
    deltas = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta"
                     and e.item_id == done[0].item_id)
    assert deltas == c.arguments
    assert events[-1].type == "response.completed"
    assert [o.name for o in events[-1].response.output if o.type == "function_call"] == [x.name for x in calls]


def test_function_call_output_round_trip(client):
    ask = {"role": "user", "content": "What is the weather in Paris?"}
    r = create(client, input=[ask], tools=[WEATHER], tool_choice="required", max_output_tokens=200)
    call = next(o for o in r.output if o.type == "function_call")
    follow = [ask, call.model_dump(exclude_none=True),
              {"type": "function_call_output", "call_id": call.call_id, "output": json.dumps({"temp_c": 21})}]
    r2 = create(client, input=follow, tools=[WEATHER], tool_choice="none", max_output_tokens=40)
    assert r2.status in ("completed", "incomplete") and r2.error is None
    assert not [o for o in r2.output if o.type == "function_call"]
    assert r2.output_text.strip(), r2.output
    # the output reaches the prompt: a longer one costs more input tokens
    follow[2]["output"] = json.dumps({"temp_c": 21, "sky": "clear, with a light breeze from the west"})
    r3 = create(client, input=follow, tools=[WEATHER], tool_choice="none", max_output_tokens=1)
    assert r3.usage.input_tokens > r2.usage.input_tokens + 5, (r2.usage, r3.usage)


def test_json_schema(client):
    fmt = {"format": {"type": "json_schema", "name": "person", "schema": PERSON, "strict": True}}
    r = create(client, input="Make up a person with a name and an age.", text=fmt, max_output_tokens=80)
    assert r.status == "completed", r
    jsonschema.validate(json.loads(r.output_text), PERSON)
    assert r.text.format.type == "json_schema"


def test_parse_pydantic(client):
    pydantic = pytest.importorskip("pydantic")

    class City(pydantic.BaseModel):
        name: str
        country: str

    r = client.responses.parse(model=client.model_name, input="Name a city in France.", text_format=City,
                               temperature=0, max_output_tokens=80)
    assert isinstance(r.output_parsed, City), r.output_text


def test_max_output_tokens_incomplete(client):
    r = create(client, input="Tell me a long story about a castle.", max_output_tokens=3)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 3
    assert r.output[0].status == "incomplete"
    events = list(create(client, input="Tell me a long story about a castle.", max_output_tokens=3, stream=True))
    assert events[-1].type == "response.incomplete"
    assert events[-1].response.incomplete_details.reason == "max_output_tokens"
    assert events[-1].response.output_text == r.output_text


def test_errors(client):
    with pytest.raises(openai.BadRequestError) as ei:
        create(client, input="hi", previous_response_id="resp_123")
    assert "previous_response_id" in str(ei.value) and "does not store responses" in str(ei.value)
    assert ei.value.body["param"] == "previous_response_id"
    with pytest.raises(openai.BadRequestError) as ei:
        create(client, input="hi", tools=[{"type": "web_search"}])
    assert "web_search" in str(ei.value)
    with pytest.raises(openai.BadRequestError) as ei:  # refused before any stream starts: a plain 400
        create(client, input="hi", include=["message.output_text.logprobs"], stream=True)
    assert "include" in str(ei.value)
    with pytest.raises(openai.NotFoundError):
        create(client, input="hi", model="no-such-model")


def test_ignored_fields_accepted(client):
    r = create(client, input="Hi!", store=False, metadata={"k": "v"}, user="u1", truncation="disabled",
               reasoning={"effort": "low"}, parallel_tool_calls=False, max_output_tokens=8)
    assert r.status in ("completed", "incomplete") and r.store is False
    assert r.metadata == {"k": "v"} and r.parallel_tool_calls is False


def test_raw_sse_framing_and_errors(smol):
    """Each SSE frame is `event: NAME` + `data: JSON` with data.type == NAME, no `[DONE]`; a 400 before the stream
    keeps OpenAI's error shape; an unknown field is named."""
    st, h, data = smol.request("POST", "/v1/responses", {"input": "Hi", "stream": True, "max_output_tokens": 4,
                                                         "temperature": 0})
    assert st == 200 and h.get("Content-Type", "").startswith("text/event-stream"), (st, h)
    raw = data.decode()
    assert "[DONE]" not in raw
    frames = [b for b in raw.split("\n\n") if b.strip() and not b.startswith(":")]
    for k, b in enumerate(frames):
        ev, payload = b.split("\n", 1)
        assert ev.startswith("event: ") and payload.startswith("data: "), b
        d = json.loads(payload[6:])
        assert d["type"] == ev[7:] and d["sequence_number"] == k, b
    st, _, j = smol.post("/v1/responses", {"input": "Hi", "frobnicate": 1})
    assert st == 400 and j["error"]["param"] == "frobnicate" and j["error"]["type"] == "invalid_request_error", j
    st, _, j = smol.post("/v1/responses", {"input": [{"role": "user", "content": [{"type": "input_image",
                                                                                     "image_url": "http://x/y.png"}]}]})
    assert st == 400 and "input_image" in j["error"]["message"] and j["error"]["param"] == "input[0].content", j


def test_reasoning_item(make_server):
    """Reasoning text becomes a `reasoning` output item (and response.reasoning_text.* events). No reasoning model
    is available: SmolLM2 runs with the Qwen3 template forced and a GBNF grammar makes it write a fixed
    "<think>…</think>answer" (as test_reasoning.py does)."""
    from conftest import SMOL
    import os
    if not os.path.exists(SMOL):
        pytest.skip("SmolLM2 model not present")
    srv = make_server(SMOL, "--ctx-size", 512, "--threads", 2, "--chat-template", "qwen3")
    c = openai.OpenAI(base_url=srv.base + "/v1", api_key="unused", max_retries=0)
    grammar = 'root ::= "<think>\\nI add two and two.\\n</think>\\n\\nFour."'
    kw = dict(model=c.models.list().data[0].id, input="What is 2+2?", temperature=0, max_output_tokens=60,
              extra_body={"grammar": grammar})
    r = c.responses.create(**kw)
    assert [o.type for o in r.output] == ["reasoning", "message"], r.output
    assert r.output[0].content[0].type == "reasoning_text"
    assert r.output[0].content[0].text == "I add two and two.\n" and r.output_text == "Four."
    events = list(c.responses.create(stream=True, **kw))
    rdeltas = [e.delta for e in events if e.type == "response.reasoning_text.delta"]
    assert len(rdeltas) > 1 and "".join(rdeltas) == "I add two and two.\n"
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "Four."
    added = [e.item.type for e in events if e.type == "response.output_item.added"]
    assert added == ["reasoning", "message"]
    assert [o.type for o in events[-1].response.output] == ["reasoning", "message"]
