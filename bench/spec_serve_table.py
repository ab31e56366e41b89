"""Speculation under bench-serve: decode throughput and p99 ITL of SmolLM2 servers with --spec off, ngram and auto
on the code-edit, code-edit-pred (OpenAI prediction), quote and creative workloads, at 1, 4 and 8 concurrent
streams, greedy. The three servers run side by side and every (workload, concurrency) cell runs off/ngram/auto
back to back (rounds repeat the whole sweep), so drifting machine load hits the modes alike.

  TACHYON_BIN=build/tachyon .venv/bin/python bench/spec_serve_table.py [--rounds 1] [--out DIR]
      [--datasets code-edit,quote] [--model TARGET.gguf --draft-model DRAFT.gguf --modes off,draft,auto]

Prints a markdown table: output tok/s, median TPOT (decode ms/token), p99 ITL, and each mode's ratio to off."""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration"))
from conftest import BIN, SMOL, Server  # noqa: E402

MODES = ["off", "ngram", "auto"]
DATASETS = ["code-edit", "code-edit-pred", "quote", "creative"]


def run(srv, model, dataset, conc, out_len, in_len, seed, path):
    n = max(2, 2 * conc)
    cmd = [BIN, "bench-serve", "--url", srv.base, "--model", model, "--endpoint", "chat", "--dataset", dataset,
           "--input-len", str(in_len), "--output-len", str(out_len), "--num-requests", str(n), "--request-rate",
           "inf", "--max-concurrency", str(conc), "--seed", str(seed), "--ignore-eos", "--json", path, "--quiet"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=900)
    s = json.load(open(path))["runs"][0]["summary"]
    return {"tok_s": s["output_throughput"], "tpot_ms": s["tpot"]["median_ms"], "itl_p99_ms": s["itl"]["p99_ms"],
            "acc": s.get("accepted_prediction_tokens"), "rej": s.get("rejected_prediction_tokens"),
            "failed": s["failed"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--conc", default="1,4,8")
    ap.add_argument("--out-len", type=int, default=64)
    ap.add_argument("--in-len", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="/tmp/spec_serve_table")
    ap.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated subset of " + ",".join(DATASETS))
    ap.add_argument("--modes", default=",".join(MODES), help="--spec modes, off first (draft needs --draft-model)")
    ap.add_argument("--model", default=SMOL)
    ap.add_argument("--draft-model", default=None, help="loaded by every server but off's")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    modes = a.modes.split(",")
    assert modes[0] == "off", "the first mode is the baseline: off"
    draft = lambda m: ["--draft-model", a.draft_model] if a.draft_model and m != "off" else []  # noqa: E731
    servers = {m: Server(a.model, "--ctx-size", 4096, "--threads", a.threads, "--spec", m, *draft(m)) for m in modes}
    try:
        st, _, body = servers["off"].request("GET", "/v1/models")
        model = json.loads(body)["data"][0]["id"]
        res = {}
        concs = [int(c) for c in a.conc.split(",")]
        datasets = a.datasets.split(",")
        for r in range(a.rounds):
            for conc in concs:
                for ds in datasets:
                    for m in modes:
                        x = run(servers[m], model, ds, conc, a.out_len, a.in_len, 11 + r,
                                os.path.join(a.out, "%s-c%d-%s-r%d.json" % (ds, conc, m, r)))
                        res.setdefault((ds, conc, m), []).append(x)
                        print(ds, conc, m, x, flush=True)
        print("\n| workload | streams | mode | output tok/s | x off | median TPOT ms | p99 ITL ms | x off | "
              "accepted/rejected prediction tokens |")
        print("|---|---|---|---|---|---|---|---|---|")
        for conc in concs:
            for ds in datasets:
                base = None
                for m in modes:
                    xs = res[(ds, conc, m)]
                    tok = statistics.median(x["tok_s"] for x in xs)
                    tpot = statistics.median(x["tpot_ms"] for x in xs)
                    itl = statistics.median(x["itl_p99_ms"] for x in xs)
                    if m == "off":
                        base = (tok, itl)
                    pred = "%s/%s" % (xs[0]["acc"], xs[0]["rej"]) if xs[0]["acc"] is not None else "-"
                    print("| %s | %d | %s | %.1f | %.2fx | %.1f | %.1f | %.2fx | %s |" % (
                        ds, conc, m, tok, tok / base[0], tpot, itl, itl / base[1] if base[1] else 0, pred))
    finally:
        for s in servers.values():
            s.stop()


if __name__ == "__main__":
    main()
