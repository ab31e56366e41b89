"""Writes tests/ref/golden/gemma3-llamacpp.json from llama.cpp (llama-cpp-python) on Gemma 3 270M Q4_K_M:
- the token ids of a ~100-token text (golden/text200.txt) as llama.cpp's tokenizer gives them, and of a few
  more strings (spaces, newlines, markup, emoji, digits) to check tachyon's SentencePiece encoding;
- llama.cpp's own distance to the exact model on that text (mean KL, top-1 agreement), the yardstick for
  tachyon's default mode — the exact logits come from the numpy reference (llama_ref.py);
- greedy continuations of chat prompts rendered with the gemma template (the GGUF carries none).
llama-cpp-python is NOT needed by `make test`; this script is run by hand:
  /work/llama-native/bin/python tests/ref/make_golden_gemma3.py   (needs numpy and the `gguf` package there too)
"""
import json
import os
import sys

import numpy as np
from llama_cpp import Llama

sys.path.insert(0, os.path.dirname(__file__))
from llama_ref import LlamaRef  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MODEL = os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf")
N_TEXT = 100
N_NEW = 24
TOK_CASES = ["Hello world, how are you?  Two  spaces\n\nnewlines <b>tag</b> \u00e9moji \U0001F642 1234567",
             "   leading spaces\ttabs\n\n\nand code: def f(x):\n    return x**2"]
CHATS = ["What is the capital of France?", "Write a haiku about the sea.", "List three primary colors.",
         "Translate 'good morning' into Spanish."]


def chat(user):
    return f"<bos><start_of_turn>user\n{user}<end_of_turn>\n<start_of_turn>model\n"


def log_softmax(x):
    x = x.astype(np.float64) - x.max(axis=1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=1, keepdims=True))


if __name__ == "__main__":
    llm = Llama(MODEL, n_ctx=1024, n_threads=2, logits_all=True, verbose=False)
    text = open(os.path.join(ROOT, "tests", "ref", "golden", "text200.txt")).read()
    ids = llm.tokenize(text.encode(), add_bos=True)[:N_TEXT]
    llm.reset()
    llm.eval(ids)
    lc = np.array(llm.scores[:len(ids)])
    exact = LlamaRef(MODEL, act_quant=False).forward(ids)
    lp, lq = log_softmax(exact), log_softmax(lc)
    kl = float((np.exp(lp) * (lp - lq)).sum(axis=1).mean())
    top1 = float((exact.argmax(1) == lc.argmax(1)).mean())
    out = {"model": os.path.basename(MODEL), "text_ids": ids, "llamacpp_kl": kl, "llamacpp_top1": top1,
           "tokenize": [{"text": t, "ids": llm.tokenize(t.encode(), add_bos=True)} for t in TOK_CASES],
           "chats": []}
    eot = llm.tokenize(b"<end_of_turn>", add_bos=False, special=True)[0]
    for user in CHATS:
        p = llm.tokenize(chat(user).encode(), add_bos=False, special=True)
        llm.reset()
        gen = []
        for t in llm.generate(p, temp=0.0, top_k=1, reset=True):
            if t in (llm.token_eos(), eot) or len(gen) >= N_NEW:
                break
            gen.append(t)
        out["chats"].append({"user": user, "prompt_ids": p, "ids": gen,
                             "text": llm.detokenize(gen).decode("utf-8", errors="replace"),
                             "finished": len(gen) < N_NEW})
    path = os.path.join(os.path.dirname(__file__), "golden", "gemma3-llamacpp.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps({k: v for k, v in out.items() if k != "text_ids"}, indent=1)[:3000])
