"""Context-overflow policies (`truncation`, `--truncation`) through the real server with the openai client on
SmolLM2 with a small context: auto keeps the system message(s) and the last user turn, drops whole turns
(a tool call with its results), reports usage.prompt_tokens_details.truncated_tokens and the
x-tachyon-truncated-* headers (streamed usage too); disabled refuses with context_length_exceeded;
completions auto keeps the head and the tail of the prompt. What the server kept is checked exactly: the
prompt it used must have the token count of the expected kept messages, rendered by /tokenize."""
import json
import os

import openai
import pytest

from conftest import BIN, SMOL, Server

M = "SmolLM2-135M-Instruct.Q4_1"  # the served model name (the file name)
CTX = 512
MAXTOK = 16


def need():
    if not os.path.exists(BIN):
        pytest.skip("no binary at %s" % BIN)
    if not os.path.exists(SMOL):
        pytest.skip("SmolLM2 model not present (run make models)")


@pytest.fixture(scope="module")
def srv():
    need()
    s = Server(SMOL, "--ctx-size", CTX)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def srv_auto():
    need()
    s = Server(SMOL, "--ctx-size", CTX, "--truncation", "auto")
    yield s
    s.stop()


def client(s):
    return openai.OpenAI(base_url=s.base + "/v1", api_key="none", max_retries=0)


SYSTEM = {"role": "system", "content": "You are a terse assistant. Remember the code word PELICAN."}
LAST = {"role": "user", "content": "What was the code word? Answer with one word."}


def turns(n=12):
    """n turns of a user question and an assistant answer, each turn well over 40 tokens."""
    out = []
    for i in range(n):
        out.append([{"role": "user", "content": "Question %d: tell me something about the number %d, and about "
                     "rivers, mountains and the history of counting in several old cultures." % (i, i)},
                    {"role": "assistant", "content": "Answer %d: the number %d is fine; rivers flow downhill, "
                     "mountains rise slowly, and people counted on fingers long before writing." % (i, i)}])
    return out


def ntok(s, messages, **extra):
    body = {"messages": messages}
    body.update(extra)
    st, _, j = s.post("/tokenize", body)
    assert st == 200, j
    return len(j["tokens"])


def expected_drop(s, system, tl, last, budget, **extra):
    """The smallest number of oldest turns whose removal makes the prompt fit: (k, prompt tokens)."""
    for k in range(len(tl) + 1):
        n = ntok(s, system + [m for t in tl[k:] for m in t] + last, **extra)
        if n <= budget:
            return k, n
    return None, None


def truncated_tokens(usage):
    d = usage.prompt_tokens_details
    return (d.model_extra or {}).get("truncated_tokens") if d is not None else None


def test_chat_auto_keeps_system_and_last_turn(srv):
    tl = turns()
    msgs = [SYSTEM] + [m for t in tl for m in t] + [LAST]
    full = ntok(srv, msgs)
    assert full + MAXTOK > CTX, "the conversation must overflow the context for this test"
    k, kept = expected_drop(srv, [SYSTEM], tl, [LAST], CTX - MAXTOK)
    assert k and k < len(tl)
    raw = client(srv).chat.completions.with_raw_response.create(
        model=M, messages=msgs, max_tokens=MAXTOK, temperature=0, extra_body={"truncation": "auto"})
    r = raw.parse()
    assert r.usage.prompt_tokens == kept, (r.usage, kept, k)
    assert truncated_tokens(r.usage) == full - kept
    assert raw.headers["x-tachyon-truncated-tokens"] == str(full - kept)
    assert raw.headers["x-tachyon-truncated-messages"] == str(2 * k)
    assert r.usage.prompt_tokens + MAXTOK <= CTX
    assert r.choices[0].finish_reason in ("stop", "length")


def test_chat_disabled_refuses(srv, srv_auto):
    msgs = [SYSTEM] + [m for t in turns() for m in t] + [LAST]
    for s, extra in ((srv, {}), (srv, {"truncation": "disabled"}), (srv_auto, {"truncation": "disabled"})):
        with pytest.raises(openai.BadRequestError) as ei:
            client(s).chat.completions.create(model=M, messages=msgs, max_tokens=MAXTOK, extra_body=extra)
        assert ei.value.code == "context_length_exceeded", ei.value.body


def test_server_default_auto_and_fitting_requests(srv_auto):
    tl = turns()
    msgs = [SYSTEM] + [m for t in tl for m in t] + [LAST]
    k, kept = expected_drop(srv_auto, [SYSTEM], tl, [LAST], CTX - MAXTOK)
    raw = client(srv_auto).chat.completions.with_raw_response.create(model=M, messages=msgs, max_tokens=MAXTOK,
                                                                    temperature=0)
    r = raw.parse()
    assert r.usage.prompt_tokens == kept and raw.headers["x-tachyon-truncated-messages"] == str(2 * k)
    # a request that fits is untouched (and says so)
    short = [SYSTEM, LAST]
    raw = client(srv_auto).chat.completions.with_raw_response.create(model=M, messages=short, max_tokens=MAXTOK,
                                                                    temperature=0)
    r = raw.parse()
    assert r.usage.prompt_tokens == ntok(srv_auto, short)
    assert truncated_tokens(r.usage) == 0 and raw.headers["x-tachyon-truncated-tokens"] == "0"


def test_chat_auto_no_max_tokens_keeps_room(srv):
    """Without max_tokens, auto keeps room for min(256, ctx/4) = 128 tokens and the completion is capped."""
    tl = turns()
    msgs = [SYSTEM] + [m for t in tl for m in t] + [LAST]
    k, kept = expected_drop(srv, [SYSTEM], tl, [LAST], CTX - CTX // 4)
    r = client(srv).chat.completions.create(model=M, messages=msgs, temperature=0,
                                            extra_body={"truncation": "auto", "ignore_eos": True})
    assert r.usage.prompt_tokens == kept
    assert r.usage.prompt_tokens + r.usage.completion_tokens <= CTX
    assert r.usage.completion_tokens >= CTX // 4


def test_chat_auto_last_turn_too_long_refuses(srv):
    huge = {"role": "user", "content": "counting words " * 400}
    msgs = [SYSTEM] + [m for t in turns(3) for m in t] + [huge]
    with pytest.raises(openai.BadRequestError) as ei:
        client(srv).chat.completions.create(model=M, messages=msgs, max_tokens=MAXTOK,
                                            extra_body={"truncation": "auto"})
    assert ei.value.code == "context_length_exceeded"
    # so is a system message alone too long: it is never dropped
    sysbig = {"role": "system", "content": "rules " * 600}
    with pytest.raises(openai.BadRequestError) as ei:
        client(srv).chat.completions.create(model=M, messages=[sysbig] + [m for t in turns(3) for m in t] + [LAST],
                                            max_tokens=MAXTOK, extra_body={"truncation": "auto"})
    assert ei.value.code == "context_length_exceeded"


TOOLS = [{"type": "function", "function": {"name": "lookup", "description": "Look a number up.",
                                           "parameters": {"type": "object",
                                                          "properties": {"n": {"type": "integer"}}}}}]


def tool_turn(i):
    call = {"id": "call_%d" % i, "type": "function", "function": {"name": "lookup", "arguments": json.dumps({"n": i})}}
    return [{"role": "user", "content": "Look up number %d for me please, and tell me about it in detail." % i},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_%d" % i,
             "content": "The number %d is a number that appears in many tables and several old books." % i},
            {"role": "assistant", "content": "Number %d appears in many tables and several old books." % i}]


def test_chat_auto_tool_calls_stay_with_results(srv):
    tl = [tool_turn(i) if i % 2 == 0 else t for i, t in enumerate(turns(10))]
    msgs = [SYSTEM] + [m for t in tl for m in t] + [LAST]
    budget = CTX - MAXTOK
    extra = {"tools": TOOLS}
    assert ntok(srv, msgs, **extra) > budget
    k, kept = expected_drop(srv, [SYSTEM], tl, [LAST], budget, **extra)
    assert k and k < len(tl)
    raw = client(srv).chat.completions.with_raw_response.create(
        model=M, messages=msgs, max_tokens=MAXTOK, temperature=0, tools=TOOLS, extra_body={"truncation": "auto"})
    r = raw.parse()
    assert r.usage.prompt_tokens == kept
    assert raw.headers["x-tachyon-truncated-messages"] == str(sum(len(t) for t in tl[:k]))


def test_chat_auto_stream_usage(srv):
    tl = turns()
    msgs = [SYSTEM] + [m for t in tl for m in t] + [LAST]
    full = ntok(srv, msgs)
    k, kept = expected_drop(srv, [SYSTEM], tl, [LAST], CTX - MAXTOK)
    raw = client(srv).chat.completions.with_raw_response.create(
        model=M, messages=msgs, max_tokens=MAXTOK, temperature=0, stream=True,
        stream_options={"include_usage": True}, extra_body={"truncation": "auto"})
    assert raw.headers["x-tachyon-truncated-tokens"] == str(full - kept)
    assert raw.headers["x-tachyon-truncated-messages"] == str(2 * k)
    usage = [c.usage for c in raw.parse() if c.usage]
    assert len(usage) == 1
    assert usage[0].prompt_tokens == kept and truncated_tokens(usage[0]) == full - kept


def completion_prompt():
    middle = " ".join("filler%d" % i for i in range(300))
    return "ALPHA begins the text. " + middle + " MIDDLEMARK " + middle + " the text ends with OMEGA"


def test_completions_middle_out(srv):
    prompt = completion_prompt()
    st, _, j = srv.post("/tokenize", {"content": prompt, "add_special": False})  # SmolLM2 adds no BOS
    full = len(j["tokens"])
    budget = CTX - MAXTOK
    assert full > budget
    with pytest.raises(openai.BadRequestError) as ei:
        client(srv).completions.create(model=M, prompt=prompt, max_tokens=MAXTOK)
    assert ei.value.code == "context_length_exceeded"
    raw = client(srv).completions.with_raw_response.create(
        model=M, prompt=prompt, max_tokens=1, temperature=0, echo=True, logprobs=0,
        extra_body={"truncation": "auto"})
    r = raw.parse()
    # max_tokens 1 leaves room for all but one token
    assert r.usage.prompt_tokens == CTX - 1 and truncated_tokens(r.usage) == full - (CTX - 1)
    assert raw.headers["x-tachyon-truncated-tokens"] == str(full - (CTX - 1))
    assert "x-tachyon-truncated-messages" not in raw.headers
    scored = "".join(r.choices[0].logprobs.tokens[:CTX - 1])  # the prompt tokens the model saw
    assert "ALPHA" in scored[:40] and scored.rstrip().endswith("OMEGA"), scored[:80] + " … " + scored[-80:]
    assert "MIDDLEMARK" not in scored
    # streamed: usage in the final chunk
    raw = client(srv).completions.with_raw_response.create(
        model=M, prompt=prompt, max_tokens=MAXTOK, temperature=0, stream=True,
        stream_options={"include_usage": True}, extra_body={"truncation": "auto"})
    usage = [c.usage for c in raw.parse() if c.usage]
    assert usage and usage[0].prompt_tokens == budget and truncated_tokens(usage[0]) == full - budget


def test_truncation_field_validated(srv):
    with pytest.raises(openai.BadRequestError) as ei:
        client(srv).chat.completions.create(model=M, messages=[LAST], max_tokens=2,
                                            extra_body={"truncation": "middle"})
    assert "truncation" in str(ei.value)


def test_chat_auto_long_history_on_the_worker(srv):
    """A 300-turn history (a body over 64 KiB: prepared on the worker thread): the oldest turns go, exactly as
    many as needed (the kept conversation fits, one more turn would not)."""
    tl = turns(300)
    msgs = [SYSTEM] + [m for t in tl for m in t] + [LAST]
    assert len(json.dumps({"messages": msgs})) > 64 * 1024
    raw = client(srv).chat.completions.with_raw_response.create(
        model=M, messages=msgs, max_tokens=MAXTOK, temperature=0, extra_body={"truncation": "auto"})
    r = raw.parse()
    k = int(raw.headers["x-tachyon-truncated-messages"]) // 2
    assert 0 < k < 300
    assert r.usage.prompt_tokens == ntok(srv, [SYSTEM] + [m for t in tl[k:] for m in t] + [LAST])
    assert ntok(srv, [SYSTEM] + [m for t in tl[k - 1:] for m in t] + [LAST]) + MAXTOK > CTX
    assert truncated_tokens(r.usage) == ntok(srv, msgs) - r.usage.prompt_tokens
