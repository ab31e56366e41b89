#!/usr/bin/env python3
"""Side-by-side prefill/decode benchmark: tachyon vs llama.cpp on the same GGUF, interleaved in one run.

    LLAMA_PY=/path/to/python-with-llama-cpp-python  python3 bench/compare_llamacpp.py MODEL.gguf [...]
        [--pp 512] [--tg 128] [--threads 2] [--rounds 3]

llama.cpp comes from the `llama-cpp-python` PyPI package (it builds llama.cpp from source; on this machine
build it with CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON
-DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"). Both sides are measured the same way: pp = one prompt of P
random tokens in one batch (llama.cpp n_batch = n_ubatch = 512, tachyon -b 512), tg = N single-token
decodes from position 0; each round runs tachyon then llama.cpp (alternating which goes first), and a
side's result is the mean over rounds of its per-round mean of 3 repetitions. The decode floor is measured
by `tachyon bench` (bytes read per token / measured memory read bandwidth).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TACHYON = os.environ.get("TACHYON_BIN", os.path.join(ROOT, "build", "tachyon"))

LLAMA_SNIPPET = r"""
import sys, time, random, statistics, json
from llama_cpp import Llama
path, P, N, R, T = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
llm = Llama(model_path=path, n_ctx=max(P, N) + 16, n_batch=512, n_ubatch=512, n_threads=T, n_threads_batch=T,
            verbose=False)
random.seed(1234); toks = [random.randrange(llm.n_vocab()) for _ in range(max(P, N))]
def pp():
    llm.reset(); t = time.perf_counter(); llm.eval(toks[:P]); return P / (time.perf_counter() - t)
def tg():
    llm.reset(); t = time.perf_counter()
    for i in range(N): llm.eval([toks[i]])
    return N / (time.perf_counter() - t)
out = {}
for name, f, n in (("pp", pp, P), ("tg", tg, N)):
    if n == 0: continue
    f(); out[name] = statistics.mean(f() for _ in range(R))
print(json.dumps(out))
"""


def run_tachyon(model, pp, tg, threads, reps):
    out = subprocess.run([TACHYON, "bench", "-m", model, "-p", str(pp), "-n", str(tg), "-t", str(threads),
                          "-r", str(reps), "--json"], capture_output=True, text=True, check=True).stdout
    res = {}
    for line in out.splitlines():
        j = json.loads(line)
        if "test" in j:
            res[j["test"][:2]] = j["avg_ts"]
        else:
            res["floor"] = j["decode_floor_ts"]
            res["bw"] = j["mem_bandwidth_gbs"]
    return res


def run_llama(py, model, pp, tg, threads, reps):
    out = subprocess.run([py, "-c", LLAMA_SNIPPET, model, str(pp), str(tg), str(reps), str(threads)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    py = os.environ.get("LLAMA_PY")
    if not py:
        sys.exit("set LLAMA_PY to a python that has llama-cpp-python installed")
    print("| model | test | tachyon t/s | llama.cpp t/s | tachyon / llama.cpp | decode floor t/s | tachyon / floor |")
    print("|---|---|---|---|---|---|---|")
    for m in a.models:
        T, L, floors = {"pp": [], "tg": []}, {"pp": [], "tg": []}, []
        for r in range(a.rounds):
            order = [0, 1] if r % 2 == 0 else [1, 0]
            for side in order:
                if side == 0:
                    res = run_tachyon(m, a.pp, a.tg, a.threads, 3)
                    floors.append(res.get("floor", 0.0))
                    for k in ("pp", "tg"):
                        if k in res:
                            T[k].append(res[k])
                else:
                    res = run_llama(py, m, a.pp, a.tg, a.threads, 3)
                    for k in ("pp", "tg"):
                        if k in res:
                            L[k].append(res[k])
        floor = statistics.median(floors)
        name = os.path.basename(m)
        for k, n in (("pp", a.pp), ("tg", a.tg)):
            if n == 0 or not T[k] or not L[k]:
                continue  # --pp 0 / --tg 0: that test was not run
            t, l = statistics.mean(T[k]), statistics.mean(L[k])
            fl = "%.1f" % floor if k == "tg" else "-"
            fr = "%.2f" % (t / floor) if k == "tg" and floor else "-"
            print("| %s | %s%d | %.1f ± %.1f | %.1f ± %.1f | **%.2f×** | %s | %s |" % (
                name, k, n, t, statistics.pstdev(T[k]), l, statistics.pstdev(L[k]), t / l, fl, fr))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
