"""Constrained-decoding overhead: decode time per token of a JSON-schema-constrained generation vs an
unconstrained one of the same length (same prompt, greedy; the unconstrained one runs with ignore_eos and
max_tokens = the constrained one's token count). Pairs alternate so that background load hits both alike;
medians are reported. Usage:
  .venv/bin/python bench/grammar_overhead.py [--model models/SmolLM2-135M-Instruct.Q4_1.gguf] [--pairs 8]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration"))
from conftest import Server, BIN  # noqa: E402

SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "year": {"type": "integer"},
        "people": {"type": "array", "minItems": 6, "maxItems": 6,
                   "items": {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                             "required": ["name", "age"]}},
    },
    "required": ["title", "year", "people"],
}


def cpu_seconds(pid):
    """User + system CPU time of a process (all its threads), seconds."""
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def stream_timing(base, body, pid):
    """(completion tokens, seconds from first to last token, server CPU seconds) of a streamed request."""
    c0 = cpu_seconds(pid)
    body = dict(body, stream=True, stream_options={"include_usage": True})
    req = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t_first = t_last = None
    n = 0
    with urllib.request.urlopen(req, timeout=600) as r:
        for line in r:
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            d = json.loads(line[6:])
            if d.get("usage"):
                n = d["usage"]["completion_tokens"]
            if d.get("choices"):
                t = time.perf_counter()
                t_first = t_first or t
                t_last = t
    return n, t_last - t_first, cpu_seconds(pid) - c0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--pairs", type=int, default=8)
    a = ap.parse_args()
    srv = Server(a.model)
    try:
        msgs = [{"role": "user", "content": "List six people with their ages as JSON."}]
        con, unc, ccon, cunc = [], [], [], []
        pid = srv.proc.pid
        for i in range(a.pairs + 1):
            n, dt, cpu = stream_timing(srv.base, {"messages": msgs, "temperature": 0, "max_tokens": 600,
                                                  "response_format": {"type": "json_schema",
                                                                      "json_schema": {"name": "x", "schema": SCHEMA}}}, pid)
            # the constrained stream holds no text back, so its first chunk is its first token
            n2, dt2, cpu2 = stream_timing(srv.base, {"messages": msgs, "temperature": 0, "max_tokens": n,
                                                     "ignore_eos": True}, pid)
            if i == 0:
                continue  # warm-up pair
            con.append(dt / (n - 1))
            unc.append(dt2 / (n2 - 1))
            ccon.append(cpu / n)
            cunc.append(cpu2 / n2)
            print("pair %d: %d tokens: constrained %.2f ms/token (CPU %.2f), unconstrained %.2f ms/token (CPU %.2f)" %
                  (i, n, con[-1] * 1e3, ccon[-1] * 1e3, unc[-1] * 1e3, cunc[-1] * 1e3), flush=True)
        mc, mu = statistics.median(con), statistics.median(unc)
        cc, cu = statistics.median(ccon), statistics.median(cunc)
        print("median wall: constrained %.3f ms/token, unconstrained %.3f ms/token, overhead %+.1f%%" %
              (mc * 1e3, mu * 1e3, (mc / mu - 1) * 100))
        print("median server CPU (all threads, prefill included): constrained %.3f ms/token, unconstrained %.3f "
              "ms/token, overhead %+.1f%%" % (cc * 1e3, cu * 1e3, (cc / cu - 1) * 100))
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
