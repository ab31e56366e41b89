"""Speculation in the benchmark tools: bench-serve's code-edit/code-edit-pred/quote/creative workloads against
the real server (prediction sent, accepted/rejected prediction tokens reported from the server's usage), and
`tachyon bench --prompt-file --spec` (acceptance and speedup per mode, interleaved repetitions)."""
import json
import os
import subprocess

import pytest

from benchutil import BIN, bench, measured
from conftest import SMOL


def model_id(server):
    st, _, body = server.request("GET", "/v1/models")
    assert st == 200
    return json.loads(body)["data"][0]["id"]


def run_serve_bench(tmp_path, server, dataset, n=3, out_len=48, name="out.json"):
    return bench(tmp_path, server.base, "--model", model_id(server), "--endpoint", "chat", "--dataset", dataset,
                 "--input-len", 120, "--output-len", out_len, "--num-requests", n, "--request-rate", "inf",
                 "--max-concurrency", 2, "--seed", 3, "--no-ignore-eos", name=name, timeout=280)


def test_code_edit_pred_reports_prediction_tokens(smol, tmp_path):
    proc, doc = run_serve_bench(tmp_path, smol, "code-edit-pred")
    s = doc["runs"][0]["summary"]
    assert s["failed"] == 0 and s["completed"] == 3, measured(doc)[:1]
    # the server verified the prediction: most of a code edit's answer is the prediction, so tokens were accepted
    assert s["accepted_prediction_tokens"] > 0, s
    assert s["rejected_prediction_tokens"] >= 0


@pytest.mark.parametrize("dataset", ["code-edit", "quote", "creative"])
def test_spec_workloads_run(smol, tmp_path, dataset):
    proc, doc = run_serve_bench(tmp_path, smol, dataset, n=2, out_len=24)
    s = doc["runs"][0]["summary"]
    assert s["failed"] == 0 and s["completed"] == 2
    assert s["total_input_tokens"] > 60  # the document/code really is in the prompt
    # no prediction was sent, so none is reported as accepted
    assert s.get("accepted_prediction_tokens", 0) == 0


def test_unknown_dataset_lists_the_spec_workloads(tmp_path):
    p = subprocess.run([BIN, "bench-serve", "--url", "http://127.0.0.1:9", "--dataset", "nope"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "code-edit-pred" in p.stderr and "creative" in p.stderr


REPETITIVE = ("Copy this list exactly.\n" + "".join("item %d: the value of field_%d is %d\n" % (i, i, i * 7)
                                                   for i in range(30)) + "\nCopy:\nitem 0: the value of field_0 is 0\n")


def test_bench_spec_modes(tmp_path):
    if not os.path.exists(SMOL):
        pytest.skip("SmolLM2 model not present")
    pf = tmp_path / "prompt.txt"
    pf.write_text(REPETITIVE)
    p = subprocess.run([BIN, "bench", "-m", SMOL, "--prompt-file", str(pf), "--spec", "off,ngram,auto", "-n", "32",
                        "-r", "1", "--json"], capture_output=True, text=True, timeout=280)
    assert p.returncode == 0, p.stderr
    rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    assert [r["spec"] for r in rows] == ["off", "ngram", "auto"]
    off, ngram, auto = rows
    assert off["drafted"] == 0 and off["speedup"] == 1.0
    # the answer copies the list: prompt lookup drafts, and over a third of the 32 output tokens are accepted
    # drafts. (Not the acceptance rate: k adapts to the measured step costs, so on a loaded machine longer drafts
    # can halve the rate while the greedy output and the accepted count stay the same: 0.44 seen in CI.)
    assert ngram["drafted"] > 0 and ngram["accepted"] >= 12, ngram
    assert ngram["accepted"] <= ngram["drafted"] and ngram["verify_steps"] > 0
    assert all(r["avg_ts"] > 0 and r["test"] == "tg32" for r in rows)


def test_bench_spec_errors(tmp_path):
    p = subprocess.run([BIN, "bench", "-m", SMOL, "--spec", "ngram"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--prompt-file" in p.stderr
    p = subprocess.run([BIN, "bench", "-m", SMOL, "--spec", "ngram,bogus", "--prompt-file", "x"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "off|ngram|draft|self|auto" in p.stderr
    # --draft-model is taken now (tests/integration/test_spec_draft_cli.py); a missing prompt file is reported
    p = subprocess.run([BIN, "bench", "-m", SMOL, "--draft-model", SMOL, "--prompt-file", "x"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "cannot open prompt file 'x'" in p.stderr, p.stderr


def test_bench_spec_chat(tmp_path):
    # --chat: the prompt file is one user turn in the model's chat template (more prompt tokens than the raw
    # text), and the instruct model then answers the request: here it repeats the text, so lookup drafts pay
    if not os.path.exists(SMOL):
        pytest.skip("SmolLM2 model not present")
    pf = tmp_path / "prompt.txt"
    pf.write_text("Repeat the following text exactly, word for word:\n\nThe old mill stood by the river for two "
                  "hundred years, grinding the grain of every farm in the valley until the railway came.")

    def run(*extra):
        p = subprocess.run([BIN, "bench", "-m", SMOL, "--prompt-file", str(pf), "--spec", "off,ngram", "-n", "24",
                            "-r", "1", "--json", *extra], capture_output=True, text=True, timeout=280)
        assert p.returncode == 0, p.stderr
        return [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    raw, chat = run(), run("--chat")
    assert chat[0]["n_prompt"] > raw[0]["n_prompt"] + 5, (raw[0], chat[0])
    assert chat[1]["drafted"] > 0 and chat[1]["acceptance"] > 0.5, chat[1]
