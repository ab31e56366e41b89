"""The quantized KV cache through the real server (SmolLM2, `--kv-type q8_0`): the pool holds proportionally
more tokens in the same --kv-cache-mem (/stats and /metrics report capacity and bytes per token), and greedy
output stays the same alone, among 8 concurrent requests (in a pool small enough to preempt), and when the
prompt's prefix comes from the prefix cache. Uses the official openai client."""
import concurrent.futures as cf
import json

import pytest

from conftest import SMOL

PROMPTS = ["Once upon a time", "The capital of France is", "def fibonacci(n):", "My favourite colour is",
           "The three laws of robotics are", "Water boils at", "In 1969, astronauts", "A haiku about rain:"]
LONG = " ".join(["The quick brown fox jumps over the lazy dog while the cat watches from the old wooden fence."] * 5)


def smollm2(make_server, *args):
    import os
    if not os.path.exists(SMOL):
        pytest.skip("SmolLM2 model not present (run make models)")
    return make_server(SMOL, "--ctx-size", 512, "--threads", 2, *args)


def stats(srv):
    st, _, data = srv.request("GET", "/stats")
    assert st == 200
    return json.loads(data)


def test_kv_capacity_scales_with_type(make_server):
    # SmolLM2-135M: 30 layers, 3 KV heads of 64 → per token and layer 3 x 2 rows (K and V) of 128 bytes (f16),
    # 68 bytes (q8_0: two blocks of 2 + 32 bytes) or 36 bytes (q4_0: two of 2 + 16).
    caps = {}
    for kv, per_row in [("f16", 128), ("q8_0", 68), ("q4_0", 36)]:
        srv = smollm2(make_server, "--kv-cache-mem", 8, "--kv-type", kv)
        s = stats(srv)
        assert s["kv_bytes_per_token"] == 30 * 3 * 2 * per_row, s
        assert (s["kv_type_k"], s["kv_type_v"]) == (kv, kv)
        assert s["kv_capacity_tokens"] == s["kv_blocks_total"] * 16
        # whole blocks of 16 tokens that fit in 8 MiB
        assert s["kv_capacity_tokens"] == (8 << 20) // (16 * s["kv_bytes_per_token"]) * 16, s
        m = srv.metrics()
        assert m["tachyon:kv_capacity_tokens"] == s["kv_capacity_tokens"]
        assert m["tachyon:kv_bytes_per_token"] == s["kv_bytes_per_token"]
        caps[kv] = s["kv_capacity_tokens"]
        srv.stop()
    assert caps["q8_0"] >= 1.85 * caps["f16"] and caps["q4_0"] >= 3.4 * caps["f16"], caps


def test_kv_type_k_v_separately(make_server):
    srv = smollm2(make_server, "--kv-type-k", "q8_0", "--kv-type-v", "q4_0")
    s = stats(srv)
    assert (s["kv_type_k"], s["kv_type_v"]) == ("q8_0", "q4_0")
    assert s["kv_bytes_per_token"] == 30 * 3 * (68 + 36)


def test_kv_type_rejects_unknown(tmp_path):
    import subprocess
    from conftest import BIN
    p = subprocess.run([BIN, "serve", "-m", SMOL, "--kv-type", "q5_1"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "--kv-type expects f16, q8_0 or q4_0, got 'q5_1'" in p.stderr, p.stderr


def test_q8_0_greedy_stable_alone_concurrent_prefix(make_server):
    openai = pytest.importorskip("openai")

    # 2 MiB of q8_0 KV = 10 blocks of 16 tokens (f16: 5): 8 concurrent requests of ~30 tokens (2 blocks) each
    # compete for them, so blocks run short and sequences get preempted and recomputed.
    srv = smollm2(make_server, "--kv-type", "q8_0", "--kv-cache-mem", 2, "--max-seqs", 8,
                   "--max-batch-tokens", 32)  # the ~100-token prompt below is prefilled in chunks
    client = openai.OpenAI(base_url=srv.base + "/v1", api_key="unused")
    model_id = client.models.list().data[0].id

    def gen(prompt, n=24):
        r = client.completions.create(model=model_id, prompt=prompt, max_tokens=n, temperature=0)
        return r.choices[0].text, r.usage

    alone = [gen(p)[0] for p in PROMPTS]
    pre0 = srv.metrics()["tachyon:preemptions_total"]
    with cf.ThreadPoolExecutor(len(PROMPTS)) as ex:
        together = [t for t, _ in ex.map(gen, PROMPTS)]
    for p, a, t in zip(PROMPTS, alone, together):
        assert a == t, "prompt %r: alone %r vs among 8 concurrent %r" % (p, a, t)
    preempted = srv.metrics()["tachyon:preemptions_total"] - pre0
    print("preemptions among the 8 concurrent requests:", preempted)
    assert preempted > 0, "the pool was meant to run short (measured: 2 preemptions)"
    # prefix cache: the same long prompt twice; the second run reads the first run's quantized blocks
    first, u1 = gen(LONG, 16)
    second, u2 = gen(LONG, 16)
    assert u2.prompt_tokens_details.cached_tokens >= 64, u2
    assert first == second, (first, second)
    assert any(a.strip() for a in alone), "empty outputs prove nothing"
