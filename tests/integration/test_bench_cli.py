"""`tachyon bench` without --spec: prefill and decode tokens/s in llama-bench's shape, measured through the same
engine the server runs (requests submitted, timed from the engine's own timestamps), plus the decode floor."""
import json
import subprocess

from conftest import BIN, STORIES


def test_bench_pp_tg_json():
    p = subprocess.run([BIN, "bench", "-m", STORIES, "-p", "32", "-n", "8", "-r", "2", "-d", "16", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    tests = [r for r in rows if "test" in r]
    assert [r["test"] for r in tests] == ["pp32@d16", "tg8@d16"], p.stdout
    assert all(r["avg_ts"] > 0 and r["threads"] == 2 and r["backend"].startswith("CPU") for r in tests), tests
    assert any("decode_floor_ts" in r for r in rows), p.stdout


def test_bench_table():
    p = subprocess.run([BIN, "bench", "-m", STORIES, "-p", "16", "-n", "4", "-r", "1"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = [l for l in p.stdout.splitlines() if l.startswith("| stories260K")]
    assert len(lines) == 2 and " pp16 " in lines[0] and " tg4 " in lines[1], p.stdout


def test_bench_prefill_at_depth():
    """-d with -p: the prompt's tokens are prefilled after a context of DEPTH tokens (llama-bench's pp<p>@d<d>)."""
    p = subprocess.run([BIN, "bench", "-m", STORIES, "-d", "64", "-p", "8", "-n", "0", "-r", "2"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = [l for l in p.stdout.splitlines() if l.startswith("| stories260K")]
    assert len(lines) == 1 and " pp8@d64 " in lines[0], p.stdout
    assert float(lines[0].split("|")[7].split("±")[0]) > 0, lines[0]
