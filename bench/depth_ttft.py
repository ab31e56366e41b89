#!/usr/bin/env python3
"""Time to first token of one long prompt (16k tokens by default) through the server, tachyon against
llama-server, interleaved (A B A B), one request at a time.

    TACHYON_BIN=build/tachyon LLAMA_SERVER=/path/to/llama-server .venv/bin/python bench/depth_ttft.py \
        [--model models/gemma-3-270m-q4_k_m.gguf] [--tokens 16384] [--reps 2] [--threads 2] [--kv f16]

Both servers load the same GGUF with a context of tokens + 256, 2 threads, one slot, flash attention on the
llama.cpp side, and the KV type given. Each request is a /v1/completions call with the prompt as token ids
(random ids, the first one varied per request so that neither server finds it cached; llama-server is also told
"cache_prompt": false) and max_tokens 1: its wall time is the prefill of the whole prompt plus one token, as
a client sees it. The model must have a trained context of at least --tokens: `tachyon serve` caps --ctx-size
at the model's trained context (SmolLM2: 8192; the TinyLlama shape: 2048), where llama-server runs past it
with a warning; Gemma 3 270M's is 32768. Not part of `make test`.
"""
import argparse
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TACHYON = os.environ.get("TACHYON_BIN", os.path.join(ROOT, "build", "tachyon"))
LLAMA_SERVER = os.environ.get("LLAMA_SERVER", "/work/llamacpp-build/bin/llama-server")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, method, path, body=None, timeout=3600):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def wait_healthy(proc, port, name, timeout=600):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError("%s exited with %s" % (name, proc.returncode))
        try:
            if request(port, "GET", "/health", timeout=2)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("%s not healthy after %ss" % (name, timeout))


def start(a):
    ctx = a.tokens + 256
    tp, lp = free_port(), free_port()
    tcmd = [TACHYON, "serve", "-m", a.model, "--host", "127.0.0.1", "--port", str(tp), "--ctx-size", str(ctx),
            "--threads", str(a.threads), "--kv-type", a.kv, "--max-seqs", "1"]
    lcmd = [LLAMA_SERVER, "-m", a.model, "--host", "127.0.0.1", "--port", str(lp), "-c", str(ctx), "-t",
            str(a.threads), "-np", "1", "-fa", "on", "-ctk", a.kv, "-ctv", a.kv, "--no-warmup"]
    logs = [open("/tmp/depth_ttft_%s.log" % n, "w") for n in ("tachyon", "llama")]
    procs = [subprocess.Popen(tcmd, stdout=logs[0], stderr=subprocess.STDOUT),
             subprocess.Popen(lcmd, stdout=logs[1], stderr=subprocess.STDOUT)]
    wait_healthy(procs[0], tp, "tachyon serve")
    wait_healthy(procs[1], lp, "llama-server")
    return procs, {"tachyon": tp, "llama": lp}


def ttft(port, side, ids):
    body = {"prompt": ids, "max_tokens": 1, "temperature": 0}
    if side == "llama":
        body["cache_prompt"] = False
    t0 = time.perf_counter()
    st, data = request(port, "POST", "/v1/completions", body)
    dt = time.perf_counter() - t0
    if st != 200:
        raise RuntimeError("%s: HTTP %d: %s" % (side, st, data[:500]))
    usage = json.loads(data).get("usage", {})
    if usage.get("prompt_tokens") not in (None, len(ids)):
        raise RuntimeError("%s counted %s prompt tokens, sent %d" % (side, usage.get("prompt_tokens"), len(ids)))
    return dt


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kv", default="f16", help="KV cache type of both servers: f16 or q8_0")
    ap.add_argument("--vocab-max", type=int, default=30000, help="prompt ids are drawn from [100, vocab-max)")
    a = ap.parse_args()
    rnd = random.Random(16384)
    base = [rnd.randrange(100, a.vocab_max) for _ in range(a.tokens)]
    procs, ports = start(a)
    res = {"tachyon": [], "llama": []}
    try:
        for r in range(a.reps):
            order = ["tachyon", "llama"] if r % 2 == 0 else ["llama", "tachyon"]
            for side in order:
                ids = [100 + (2 * r + (side == "llama")) % 50] + base[1:]  # a prompt neither has seen
                res[side].append(ttft(ports[side], side, ids))
                print("  rep %d %s: %.2f s" % (r, side, res[side][-1]), file=sys.stderr, flush=True)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)
    t, l = sum(res["tachyon"]) / a.reps, sum(res["llama"]) / a.reps
    print("| model | prompt tokens | KV | TTFT tachyon / llama-server s | tachyon speed-up |")
    print("|---|---|---|---|---|")
    print("| %s | %d | %s | %.2f / %.2f | **%.2f×** |" % (os.path.basename(a.model), a.tokens, a.kv, t, l, l / t))


if __name__ == "__main__":
    main()
