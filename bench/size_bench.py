#!/usr/bin/env python3
"""Prefill and decode of one GGUF, tachyon against llama.cpp's llama-bench, interleaved (A B A B) in one run.

    TACHYON_BIN=build/tachyon LLAMA_BENCH=/path/to/llama-bench .venv/bin/python bench/size_bench.py MODEL.gguf \
        [--pp 512] [--tg 128] [--threads 2] [--reps 2] [--rounds 2]

Each round runs `llama-bench -p PP -n TG -t T -r REPS` and `tachyon bench` with the same settings (the side that
goes first alternates); a side's figure is the mean over rounds. The decode floor is bandwidth / bytes read per
token: bandwidth is the read bandwidth `tachyon bench` measures; bytes are every tensor of the file except the
token embedding when the output projection is separate (one row of it is read), and of the experts' tensors
(names with "_exps") only the n_used / n_expert share a token reads (active experts only, for MoE). Meant for the
full-size synthetic shapes (`tachyon synth --shape llama3-8b ...`, docs/MODELS.md); not part of `make test`.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import gguf

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TACHYON = os.environ.get("TACHYON_BIN", os.path.join(ROOT, "build", "tachyon"))
LLAMA_BENCH = os.environ.get("LLAMA_BENCH", "/work/llamacpp-build/bin/llama-bench")


def active_bytes(path):
    """Bytes of weights one decoded token reads, and the total, from the file's tensors and metadata."""
    r = gguf.GGUFReader(path)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()

    def u32(key, default):
        f = r.fields.get("%s.%s" % (arch, key))
        return int(f.parts[-1][0]) if f else default

    n_expert, n_used = u32("expert_count", 0), u32("expert_used_count", 0)
    names = {t.name for t in r.tensors}
    total = active = 0
    for t in r.tensors:
        n = int(t.n_bytes)
        total += n
        if t.name == "token_embd.weight" and "output.weight" in names:
            continue  # one row of it per token
        if "_exps" in t.name and n_expert:
            n = n * n_used / n_expert
        active += n
    return active, total


def run_llama(model, a, extra=()):
    """llama-bench's pp and tg t/s for a's settings; extra: more llama-bench arguments (depth, KV type)."""
    out = subprocess.run([LLAMA_BENCH, "-m", model, "-p", str(a.pp), "-n", str(a.tg), "-t", str(a.threads),
                          "-r", str(a.reps), *extra, "-o", "json"], capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError("llama-bench failed: " + out.stderr[-2000:])
    res = {}
    for row in json.loads(out.stdout):
        res["pp" if row["n_prompt"] else "tg"] = row["avg_ts"]
    return res


def run_tachyon(model, a, extra=()):
    """tachyon bench's pp and tg t/s (and the read bandwidth, bw) for a's settings; extra: more arguments."""
    out = subprocess.run([TACHYON, "bench", "-m", model, "-p", str(a.pp), "-n", str(a.tg), "-t", str(a.threads),
                          "-r", str(a.reps), *extra, "--json"], capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError("tachyon bench failed: " + out.stderr[-2000:])
    res = {}
    for line in out.stdout.splitlines():
        if not line.startswith("{"):
            continue
        j = json.loads(line)
        if "test" in j:
            res[j["test"][:2]] = j["avg_ts"]
        elif "mem_bandwidth_gbs" in j:
            res["bw"] = j["mem_bandwidth_gbs"] * 1e9
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    act, total = active_bytes(a.model)
    T, L, bws = {"pp": [], "tg": []}, {"pp": [], "tg": []}, []
    for r in range(a.rounds):
        for side in ((0, 1) if r % 2 == 0 else (1, 0)):
            res = run_tachyon(a.model, a) if side == 0 else run_llama(a.model, a)
            for k in ("pp", "tg"):
                if k in res:
                    (T if side == 0 else L)[k].append(res[k])
            if side == 0 and "bw" in res:
                bws.append(res["bw"])
            print("round %d %s: %s" % (r + 1, "tachyon" if side == 0 else "llama.cpp", res), file=sys.stderr)
    name = os.path.basename(a.model)
    print("%s: %.2f GiB in the file, %.2f GiB read per token" % (name, total / 2**30, act / 2**30))
    print("| test | tachyon t/s | llama.cpp t/s | tachyon / llama.cpp |")
    print("|---|---|---|---|")
    for k, n in (("pp", a.pp), ("tg", a.tg)):
        if T[k] and L[k]:
            t, l = statistics.mean(T[k]), statistics.mean(L[k])
            print("| %s%d | %.2f | %.2f | %.2f× |" % (k, n, t, l, t / l))
    if bws and T["tg"]:
        bw = statistics.median(bws)
        floor = bw / act
        print("decode floor: %.1f GB/s / %.2f GiB = %.2f t/s; tachyon decode / floor %.2f, llama.cpp %.2f" % (
            bw / 1e9, act / 2**30, floor, statistics.mean(T["tg"]) / floor,
            statistics.mean(L["tg"]) / floor if L["tg"] else 0.0))


if __name__ == "__main__":
    main()
