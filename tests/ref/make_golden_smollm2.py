"""Writes tests/ref/golden/smollm2-greedy.jsonl: greedy continuations of SmolLM2-135M-Instruct Q4_1 produced by
the independent numpy reference (llama_ref.py: weights dequantized by `gguf`, float64 math, activations not
rounded, K/V rounded to f16 like the engine's cache) and the `tokenizers` package on the model's
tokenizer.json. The engine reproduces them in its reference-precision mode (TACHYON_PRECISE=1); its default
8-bit-activation mode is checked against the reference with stated bounds instead (see test_model_ref.py).
Run: .venv/bin/python tests/ref/make_golden_smollm2.py
"""
import json
import os
import sys

from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(__file__))
from llama_ref import LlamaRef  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
TOKJSON = os.path.join(ROOT, "..", "shared", "testdata", "vocab", "smollm2-135m-tokenizer.json")
PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Here are three tips for staying healthy:\n1.",
]
N_NEW = 32

if __name__ == "__main__":
    tok = Tokenizer.from_file(TOKJSON)
    ref = LlamaRef(MODEL, act_quant=False, kv_f16=True)
    out = os.path.join(os.path.dirname(__file__), "golden", "smollm2-greedy.jsonl")
    with open(out, "w") as f:
        for p in PROMPTS:
            ids = tok.encode(p, add_special_tokens=False).ids
            gen = ref.greedy(ids, N_NEW)  # like `tachyon run --ignore-eos`
            rec = {"prompt": p, "prompt_ids": ids, "n_predict": N_NEW, "ids": gen,
                   "continuation": tok.decode(gen, skip_special_tokens=False)}
            f.write(json.dumps(rec) + "\n")
            print(rec)
