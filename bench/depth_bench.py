#!/usr/bin/env python3
"""Prefill and decode at depth, tachyon against llama.cpp's llama-bench, interleaved (A B A B) in one run.

    TACHYON_BIN=build/tachyon LLAMA_BENCH=/path/to/llama-bench .venv/bin/python bench/depth_bench.py \
        MODEL.gguf [MODEL2.gguf ...] [--depths 4096,16384] [--kv f16,q8_0] [--pp 512] [--tg 32] [--threads 2] \
        [--reps 2] [--rounds 2]

Per model, depth and KV type, each round runs `llama-bench -d D -p PP -n TG -fa 1 -ctk KV -ctv KV` and
`tachyon bench -d D -p PP -n TG --kv-type KV` (the side that goes first alternates); a side's figure is the mean
over rounds. Both name their rows pp<PP>@d<D> and tg<TG>@d<D>: PP prompt tokens prefilled, or TG tokens decoded,
after a context of D tokens. llama-bench sizes its context to D + PP + TG; tachyon bench likewise (a model whose
trained context is shorter, SmolLM2's 8192, runs past it in both, with its RoPE unscaled: the cost is the same).
Not part of `make test`: depth 16384 takes minutes per row on 2 cores.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import size_bench  # noqa: E402  (its runners of llama-bench and tachyon bench)


def run_llama(model, depth, kv, a):
    return size_bench.run_llama(model, a, ["-d", str(depth), "-fa", "1", "-ctk", kv, "-ctv", kv])


def run_tachyon(model, depth, kv, a):
    return size_bench.run_tachyon(model, a, ["-d", str(depth), "--kv-type", kv])


def mean(xs):
    return sum(xs) / len(xs) if xs else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--depths", default="4096,16384", help="comma-separated depths (32768: slow on 2 cores)")
    ap.add_argument("--kv", default="f16,q8_0", help="comma-separated KV cache types (K and V alike)")
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    depths = [int(d) for d in a.depths.split(",") if d]
    kvs = [k for k in a.kv.split(",") if k]
    rows = []
    print("| model | KV | depth | pp%d tachyon / llama.cpp t/s | ratio | tg%d tachyon / llama.cpp t/s | ratio |"
          % (a.pp, a.tg))
    print("|---|---|---|---|---|---|---|")
    for model in a.models:
        for depth in depths:
            for kv in kvs:
                t = {"pp": [], "tg": []}
                l = {"pp": [], "tg": []}
                for r in range(a.rounds):
                    sides = [("t", run_tachyon), ("l", run_llama)]
                    for side, fn in (sides if r % 2 == 0 else sides[::-1]):
                        res = fn(model, depth, kv, a)
                        for k in ("pp", "tg"):
                            (t if side == "t" else l)[k].append(res.get(k, 0.0))
                        print("  round %d %s %s: %s" % (r, "tachyon" if side == "t" else "llama.cpp", kv, res),
                              file=sys.stderr, flush=True)
                tp, tt, lp, lt = mean(t["pp"]), mean(t["tg"]), mean(l["pp"]), mean(l["tg"])
                row = {"model": os.path.basename(model), "kv": kv, "depth": depth, "tachyon_pp": tp, "llama_pp": lp,
                       "tachyon_tg": tt, "llama_tg": lt, "pp_ratio": tp / lp if lp else 0.0,
                       "tg_ratio": tt / lt if lt else 0.0}
                rows.append(row)
                print("| %s | %s | %d | %.1f / %.1f | **%.2f×** | %.2f / %.2f | **%.2f×** |"
                      % (row["model"], kv, depth, tp, lp, row["pp_ratio"], tt, lt, row["tg_ratio"]), flush=True)
    if os.environ.get("DEPTH_BENCH_JSON"):
        with open(os.environ["DEPTH_BENCH_JSON"], "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
