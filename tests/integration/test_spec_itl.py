"""`auto` and several streams: drafted rows lengthen the step every stream waits for. By default (`--spec-max-streams
1`) `auto` drafts only while one stream decodes, as vLLM's speculative_disable_by_batch_size; with a higher limit,
a multi-stream step's drafts stay within the recent p99 of the streams' inter-token gaps without drafts
(src/speculation/spec_itl.h: the 10th largest of the last 1024 gaps), which in steady multi-stream decoding leaves no
room: no drafts, no probes, the streams' gaps are those of `--spec off`. One stream alone drafts as with the default limit.

The engine is slowed by the test-only TACHYON_FAULT=step_sleep_ms:A:B hook (every step A ms + B ms per batch
token longer) so that the step-cost model sees a clean line whatever the machine's load."""
import concurrent.futures as cf
import json
import time

import pytest

from conftest import STORIES

BODY = {"prompt": "Once upon a time", "max_tokens": 330, "temperature": 0, "ignore_eos": True}


def spec_stats(srv):
    st, _, j = srv.request("GET", "/stats")
    assert st == 200
    j = json.loads(j)
    return j["steps"], j["spec"]["draft_tokens"]


@pytest.mark.parametrize("limit", [None, 4])
def test_multi_stream_auto_keeps_steps_plain(make_server, monkeypatch, limit):
    monkeypatch.setenv("TACHYON_FAULT", "step_sleep_ms:6:1")
    extra = ["--spec-max-streams", limit] if limit else []
    srv = make_server(STORIES, "--spec", "auto", "--ctx-size", 512, "--spec-k", 4, *extra)
    for n in (1, 8, 30):  # steps of different sizes: the step-cost model learns the slowed engine (its start-up
        # warm-up timed the engine without the sleep)
        assert srv.post("/v1/completions", {"prompt": "Once upon a time " * n, "max_tokens": 2})[0] == 200
    want = srv.post("/v1/completions", BODY)[2]["choices"][0]["text"]
    _, d_one = spec_stats(srv)
    assert d_one > 20, "one stream alone drafted %d tokens in 330" % d_one  # the looping story copies itself

    long_prompt = {"prompt": "Once upon a time there was a little girl named Lily. " * 8, "max_tokens": 1}
    with cf.ThreadPoolExecutor(4) as ex:
        futs = [ex.submit(srv.post, "/v1/completions", BODY) for _ in range(4)]
        s0, d_start = spec_stats(srv)
        while spec_stats(srv)[0] < s0 + 3:  # the four decode together
            time.sleep(0.01)
        s0, d_start = spec_stats(srv)
        # 270 steps in, the prompts' steps have left the window (1024 gaps: 256 steps of 4 streams)
        while spec_stats(srv)[0] < s0 + 250:
            time.sleep(0.02)
        s_mid, d_mid = spec_stats(srv)
        while spec_stats(srv)[0] < s_mid + 20:
            time.sleep(0.02)
        _, d_mid2 = spec_stats(srv)
        # prompts prefilled beside the streams: 5 steps of ~100 rows, 4 gaps each, become the gaps' p99
        for _ in range(5):
            assert srv.post("/v1/completions", long_prompt)[0] == 200
        got = [f.result()[2]["choices"][0]["text"] for f in futs]
    s_end, d_end = spec_stats(srv)
    assert s_end - s0 >= 300, "the four streams took %d steps" % (s_end - s0)  # they did run together
    assert got == [want] * 4
    if not limit:  # nothing drafted while four streams decode
        assert d_end == d_start, "auto drafted %d tokens with 4 streams decoding" % (d_end - d_start)
    else:  # nothing in steady decoding, then the prefill steps opened room
        assert d_mid2 == d_mid, "auto drafted %d tokens in steady 4-stream decoding" % (d_mid2 - d_mid)
        assert d_end > d_mid2, "no drafts after prompts were prefilled beside the streams"
