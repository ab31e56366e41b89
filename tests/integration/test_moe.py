"""Mixture-of-experts models through the public interfaces, on the synthetic qwen3moe-tiny and gptoss-tiny shapes
that `tachyon synth` writes (8 experts, 2 used, Q8_0 experts read as slices of their 3-D tensors; gpt-oss with its
biases, attention sinks, a sliding window of 128 on alternate layers, YaRN and the clamped SwiGLU; qwen3moe-tiny
also in Q4_K_M, whose experts run repacked):
  - `tachyon info` names the architecture and the expert counts;
  - greedy output through the server is the same for requests run together in one batch (rows routed to
    different experts, each expert's rows grouped) as for each alone, and as `tachyon run`;
  - the CUDA backend refuses the model with a message naming what it lacks.
Timing free."""
import concurrent.futures as cf
import os
import subprocess

import pytest

from conftest import BIN

PROMPTS = ["a b c d e f", "the river of town", "one two three four five six seven", "zz yy xx"]
N = 12


INFO = {"qwen3moe-tiny": ["architecture    qwen3moe", "experts         2 used of 8 per layer, expert ffn 256"],
        "gptoss-tiny": ["architecture    gpt-oss", "experts         2 used of 8 per layer, expert ffn 256",
                        "attention sinks one learned logit per query head", "expert swiglu   clamped at 7",
                        "sliding window  128 positions", "yarn            factor 32 over original context 4096"]}


# (shape, weight type): gpt-oss also as released, MXFP4 experts (synth's mxfp4 = llama.cpp's MXFP4_MOE); Qwen3-MoE
# also in Q4_K_M (Q4_K and Q6_K experts, which run in the repacked layout)
MODELS = [(shape, "q8_0") for shape in sorted(INFO)] + [("gptoss-tiny", "mxfp4"), ("qwen3moe-tiny", "q4_k_m")]


@pytest.fixture(scope="module", params=MODELS, ids=["%s-%s" % m for m in MODELS])
def moe_model(request, tmp_path_factory):
    if not os.path.exists(BIN):
        pytest.skip("no binary at %s" % BIN)
    shape, qtype = request.param
    path = str(tmp_path_factory.mktemp("moe") / f"{shape}-{qtype}.gguf")
    p = subprocess.run([BIN, "synth", "-o", path, "--shape", shape, "--type", qtype],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return shape, path


def test_info_names_the_experts(moe_model):
    shape, path = moe_model
    p = subprocess.run([BIN, "info", "-m", path], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    for line in INFO[shape]:
        assert line in p.stdout, p.stdout


def run_alone(model, prompt):
    p = subprocess.run([BIN, "run", "-m", model, "-p", prompt, "-n", str(N), "-t", "2"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout[:-1]


def test_greedy_batched_equals_alone(make_server, moe_model):
    _, moe_model = moe_model
    srv = make_server(moe_model, "--ctx-size", 256, "--threads", 2, "--max-seqs", 4)

    def gen(prompt):
        st, _, j = srv.post("/v1/completions", {"prompt": prompt, "max_tokens": N, "temperature": 0,
                                                "ignore_eos": True})
        assert st == 200, j
        return j["choices"][0]["text"]

    alone = [gen(p) for p in PROMPTS]
    # one request of four prompts: submitted at once, so their prefills and decode steps share batches
    st, _, j = srv.post("/v1/completions", {"prompt": PROMPTS, "max_tokens": N, "temperature": 0,
                                            "ignore_eos": True})
    assert st == 200, j
    together = [c["text"] for c in sorted(j["choices"], key=lambda c: c["index"])]
    assert together == alone
    with cf.ThreadPoolExecutor(len(PROMPTS)) as ex:  # and as concurrent requests
        assert list(ex.map(gen, PROMPTS)) == alone
    assert len(set(alone)) > 1, alone  # the prompts lead somewhere different: the model is not degenerate
    assert alone[0] == run_alone(moe_model, PROMPTS[0])


def test_cuda_refuses_moe(moe_model):
    _, moe_model = moe_model
    p = subprocess.run([BIN, "logits", "-m", moe_model, "--ids", "1,2,3", "-o", os.devnull, "--device", "cuda"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert "mixture-of-experts" in p.stderr or "attention sinks" in p.stderr or "without CUDA" in p.stderr or "no CUDA device" in p.stderr, p.stderr
