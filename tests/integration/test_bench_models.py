"""bench-serve's per-model breakdown: each record carries the model that answered (the response's
"model" and the x-tachyon-routed-model header), and the console table, the JSON and the HTML report split
latency and throughput by it. Against the scripted fake server (which alternates two model names, one of them
scripted 60 ms slower to first token) and once against a real two-model server behind a router alias."""
import os

import pytest

from benchutil import FakeServer, bench, measured
from conftest import BIN, SMOL, STORIES, Server


def test_per_model_breakdown_fake(tmp_path):
    with FakeServer("--ttft-ms", 5, "--itl-ms", 2, "--tokens", 4, "--models", "small,large", "--model-ttft-ms",
                    "large=60") as srv:
        html = tmp_path / "r.html"
        p, doc = bench(tmp_path, srv.url, "--num-requests", 20, "--warmup", 0, "--max-concurrency", 1,
                       "--report", html)
    reqs = measured(doc)
    assert len(reqs) == 20
    assert sorted(set(r["model"] for r in reqs)) == ["large", "small"]
    assert all(r["routed_model"] == r["model"] for r in reqs)
    by = doc["models"]
    assert set(by) == {"small", "large"}
    assert by["small"]["completed"] == by["large"]["completed"] == 10
    assert by["large"]["ttft"]["median_ms"] > by["small"]["ttft"]["median_ms"] + 40  # scripted 60 ms slower
    assert doc["runs"][0]["models"] == by
    assert "Per model" in p.stdout and "small" in p.stdout and "large" in p.stdout
    page = html.read_text()
    assert "Per model" in page and "<td>small</td>" in page and "<td>large</td>" in page


def test_single_model_has_no_table(tmp_path):
    with FakeServer("--ttft-ms", 5, "--itl-ms", 2, "--tokens", 4) as srv:
        p, doc = bench(tmp_path, srv.url, "--num-requests", 4, "--warmup", 0)
    assert set(doc["models"]) == {"fake"}
    assert all(r["model"] == "fake" and "routed_model" not in r for r in measured(doc))
    assert "Per model" not in p.stdout


def test_per_model_breakdown_real_router(tmp_path):
    """SmolLM2 and stories260K behind the router alias "auto": short prompts go to tiny, long ones to smol."""
    for m in (SMOL, STORIES):
        if not os.path.exists(m):
            pytest.skip("model %s not present" % m)
    if not os.path.exists(BIN):
        pytest.skip("no binary")
    s = Server("tiny=" + STORIES, "-m", "smol=" + SMOL, "--router", "auto=tiny,smol", "--route-max-prompt-tokens",
               16, "--route-max-tokens", 16, "--kv-cache-mem", 32, "--ctx-size", 512)
    try:
        p, doc = bench(tmp_path, s.base, "--model", "auto", "--endpoint", "completions", "--dataset", "random",
                       "--input-len", 16, "--range-ratio", 0.9, "--output-len", 8, "--num-requests", 24,
                       "--warmup", 0, "--max-concurrency", 4, "--seed", 3, timeout=240)
    finally:
        s.stop()
    reqs = measured(doc)
    assert doc["runs"][0]["summary"]["failed"] == 0, [r.get("error") for r in reqs if r.get("error")][:3]
    assert {r["routed_model"] for r in reqs} == {"tiny", "smol"}, [r["input_tokens"] for r in reqs]
    assert all(r["model"] == r["routed_model"] for r in reqs)
    by = doc["models"]
    assert set(by) == {"tiny", "smol"}
    assert by["tiny"]["completed"] + by["smol"]["completed"] == 24
    assert by["tiny"]["completed"] == sum(r["routed_model"] == "tiny" for r in reqs)
    assert "Per model" in p.stdout
