"""`auto` and several streams (src/spec/spec_itl.h): drafted rows lengthen the step every stream waits for, so
with two or more streams decoding, `auto` lets drafts make a step at most as long as the recent p99 (the 3rd
longest of the last 256) of the draft-free steps. In steady multi-stream decoding that leaves no room: no drafts,
no probes, the streams' inter-token gaps are those of `--spec off`. One stream alone drafts as before.

The engine is slowed by the test-only TACHYON_FAULT=step_sleep_ms:A:B hook (every step A ms + B ms per batch
token longer) so that the step-cost model sees a clean line whatever the machine's load."""
import concurrent.futures as cf
import json
import time

from conftest import STORIES

BODY = {"prompt": "Once upon a time", "max_tokens": 330, "temperature": 0, "ignore_eos": True}


def spec_stats(srv):
    st, _, j = srv.request("GET", "/stats")
    assert st == 200
    j = json.loads(j)
    return j["steps"], j["spec"]["draft_tokens"]


def test_multi_stream_auto_keeps_steps_plain(make_server, monkeypatch):
    monkeypatch.setenv("TACHYON_FAULT", "step_sleep_ms:6:1")
    srv = make_server(STORIES, "--spec", "auto", "--ctx-size", 512, "--spec-k", 4)
    for n in (1, 8, 30):  # steps of different sizes: the step-cost model learns the slowed engine (its start-up
        # warm-up timed the engine without the sleep)
        assert srv.post("/v1/completions", {"prompt": "Once upon a time " * n, "max_tokens": 2})[0] == 200
    want = srv.post("/v1/completions", BODY)[2]["choices"][0]["text"]
    _, d_one = spec_stats(srv)
    assert d_one > 20, "one stream alone drafted %d tokens in 330" % d_one  # the looping story copies itself

    with cf.ThreadPoolExecutor(4) as ex:
        futs = [ex.submit(srv.post, "/v1/completions", BODY) for _ in range(4)]
        # once the prompts' steps have left the window, drafting stops: sample the counter 270 steps in
        s0, _ = spec_stats(srv)
        while True:
            s, d_mid = spec_stats(srv)
            if s >= s0 + 270 or all(f.done() for f in futs):
                break
            time.sleep(0.02)
        got = [f.result()[2]["choices"][0]["text"] for f in futs]
    s_end, d_end = spec_stats(srv)
    assert d_end == d_mid, "auto drafted %d tokens in steady 4-stream decoding" % (d_end - d_mid)
    assert s_end - s0 >= 300, "the four streams took %d steps" % (s_end - s0)  # they did run together
    assert got == [want] * 4
