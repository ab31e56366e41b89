"""Gemma 3's sliding-window KV through the real server (official openai client + raw /stats): the local
layers (15 of the 270M's 18; window 512 positions) keep their blocks in a pool of their own and give back the
blocks behind the window, so
  - greedy output of a prompt longer than the window equals `tachyon run` (which keeps every block of every
    layer in one storage, the layout before the split), alone, again from the prefix cache, and with a shared
    prefix longer than the window followed by another ending;
  - the local pool's blocks in use stay bounded by the window (kv_swa_blocks_peak), while the request holds far
    more global blocks;
  - a context token costs the global layers' bytes only, so --kv-cache-mem holds > 4x the tokens.
Timing free."""
import json
import math
import os
import subprocess

import pytest

from conftest import BIN, ROOT

GEMMA = os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf")
WINDOW, BS, MBT, SPEC_K = 512, 16, 64, 8
# ~800 tokens of varied text (the window is 512): numbered facts, so greedy output is not a loop
LONG = " ".join(f"Fact {i}: the {w} number {i * 7 % 97} sits next to the {v} river in town {i}."
                for i, (w, v) in enumerate(zip(["red", "blue", "green", "old", "tall"] * 8,
                                               ["quiet", "wide", "cold", "fast"] * 10)))


def run_ref(prompt, n):
    p = subprocess.run([BIN, "run", "-m", GEMMA, "-p", prompt, "-n", str(n), "-t", "2"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return p.stdout[:-1]


def stats(srv):
    st, _, data = srv.request("GET", "/stats")
    assert st == 200
    return json.loads(data)


@pytest.mark.timeout(900)  # a loaded 2-core machine: two ~800-token Gemma prefills in `run`, three in the server
def test_gemma3_sliding_window_kv(make_server):
    openai = pytest.importorskip("openai")
    if not os.path.exists(GEMMA):
        pytest.skip("Gemma 3 model not present (run make models)")
    srv = make_server(GEMMA, "--ctx-size", 2048, "--threads", 2, "--max-batch-tokens", MBT, "--max-seqs", 2,
                      "--kv-cache-mem", 64)
    s = stats(srv)
    # 270M: 1 KV head of 256, f16, K and V: 1024 bytes per token and layer; only the 3 global layers count
    assert s["kv_bytes_per_token"] == 3 * 1024, s
    assert s["kv_swa_blocks_total"] > 0 and s["kv_swa_blocks_peak"] <= s["kv_swa_blocks_total"], s
    all_layers = (64 << 20) // (BS * 18 * 1024) * BS  # what the same memory held with one pool for every layer
    assert s["kv_capacity_tokens"] >= 4 * all_layers, (s, all_layers)

    client = openai.OpenAI(base_url=srv.base + "/v1", api_key="unused")
    model = client.models.list().data[0].id

    def gen(prompt, n=16):
        r = client.completions.create(model=model, prompt=prompt, max_tokens=n, temperature=0)
        return r.choices[0].text, r.usage.prompt_tokens

    got, n_prompt = gen(LONG)
    assert n_prompt > WINDOW + 6 * BS, n_prompt  # well past the window: local blocks must have been released
    assert got == run_ref(LONG, 16), got
    s = stats(srv)
    per_request = math.ceil((WINDOW + MBT + SPEC_K) / BS) + 1
    assert 0 < s["kv_swa_blocks_peak"] <= per_request < math.ceil(n_prompt / BS), (s, per_request, n_prompt)

    hits0 = srv.metrics().get("tachyon:prefix_cache_hit_tokens_total", 0)
    again, _ = gen(LONG)  # from the prefix cache: global blocks + the local window's blocks
    assert again == got
    hits1 = srv.metrics()["tachyon:prefix_cache_hit_tokens_total"]
    assert hits1 - hits0 >= n_prompt - WINDOW, (hits0, hits1)

    other = LONG + " Now a question: which river is in town 3? Answer:"
    got2, _ = gen(other)  # shares ~all of LONG (> window) with the cache, then differs
    assert srv.metrics()["tachyon:prefix_cache_hit_tokens_total"] - hits1 >= n_prompt - WINDOW
    assert got2 == run_ref(other, 16), got2
    assert stats(srv)["kv_swa_blocks_peak"] <= 2 * per_request
