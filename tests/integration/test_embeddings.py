"""/v1/embeddings through the official client: OpenAI's response shape, L2 norm 1, identical inputs equal, a
paraphrase closer than an unrelated text, list input equal to one-by-one inputs (batched through the engine),
token-id inputs, base64 encoding, `dimensions`, unknown fields; and the vector equal to a numpy computation
from the reference model (tests/ref/llama_ref.py: mean / last pooling of the final-normed hidden states)."""
import base64
import os
import sys

import numpy as np
import openai
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "ref"))
from llama_ref import LlamaRef  # noqa: E402

from conftest import STORIES  # noqa: E402

M = "stories260K"


def client(srv):
    return openai.OpenAI(base_url=srv.base + "/v1", api_key="unused")


def emb(srv, inp, **kw):
    r = client(srv).embeddings.create(model=M, input=inp, encoding_format="float", **kw)
    return r, [np.array(d.embedding) for d in r.data]


def cos(a, b):
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_embeddings_basic(stories):
    texts = ["The little dog ran to the park.", "A small puppy hurried to the playground.",
             "Seven plus five equals twelve in arithmetic."]
    r, vs = emb(stories, texts)
    assert r.object == "list" and r.model == M and [d.index for d in r.data] == [0, 1, 2]
    assert all(d.object == "embedding" for d in r.data)
    assert r.usage.prompt_tokens == r.usage.total_tokens > 0
    for v in vs:
        assert len(v) == 64 and abs(np.linalg.norm(v) - 1) < 1e-5
    # one by one equals the batched list; identical inputs are equal
    singles = [emb(stories, t)[1][0] for t in texts]
    for a, b in zip(vs, singles):
        assert np.abs(a - b).max() < 1e-5
    _, same = emb(stories, [texts[0], texts[0]])
    assert np.abs(same[0] - same[1]).max() < 1e-6
    # a paraphrase is closer than an unrelated text
    assert cos(vs[0], vs[1]) > cos(vs[0], vs[2]), (cos(vs[0], vs[1]), cos(vs[0], vs[2]))
    # token ids and lists of token ids
    st, _, t = stories.post("/tokenize", {"content": texts[0], "add_special": True})
    _, v_ids = emb(stories, t["tokens"])
    assert np.abs(v_ids[0] - vs[0]).max() < 1e-5
    _, v_lists = emb(stories, [t["tokens"], t["tokens"][:4]])
    assert np.abs(v_lists[0] - vs[0]).max() < 1e-5 and np.abs(v_lists[1] - vs[0]).max() > 1e-3
    # base64: little-endian float32, what the client decodes by default
    st, _, j = stories.post("/v1/embeddings", {"input": texts[0], "encoding_format": "base64"})
    assert st == 200
    b = np.frombuffer(base64.b64decode(j["data"][0]["embedding"]), dtype="<f4")
    assert np.abs(b - vs[0]).max() < 1e-6
    r2 = client(stories).embeddings.create(model=M, input=texts[0])  # the client asks for base64 itself
    assert np.abs(np.array(r2.data[0].embedding) - vs[0]).max() < 1e-6


@pytest.mark.parametrize("body,param", [
    ({"input": "x", "dimensions": 8}, "dimensions"),
    ({"input": "x", "encoding_format": "int8"}, "encoding_format"),
    ({"input": "x", "frobnicate": 1}, "frobnicate"),
    ({"input": "x", "model": "nope"}, "model"),
    ({}, "input"),
    ({"input": ""}, "input"),
    ({"input": []}, "input"),
    ({"input": [1, 99999]}, "input"),
    ({"input": ["a", 3]}, "input"),
])
def test_embeddings_refused(stories, body, param):
    st, _, j = stories.post("/v1/embeddings", body)
    assert st in (400, 404) and j["error"]["param"] == param, j


def test_embeddings_dimensions_equal_accepted(stories):
    r, vs = emb(stories, "hello", dimensions=64)
    assert len(vs[0]) == 64


@pytest.mark.parametrize("pooling", ["mean", "last"])
def test_embeddings_match_reference(make_server, pooling):
    srv = make_server(STORIES, "--ctx-size", 256, "--pooling", pooling, "--max-batch-tokens", 8)
    ids = [1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 400, 290, 301]  # > one prefill chunk
    _, vs = emb(srv, [ids, ids[:6]])
    ref = LlamaRef(STORIES, act_quant=True)
    for v, seq in zip(vs, [ids, ids[:6]]):
        h = ref.hidden(seq)
        want = h.mean(0) if pooling == "mean" else h[-1]
        want = want / np.linalg.norm(want)
        # F32 weights: float32 vs float64 arithmetic and the f16 KV rounding noise (see test_model_ref.py)
        assert np.abs(v - want).max() < 2e-3, np.abs(v - want).max()
        assert cos(v, want) > 0.9999
