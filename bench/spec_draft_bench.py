"""Decode tokens/s of one greedy stream on SmolLM2-135M Q4_1: --spec off vs a draft model (the same file: the
worst case, the draft costs as much as the target and every draft is accepted) vs self-speculation with a few
L. All servers run side by side and the requests are interleaved round by round (A/B/C… A/B/C…), so machine
noise hits every mode alike. Decode rate = (completion tokens - 1) / (last token time - first token time).

usage: [MODES=off,draft,auto,self] TACHYON_BIN=build/tachyon .venv/bin/python bench/spec_draft_bench.py [ROUNDS] [MAX_TOKENS]
       TARGET=F16.gguf DRAFT=Q4_0.gguf ... : another target and a real (cheaper) draft: modes off, draft, auto + draft
       (e.g. an F16 target and a Q4_0 draft made from it with `tachyon quantize`)"""
import json
import os
import statistics
import sys
import time
import http.client

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration"))
from conftest import SMOL, Server  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
MAXT = int(sys.argv[2]) if len(sys.argv) > 2 else 64
COMMON = ["--ctx-size", 1024, "--threads", 2, "--spec-k", 4, "--itl-guard", 0]
TARGET = os.environ.get("TARGET", SMOL)
DRAFT = os.environ.get("DRAFT")
MODES = [("off", ["--spec", "off"]), ("draft (same Q4_1)", ["--spec", "draft", "--draft-model", SMOL])]
MODES += [("auto + draft (same Q4_1)", ["--spec", "auto", "--draft-model", SMOL])]
MODES += [("self L=%d" % L, ["--spec", "self", "--self-spec-layers", L]) for L in (8, 16, 24)]
if DRAFT:
    dn = os.path.basename(DRAFT)
    MODES = [("off", ["--spec", "off"]), ("draft " + dn, ["--spec", "draft", "--draft-model", DRAFT]),
             ("auto + draft " + dn, ["--spec", "auto", "--draft-model", DRAFT])]
if os.environ.get("MODES"):  # e.g. MODES=off,draft,auto: names starting with one of these
    MODES = [m for m in MODES if any(m[0].startswith(w) for w in os.environ["MODES"].split(","))]
PROMPTS = ["Write a short story about a robot who learns to paint.",
           "Repeat this code exactly:\ndef add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n"]


def decode_rate(srv, prompt):
    c = http.client.HTTPConnection(srv.host, srv.port, timeout=600)
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": MAXT, "temperature": 0,
            "ignore_eos": True, "stream": True}
    c.request("POST", "/v1/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    times, buf = [], b""
    while True:
        chunk = r.read1(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            if ev.startswith(b"data: {") and b'"content"' in ev:
                times.append(time.perf_counter())
    c.close()
    n = len(times)  # one content chunk per token
    return (n - 1) / (times[-1] - times[0]) if n > 1 and times[-1] > times[0] else float("nan")


def main():
    servers = [(name, Server(TARGET, *COMMON, *args, timeout=180)) for name, args in MODES]
    try:
        res = {(name, p): [] for name, _ in MODES for p in range(len(PROMPTS))}
        for _ in range(ROUNDS):
            for p, prompt in enumerate(PROMPTS):
                for name, srv in servers:
                    res[(name, p)].append(decode_rate(srv, prompt))
        acc = {}
        for name, srv in servers:
            _, _, raw = srv.request("GET", "/stats")
            acc[name] = json.loads(raw)["spec"]["acceptance_rate"]
    finally:
        for _, s in servers:
            s.stop()
    print("| mode | %s | acceptance |" % " | ".join("decode tok/s: %s" % ("creative", "copy code")[p]
                                                 for p in range(len(PROMPTS))))
    print("|---|" + "---|" * (len(PROMPTS) + 1))
    base = [statistics.median(res[("off", p)]) for p in range(len(PROMPTS))]
    for name, _ in MODES:
        cells = []
        for p in range(len(PROMPTS)):
            m = statistics.median(res[(name, p)])
            cells.append("%.1f (%.2fx)" % (m, m / base[p]))
        print("| %s | %s | %.2f |" % (name, " | ".join(cells), acc[name]))


if __name__ == "__main__":
    main()
