"""Speculative decoding, measured: decode tokens/s of one greedy stream on SmolLM2 with --spec off, ngram and
auto (+ a Predicted Output), requests interleaved across three servers so machine noise hits every
configuration alike. Decode rate = (completion tokens - 1) / (last token time - first token time), streamed.

  TACHYON_BIN=build/tachyon .venv/bin/python bench/spec_bench.py [--reps 3] [--threads 2]

Prints one line per (prompt, configuration): median and all repetitions, plus the acceptance counters."""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration"))
from conftest import SMOL, Server  # noqa: E402

QUOTE = ('Here is a paragraph: "The old lighthouse stood on the northern cliff for more than two hundred years. '
         'Every night its keeper climbed the narrow stairs, cleaned the great lens, and lit the lamp that guided '
         'ships past the rocks." Repeat the paragraph word for word.')
CODE = ("Rename the function total to sum_all and repeat the code:\n"
        "def total(xs):\n    s = 0\n    for x in xs:\n        s += x\n    return s\n\n"
        "def mean(xs):\n    return total(xs) / len(xs)\n")
CREATIVE = "Write a short story about a dragon who learns to bake bread."


def decode_rate(srv, prompt, prediction=None, max_tokens=96):
    b = {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens, "temperature": 0,
         "stream": True, "stream_options": {"include_usage": True}}
    if prediction:
        b["prediction"] = {"type": "content", "content": prediction}
    import http.client
    c = http.client.HTTPConnection(srv.host, srv.port, timeout=600)
    c.request("POST", "/v1/chat/completions", body=json.dumps(b), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    t_first = t_last = None
    text, usage = [], None
    buf = b""
    while True:
        chunk = r.read1(65536) if hasattr(r, "read1") else r.read(1)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            d = ev[6:].decode()
            if d == "[DONE]":
                continue
            j = json.loads(d)
            if j.get("usage"):
                usage = j["usage"]
            for ch in j.get("choices", []):
                t = ch["delta"].get("content")
                if t:
                    now = time.perf_counter()
                    t_first = t_first or now
                    t_last = now
                    text.append(t)
    c.close()
    n = usage["completion_tokens"]
    return (n - 1) / (t_last - t_first), "".join(text), usage


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    servers = {m: Server(SMOL, "--spec", m, "--threads", a.threads, "--ctx-size", 1024)
               for m in ("off", "ngram", "auto")}
    try:
        ref = {}
        for name, p in (("quote", QUOTE), ("code-edit", CODE), ("creative", CREATIVE)):
            ref[name] = decode_rate(servers["off"], p)[1]  # warm-up, and the prediction for the copy prompts
        plan = [("quote", QUOTE, ["off", "ngram", "auto", "auto+pred"]), ("code-edit", CODE, ["off", "ngram", "auto", "auto+pred"]),
                ("creative", CREATIVE, ["off", "auto"])]
        res = {}
        for rep in range(a.reps):
            for name, p, cfgs in plan:
                for cfg in cfgs:
                    srv = servers[cfg.split("+")[0]]
                    pred = ref[name] if cfg.endswith("+pred") else None
                    rate, txt, usage = decode_rate(srv, p, pred)
                    assert txt == ref[name], "%s/%s: output differs from --spec off" % (name, cfg)
                    res.setdefault((name, cfg), []).append(rate)
        for (name, cfg), rs in res.items():
            print("%-10s %-10s median %6.1f tok/s   runs %s" % (name, cfg, statistics.median(rs),
                                                                 " ".join("%.1f" % r for r in rs)))
        for m, s in servers.items():
            st, _, raw = s.request("GET", "/stats")
            print("server --spec %-6s %s" % (m, json.loads(raw)["spec"]))
    finally:
        for s in servers.values():
            s.stop()


if __name__ == "__main__":
    main()
