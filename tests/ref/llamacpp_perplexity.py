#!/usr/bin/env python3
"""llama.cpp's perplexity of a text with the chunking `tachyon perplexity` and llama-perplexity use, computed
through llama-cpp-python (logits_all) so that docs/QUALITY.md can put both numbers side by side:
the file is tokenized once with BOS (when the model adds one, special tokens as plain text), cut into chunks of
CTX tokens, each chunk evaluated in a fresh context with its first token replaced by BOS, and rows CTX/2 ..
CTX-2 score the next token. Prints one JSON line.

Run with a Python that has llama-cpp-python (not the test venv), e.g.
    /work/llama-native/bin/python tests/ref/llamacpp_perplexity.py MODEL TEXT [CTX] [CHUNKS] [THREADS]
Optional env: KV_TYPE=q8_0|q4_0 sets llama.cpp's type_k/type_v (flash attention on, as llama.cpp requires for a
quantized V cache).
"""
import json
import math
import os
import sys

import numpy as np
import llama_cpp
from llama_cpp import Llama


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    path, text_path = sys.argv[1], sys.argv[2]
    ctx = int(sys.argv[3]) if len(sys.argv) > 3 else 512
    chunks = int(sys.argv[4]) if len(sys.argv) > 4 else -1
    threads = int(sys.argv[5]) if len(sys.argv) > 5 else 2
    kw = {}
    kvt = os.environ.get("KV_TYPE")
    if kvt:
        t = {"f16": 1, "q8_0": 8, "q4_0": 2}[kvt]
        kw.update(type_k=t, type_v=t, flash_attn=True)
    llm = Llama(model_path=path, n_ctx=ctx, n_batch=ctx, n_ubatch=ctx, n_threads=threads, logits_all=True,
                verbose=False, **kw)
    add_bos = llama_cpp.llama_vocab_get_add_bos(llama_cpp.llama_model_get_vocab(llm.model)) if hasattr(
        llama_cpp, "llama_vocab_get_add_bos") else True
    text = open(text_path, "rb").read()
    ids = llm.tokenize(text, add_bos=bool(add_bos), special=False)
    n_chunks = len(ids) // ctx if chunks < 0 else min(chunks, len(ids) // ctx)
    first = ctx // 2
    nll = []
    for c in range(n_chunks):
        chunk = list(ids[c * ctx:(c + 1) * ctx])
        if add_bos:
            chunk[0] = llm.token_bos()
        llm.reset()
        llm.eval(chunk)
        lg = np.asarray(llm.scores[first:ctx - 1], dtype=np.float64)
        lg -= lg.max(axis=1, keepdims=True)
        lp = lg - np.log(np.exp(lg).sum(axis=1, keepdims=True))
        tgt = np.asarray(chunk[first + 1:ctx])
        nll.extend((-lp[np.arange(len(tgt)), tgt]).tolist())
    nll = np.asarray(nll)
    ppl = math.exp(nll.mean())
    se = ppl * nll.std(ddof=1) / math.sqrt(len(nll))
    print(json.dumps({"tokens": len(ids), "chunks": n_chunks, "ctx": ctx, "scored": len(nll), "ppl": ppl,
                      "ppl_stderr": se, "kv": kvt or "f16", "llama_cpp_python": llama_cpp.__version__}))


if __name__ == "__main__":
    main()
