"""bench-serve's scheduling workloads against the scripted fake server (fake_openai_server.py) and once against
the real server: the mixed-length dataset and the per-request priority / TTFT-SLO fields (names configurable)
are in the bodies the server receives, goodput is computed per priority class and per length class (the fake
server's TTFT grows with the prompt, so long prompts miss the SLO and short ones meet it), and the overload
sweep runs Poisson arrivals at multiples of the capacity (given, or measured first) and shows goodput per
class in the HTML report. No timing thresholds: the SLO (300 ms) sits far from both scripted TTFTs
(about 15 ms short, 1 s long)."""
import collections
import os

import pytest

from benchutil import BIN, FakeServer, bench, measured

pytestmark = pytest.mark.skipif(not os.path.exists(BIN), reason="no tachyon binary")


def by_id(stats):
    return {e["id"]: e for e in stats["log"]}


def words(req):
    return len(req["messages"][0]["content"].split())


def test_mixed_length_priority_fields_and_class_goodput(tmp_path):
    with FakeServer("--ttft-ms", 10, "--ttft-per-word-ms", 0.25, "--itl-ms", 1, "--tokens", 3,
                    "--keep-requests") as srv:
        p, doc = bench(tmp_path, srv.url, "--model", "fake", "--dataset", "mixed-length", "--num-requests", 60,
                       "--max-concurrency", 8, "--priority-mix", "0:0.7,5:0.3", "--priority-field", "prio_x",
                       "--ttft-slo-ms", 300, "--ttft-slo-field", "slo_x", "--seed", 3)
        log = by_id(srv.stats())
    reqs = measured(doc)
    assert len(reqs) == 60 and all(r["ok"] for r in reqs)
    n_long = 0
    for r in reqs:  # what the record says is what the server got
        body = log[r["id"]]["request"]
        assert body["prio_x"] == r["priority"] and r["priority"] in (0, 5)
        assert body["slo_x"] == 300 and "priority" not in body and "ttft_slo_ms" not in body
        assert words(body) == (4000 if r["length_class"] == "long" else 100)
        n_long += r["length_class"] == "long"
    assert 1 <= n_long <= 15, n_long  # 10% of 60, drawn per request with a fixed seed
    cls = {c["class"]: c for c in doc["runs"][0]["classes"]}
    assert set(cls) == {"priority=0", "priority=5", "short", "long"}
    dur = doc["runs"][0]["summary"]["duration_s"]
    assert cls["long"]["completed"] == n_long and cls["long"]["good"] == 0 and cls["long"]["goodput"] == 0
    assert cls["short"]["completed"] == cls["short"]["good"] == 60 - n_long
    assert abs(cls["short"]["goodput"] - (60 - n_long) / dur) < 1e-6
    for pr in (0, 5):
        mine = [r for r in reqs if r["priority"] == pr]
        c = cls["priority=%d" % pr]
        assert c["completed"] == len(mine) and c["good"] == sum(r["length_class"] == "short" for r in mine)
    s = doc["runs"][0]["summary"]
    assert s["good_requests"] == 60 - n_long  # --ttft-slo-ms is the goodput SLO too
    assert "priority=5" in p.stdout and "long" in p.stdout  # the console table has the per-class block


def test_no_classes_without_the_options(tmp_path):
    with FakeServer("--ttft-ms", 5, "--itl-ms", 1, "--tokens", 2, "--keep-requests") as srv:
        _, doc = bench(tmp_path, srv.url, "--model", "fake", "--num-requests", 5)
        log = by_id(srv.stats())
    assert doc["runs"][0]["classes"] == []
    for r in measured(doc):
        assert "priority" not in log[r["id"]]["request"] and "priority" not in r


def test_overload_sweep_given_and_measured_capacity(tmp_path):
    with FakeServer("--ttft-ms", 10, "--ttft-per-word-ms", 0.25, "--itl-ms", 1, "--tokens", 2) as srv:
        html = os.path.join(str(tmp_path), "r.html")
        p, doc = bench(tmp_path, srv.url, "--model", "fake", "--dataset", "mixed-length", "--num-requests", 30,
                       "--priority-mix", "0:1,5:1", "--ttft-slo-ms", 300, "--sweep", "overload=0.5,2",
                       "--capacity", 40, "--report", html, "--seed", 1, timeout=120)
        assert doc["config"]["capacity_rps"] == 40
        runs = doc["runs"]
        assert [r["label"] for r in runs] == ["overload=0.5x", "overload=2x"] and [r["x"] for r in runs] == [0.5, 2]
        for r in runs:
            sends = sorted(q["t_send_s"] for q in measured(doc, runs.index(r)))
            gaps = [b - a for a, b in zip(sends, sends[1:])]
            # Poisson at 20 and 80 req/s: not all at once, and the gaps vary (exponential, not a fixed interval)
            assert sends[-1] - sends[0] > 29 * 0.2 / (40 * r["x"]), sends
            assert sends[-1] - sends[0] < 29 * 10 / (40 * r["x"]), sends  # the rate is x * capacity
            assert len(set(round(g, 4) for g in gaps)) > 10
            assert {c["class"] for c in r["classes"]} == {"priority=0", "priority=5", "short", "long"}
        page = open(html).read()
        assert "Overload sweep" in page and "goodput (requests meeting the SLOs per second)" in page
        assert "p99 TTFT per class" in page and "priority=5" in page
        # without --capacity it is measured first (all requests at once) and recorded
        p, doc = bench(tmp_path, srv.url, "--model", "fake", "--num-requests", 10, "--sweep", "overload=1",
                       "--input-len", 20, name="m.json", timeout=120)
        assert doc["config"]["capacity_rps"] > 0
        assert doc["runs"][0]["label"] == "overload=1x" and doc["runs"][0]["summary"]["completed"] == 10


def test_only_priority_replays_one_class_of_the_schedule(tmp_path):
    """--only-priority P: the same seeded schedule, with only class P's requests sent (the unloaded baseline
    of a class in bench/sched_bench.py): the same request indices, at the same planned arrival times."""
    args = ["--model", "fake", "--num-requests", 30, "--request-rate", 40, "--priority-mix", "0:0.3,5:0.7",
            "--seed", 4, "--input-len", 10]
    with FakeServer("--ttft-ms", 2, "--itl-ms", 1, "--tokens", 2) as srv:
        _, full = bench(tmp_path, srv.url, *args, name="full.json")
        _, only = bench(tmp_path, srv.url, *args, "--only-priority", 0, name="only.json")
    hi = {r["index"]: r for r in measured(full) if r["priority"] == 0}
    got = {r["index"]: r for r in measured(only)}
    assert 3 <= len(hi) < 30 and all(r["ok"] for r in got.values())
    assert set(got) == set(hi) and all(r["priority"] == 0 for r in got.values())
    for i, r in got.items():  # sent at its planned time in both runs (generous: the fake server is instant)
        assert abs(r["t_send_s"] - hi[i]["t_send_s"]) < 0.25, (i, r["t_send_s"], hi[i]["t_send_s"])


def test_bad_class_options(tmp_path):
    for args in (["--priority-mix", "0"], ["--priority-mix", "a:1"], ["--priority-mix", "0:0"],
                 ["--sweep", "overload=inf"], ["--long-frac", "2"], ["--only-priority", "0"],
                 ["--priority-mix", "0:1", "--only-priority", "x"]):
        p, _ = bench(tmp_path, "http://127.0.0.1:9", *args, check=False)
        assert p.returncode == 2, (args, p.stderr)


def test_mixed_length_against_tachyon(smol, tmp_path):
    """Once against the real server: every request served, the long prompts really are long (the server's own
    usage), and the classes are reported. Priority 0 only: the real server takes the field."""
    _, doc = bench(tmp_path, smol.base, "--model", "SmolLM2-135M-Instruct.Q4_1", "--dataset", "mixed-length",
                   "--input-len", 20, "--long-len", 400, "--long-frac", 0.25, "--output-len", 4, "--num-requests", 12,
                   "--max-concurrency", 4, "--priority-mix", "0:1", "--seed", 2, timeout=300)
    reqs = measured(doc)
    assert all(r["ok"] for r in reqs), [r["error"] for r in reqs if not r["ok"]][:3]
    by = collections.defaultdict(list)
    for r in reqs:
        assert r["usage_from_server"]
        by[r["length_class"]].append(r["input_tokens"])
    assert by["long"] and by["short"]
    assert min(by["long"]) > 300 and max(by["short"]) < 100, dict(by)
    assert {c["class"] for c in doc["runs"][0]["classes"]} == {"priority=0", "short", "long"}
