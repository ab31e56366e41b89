"""Qwen3.5 (qwen35: gated DeltaNet layers with a recurrent state per sequence, between gated-attention layers)
through the public interfaces, on the synthetic qwen35-tiny that `tachyon synth` writes (and the serving tests
again on qwen35moe-tiny: the same layers with routed and shared experts as the FFN, and on qwen3next-tiny:
Qwen3-Next's layout of those layers):
  - `tachyon info` names the layer kinds and the state's size;
  - greedy output through the server is the same for requests batched together (each with its own state slot)
    as for each alone, and as `tachyon run`;
  - in a KV pool small enough that sequences are preempted and recomputed (their state rebuilt from position 0),
    outputs are unchanged;
  - a long prompt prefilled in chunks (the state carried from chunk to chunk) gives the unchunked output;
  - a cancelled stream frees its slot: later requests still give the outputs alone;
  - a prefix-cache hit resumes from the state kept at its last cached block: outputs equal those of a server
    without the cache (the same prompt again, prompts sharing a prefix, concurrent requests);
  - speculative decoding keeps the state after each verify row and restores the one after the last accepted
    draft: --spec ngram / auto give --spec off's output, alone and batched, with drafts accepted and rejected;
    self-speculation is off (said in the log), and a draft model with recurrent layers is refused.
Timing free."""
import concurrent.futures as cf
import http.client
import json
import os
import subprocess

import pytest

from conftest import BIN

PROMPTS = ["a b c d e f", "the river of town", "one two three four five six seven", "zz yy xx",
           "b a b a b a", "seven six five", "x y z", "town river the of a"]
LONG = " ".join(["a b c d e f g h i j k l m n o p"] * 12)  # ~200 tokens
N = 16


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    if not os.path.exists(BIN):
        pytest.skip("no binary at %s" % BIN)
    path = str(tmp_path_factory.mktemp("qwen35") / "qwen35-tiny-q8_0.gguf")
    p = subprocess.run([BIN, "synth", "-o", path, "--shape", "qwen35-tiny", "--type", "q8_0"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return path


@pytest.fixture(scope="module")
def synth_q8(tmp_path_factory):
    """The Q8_0 model of a synth shape, made once per module."""
    made = {}

    def get(shape):
        if shape not in made:
            path = str(tmp_path_factory.mktemp(shape) / (shape + "-q8_0.gguf"))
            p = subprocess.run([BIN, "synth", "-o", path, "--shape", shape, "--type", "q8_0"],
                               capture_output=True, text=True, timeout=120)
            assert p.returncode == 0, p.stderr
            made[shape] = path
        return made[shape]
    return get


@pytest.fixture(scope="module", params=["qwen35-tiny", "qwen35moe-tiny", "qwen3next-tiny"])
def hybrid(request, model, synth_q8):
    """qwen35-tiny, qwen35moe-tiny (Qwen3.5 MoE) and qwen3next-tiny (Qwen3-Next): the serving tests run on each."""
    return model if request.param == "qwen35-tiny" else synth_q8(request.param)


def test_info_names_the_layer_kinds(model):
    p = subprocess.run([BIN, "info", "-m", model], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "architecture    qwen35" in p.stdout, p.stdout
    assert "gated deltanet  3 of 4 layers (every 4th layer full attention with a sigmoid output gate); " \
           "2 key and 4 value heads of 32, conv 4" in p.stdout, p.stdout
    assert "recurrent state 57.0 KiB per sequence" in p.stdout, p.stdout


def gen(srv, prompt, n=N):
    st, _, j = srv.post("/v1/completions", {"prompt": prompt, "max_tokens": n, "temperature": 0,
                                            "ignore_eos": True, "logprobs": 1})
    assert st == 200, j
    c = j["choices"][0]
    return c["logprobs"]["tokens"], j["usage"]


def tokens(srv, prompt, n=N):
    return gen(srv, prompt, n)[0]


def test_greedy_batched_equals_alone(make_server, hybrid):
    srv = make_server(hybrid, "--ctx-size", 512, "--threads", 2, "--max-seqs", 8)
    alone = [tokens(srv, p) for p in PROMPTS]
    with cf.ThreadPoolExecutor(len(PROMPTS)) as ex:
        together = list(ex.map(lambda p: tokens(srv, p), PROMPTS))
    assert together == alone
    assert len({tuple(a) for a in alone}) > 1, alone  # the prompts lead somewhere different
    p = subprocess.run([BIN, "run", "-m", hybrid, "-p", PROMPTS[0], "-n", str(N), "-t", "2"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    # the whole text, not the tokens' pieces joined: a character split over two tokens is one character in both
    st, _, j = srv.post("/v1/completions", {"prompt": PROMPTS[0], "max_tokens": N, "temperature": 0,
                                            "ignore_eos": True})
    assert st == 200 and p.stdout[:-1] == j["choices"][0]["text"], (p.stdout, j)


def test_preemption_keeps_outputs(make_server, hybrid):
    # 1 MiB of f16 KV = 32 blocks of 16 positions (4 layers x 2 KV heads x 64 x 2 bytes x 2 a position); eight
    # requests of ~160 positions (10 blocks) each run short of them as soon as four overlap (even when a loaded
    # machine staggers the clients): sequences are preempted and recomputed
    srv = make_server(hybrid, "--ctx-size", 512, "--threads", 2, "--max-seqs", 8, "--kv-cache-mem", 1)
    n = 150
    alone = [tokens(srv, p, n) for p in PROMPTS]
    pre0 = srv.metrics()["tachyon:preemptions_total"]
    for _ in range(5):  # a round whose clients all came late may not overlap enough: then another
        with cf.ThreadPoolExecutor(len(PROMPTS)) as ex:
            together = list(ex.map(lambda p: tokens(srv, p, n), PROMPTS))
        for p, a, t in zip(PROMPTS, alone, together):
            assert a == t, "prompt %r: alone %r vs under preemption %r" % (p, a, t)
        if srv.metrics()["tachyon:preemptions_total"] > pre0:
            break
    assert srv.metrics()["tachyon:preemptions_total"] > pre0, "the pool was meant to run short"


def test_chunked_prefill_equals_unchunked(make_server, hybrid):
    whole = make_server(hybrid, "--ctx-size", 512, "--threads", 2, "--max-batch-tokens", 512)
    ref, u = gen(whole, LONG)
    assert u["prompt_tokens"] > 150, u
    for chunk in (16, 37):  # chunk ends inside the conv's window and anywhere else
        srv = make_server(hybrid, "--ctx-size", 512, "--threads", 2, "--max-batch-tokens", chunk)
        assert gen(srv, LONG)[0] == ref, chunk


def test_cancelled_stream_frees_its_slot(make_server, hybrid):
    srv = make_server(hybrid, "--ctx-size", 512, "--threads", 2, "--max-seqs", 2)
    alone = [tokens(srv, p) for p in PROMPTS[:4]]
    for _ in range(3):  # more cancelled streams than slots
        c = http.client.HTTPConnection(srv.host, srv.port, timeout=30)
        c.request("POST", "/v1/completions", body=json.dumps(
            {"prompt": LONG, "max_tokens": 400, "stream": True, "ignore_eos": True}),
            headers={"Content-Type": "application/json"})
        r = c.getresponse()
        r.read1(64)  # the stream has started
        c.close()
    with cf.ThreadPoolExecutor(4) as ex:
        assert list(ex.map(lambda p: tokens(srv, p), PROMPTS[:4])) == alone


def test_prefix_cache_hits_resume_the_state(make_server, hybrid):
    # a hit resumes from the state kept at the last cached block (16 positions a block): outputs equal a server
    # without the cache, for the same prompt again and for prompts sharing only a prefix with it
    on = make_server(hybrid, "--ctx-size", 512, "--threads", 2)
    off = make_server(hybrid, "--ctx-size", 512, "--threads", 2, "--no-prefix-cache")
    prompts = [LONG, LONG, LONG + " zz yy", LONG[:101] + " x y z", LONG + " zz yy"]
    ref = [gen(off, p)[0] for p in prompts]
    got, cached = [], []
    for p in prompts:
        t, u = gen(on, p)
        got.append(t)
        cached.append((u.get("prompt_tokens_details") or {}).get("cached_tokens", 0))
    print("cached tokens", cached)
    assert cached[0] == 0 and all(c > 0 for c in cached[1:]), cached
    assert got == ref
    with cf.ThreadPoolExecutor(len(prompts)) as ex:  # hits among concurrent requests
        assert list(ex.map(lambda p: gen(on, p)[0], prompts)) == ref


def spec_counts(srv):
    m = srv.metrics()
    drafted = sum(v for k, v in m.items() if k.startswith("tachyon:spec_draft_tokens_total"))
    accepted = sum(v for k, v in m.items() if k.startswith("tachyon:spec_accepted_tokens_total"))
    return drafted, accepted


def test_speculation_rolls_back_the_state(make_server, hybrid):
    # prompt lookup drafts from repeated text; some drafts are accepted, some rejected: a rejection must put the
    # recurrent state back to the one after the last accepted row, so the output is --spec off's
    off = make_server(hybrid, "--ctx-size", 512, "--threads", 2, "--spec", "off")
    prompts = ["a b a b a b a b a b a b", LONG, PROMPTS[1]] + [" ".join(tokens(off, p, 8)) for p in PROMPTS[:3]]
    ref = [tokens(off, p, 40) for p in prompts]
    for mode in ("ngram", "auto"):
        srv = make_server(hybrid, "--ctx-size", 512, "--threads", 2, "--spec", mode, "--spec-k", 4)
        got = [tokens(srv, p, 40) for p in prompts]
        drafted, accepted = spec_counts(srv)
        print(mode, "drafted", drafted, "accepted", accepted)
        assert got == ref, mode
        with cf.ThreadPoolExecutor(len(prompts)) as ex:  # and batched, each with its own state and drafts
            assert list(ex.map(lambda p: tokens(srv, p, 40), prompts)) == ref, mode
        drafted, accepted = spec_counts(srv)
        assert drafted > accepted, (drafted, accepted)  # rejections happened
        if mode == "ngram" and os.path.basename(hybrid).startswith("qwen35-tiny"):  # (the other models' outputs
            # do not repeat these prompts: there only rejections roll the state back)
            assert accepted > 0, (drafted, accepted)  # and acceptances


def test_self_speculation_off(make_server, model):
    off = make_server(model, "--ctx-size", 512, "--threads", 2, "--spec", "off")
    srv = make_server(model, "--ctx-size", 512, "--threads", 2, "--spec", "self")
    assert tokens(srv, PROMPTS[0], 24) == tokens(off, PROMPTS[0], 24)
    with open(srv.log_path) as f:
        assert "self-speculation off" in f.read()


def test_hybrid_draft_model_refused(model, tmp_path):
    target = str(tmp_path / "llama-tiny.gguf")  # the same synthetic vocabulary
    p = subprocess.run([BIN, "synth", "-o", target, "--shape", "llama-tiny"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([BIN, "run", "-m", target, "--spec", "draft", "--draft-model", model, "-p", "a b", "-n", "4",
                        "-t", "2"], capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    assert "the draft model (qwen35) has recurrent layers" in p.stderr, p.stderr


def patched(model, tmp_path, key, new_value):
    """A copy of the model with metadata key's value bytes replaced (same length), or the key renamed."""
    data = bytearray(open(model, "rb").read())
    k = key.encode()
    at = data.index(len(k).to_bytes(8, "little") + k) + 8 + len(k)
    if isinstance(new_value, str):  # rename the key
        data[at - len(k):at] = new_value.encode()
    else:
        data[at:at + len(new_value)] = new_value
    out = tmp_path / ("bad-%d.gguf" % len(list(tmp_path.iterdir())))
    out.write_bytes(bytes(data))
    return str(out)


def i32s(*v):
    return b"".join(x.to_bytes(4, "little", signed=True) for x in v)


@pytest.mark.parametrize("key,value,message", [
    # (type ARRAY, element INT32, count 4, values): a rotated pair in no text section
    ("qwen35.rope.dimension_sections", (9).to_bytes(4, "little") + (5).to_bytes(4, "little") +
     (4).to_bytes(8, "little") + i32s(2, 2, 2, 2),
     "qwen35.rope.dimension_sections [2, 2, 2, 2]: rotated pair 6 is not a text section"),
    ("qwen35.ssm.state_size", "qwen35.ssm.state_sizX", "missing or invalid qwen35.ssm.state_size"),
    ("qwen35.ssm.group_count", (4).to_bytes(4, "little") + (3).to_bytes(4, "little"),
     "qwen35.ssm.time_step_rank 4 is not a multiple of ssm.group_count 3"),
])
def test_bad_files_refused(model, tmp_path, key, value, message):
    bad = patched(model, tmp_path, key, value)
    p = subprocess.run([BIN, "info", "-m", bad], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and message in p.stderr, p.stderr


def test_huge_recurrent_state_refused(model, tmp_path):
    """A file asking for a recurrent state far beyond real models' (every sequence's is read and written per
    token) is refused before anything is allocated: 1024 value heads of 1024² floats in each DeltaNet layer."""
    bad = patched(model, tmp_path, "qwen35.ssm.state_size", (4).to_bytes(4, "little") + (1024).to_bytes(4, "little"))
    bad = patched(bad, tmp_path, "qwen35.ssm.time_step_rank", (4).to_bytes(4, "little") + (1024).to_bytes(4, "little"))
    bad = patched(bad, tmp_path, "qwen35.ssm.inner_size", (4).to_bytes(4, "little") + (1 << 20).to_bytes(4, "little"))
    p = subprocess.run([BIN, "info", "-m", bad], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "GiB per sequence (at most 1)" in p.stderr, p.stderr


def bools(*v):
    """A GGUF bool array's value bytes (type ARRAY, element BOOL, count, values)."""
    return (9).to_bytes(4, "little") + (7).to_bytes(4, "little") + len(v).to_bytes(8, "little") + bytes(v)


@pytest.mark.parametrize("value,message", [
    # not an interval's pattern (layer 0 full attention, so every layer should be): refused
    (bools(0, 1, 1, 0), "qwen3next.attention.recurrent_layers: layer 1 is recurrent; only every n-th layer"),
    # every 2nd layer: the list is taken over full_attention_interval (4), so layer 1 wants attention weights
    (bools(1, 0, 1, 0), "missing tensor 'blk.1.attn_q.weight'"),
])
def test_layer_list(synth_q8, tmp_path, value, message):
    """Qwen3-Next's files carry the recurrent layers as a list (attention.recurrent_layers, from layer_types)."""
    good = synth_q8("qwen3next-tiny")
    p = subprocess.run([BIN, "info", "-m", good], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "gated deltanet  3 of 4 layers (every 4th layer" in p.stdout, p.stdout + p.stderr
    bad = patched(good, tmp_path, "qwen3next.attention.recurrent_layers", value)
    p = subprocess.run([BIN, "info", "-m", bad], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and message in p.stderr, p.stderr
