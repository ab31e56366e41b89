"""Split attention through the real server (SmolLM2, contexts past one span of 1024 positions): a decode step of
one sequence splits each KV head's context into spans that run on both threads (flash-decoding, attention.h),
while a step with several sequences runs each (sequence, KV head) whole. Greedy tokens and their logprobs must
be the same either way: each prompt alone (every decode step split) and the three together (steps unsplit
while all three decode). q8_0 KV (its keys dotted in int8); tests/unit/test_attention.c checks every cache type
and ISA level bit for bit."""
import concurrent.futures as cf
import os
import random

import pytest

from conftest import SMOL


def prompts():
    rnd = random.Random(35)
    return [[rnd.randrange(100, 40000) for _ in range(1060 + 7 * i)] for i in range(3)]


def test_split_decode_matches_unsplit(make_server, kv="q8_0"):
    if not os.path.exists(SMOL):
        pytest.skip("SmolLM2 model not present (run make models)")
    srv = make_server(SMOL, "--ctx-size", 2048, "--threads", 2, "--kv-type", kv, "--kv-cache-mem", 128,
                      "--no-prefix-cache")

    def gen(ids):
        st, _, j = srv.post("/v1/completions", {"prompt": ids, "max_tokens": 8, "temperature": 0, "logprobs": 1,
                                                "ignore_eos": True}, timeout=300)
        assert st == 200, j
        c = j["choices"][0]
        return c["text"], c["logprobs"]["token_logprobs"]

    ps = prompts()
    alone = [gen(p) for p in ps]
    with cf.ThreadPoolExecutor(3) as ex:
        together = list(ex.map(gen, ps))
    for i, (a, t) in enumerate(zip(alone, together)):
        assert a == t, "prompt %d (%d tokens): alone %r vs together %r" % (i, len(ps[i]), a, t)
    assert all(len(lp) == 8 for _, lp in alone)
