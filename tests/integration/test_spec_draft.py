"""Model-based speculation through the API: a draft model (--draft-model, --spec draft) and self-speculation
(--spec self, the target's first L layers).

- Greedy output is byte-identical with speculation off and on, alone and in a concurrent batch (the drafter
  runs one batched forward per draft position over every drafting request), streamed and not, on
  /v1/chat/completions and /v1/completions: SmolLM2 drafting for itself (the same file: every draft is
  accepted, so the multi-token path runs on every step) and stories260K drafting for itself.
- A draft whose vocabulary differs from the target's is refused at startup with a message naming the first
  difference.
- Sampled requests with a sampled (NOT one-hot) draft keep the target's distribution: the draft draws x from
  q = softmax(draft logits / T) over the whole vocabulary while the target samples with top_k = 5, so q != p and
  the verifier's min(1, p/q) test and its residual normalize(max(0, p - q)) both run. The first two tokens over
  512 seeds pass a chi-square test against the exact distribution from `tachyon logits` at p > 1e-4 (a fixed
  seed set: deterministic).
- Metrics and /stats carry the method label (draft, self).
- Self-speculation drafts in the target's own KV (layers 0..L-1 of the drafted rows) and the verify forward
  resumes those rows at layer L: greedy output stays identical alone, among concurrent requests (one batched
  early-exit forward per draft position, resumed rows of several requests in one verify batch), and with
  Gemma 3's sliding-window KV (the local layers' block tables, a prompt past the 512-position window).
"""
import concurrent.futures as cf
import json
import os

import pytest

from conftest import SMOL, STORIES, Server, stream_text
from test_spec import PROMPTS, check_pair_distribution, pair_draws


def need_smol():
    if not os.path.exists(SMOL):
        pytest.skip("SmolLM2 model not present")


@pytest.fixture(scope="module")
def off():
    need_smol()
    s = Server(SMOL, "--ctx-size", 1024, "--spec", "off")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def draft():
    need_smol()
    s = Server(SMOL, "--ctx-size", 1024, "--spec", "draft", "--draft-model", SMOL, "--itl-guard", 0)
    yield s
    s.stop()


def chat(srv, msgs, **kw):
    b = {"messages": msgs, "max_tokens": 32, "temperature": 0}
    b.update(kw)
    st, _, j = srv.post("/v1/chat/completions", b, timeout=180)
    assert st == 200, j
    return j["choices"][0]["message"]["content"]


def drafted(srv, method):
    m = srv.metrics()
    return (m['tachyon:spec_draft_tokens_total{method="%s"}' % method],
            m['tachyon:spec_accepted_tokens_total{method="%s"}' % method])


def test_draft_model_greedy_identical(off, draft):
    d0, _ = drafted(draft, "draft")
    for msgs in PROMPTS[:2]:
        want = chat(off, msgs)
        assert chat(draft, msgs) == want
        st, ev, _ = draft.stream("/v1/chat/completions", {"messages": msgs, "max_tokens": 32, "temperature": 0,
                                                          "stream": True})
        assert st == 200 and stream_text(ev) == want
    d1, a1 = drafted(draft, "draft")
    assert d1 > d0 + 20  # the draft model really drafted
    assert a1 > 0.9 * d1  # the same model drafts what the target picks
    st, _, raw = draft.request("GET", "/stats")
    s = json.loads(raw)["spec"]
    assert s["by_method"]["draft"]["draft_tokens"] == d1 and s["acceptance_rate"] > 0.9, s


def test_draft_model_prefills_beside_the_target(draft):
    # the draft model runs each prompt chunk in the step that prefills it (time to first token), not the whole
    # prompt at the first draft (an inter-token gap): its prefilled tokens follow the prompt tokens
    def prefilled():
        st, _, raw = draft.request("GET", "/stats")
        return json.loads(raw)["spec"]["draft_prefill_tokens"]
    p0 = prefilled()
    msgs = [{"role": "user", "content": "Count the words in this sentence, then repeat it: " + "tic tac toe " * 60}]
    st, _, j = draft.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 8, "temperature": 0})
    assert st == 200, j
    n_prompt = j["usage"]["prompt_tokens"] - j["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)
    assert prefilled() - p0 >= n_prompt - 1 > 150, (prefilled() - p0, j["usage"])


def test_draft_model_completions_identical(off, draft):
    b = {"prompt": "The capital of France is", "max_tokens": 24, "temperature": 0}
    _, _, a = off.post("/v1/completions", b)
    _, _, c = draft.post("/v1/completions", b)
    assert a["choices"][0]["text"] == c["choices"][0]["text"]
    _, ev_off, _ = off.stream("/v1/completions", dict(b, stream=True))
    _, ev_on, _ = draft.stream("/v1/completions", dict(b, stream=True))
    assert stream_text(ev_on, kind="cmpl") == stream_text(ev_off, kind="cmpl")


def assert_concurrent_same(srv, off, msgs, what):
    want = [chat(off, m) for m in msgs]
    with cf.ThreadPoolExecutor(len(msgs)) as ex:
        got = list(ex.map(lambda m: chat(srv, m), msgs))
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, "prompt %d differs among %d concurrent requests %s:\n%r\n%r" % (i, len(msgs), what, g, w)


def test_draft_model_concurrent(off, draft):
    assert_concurrent_same(draft, off, PROMPTS[:6], "with a draft model")


def test_stories_drafts_for_itself(make_server):
    a = make_server(STORIES, "--spec", "off")
    d = make_server(STORIES, "--spec", "draft", "--draft-model", STORIES, "--spec-k", 4)
    prompts = ["Once upon a time", "The little dog", "Lily and Tom went to the park", "One day"]
    body = lambda p: {"prompt": p, "max_tokens": 40, "temperature": 0}  # noqa: E731
    want = [a.post("/v1/completions", body(p))[2]["choices"][0]["text"] for p in prompts]
    with cf.ThreadPoolExecutor(4) as ex:
        got = list(ex.map(lambda p: d.post("/v1/completions", body(p))[2]["choices"][0]["text"], prompts))
    assert got == want
    assert drafted(d, "draft")[0] > 0
    # auto with a draft model: it drafts with it while the measured draft cost allows (at least the first try);
    # one stream at a time (with several, auto keeps steps to the plain steps' p99: test_spec_itl.py)
    au = make_server(STORIES, "--spec", "auto", "--draft-model", STORIES, "--spec-k", 4)
    got = [au.post("/v1/completions", body(p))[2]["choices"][0]["text"] for p in prompts]
    assert got == want
    assert drafted(au, "draft")[0] > 0
    with cf.ThreadPoolExecutor(4) as ex:  # and concurrently, the output is still the same
        got = list(ex.map(lambda p: au.post("/v1/completions", body(p))[2]["choices"][0]["text"], prompts))
    assert got == want


def test_vocabulary_mismatch_refused():
    need_smol()
    with pytest.raises(RuntimeError) as e:
        Server(SMOL, "--spec", "draft", "--draft-model", STORIES)
    msg = str(e.value)
    assert "draft model vocabulary has 512 tokens, the target's has 49152" in msg, msg[-800:]


def test_self_spec_greedy_identical(off):
    s = Server(SMOL, "--ctx-size", 1024, "--spec", "self", "--self-spec-layers", 24, "--spec-k", 3)
    try:
        msgs = PROMPTS[0]
        want = chat(off, msgs, max_tokens=24)
        assert chat(s, msgs, max_tokens=24) == want
        st, ev, _ = s.stream("/v1/chat/completions", {"messages": msgs, "max_tokens": 24, "temperature": 0,
                                                      "stream": True})
        assert st == 200 and stream_text(ev) == want
        b = {"prompt": "1, 2, 3, 4, 5,", "max_tokens": 16, "temperature": 0}
        assert s.post("/v1/completions", b)[2]["choices"][0]["text"] == off.post("/v1/completions", b)[2]["choices"][0]["text"]
        assert drafted(s, "self")[0] > 0
    finally:
        s.stop()


def test_self_spec_refused_on_cuda():
    need_smol()
    with pytest.raises(RuntimeError) as e:
        Server(SMOL, "--spec", "self", "--device", "cuda")
    msg = str(e.value)
    assert "self-speculation" in msg and "--device cpu" in msg, msg[-800:]


def test_self_spec_concurrent(off):
    s = Server(SMOL, "--ctx-size", 1024, "--spec", "self", "--self-spec-layers", 24, "--spec-k", 4)
    try:
        assert_concurrent_same(s, off, PROMPTS[:6], "self-speculating")
        d, a = drafted(s, "self")
        assert d > 0 and a > 0, (d, a)  # drafts ran and some were kept: resumed rows reached the output
    finally:
        s.stop()


GEMMA = os.path.join(os.path.dirname(SMOL), "gemma-3-270m-q4_k_m.gguf")
# ~800 tokens (the local layers' window is 512 positions): numbered facts, so greedy output is not a loop
GEMMA_LONG = " ".join(f"Fact {i}: the {w} number {i * 7 % 97} sits next to the {v} river in town {i}."
                      for i, (w, v) in enumerate(zip(["red", "blue", "green", "old", "tall"] * 8,
                                                     ["quiet", "wide", "cold", "fast"] * 10)))


@pytest.mark.timeout(900)
def test_self_spec_gemma3_sliding_window(make_server):
    if not os.path.exists(GEMMA):
        pytest.skip("Gemma 3 model not present")
    # a KV budget that keeps the local layers' blocks in a pool of their own (block_tables_swa), released
    # behind the window
    args = ("--ctx-size", 2048, "--threads", 2, "--max-batch-tokens", 64, "--max-seqs", 3, "--kv-cache-mem", 64)
    off_g = make_server(GEMMA, *args, "--spec", "off")
    self_g = make_server(GEMMA, *args, "--spec", "self", "--self-spec-layers", 12, "--spec-k", 4)
    st, _, raw = self_g.request("GET", "/stats")
    assert json.loads(raw)["kv_swa_blocks_total"] > 0
    prompts = [GEMMA_LONG + " Which river is in town 3? Answer:", "The three primary colors are",
               "Once upon a time, in a small village by the sea,"]
    body = lambda p: {"prompt": p, "max_tokens": 32, "temperature": 0}  # noqa: E731
    want = [off_g.post("/v1/completions", body(p), timeout=600)[2]["choices"][0]["text"] for p in prompts]
    with cf.ThreadPoolExecutor(3) as ex:
        got = list(ex.map(lambda p: self_g.post("/v1/completions", body(p), timeout=600)[2]["choices"][0]["text"],
                          prompts))
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, "Gemma 3 prompt %d differs with self-speculation:\n%r\n%r" % (i, g, w)
    d, a = drafted(self_g, "self")
    assert d > 0 and a > 0, (d, a)


def test_sampled_draft_distribution(make_server):
    # Target: top_k 5 at temperature 2 with logit_bias -3 on " was" (286), the likeliest second token; the
    # draft draws from q = softmax(logits / 2) over all 512 tokens without the bias, so it over-proposes 286
    # and q is far from p: both the min(1, p/q) acceptance and the residual normalize(max(0, p - q)) shape
    # the second token (checked: with either replaced by the naive version, this test fails).
    bias = {"286": -3.0}
    params = dict(temperature=2.0, top_k=5, logit_bias=bias)
    on = make_server(STORIES, "--spec", "draft", "--draft-model", STORIES, "--spec-k", 4)
    d_on = pair_draws(on, params)
    check_pair_distribution(d_on, dict(temperature=2.0, top_k=5), bias=bias)
    n_draft, n_acc = drafted(on, "draft")
    assert n_draft > 0 and n_acc < n_draft  # drafts ran, and some were rejected (the residual was sampled)


def test_self_spec_sampled_distribution(make_server):
    # The same test with stories260K drafting through its own first 3 of 5 layers: sampled drafts from the
    # early exit, verified by a forward that resumes the drafted rows at layer 3 (the target's p is unchanged
    # by the reuse, so the pairs keep the exact distribution).
    bias = {"286": -3.0}
    on = make_server(STORIES, "--spec", "self", "--self-spec-layers", 3, "--spec-k", 4)
    d_on = pair_draws(on, dict(temperature=2.0, top_k=5, logit_bias=bias))
    check_pair_distribution(d_on, dict(temperature=2.0, top_k=5), bias=bias)
    n_draft, n_acc = drafted(on, "self")
    assert n_draft > 0 and 0 < n_acc < n_draft, (n_draft, n_acc)


def test_draft_pool_exhausted(off):
    # 2 MiB of draft KV holds ~90 SmolLM2 tokens (5 blocks): most requests find no room to draft and go on
    # without (dropping their draft KV so others can use it); output unchanged, nobody preempted or failed.
    s = Server(SMOL, "--ctx-size", 1024, "--spec", "draft", "--draft-model", SMOL, "--draft-kv-mem", 2)
    try:
        msgs = [[{"role": "user", "content": "Hi"}], [{"role": "user", "content": "Count to five."}]] + PROMPTS[:3]
        want = [chat(off, m, max_tokens=16) for m in msgs]
        with cf.ThreadPoolExecutor(5) as ex:
            got = list(ex.map(lambda m: chat(s, m, max_tokens=16), msgs))
        assert got == want
        assert s.metrics()["tachyon:preemptions_total"] == 0
        assert drafted(s, "draft")[0] > 0  # the requests that found room did draft
    finally:
        s.stop()
