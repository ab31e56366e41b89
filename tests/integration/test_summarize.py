"""Summarization policy (`--summarize-with MODEL`) through the real server with the openai client on
SmolLM2 with a small context: with truncation "auto" the dropped turns are replaced by one generated summary
message (x-tachyon-summary: generated), an identical conversation hits the cache (cached, /stats counter, same
prompt), the system message and the last turn stay, other streams keep producing tokens while a summary is
generated, and a failed summary falls back to plain truncation (failed). The summary itself is not checked
for quality, only that it is there: the prompt used is longer than the kept messages alone by its tokens."""
import json
import os
import threading
import time

import openai
import pytest

from conftest import BIN, SMOL, STORIES, Server

M = "SmolLM2-135M-Instruct.Q4_1"  # the served model name (the file name)
CTX = 512
MAXTOK = 16


def need(*models):
    if not os.path.exists(BIN):
        pytest.skip("no binary at %s" % BIN)
    for m in models:
        if not os.path.exists(m):
            pytest.skip("model %s not present (run make models)" % m)


def start(*args, env=None):
    old = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        return Server(SMOL, "--ctx-size", CTX, "--truncation", "auto", *args)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def srv():
    need(SMOL)
    s = start("--summarize-with", M, "--log-level", "debug")
    yield s
    s.stop()


def client(s):
    return openai.OpenAI(base_url=s.base + "/v1", api_key="none", max_retries=0)


SYSTEM = {"role": "system", "content": "You are a terse assistant. Remember the code word PELICAN."}
LAST = {"role": "user", "content": "What was the code word? Answer with one word."}


def turns(n=12, topic="rivers"):
    """n turns of a user question and an assistant answer, each turn well over 40 tokens."""
    out = []
    for i in range(n):
        out.append([{"role": "user", "content": "Question %d: tell me something about the number %d, and about "
                     "%s, mountains and the history of counting in several old cultures." % (i, i, topic)},
                    {"role": "assistant", "content": "Answer %d: the number %d is fine; %s are old, "
                     "mountains rise slowly, and people counted on fingers long before writing." % (i, i, topic)}])
    return out


def ntok(s, messages):
    st, _, j = s.post("/tokenize", {"messages": messages})
    assert st == 200, j
    return len(j["tokens"])


def summary_stats(s):
    st, _, data = s.request("GET", "/stats")
    assert st == 200
    return json.loads(data)["summary"]


def ask(s, tl, **kw):
    msgs = [SYSTEM] + [m for t in tl for m in t] + [LAST]
    raw = client(s).chat.completions.with_raw_response.create(model=M, messages=msgs, max_tokens=MAXTOK,
                                                              temperature=0, **kw)
    return raw, raw.parse(), msgs


def check_summarized(s, raw, r, tl, msgs):
    """The reply used [SYSTEM, summary, kept turns, LAST]: kept turns from the truncation header; the summary
    is what the prompt has beyond those. Returns the summary's tokens."""
    full = ntok(s, msgs)
    dropped = int(raw.headers["x-tachyon-truncated-messages"])
    assert dropped > 0 and dropped % 2 == 0, dropped  # whole turns
    k = dropped // 2
    assert k < len(tl)
    kept = ntok(s, [SYSTEM] + [m for t in tl[k:] for m in t] + [LAST])
    assert int(raw.headers["x-tachyon-truncated-tokens"]) == full - kept
    assert r.usage.prompt_tokens + MAXTOK <= CTX
    extra = r.usage.prompt_tokens - kept
    assert extra > 8, "no summary message in the prompt (%d tokens beyond the kept messages)" % extra
    return extra


def test_summary_generated_then_cached(srv):
    tl = turns()
    before = summary_stats(srv)
    raw, r, msgs = ask(srv, tl)
    assert raw.headers["x-tachyon-summary"] == "generated"
    extra = check_summarized(srv, raw, r, tl, msgs)
    assert r.choices[0].finish_reason in ("stop", "length")
    st = summary_stats(srv)
    assert st["generated"] == before["generated"] + 1
    assert st["cache_entries"] >= 1
    # the same conversation again: the cached summary, the same prompt
    raw2, r2, _ = ask(srv, tl)
    assert raw2.headers["x-tachyon-summary"] == "cached"
    assert check_summarized(srv, raw2, r2, tl, msgs) == extra
    assert r2.usage.prompt_tokens == r.usage.prompt_tokens
    assert r2.choices[0].message.content == r.choices[0].message.content  # greedy, same prompt
    st2 = summary_stats(srv)
    assert st2["cached"] == st["cached"] + 1
    assert st2["generated"] == st["generated"]


def test_fitting_conversation_has_no_summary(srv):
    raw, r, _ = ask(srv, turns(1))
    assert "x-tachyon-summary" not in raw.headers
    assert raw.headers["x-tachyon-truncated-messages"] == "0"


def test_streams_go_on_while_a_summary_is_generated(srv):
    """A long stream runs; a conversation needing a (new) summary arrives: the stream's chunks keep arriving
    between that request's send and its reply (the summary is batched, it never holds the engine)."""
    got = []
    done = threading.Event()

    def streamer():
        s = client(srv).chat.completions.create(
            model=M, messages=[{"role": "user", "content": "Count from one to one thousand in words."}],
            max_tokens=300, temperature=0, stream=True, extra_body={"ignore_eos": True})
        for ch in s:
            got.append(time.monotonic())
        done.set()

    t = threading.Thread(target=streamer)
    t.start()
    while len(got) < 5 and not done.is_set():
        time.sleep(0.01)
    t0 = time.monotonic()
    raw, r, msgs = ask(srv, turns(12, topic="lakes"))
    t1 = time.monotonic()
    t.join(120)
    assert raw.headers["x-tachyon-summary"] == "generated"
    check_summarized(srv, raw, r, turns(12, topic="lakes"), msgs)
    during = [x for x in got if t0 < x < t1]
    assert len(during) >= 3, "the stream stalled while the summary was generated (%d chunks in %.2f s)" % (
        len(during), t1 - t0)
    assert len(got) > 250, len(got)


def test_client_leaving_during_a_summary(srv):
    """A client that gives up while its summary is generated: the summary still finishes (and is cached), the
    server stays healthy, and the same conversation then launches from the cache."""
    tl = turns(12, topic="forests")
    msgs = [SYSTEM] + [m for t in tl for m in t] + [LAST]
    before = summary_stats(srv)
    with pytest.raises(openai.APITimeoutError):
        openai.OpenAI(base_url=srv.base + "/v1", api_key="none", max_retries=0, timeout=0.3).chat.completions.create(
            model=M, messages=msgs, max_tokens=MAXTOK, temperature=0)
    deadline = time.time() + 60
    while summary_stats(srv)["generated"] == before["generated"] and time.time() < deadline:
        time.sleep(0.1)
    assert summary_stats(srv)["generated"] == before["generated"] + 1
    raw, r, _ = ask(srv, tl)
    assert raw.headers["x-tachyon-summary"] == "cached"
    assert "summary by" in open(srv.log_path).read()  # the debug log shows the summary text


def test_summary_failure_falls_back():
    need(SMOL)
    s = start("--summarize-with", M, env={"TACHYON_FAULT_SUMMARY": "1"})
    try:
        tl = turns()
        raw, r, msgs = ask(s, tl)
        assert raw.headers["x-tachyon-summary"] == "failed"
        dropped = int(raw.headers["x-tachyon-truncated-messages"])
        k = dropped // 2
        assert 0 < k < len(tl)
        # plain truncation: exactly the kept messages, nothing inserted
        assert r.usage.prompt_tokens == ntok(s, [SYSTEM] + [m for t in tl[k:] for m in t] + [LAST])
        assert summary_stats(s)["failed"] == 1
    finally:
        s.stop()


def test_summary_by_another_model():
    """Two models in one server: SmolLM2's dropped turns summarized by stories260K (any text will do)."""
    need(SMOL, STORIES)
    s = Server("smol=" + SMOL, "-m", "tiny=" + STORIES, "--ctx-size", CTX, "--truncation", "auto",
               "--summarize-with", "tiny")
    try:
        tl = turns()
        msgs = [SYSTEM] + [m for t in tl for m in t] + [LAST]
        raw = client(s).chat.completions.with_raw_response.create(model="smol", messages=msgs, max_tokens=MAXTOK,
                                                                  temperature=0)
        r = raw.parse()
        assert raw.headers["x-tachyon-summary"] in ("generated", "failed")
        assert raw.headers["x-tachyon-summary"] == "generated", s.read_log()
        assert r.usage.prompt_tokens + MAXTOK <= CTX
    finally:
        s.stop()
