#!/usr/bin/env python3
"""The measurements behind docs/QUALITY.md: `tachyon perplexity` of each model over the quality text with
KV f16 (the base, saved with --save-logits), q8_0 and q4_0, and with weight-type variants made by llama.cpp's
quantizer (llama-cpp-python's llama_model_quantize, requantizing the shipped file), each compared with the
base by --kl-base; and llama.cpp's perplexity of the same text, context and chunks
(tests/ref/llamacpp_perplexity.py). Prints the markdown table and writes bench/out/quality-MODELS-CHUNKS.json (`--table` prints the table of all
of them).

    scripts/fetch_quality_text.sh && .venv/bin/python bench/quality.py [CHUNKS] [CTX]
    .venv/bin/python bench/quality.py --table
Env: LLAMA_PY (default /work/llama-native/bin/python), TACHYON_BIN (default build/tachyon), MODELS (comma
list of names below, default all).
"""
import glob
import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BIN = os.environ.get("TACHYON_BIN", os.path.join(ROOT, "build", "tachyon"))
LLAMA_PY = os.environ.get("LLAMA_PY", "/work/llama-native/bin/python")
TEXT = os.path.join(ROOT, "build", "quality", "jargon.txt")
OUT = os.path.join(ROOT, "bench", "out")
MODELS = {"SmolLM2-135M Q4_1": "SmolLM2-135M-Instruct.Q4_1.gguf",
          "Gemma 3 270M Q4_K_M": "gemma-3-270m-q4_k_m.gguf"}
WEIGHTS = {"q8_0": 7, "q4_0": 2}  # llama_ftype values

QUANTIZE = r"""
import sys, llama_cpp
p = llama_cpp.llama_model_quantize_default_params()
p.ftype = int(sys.argv[3]); p.allow_requantize = True; p.nthread = 2
sys.exit(llama_cpp.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), p))
"""


def tachyon(model, ctx, chunks, *extra):
    cmd = [BIN, "perplexity", "-m", model, "-f", TEXT, "-c", str(ctx), "--chunks", str(chunks), "--json", *extra]
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def main():
    if sys.argv[1:2] == ["--table"]:  # the table of every result file written so far
        res = [r for f in sorted(glob.glob(os.path.join(OUT, "quality-*.json"))) for r in json.load(open(f))]
        return table(res)
    chunks = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    ctx = int(sys.argv[2]) if len(sys.argv) > 2 else 512
    want = os.environ.get("MODELS")
    os.makedirs(OUT, exist_ok=True)
    res = []
    for name, fn in MODELS.items():
        if want and not any(name.startswith(w) for w in want.split(",")):
            continue
        model = os.path.join(ROOT, "models", fn)
        base = os.path.join(OUT, fn + ".base.tcppl")
        r = tachyon(model, ctx, chunks, "--save-logits", base)
        r.update(model=name, variant="KV f16 (base)", kl=0.0, top1=1.0, ppl_ratio=1.0)
        lc = subprocess.run([LLAMA_PY, os.path.join(ROOT, "tests", "ref", "llamacpp_perplexity.py"), model, TEXT,
                             str(ctx), str(chunks)], check=True, capture_output=True, text=True).stdout
        r["llama_cpp"] = json.loads(lc)  # (only for the base: the machine is shared, runs are kept few)
        res.append(r)
        for kv in ("q8_0", "q4_0"):
            r = tachyon(model, ctx, chunks, "--kv-type", kv, "--kl-base", base)
            r.update(model=name, variant=f"KV {kv}")
            res.append(r)
        for wt, ftype in WEIGHTS.items():
            qpath = os.path.join(OUT, f"{fn}.{wt}.gguf")
            if not os.path.exists(qpath):
                subprocess.run([LLAMA_PY, "-c", QUANTIZE, model, qpath, str(ftype)], check=True, capture_output=True)
            r = tachyon(qpath, ctx, chunks, "--kl-base", base)
            r.update(model=name, variant=f"weights {wt} (requantized), KV f16")
            res.append(r)
        json.dump(res, open(os.path.join(OUT, f"quality-{want or 'all'}-{chunks}.json"), "w"), indent=1)
    table(res)


def table(res):
    print(f"| model | variant | perplexity | vs base | mean KL (95% interval) | top-1 agreement | llama.cpp ppl |")
    print("|---|---|---|---|---|---|---|")
    for r in res:
        kl = "0 (base)" if r["variant"].endswith("(base)") else \
            f"{r['kl']:.5f} ({max(r['kl_lo'], 0):.5f} .. {r['kl_hi']:.5f})"
        lc = f"{r['llama_cpp']['ppl']:.3f}" if "llama_cpp" in r else ""
        print(f"| {r['model']} | {r['variant']} | {r['ppl']:.3f} ± {r['ppl_stderr']:.3f} | "
              f"{100 * (r['ppl_ratio'] - 1):+.2f}% | {kl} | {100 * r['top1']:.2f}% | {lc} |")


if __name__ == "__main__":
    main()
