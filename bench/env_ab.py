#!/usr/bin/env python3
"""One engine switch A/B: `tachyon bench` run N times with an environment variable at value A and at value B,
alternating (A B B A A B ...), one process per sample, so that each sample loads the model anew.

    TACHYON_BIN=build/tachyon .venv/bin/python bench/env_ab.py MODEL.gguf --var TACHYON_HUGE_PAGES --a 0 --b 1 \
        [--pp 0] [--tg 32] [--reps 2] [--threads 2] [--n 10]

Prints every sample, sorted, and the medians of both sides and their ratio (B / A). Meant for the VMs this
project measures on, whose memory bandwidth jumps between two levels from one process to the next (a plain
two-thread read: ~31 or ~48 GB/s on the Zen 4 of docs/PERFORMANCE.md): a handful of samples per side shows both
levels, a single pair of runs shows noise. Not part of `make test`.
"""
import argparse
import json
import os
import statistics
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TACHYON = os.environ.get("TACHYON_BIN", os.path.join(ROOT, "build", "tachyon"))


def sample(model, a, value):
    env = dict(os.environ, **{a.var: value})
    out = subprocess.run([TACHYON, "bench", "-m", model, "-p", str(a.pp), "-n", str(a.tg), "-t", str(a.threads),
                          "-r", str(a.reps), "--json"], capture_output=True, text=True, env=env)
    if out.returncode:
        raise RuntimeError("tachyon bench failed: " + out.stderr[-2000:])
    res = {}
    for line in out.stdout.splitlines():
        if line.startswith("{") and '"test"' in line:
            j = json.loads(line)
            res[j["test"][:2]] = j["avg_ts"]
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--var", required=True)
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--pp", type=int, default=0)
    ap.add_argument("--tg", type=int, default=32)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n", type=int, default=10, help="samples per side")
    a = ap.parse_args()
    got = {a.a: [], a.b: []}
    for i in range(a.n):
        for v in ((a.a, a.b) if i % 2 == 0 else (a.b, a.a)):
            got[v].append(sample(a.model, a, v))
    print("%s, %s=%s (A) vs %s (B), %d samples each" % (os.path.basename(a.model), a.var, a.a, a.b, a.n))
    for k in ("pp", "tg"):
        xs = {v: sorted(s[k] for s in got[v] if k in s) for v in got}
        if not xs[a.a] or not xs[a.b]:
            continue
        for v in (a.a, a.b):
            print("  %s %s=%s: %s" % (k, a.var, v, " ".join("%.2f" % x for x in xs[v])))
        ma, mb = statistics.median(xs[a.a]), statistics.median(xs[a.b])
        print("  %s median %.2f -> %.2f t/s: %.3fx" % (k, ma, mb, mb / ma))


if __name__ == "__main__":
    main()
