"""Model-based speculation in the CLI: `tachyon run` and `tachyon bench` take --draft-model, --spec
off|ngram|draft|self|auto and --self-spec-layers, and drive the same drafter (src/speculation/spec_draft.c) as serve.

- `tachyon run`: greedy output is byte-identical with --spec off, draft (SmolLM2 drafting for itself: every
  draft is accepted, so multi-token verify steps run throughout), self (first 24 layers) and auto; the run
  prints how many tokens the draft model drafted and the acceptance rate.
- Self-speculation drafts in the session's own KV and resumes the drafted rows at layer L in the verify
  forward: Gemma 3 (sandwich norms, local and global layers) gives the --spec off output too; --spec self is
  refused on --device cuda before anything is opened.
- A draft whose vocabulary differs from the target's is refused with a message naming the difference.
- `tachyon bench --spec off,draft,self,auto --draft-model`: one row per mode with the model's drafts counted.
"""
import json
import os
import re
import subprocess

import pytest

from conftest import BIN, SMOL, STORIES

PROMPT = "Write a Python function that returns the first ten prime numbers."


def need_models():
    if not os.path.exists(SMOL) or not os.path.exists(STORIES):
        pytest.skip("SmolLM2 or stories260K not present")


def run(*args, timeout=240):
    return subprocess.run([BIN, "run", "-m", SMOL, "--chat", "-p", PROMPT, "-n", "40"] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=timeout)


def spec_line(stderr):
    m = re.search(r"spec (\w+): (\d+) drafted \((\d+) by the ([\w -]+)\), (\d+) accepted \(acceptance ([\d.]+)%\) "
                  r"in (\d+) verify steps", stderr)
    assert m, stderr[-600:]
    return {"mode": m[1], "drafted": int(m[2]), "model_drafted": int(m[3]), "by": m[4], "accepted": int(m[5]),
            "rate": float(m[6]), "steps": int(m[7])}


def test_run_greedy_identical_across_modes():
    need_models()
    off = run("--spec", "off")
    assert off.returncode == 0, off.stderr
    assert len(off.stdout.strip()) > 20
    assert spec_line(off.stderr)["drafted"] == 0
    cases = [("draft", ["--draft-model", SMOL]), ("self", ["--self-spec-layers", 24]),
             ("auto", ["--draft-model", SMOL])]
    for mode, extra in cases:
        p = run("--spec", mode, "--spec-k", 4, *extra)
        assert p.returncode == 0, (mode, p.stderr)
        assert p.stdout == off.stdout, (mode, p.stdout, off.stdout)
        s = spec_line(p.stderr)
        assert s["mode"] == mode
        assert s["accepted"] <= s["drafted"]
        if mode != "auto":  # auto may stop drafting with the model when it does not pay (it tries it once)
            assert s["model_drafted"] == s["drafted"] > 0 and s["steps"] > 0, s
        else:
            assert s["model_drafted"] > 0, s
        if mode == "draft":  # the same model drafts: its argmax is the target's on (nearly) every token
            assert s["by"] == "draft model" and s["rate"] > 90, s
        if mode == "self":
            assert s["by"] == "self-speculation drafter", s


def test_run_sampled_with_draft():
    need_models()
    # a sampled draft (q = softmax(draft logits / T)) verified by rejection sampling: runs, and a seed repeats
    a = run("--spec", "draft", "--draft-model", SMOL, "--temp", 0.8, "--seed", 7, "--spec-k", 3)
    b = run("--spec", "draft", "--draft-model", SMOL, "--temp", 0.8, "--seed", 7, "--spec-k", 3)
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert a.stdout == b.stdout and len(a.stdout.strip()) > 0
    assert spec_line(a.stderr)["model_drafted"] > 0


def test_run_self_gemma3_identical():
    gemma = os.path.join(os.path.dirname(SMOL), "gemma-3-270m-q4_k_m.gguf")
    if not os.path.exists(gemma):
        pytest.skip("Gemma 3 model not present")
    base = [BIN, "run", "-m", gemma, "--chat", "-p", PROMPT, "-n", "48", "-t", "2", "--ignore-eos"]
    off = subprocess.run(base + ["--spec", "off"], capture_output=True, text=True, timeout=240)
    on = subprocess.run(base + ["--spec", "self", "--self-spec-layers", "12", "--spec-k", "4"], capture_output=True,
                        text=True, timeout=240)
    assert off.returncode == 0 and on.returncode == 0, (off.stderr, on.stderr)
    assert on.stdout == off.stdout, (on.stdout, off.stdout)
    s = spec_line(on.stderr)
    assert s["model_drafted"] > 0 and s["accepted"] > 0, s


def test_self_spec_refused_on_cuda():
    need_models()
    p = run("--spec", "self", "--device", "cuda", timeout=60)
    assert p.returncode != 0
    assert "self-speculation" in p.stderr and "--device cpu" in p.stderr, p.stderr[-600:]


def test_run_refuses_bad_draft():
    need_models()
    p = run("--spec", "draft", "--draft-model", STORIES)
    assert p.returncode != 0
    assert "draft model vocabulary has 512 tokens, the target's has 49152" in p.stderr, p.stderr
    p = run("--spec", "draft")
    assert p.returncode != 0 and "--draft-model" in p.stderr, p.stderr
    p = run("--spec", "self", "--self-spec-layers", 30)
    assert p.returncode != 0 and "below the model's 30 layers" in p.stderr, p.stderr


def test_bench_draft_modes(tmp_path):
    need_models()
    pf = tmp_path / "prompt.txt"
    pf.write_text("The capital of France is Paris. The capital of Italy is Rome. The capital of Spain is")
    p = subprocess.run([BIN, "bench", "-m", SMOL, "--prompt-file", str(pf), "--spec", "off,draft,self,auto",
                        "--draft-model", SMOL, "--self-spec-layers", "24", "--spec-k", "4", "-n", "24", "-r", "1", "--json"],
                       capture_output=True, text=True, timeout=280)
    assert p.returncode == 0, p.stderr
    rows = {r["spec"]: r for r in (json.loads(l) for l in p.stdout.splitlines() if l.startswith("{"))}
    assert list(rows) == ["off", "draft", "self", "auto"], p.stdout
    assert rows["off"]["drafted"] == 0
    assert rows["draft"]["drafted"] > 0 and rows["draft"]["acceptance"] > 0.9, rows["draft"]
    assert rows["self"]["drafted"] > 0 and rows["self"]["accepted"] <= rows["self"]["drafted"]
    assert all(r["avg_ts"] > 0 for r in rows.values())
    # a bad draft vocabulary and a draft mode without a draft model are refused
    p = subprocess.run([BIN, "bench", "-m", SMOL, "--prompt-file", str(pf), "--spec", "off,draft",
                        "--draft-model", STORIES, "-n", "8", "-r", "1"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "vocabulary has 512 tokens" in p.stderr, p.stderr
    p = subprocess.run([BIN, "bench", "-m", SMOL, "--prompt-file", str(pf), "--spec", "draft", "-n", "8", "-r", "1"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "--draft-model" in p.stderr, p.stderr
