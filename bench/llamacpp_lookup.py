#!/usr/bin/env python3
"""llama.cpp's prompt-lookup decoding side by side with plain decoding (not a test), for comparison with
`tachyon bench --spec off,ngram,auto` on the same GGUF and prompt files.

llama.cpp comes from llama-cpp-python (its bundled llama.cpp): `LlamaPromptLookupDecoding(num_pred_tokens=K)`
as the draft model of `Llama`, which is llama.cpp's lookup decoding (n-gram match in the context, K drafted
tokens verified in one batch). Greedy (temperature 0), one stream; decode tok/s = (tokens - 1) / (time of
the last streamed token - time of the first), so prefill is excluded as in `tachyon bench`. Modes are
interleaved within each round; median over rounds.

usage: /work/llama-native/bin/python bench/llamacpp_lookup.py MODEL PROMPT_FILE [--chat] [-n 64] [-r 3] [-t 2] [-k 8]
"""
import argparse
import statistics
import sys
import time

from llama_cpp import Llama
from llama_cpp.llama_speculative import LlamaPromptLookupDecoding


def decode_rate(llm, prompt, chat, n):
    llm.reset()
    stamps, text = [], []
    if chat:
        it = llm.create_chat_completion([{"role": "user", "content": prompt}], max_tokens=n, temperature=0.0,
                                        stream=True)
        for ch in it:
            d = ch["choices"][0]["delta"].get("content")
            if d:
                stamps.append(time.perf_counter())
                text.append(d)
    else:
        for ch in llm.create_completion(prompt, max_tokens=n, temperature=0.0, stream=True):
            stamps.append(time.perf_counter())
            text.append(ch["choices"][0]["text"])
    if len(stamps) < 2:
        return 0.0, "".join(text), len(stamps)
    return (len(stamps) - 1) / (stamps[-1] - stamps[0]), "".join(text), len(stamps)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("prompt_file")
    ap.add_argument("--chat", action="store_true")
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("-k", type=int, default=8, help="num_pred_tokens of the lookup draft")
    a = ap.parse_args()
    prompt = open(a.prompt_file).read()
    common = dict(model_path=a.model, n_ctx=4096, n_threads=a.t, n_threads_batch=a.t, verbose=False, seed=1)
    llms = {"off": Llama(**common),
            "lookup": Llama(draft_model=LlamaPromptLookupDecoding(num_pred_tokens=a.k), **common)}
    rates = {m: [] for m in llms}
    texts = {}
    for _ in range(a.r):
        for m, llm in llms.items():
            r, t, n = decode_rate(llm, prompt, a.chat, a.n)
            rates[m].append(r)
            texts[m] = (t, n)
    base = statistics.median(rates["off"])
    for m in llms:
        med = statistics.median(rates[m])
        print("llama.cpp %-6s k=%d: decode %.2f tok/s (median of %d: %s) %.2fx, %d streamed chunks" %
              (m, a.k, med, a.r, " ".join("%.1f" % x for x in rates[m]), med / base if base else 0, texts[m][1]))
    print("same text as off: %s" % (texts["lookup"][0] == texts["off"][0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
