"""OpenAI API behaviour of `tachyon serve`: streamed == non-streamed, usage, the official client, stop
strings, n, logprobs, tokenize/detokenize, models, metrics/stats, concurrency == alone."""
import concurrent.futures as cf
import json

import numpy as np
import pytest

import refprobs
from conftest import STORIES, chat_body, stream_text

PROMPTS = ["Once upon a time", "The little dog", "Lily and Ben went", "One day, a big", "The sun was",
           "Tom had a red ball", "In the park", "The cat said", "A girl named Sue", "Max was sad because",
           "They played with", "Mom said", "The bird flew", "It was a sunny day", "Sam wanted to", "The tree"]


def complete(srv, prompt, max_tokens=24, **kw):
    b = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
    b.update(kw)
    st, _, j = srv.post("/v1/completions", b)
    assert st == 200, j
    return j


@pytest.mark.parametrize("kind", ["chat", "completions"])
def test_stream_equals_nonstream(stories, kind):
    if kind == "chat":
        path, body = "/v1/chat/completions", chat_body("Tell me a story about a cat.", 32)
    else:
        path, body = "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 32, "temperature": 0}
    st, _, full = stories.post(path, body)
    assert st == 200, full
    st, events, raw = stories.stream(path, dict(body, stream=True))
    assert st == 200
    assert events[-1] == "[DONE]", raw[-200:]
    text = stream_text(events, kind="chat" if kind == "chat" else "cmpl")
    want = full["choices"][0]["message"]["content"] if kind == "chat" else full["choices"][0]["text"]
    assert text == want, "streamed %r != non-streamed %r" % (text, want)
    finals = [e for e in events[:-1] if e["choices"] and e["choices"][0]["finish_reason"]]
    assert len(finals) == 1 and finals[0]["choices"][0]["finish_reason"] == full["choices"][0]["finish_reason"]
    ids = {e["id"] for e in events[:-1]}
    assert len(ids) == 1
    obj = "chat.completion.chunk" if kind == "chat" else "text_completion"
    assert all(e["object"] == obj for e in events[:-1])
    if kind == "chat":
        first = events[0]["choices"][0]["delta"]
        assert first == {"role": "assistant", "content": ""}, first
        assert full["object"] == "chat.completion" and full["id"].startswith("chatcmpl-")
        assert full["choices"][0]["message"]["role"] == "assistant"
    else:
        assert full["object"] == "text_completion" and full["id"].startswith("cmpl-")
    assert isinstance(full["created"], int) and full["model"]


def test_usage(stories):
    st, _, tok = stories.post("/tokenize", {"content": "Once upon a time", "add_special": True})
    assert st == 200
    j = complete(stories, "Once upon a time", 16, ignore_eos=True)
    u = j["usage"]
    assert u["prompt_tokens"] == len(tok["tokens"]), (u, tok)
    assert j["choices"][0]["finish_reason"] == "length"
    assert u["completion_tokens"] == 16
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    assert "cached_tokens" in u["prompt_tokens_details"]
    # streamed usage chunk agrees
    st, events, _ = stories.stream("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 16,
                                                       "temperature": 0, "ignore_eos": True, "stream": True,
                                                       "stream_options": {"include_usage": True}})
    usage = [e for e in events if e != "[DONE]" and e.get("usage")]
    assert len(usage) == 1 and usage[0]["choices"] == []
    assert usage[0]["usage"]["prompt_tokens"] == u["prompt_tokens"]
    assert usage[0]["usage"]["completion_tokens"] == 16


def test_openai_client(stories):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=stories.base + "/v1", api_key="unused")
    models = client.models.list()
    name = models.data[0].id
    msgs = [{"role": "user", "content": "Say something nice."}]
    full = client.chat.completions.create(model=name, messages=msgs, max_tokens=20, temperature=0)
    assert full.choices[0].message.role == "assistant"
    stream = client.chat.completions.create(model=name, messages=msgs, max_tokens=20, temperature=0, stream=True,
                                            stream_options={"include_usage": True})
    text, usage, finish = "", None, None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
            assert chunk.choices == []
        for c in chunk.choices:
            text += c.delta.content or ""
            finish = c.finish_reason or finish
    assert text == full.choices[0].message.content
    assert finish == full.choices[0].finish_reason
    assert usage is not None and usage.completion_tokens == full.usage.completion_tokens
    assert usage.prompt_tokens == full.usage.prompt_tokens
    c = client.completions.create(model=name, prompt="Once upon a time", max_tokens=8, temperature=0)
    assert c.choices[0].text and c.usage.completion_tokens <= 8
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="no-such-model", messages=msgs, max_tokens=4)


def test_stop_string(stories):
    base = complete(stories, "Once upon a time", 40, ignore_eos=True)["choices"][0]["text"]
    assert len(base) > 12, base
    # a stop string from the middle of the greedy output: the text ends right before it
    stop = base[8:11]
    cut = base[:base.index(stop)]
    j = complete(stories, "Once upon a time", 40, ignore_eos=True, stop=[stop, "zzzzqqq"])
    assert j["choices"][0]["text"] == cut
    assert j["choices"][0]["finish_reason"] == "stop"
    st, events, _ = stories.stream("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 40,
                                                       "temperature": 0, "ignore_eos": True, "stop": stop,
                                                       "stream": True})
    assert stream_text(events, kind="cmpl") == cut
    fin = [e["choices"][0]["finish_reason"] for e in events[:-1] if e["choices"][0]["finish_reason"]]
    assert fin == ["stop"]


def test_n_choices(stories):
    body = chat_body("Hello there", 12, n=3)
    st, _, j = stories.post("/v1/chat/completions", body)
    assert st == 200, j
    one = stories.post("/v1/chat/completions", chat_body("Hello there", 12))[2]
    assert [c["index"] for c in j["choices"]] == [0, 1, 2]
    for c in j["choices"]:
        assert c["message"]["content"] == one["choices"][0]["message"]["content"]
    assert j["usage"]["completion_tokens"] == 3 * one["usage"]["completion_tokens"]
    st, events, _ = stories.stream("/v1/chat/completions", dict(body, stream=True))
    for i in range(3):
        assert stream_text(events, i) == one["choices"][0]["message"]["content"]


LONG_PREFIX = " ".join(["Once upon a time there was a little dog named Max who liked to run in the park."] * 6)


def _cached(srv, prompt):
    j = complete(srv, prompt, 2)
    return j["usage"]["prompt_tokens_details"]["cached_tokens"], j["usage"]["prompt_tokens"]


def test_prefix_cache_reports_cached_tokens(stories):
    # Two prompts sharing a ~100-token prefix: the second reuses the first one's full KV blocks.
    shared = len(stories.post("/tokenize", {"content": LONG_PREFIX, "add_special": True})[2]["tokens"])
    assert shared >= 64, shared
    hits0 = stories.metrics()["tachyon:prefix_cache_hit_tokens_total"]
    _cached(stories, LONG_PREFIX + " The end.")
    cached, n_prompt = _cached(stories, LONG_PREFIX + " Then the sun came out.")
    assert 0 < cached <= min(shared, n_prompt - 1), (cached, shared, n_prompt)
    assert cached >= shared - 32, "only %d of %d shared prompt tokens came from the cache" % (cached, shared)
    assert stories.metrics()["tachyon:prefix_cache_hit_tokens_total"] - hits0 >= cached


def test_prefix_cache_off_reports_zero(make_server):
    srv = make_server(None, "--ctx-size", 512, "--no-prefix-cache")
    _cached(srv, LONG_PREFIX + " The end.")
    cached, _ = _cached(srv, LONG_PREFIX + " Then the sun came out.")
    assert cached == 0
    assert srv.metrics()["tachyon:prefix_cache_hit_tokens_total"] == 0


def _greedy_reference(model, prompt_ids, n):
    """Per generated position: (chosen id, log-softmax row of the raw logits), greedy, from `tachyon logits`."""
    ids, out = list(prompt_ids), []
    for _ in range(n):
        ls = refprobs.log_softmax(refprobs.logits(model, ids)[-1])
        t = int(np.argmax(ls))
        out.append((t, ls))
        ids.append(t)
    return out


def test_logprobs_equal_log_softmax_of_logits(stories):
    prompt = [1, 378, 31]  # a spread-out next-token distribution: the top-k alternatives are far from 0
    k, n = 5, 4
    j = complete(stories, prompt, n, logprobs=k, ignore_eos=True)
    lp = j["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == len(lp["text_offset"]) == n
    ref = _greedy_reference(STORIES, prompt, n)
    st, _, d = stories.post("/detokenize", {"tokens": [t for t, _ in ref]})
    text = j["choices"][0]["text"]
    assert st == 200 and text.lstrip() == d["content"] and "".join(lp["tokens"]) == text, (text, d, lp["tokens"])
    for pos, (t, ls) in enumerate(ref):
        assert abs(lp["token_logprobs"][pos] - ls[t]) < 1e-3, (pos, lp["token_logprobs"][pos], ls[t])
        want = np.sort(ls)[::-1][:k]
        got = sorted(lp["top_logprobs"][pos].values(), reverse=True)
        assert len(got) == k, lp["top_logprobs"][pos]  # k distinct pieces here
        assert np.abs(np.array(got) - want).max() < 1e-3, (pos, got, want)
        assert lp["top_logprobs"][pos][lp["tokens"][pos]] == lp["token_logprobs"][pos]
    # chat: the chosen token's logprob is the first of the top list (greedy), each entry's bytes are its token
    st, _, j = stories.post("/v1/chat/completions", chat_body("Hi", 6, logprobs=True, top_logprobs=3))
    assert st == 200, j
    content = j["choices"][0]["logprobs"]["content"]
    assert len(content) == j["usage"]["completion_tokens"]
    for e in content:
        assert len(e["top_logprobs"]) == 3 and bytes(e["bytes"]) == e["token"].encode()
        assert abs(e["logprob"] - e["top_logprobs"][0]["logprob"]) < 1e-6


def test_tokenize_roundtrip(stories):
    st, _, t = stories.post("/tokenize", {"content": "Hello world, once upon a time."})
    assert st == 200 and all(isinstance(x, int) for x in t["tokens"]) and t["tokens"]
    st, _, d = stories.post("/detokenize", {"tokens": t["tokens"]})
    assert st == 200 and d["content"].strip() == "Hello world, once upon a time."
    st, _, e = stories.post("/detokenize", {"tokens": [10 ** 9]})
    assert st == 400 and e["error"]["param"] == "tokens"


def test_models_metrics_stats(stories):
    st, _, data = stories.request("GET", "/v1/models")
    j = json.loads(data)
    assert st == 200 and j["object"] == "list" and j["data"][0]["object"] == "model"
    complete(stories, "Once upon a time", 8)
    m = stories.metrics()
    for name in ["tachyon:time_to_first_token_seconds_count", "tachyon:e2e_request_latency_seconds_count",
                 "tachyon:time_per_output_token_seconds_count", "tachyon:inter_token_latency_seconds_count",
                 "tachyon:request_queue_time_seconds_count", "tachyon:num_requests_running",
                 "tachyon:num_requests_waiting", "tachyon:kv_blocks_used", "tachyon:kv_blocks_total",
                 "tachyon:prompt_tokens_total", "tachyon:generation_tokens_total", "tachyon:preemptions_total",
                 "tachyon:requests_rejected_total", "tachyon:requests_cancelled_total",
                 "tachyon:prefix_cache_hit_tokens_total", "tachyon:prefix_cache_queries_total",
                 'tachyon:request_success_total{finish_reason="length"}']:
        assert name in m, name
    assert m["tachyon:e2e_request_latency_seconds_count"] >= 1
    assert m["tachyon:generation_tokens_total"] >= 8
    assert m["tachyon:kv_blocks_total"] > 0
    st, _, data = stories.request("GET", "/stats")
    s = json.loads(data)
    assert st == 200
    w = s["windows"]["1m"]
    assert w["ttft"]["n"] >= 1 and w["ttft"]["p50"] > 0 and w["e2e"]["p99"] >= w["e2e"]["p50"]
    for k in ["output_tokens_per_s", "running", "waiting", "kv_usage", "prefix_cache_hit_rate"]:
        assert k in s


def _alone_and_together(srv, prompts, max_tokens):
    alone = [complete(srv, p, max_tokens)["choices"][0]["text"] for p in prompts]
    with cf.ThreadPoolExecutor(len(prompts)) as ex:
        together = list(ex.map(lambda p: complete(srv, p, max_tokens)["choices"][0]["text"], prompts))
    return alone, together


def test_concurrent_equals_alone_stories(stories):
    alone, together = _alone_and_together(stories, PROMPTS, 32)
    for p, a, t in zip(PROMPTS, alone, together):
        assert a == t, "prompt %r: alone %r vs concurrent %r" % (p, a, t)


def test_concurrent_equals_alone_smol(smol):
    alone, together = _alone_and_together(smol, PROMPTS, 12)
    for p, a, t in zip(PROMPTS, alone, together):
        assert a == t, "prompt %r: alone %r vs concurrent %r" % (p, a, t)
