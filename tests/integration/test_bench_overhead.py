"""The benchmark client's own cost and measurement error (requirements from the serving-benchmark issue):

- throughput: against a server that streams tokens as fast as it can (fake server --instant), the client
  must process at least 2,000 streamed tokens per second of its own CPU time (user + sys, from getrusage of
  the child). Each token is one SSE event with a JSON chunk, as real servers send.
- distortion: against a server that sends a chunk every 5 ms on 8 concurrent streams, the client's ITL
  samples must match the gaps between the server's own send timestamps (same CLOCK_MONOTONIC, logged by the
  server right before each write) to within 1 ms at p99 (best of up to 3 attempts: the machine is shared).
Numbers are printed (pytest -s) for the record.
"""
import os
import resource

import numpy as np
import pytest

from benchutil import FakeServer, bench, measured

pytestmark = pytest.mark.bench  # timing thresholds: `make bench`, not `make test`

MIN_TOKENS_PER_CPU_S = 2000
MAX_ITL_DISTORTION_P99_MS = 1.0


def cpu_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def test_client_sustains_2000_tokens_per_cpu_second(tmp_path):
    with FakeServer("--instant", "--tokens", 2000) as srv:
        c0 = cpu_children()
        _, doc = bench(tmp_path, srv.url, "--num-requests", 16, "--max-concurrency", 4)
        cpu = cpu_children() - c0  # only the bench-serve process was reaped in between
    s = doc["summary"]
    assert s["completed"] == 16 and s["total_output_tokens"] == 32000
    rate = s["total_output_tokens"] / cpu
    print("client: %d tokens in %.3f CPU s = %.0f tokens per CPU second (wall %.2f s, %.0f tok/s)"
          % (s["total_output_tokens"], cpu, rate, s["duration_s"], s["output_throughput"]))
    assert rate >= MIN_TOKENS_PER_CPU_S, rate


def distortion_run(tmp_path, i):
    with FakeServer("--ttft-ms", 5, "--itl-ms", 5, "--tokens", 60) as srv:
        _, doc = bench(tmp_path, srv.url, "--num-requests", 16, "--max-concurrency", 8, "--warmup", 8,
                       name="d%d.json" % i)
        log = {e["id"]: e for e in srv.stats()["log"]}
    d = []
    for r in measured(doc):
        gaps = np.diff(log[r["id"]]["send"]) * 1e3
        assert len(gaps) == len(r["itl_ms"]) == 59
        d += list(np.abs(np.array(r["itl_ms"]) - gaps))
    return np.array(d)


def test_itl_distortion_below_1ms_p99(tmp_path):
    # Other processes on a shared machine can only add delay, never remove the client's own: the tool's
    # distortion is the best of up to three attempts (each ~0.5 s), and every attempt is printed.
    best = None
    for i in range(3):
        d = distortion_run(tmp_path, i)
        p50, p99 = np.percentile(d, 50), np.percentile(d, 99)
        print("ITL distortion over %d gaps: p50 %.3f ms, p99 %.3f ms, max %.3f ms (load %.1f)"
              % (len(d), p50, p99, d.max(), os.getloadavg()[0]))
        best = p99 if best is None else min(best, p99)
        if best < MAX_ITL_DISTORTION_P99_MS:
            break
    assert best < MAX_ITL_DISTORTION_P99_MS, best
