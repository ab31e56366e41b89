#!/usr/bin/env python3
"""How much can prompt lookup gain on this prompt with this model, at best? (not a test)

Generates the greedy continuation once (`tachyon run --spec off`), then replays tachyon's n-gram proposer
(spec_ngram_propose: the earlier occurrence of the last token with the longest common suffix, drafting 1, 2,
4 or k tokens for a suffix of 1, 2, 3-4, 5+ tokens) over it offline and
prices each verify step as 1 + c * (drafted rows), c = the marginal cost of a verify row in units of a one-row
decode step (measure it with build/bench_verify MODEL). Reports decode speedup over plain decoding for:
  fixed k   - always draft k tokens when the lookup finds a match (`--spec ngram`)
  oracle    - each draft cut to the part the model then accepts (no rejected row is ever paid for): the
              ceiling of ANY draft-length policy on top of this proposer
so a target such as ">= 2.0x" can be checked against what the model's own output allows before tuning
kernels or policies. Tokens come from re-tokenizing prompt + output text (`tachyon tokenize --special`), which
can differ from the generated ids at a few boundaries: an estimate.

usage: TACHYON_BIN=build/tachyon python bench/spec_ngram_ceiling.py MODEL PROMPT_FILE [--chat] [-n 128] [-c 0.2,0.4]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

NGRAM_MAX_L = 64  # src/speculation/spec.h SPEC_NGRAM_MAX_L (the work bound SPEC_NGRAM_WORK is not modelled)


def propose(toks, k):
    n_tok = len(toks)
    if n_tok < 2:
        return []
    best_l, best_j = 0, -1
    for j in range(n_tok - 2, -1, -1):
        if toks[j] != toks[-1]:
            continue
        L = 1
        while L < NGRAM_MAX_L and L <= j and toks[j - L] == toks[n_tok - 1 - L]:
            L += 1
        if L > best_l:
            best_l, best_j = L, j
        if L == NGRAM_MAX_L:
            break
    if best_j < 0:
        return []
    cap = 1 if best_l < 2 else 2 if best_l < 3 else 4 if best_l < 5 else k
    return toks[best_j + 1:best_j + 1 + min(cap, k)]


def replay(toks, n_prompt, k, c, oracle):
    t, cost = n_prompt, 0.0
    while t < len(toks):
        d = propose(toks[:t], k)
        m = 0
        while m < len(d) and t + m < len(toks) and d[m] == toks[t + m]:
            m += 1
        cost += 1 + c * (m if oracle else len(d))
        t += m + 1
    return (len(toks) - n_prompt) / cost


def tokenize(binary, model, text):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write(json.dumps(text) + "\n")
    try:
        out = subprocess.run([binary, "tokenize", "-m", model, "--special", "--file", f.name], check=True,
                             capture_output=True, text=True).stdout
    finally:
        os.unlink(f.name)
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("prompt_file")
    ap.add_argument("--chat", action="store_true", help="the prompt as one user turn in the chat template")
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-c", default="0.2,0.4", help="marginal verify-row costs to price with")
    ap.add_argument("-k", default="4,8,16")
    a = ap.parse_args()
    binary = os.environ.get("TACHYON_BIN", "build/tachyon")
    prompt = open(a.prompt_file).read()
    run = [binary, "run", "-m", a.model, "-p", prompt, "-n", str(a.n), "--spec", "off", "--ignore-eos"]
    if a.chat:
        run.append("--chat")
    out = subprocess.run(run, check=True, capture_output=True, text=True).stdout
    if a.chat:  # the text the model saw: the template around the prompt (chatml here; enough for SmolLM2)
        prompt = "<|im_start|>user\n" + prompt + "<|im_end|>\n<|im_start|>assistant\n"
    p_ids = tokenize(binary, a.model, prompt)
    all_ids = tokenize(binary, a.model, prompt + out)
    n_prompt = len(p_ids) - 1  # the boundary token may merge with the output's first
    print("%s: %d prompt tokens, %d generated" % (os.path.basename(a.prompt_file), n_prompt, len(all_ids) - n_prompt))
    for c in [float(x) for x in a.c.split(",")]:
        cells = ["fixed k=%s %.2fx" % (k, replay(all_ids, n_prompt, int(k), c, False)) for k in a.k.split(",")]
        cells.append("oracle %.2fx" % replay(all_ids, n_prompt, 16, c, True))
        print("  c=%.2f: %s" % (c, ", ".join(cells)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
