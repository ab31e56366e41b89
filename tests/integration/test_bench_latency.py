"""Latency under hostile or lower-class load on SmolLM2 (timing thresholds: `make bench`, on an idle machine).
  - priority: a high-priority request's p99 time to first token while long low-priority prompts keep the
    engine busy stays within 1.5x of its p99 alone (docs/SCHEDULING.md, "Lower classes yield");
  - grammar: a normal stream's p99 inter-token gap while requests with a hostile schema (anyOf of 2,000
    objects: near the 4,096 open alternatives a grammar may have, 3,000 are refused) decode beside it stays
    below 2x its unloaded p99.
Each prints what it measured (pytest -s)."""
import http.client
import json
import os
import random
import threading
import time

import pytest

from conftest import SMOL

pytestmark = pytest.mark.bench


def pct(xs, q):
    """Nearest-rank percentile (q in 0..100)."""
    xs = sorted(xs)
    k = max(0, min(len(xs) - 1, int(-(-q * len(xs) // 100)) - 1))
    return xs[k]


def stream_times(srv, path, body):
    """POSTs a streaming request; returns (send time, arrival time of every data event but [DONE])."""
    c = http.client.HTTPConnection(srv.host, srv.port, timeout=300)
    t0 = time.perf_counter()
    c.request("POST", path, json.dumps(dict(body, stream=True)), {"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200, (r.status, r.read()[:300])
    times = []
    while True:
        line = r.fp.readline()
        if not line:
            break
        if line.startswith(b"data: [DONE]"):
            break  # the server keeps the connection open for the next request
        if line.startswith(b"data: "):
            times.append(time.perf_counter())
    c.close()
    return t0, times


def running(srv):
    st, _, data = srv.request("GET", "/stats")
    assert st == 200
    return json.loads(data)["running"]


def wait_running(srv, n, timeout=120):
    t0 = time.time()
    while running(srv) < n:
        assert time.time() - t0 < timeout, "load did not start"
        time.sleep(0.05)


def need_smol():
    if not os.path.exists(SMOL):
        pytest.skip("SmolLM2 model not present (run make models)")


SENT = "The quick brown fox jumps over the lazy dog while the farmer watches from the old barn. "


@pytest.mark.timeout(900)
def test_high_priority_ttft_under_low_priority_load(make_server):
    need_smol()
    srv = make_server(SMOL, "--ctx-size", 4096, "--sched", "priority", "--max-seqs", 8)
    rng = random.Random(7)
    gaps = [rng.uniform(0.2, 0.6) for _ in range(20)]  # arrivals land at random phases of the steps

    def high_ttfts(n=len(gaps)):
        out = []
        for i, g in enumerate(gaps[:n]):  # ~60-token prompts (bench/sched_bench.py's two-class workload uses 64)
            time.sleep(g)
            t0, times = stream_times(srv, "/v1/completions", {
                "prompt": "Question %d: " % i + SENT * 3 + "Where does the farmer watch from?",
                "max_tokens": 2, "ignore_eos": True, "temperature": 0, "priority": 0})
            out.append(times[0] - t0)
        return out

    high_ttfts(5)  # warm-up (and the step-cost model learns)
    solo = high_ttfts()
    stop = threading.Event()

    def low_load(k):
        n = 0
        while not stop.is_set():  # ~1,100-token prompts, each different (no prefix-cache hits)
            stream_times(srv, "/v1/completions", {"prompt": "Document %d-%d. " % (k, n) + SENT * 60,
                                                  "max_tokens": 8, "ignore_eos": True, "temperature": 0,
                                                  "priority": 5})
            n += 1

    load = [threading.Thread(target=low_load, args=(k,)) for k in range(3)]
    for t in load:
        t.start()
    try:
        wait_running(srv, 2)
        loaded = high_ttfts()
    finally:
        stop.set()
        for t in load:
            t.join(300)
    s99, l99 = pct(solo, 99), pct(loaded, 99)
    print("\nhigh-priority TTFT ms: solo p50 %.0f p99 %.0f; under low-priority load p50 %.0f p99 %.0f; "
          "ratio %.2f" % (1e3 * pct(solo, 50), 1e3 * s99, 1e3 * pct(loaded, 50), 1e3 * l99, l99 / s99))
    assert l99 <= 1.5 * s99, "p99 TTFT %.0f ms under load vs %.0f ms alone (target <= 1.5x)" % (
        1e3 * l99, 1e3 * s99)


def hostile_schema(n):
    return {"anyOf": [{"type": "object", "properties": {"k%d" % i: {"type": "integer"}},
                       "required": ["k%d" % i]} for i in range(n)]}


@pytest.mark.timeout(900)
def test_stream_gaps_beside_a_hostile_grammar(make_server):
    need_smol()
    srv = make_server(SMOL, "--ctx-size", 2048)
    normal = {"prompt": "Story: once upon a time", "max_tokens": 64, "ignore_eos": True, "temperature": 0}

    def gaps():
        _, times = stream_times(srv, "/v1/completions", normal)
        g = [b - a for a, b in zip(times, times[1:])]
        return g[1:-1]  # the first and last chunks carry role / finish bookkeeping

    gaps()  # warm-up
    alone = gaps() + gaps()
    stop = threading.Event()
    hostile = {"messages": [{"role": "user", "content": "Give me a JSON object."}], "max_tokens": 64,
               "temperature": 0, "response_format": {"type": "json_schema", "json_schema": {
                   "name": "x", "schema": hostile_schema(2000), "strict": True}}}
    served = []

    def hostile_load():
        while not stop.is_set():
            st, _, j = srv.post("/v1/chat/completions", hostile, timeout=300)
            served.append(st)

    t = threading.Thread(target=hostile_load)
    t.start()
    try:
        wait_running(srv, 1)  # compiled (worker thread) and decoding
        beside = gaps() + gaps()
    finally:
        stop.set()
        t.join(300)
    assert served and set(served) == {200}, served
    a99, b99 = pct(alone, 99), pct(beside, 99)
    print("\nstream gap ms: alone p50 %.1f p99 %.1f; beside a hostile grammar p50 %.1f p99 %.1f; ratio %.2f"
          % (1e3 * pct(alone, 50), 1e3 * a99, 1e3 * pct(beside, 50), 1e3 * b99, b99 / a99))
    assert b99 < 2 * a99, "p99 gap %.1f ms beside the hostile grammar vs %.1f ms alone (target < 2x)" % (
        1e3 * b99, 1e3 * a99)
