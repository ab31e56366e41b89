"""bench-serve against the real server: a 100-request run completes with zero failures, and the token counts
it reports (from each response's usage) equal what the server itself counted (/metrics counters)."""
from benchutil import bench, measured


def counters(server):
    m = server.metrics()
    return m.get("tachyon:prompt_tokens_total", 0.0), m.get("tachyon:generation_tokens_total", 0.0)


def test_bench_serve_100_requests_against_tachyon(stories, tmp_path):
    p0, g0 = counters(stories)
    _, doc = bench(tmp_path, stories.base, "--model", "stories260K", "--endpoint", "completions",
                   "--dataset", "random", "--input-len", 32, "--output-len", 16, "--num-requests", 100,
                   "--request-rate", "inf", "--max-concurrency", 8, "--seed", 7, timeout=300)
    p1, g1 = counters(stories)
    s = doc["runs"][0]["summary"]
    reqs = measured(doc)
    assert len(reqs) == 100
    assert s["failed"] == 0, [r.get("error") for r in reqs if r.get("error")][:3]
    assert s["completed"] == 100
    assert s["total_input_tokens"] == sum(r["input_tokens"] for r in reqs)
    assert s["total_output_tokens"] == sum(r["output_tokens"] for r in reqs)
    assert s["total_input_tokens"] == p1 - p0, (s["total_input_tokens"], p1 - p0)
    assert s["total_output_tokens"] == g1 - g0, (s["total_output_tokens"], g1 - g0)
