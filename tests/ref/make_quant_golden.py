"""Golden greedy output of llama.cpp on a model made by `tachyon quantize` (tests/integration/test_quantize.py).

    build/tachyon quantize models/SmolLM2-135M-Instruct.Q4_1.gguf /tmp/smol-f16.gguf F16
    build/tachyon quantize /tmp/smol-f16.gguf /tmp/smol-q8_0.gguf Q8_0
    /work/llama-native/bin/python tests/ref/make_quant_golden.py /tmp/smol-q8_0.gguf > tests/ref/golden/smollm2-q8_0-quantized-llamacpp.json
    (and the same with Q4_0 / q4_0: tests/ref/golden/smollm2-q4_0-quantized-llamacpp.json)

Records, per prompt, the prompt's token ids, llama.cpp's greedy token ids and the logit margin between its top
two candidates at each step, so the test can tell a real disagreement from a near-tie that legitimately flips with
the order of float additions. The sha256 of the file pins the bytes llama.cpp saw: tachyon's quantizers are
deterministic, so the test re-creates the same file and checks the hash first.
"""
import hashlib, json, sys

import llama_cpp
import numpy as np
from llama_cpp import Llama

PROMPTS = ["The capital of France is", "def fibonacci(n):", "Once upon a time, in a small village,"]
N = 32

path = sys.argv[1]
sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
llm = Llama(model_path=path, n_ctx=512, n_threads=2, verbose=False, seed=0, logits_all=True)
out = []
for p in PROMPTS:
    prompt_ids = llm.tokenize(p.encode(), add_bos=True)
    llm.reset()
    llm.eval(prompt_ids)
    ids, margins = [], []
    for _ in range(N):  # greedy by hand, to record the token ids and llama.cpp's top-2 margins
        logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        top = np.argsort(-logits)[:2]
        ids.append(int(top[0]))
        margins.append(round(float(logits[top[0]] - logits[top[1]]), 4))
        llm.eval([int(top[0])])
    text = llm.detokenize(ids).decode("utf-8", errors="replace")
    out.append({"prompt": p, "prompt_ids": [int(t) for t in prompt_ids], "ids": ids, "text": text, "margins": margins})
json.dump({"llama_cpp_python": llama_cpp.__version__, "sha256": sha, "n": N, "results": out}, sys.stdout, indent=1)
