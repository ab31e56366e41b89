"""Speculative decoding, measured: decode tokens/s of one greedy stream on SmolLM2 with --spec off, ngram and
auto (+ a Predicted Output), requests interleaved across three servers so machine noise hits every
configuration alike. Decode rate = (completion tokens - 1) / (last token time - first token time), streamed.

  TACHYON_BIN=build/tachyon .venv/bin/python bench/spec_bench.py [--reps 3] [--threads 2]

Configurations: off, ngram, auto (prompt lookup), auto+pred (the exact answer as an OpenAI Predicted Output),
auto+half (a prediction whose first half is the answer and whose second half is other text) and auto+alt (the
answer with every other run of 6 words replaced). Prints one line per (prompt, configuration): median and all
repetitions, then the ratios the speculation targets are stated in (docs/SPECULATIVE.md), the drafted and
rejected tokens of each run (counts: what a wrong prediction cost in verify rows, readable on a busy machine),
plus the acceptance counters."""
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
OTHER = ("Tides rise twice a day because the moon pulls the oceans toward it while the earth turns beneath, "
         "and the sun adds a smaller pull that makes spring and neap tides as the month goes by. ") * 4


def half_wrong(answer):
    """The first half of answer, then unrelated text of the same length."""
    h = len(answer) // 2
    return answer[:h] + OTHER[:len(answer) - h]


def alternating(answer, run=6):
    """answer with every other run of `run` words replaced by unrelated words."""
    w, o = answer.split(" "), OTHER.split(" ")
    return " ".join(o[i % len(o)] if (i // run) % 2 else x for i, x in enumerate(w))


PREDICTIONS = {"pred": lambda a: a, "half": half_wrong, "alt": alternating}


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


def spec_counts(srv):
    """(drafted, rejected) tokens of every method so far, from /stats."""
    st, _, raw = srv.request("GET", "/stats")
    by = json.loads(raw)["spec"]["by_method"]
    d = sum(m["draft_tokens"] for m in by.values())
    return d, d - sum(m["accepted_tokens"] for m in by.values())


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
        copy = ["off", "ngram", "auto", "auto+pred", "auto+half", "auto+alt"]
        plan = [("quote", QUOTE, copy), ("code-edit", CODE, copy),
                ("creative", CREATIVE, ["off", "auto", "auto+half"])]
        res, counts = {}, {}
        for rep in range(a.reps):
            for name, p, cfgs in plan:
                for cfg in cfgs:
                    srv = servers[cfg.split("+")[0]]
                    kind = cfg.split("+")[1] if "+" in cfg else None
                    pred = PREDICTIONS[kind](ref[name]) if kind else None
                    c0 = spec_counts(srv)
                    rate, txt, usage = decode_rate(srv, p, pred)
                    c1 = spec_counts(srv)
                    assert txt == ref[name], "%s/%s: output differs from --spec off" % (name, cfg)
                    res.setdefault((name, cfg), []).append(rate)
                    counts.setdefault((name, cfg), []).append((c1[0] - c0[0], c1[1] - c0[1]))
        for (name, cfg), rs in res.items():
            print("%-10s %-10s median %6.1f tok/s   runs %s" % (name, cfg, statistics.median(rs),
                                                                 " ".join("%.1f" % r for r in rs)))
        med = {k: statistics.median(v) for k, v in res.items()}
        print("ratios (medians): a prediction against none (target >= 0.97), speculation against off")
        for name, _, cfgs in plan:
            for cfg in cfgs:
                if cfg == "off":
                    continue
                line = "%-10s %-10s vs off %.2fx" % (name, cfg, med[(name, cfg)] / med[(name, "off")])
                if "+" in cfg:
                    line += "   vs auto without a prediction %.2fx" % (med[(name, cfg)] / med[(name, "auto")])
                print(line)
        print("counts: drafted / rejected tokens per run")
        for (name, cfg), cs in counts.items():
            print("%-10s %-10s %s" % (name, cfg, "  ".join("%d/%d" % c for c in cs)))
        for m, s in servers.items():
            st, _, raw = s.request("GET", "/stats")
            print("server --spec %-6s %s" % (m, json.loads(raw)["spec"]))
    finally:
        for s in servers.values():
            s.stop()


if __name__ == "__main__":
    main()
