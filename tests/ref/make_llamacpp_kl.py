#!/usr/bin/env python3
"""llama.cpp's quality figures on the SmolLM2 logits test's 200 tokens, the yardstick test_model_ref.py holds
tachyon's default (8-bit activation) mode to: mean KL(exact || llama.cpp) of the next-token distributions and
top-1 agreement, where "exact" is the float64 numpy reference (llama_ref.py, no activation or KV rounding).

Generated once per llama.cpp build and committed (golden/smollm2-llamacpp-kl.json); regenerate with both
builds of llama-cpp-python 0.3.36 (it compiles llama.cpp from source):

    python3 -m venv /work/llama-native
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AVX2=ON \\
        -DGGML_FMA=ON -DGGML_F16C=ON" /work/llama-native/bin/pip install llama-cpp-python==0.3.36 numpy
    python3 -m venv /work/llama-avx2
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF" \\
        /work/llama-avx2/bin/pip install llama-cpp-python==0.3.36 numpy
    .venv/bin/python tests/ref/make_llamacpp_kl.py avx512=/work/llama-native/bin/python \\
        avx2=/work/llama-avx2/bin/python

Each build's logits come from a subprocess of its own Python (llama-cpp-python is not in the test venv).
"""
import json
import os
import platform
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from llama_ref import LlamaRef  # noqa: E402

SMOL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
SMOL_TOK = os.path.join(ROOT, "..", "shared", "testdata", "vocab", "smollm2-135m-tokenizer.json")
OUT = os.path.join(HERE, "golden", "smollm2-llamacpp-kl.json")

SNIPPET = r"""
import sys, numpy as np, llama_cpp
from llama_cpp import Llama
path, ids, out = sys.argv[1], [int(x) for x in sys.argv[2].split(",")], sys.argv[3]
llm = Llama(model_path=path, n_ctx=512, n_batch=512, n_ubatch=512, n_threads=2, logits_all=True, verbose=False)
llm.eval(ids)
np.asarray(llm.scores[:len(ids)], dtype=np.float32).tofile(out)
print(llama_cpp.__version__)
"""


def text_ids():
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(SMOL_TOK)
    text = open(os.path.join(HERE, "golden", "text200.txt")).read()
    return tok.encode(text, add_special_tokens=False).ids[:200]


def log_softmax(x):
    x = x.astype(np.float64)
    x = x - x.max(axis=1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=1, keepdims=True))


def main():
    builds = dict(a.split("=", 1) for a in sys.argv[1:])
    if not builds:
        sys.exit(__doc__)
    ids = text_ids()
    exact = LlamaRef(SMOL, act_quant=False).forward(ids)
    lp = log_softmax(exact)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    res = {"ids": ids, "model": os.path.basename(SMOL), "cpu": cpu, "machine": platform.machine(), "builds": {}}
    for isa, py in builds.items():
        tmp = os.path.join("/tmp", f"llamacpp_logits_{isa}.f32")
        ver = subprocess.run([py, "-c", SNIPPET, SMOL, ",".join(map(str, ids)), tmp], check=True,
                             capture_output=True, text=True).stdout.strip()
        lc = np.fromfile(tmp, dtype=np.float32).reshape(len(ids), -1)
        lq = log_softmax(lc)
        kl = (np.exp(lp) * (lp - lq)).sum(axis=1)
        res["builds"][isa] = {"llama_cpp_python": ver, "kl": float(kl.mean()),
                              "top1": float((exact.argmax(1) == lc.argmax(1)).mean()),
                              "max_abs_dlogit": float(np.abs(lc - exact).max())}
        print(isa, res["builds"][isa])
    with open(OUT, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
