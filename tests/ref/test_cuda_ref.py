"""The CUDA backend (--device cuda) against the CPU backend and the numpy reference.

These tests need a CUDA device and a binary built with nvcc; without either they SKIP, visibly, with the reason
("no CUDA device: …", as tachyon reports it), so a green run on a machine without a GPU says the CUDA kernels
went unchecked. What they check when a GPU is there:

- stories260K (F32 weights): CUDA logits equal the numpy reference and the CPU backend in reference-precision
  mode (TACHYON_PRECISE=1: f32 activations, as the CUDA kernels use) within the CPU's own bound, same argmax;
- SmolLM2-135M-Instruct Q4_1 (quant weights, tied Q8_0 head): the 200-token text's logits against the CPU in
  reference-precision mode — mean KL and top-1 agreement — and against the float64 reference;
- batch invariance on the device: logits in chunks of 1, 7 and 200 rows are bit-identical;
- greedy generation: `run --device cuda` reproduces llama.cpp's golden continuations of stories260K;
- CUDA graphs (TACHYON_CUDA_GRAPHS=1): replayed steps give the same logits bit for bit as direct launches.

The bounds marked PROVISIONAL were set before any GPU run (no GPU was lent when this was written): the first
run on a GPU records the measured values here and tightens them (docs/CUDA.md lists what is unverified).
"""
import os
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from llama_ref import LlamaRef  # noqa: E402
from test_model_ref import BIN, SMOL, STORIES, TD, kl_top1, load_jsonl, logits, run  # noqa: E402,F401


def _cuda_status():
    """(usable, reason): runs one token through `tachyon logits --device cuda`."""
    if not os.path.exists(BIN):
        return False, "tachyon binary missing"
    out = "/tmp/tachyon_cuda_probe_%d.f32" % os.getpid()
    p = subprocess.run([BIN, "logits", "-m", STORIES, "--ids", "1", "-o", out, "--device", "cuda"],
                       capture_output=True, text=True, timeout=120)
    if os.path.exists(out):
        os.unlink(out)
    if p.returncode == 0:
        return True, ""
    msg = (p.stderr.strip().splitlines() or ["(no message)"])[-1]
    return False, "no CUDA device: " + msg


CUDA_OK, CUDA_WHY = _cuda_status()
needs_cuda = pytest.mark.skipif(not CUDA_OK, reason=CUDA_WHY or "no CUDA device")

CUDA_ENV = dict(os.environ)
PRECISE_ENV = dict(os.environ, TACHYON_PRECISE="1")


def cuda_logits(model, ids, tmp_path, batch=512, env=None):
    out = tmp_path / f"cuda_logits_{batch}.f32"
    run("logits", "-m", model, "--ids", ",".join(map(str, ids)), "-o", str(out), "--batch", str(batch),
        "--device", "cuda", env=env or CUDA_ENV)
    return np.fromfile(out, dtype=np.float32).reshape(len(ids), -1)


def test_cuda_probe_reports_reason():
    """Runs everywhere: the probe either works or says why, and a CPU-only outcome is a clear message."""
    if CUDA_OK:
        return
    assert "--device cuda" in CUDA_WHY, CUDA_WHY
    assert "built without CUDA" in CUDA_WHY or "no CUDA device" in CUDA_WHY.split(": ", 1)[1], CUDA_WHY


@needs_cuda
def test_cuda_stories260k_logits(tmp_path):
    ids = [1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315]
    ours = cuda_logits(STORIES, ids, tmp_path)
    cpu = logits(STORIES, ids, tmp_path, env=PRECISE_ENV)
    ref = LlamaRef(STORIES, act_quant=True).forward(ids)
    d_cpu, d_ref = np.abs(ours - cpu).max(), np.abs(ours - ref).max()
    print(f"stories260K cuda: max |dlogit| to the CPU (precise) {d_cpu:.2e}, to the reference {d_ref:.2e}")
    # the CPU's own bound against the reference (test_model_ref.test_stories260k_logits_exact)
    assert d_ref < 5e-3 and d_cpu < 5e-3
    assert (ours.argmax(1) == ref.argmax(1)).all()


@needs_cuda
def test_cuda_smollm2_logits(smol_text_ids, smol_ref_f16kv, tmp_path):
    ids = smol_text_ids
    ours = cuda_logits(SMOL, ids, tmp_path)
    cpu = logits(SMOL, ids, tmp_path, env=PRECISE_ENV)
    kl_cpu, top1_cpu = kl_top1(cpu, ours)
    kl_ref, top1_ref = kl_top1(smol_ref_f16kv, ours)
    kl_cpu_ref, _ = kl_top1(smol_ref_f16kv, cpu)
    print(f"SmolLM2 cuda: KL(cpu precise || cuda) {kl_cpu:.2e} (top-1 {top1_cpu:.3f}); KL(ref || cuda) "
          f"{kl_ref:.2e} (top-1 {top1_ref:.3f}); KL(ref || cpu precise) {kl_cpu_ref:.2e}")
    # PROVISIONAL: the CUDA and the precise CPU paths do the same f32 math in a different summation order
    assert kl_cpu < 1e-4 and top1_cpu >= 0.98
    assert kl_ref < 2 * kl_cpu_ref + 1e-4


@needs_cuda
def test_cuda_batch_invariance(smol_text_ids, tmp_path):
    ids = smol_text_ids[:64]
    whole = cuda_logits(SMOL, ids, tmp_path, batch=200)
    for b in (1, 7):
        part = cuda_logits(SMOL, ids, tmp_path, batch=b)
        assert np.array_equal(whole, part), f"chunks of {b}: max diff {np.abs(whole - part).max()}"


@needs_cuda
@pytest.mark.parametrize("case", load_jsonl(os.path.join(TD, "golden", "stories260K-greedy.jsonl")),
                         ids=lambda c: c["prompt"][:20])
def test_cuda_stories260k_golden(case):
    out = run("run", "-m", STORIES, "-p", case["prompt"], "-n", str(case["n_predict"]), "--ignore-eos",
              "--device", "cuda")
    assert out[:-1] == case["continuation"], f"got {out!r}"


@needs_cuda
def test_cuda_graphs_same_logits(smol_text_ids, tmp_path):
    """Decode-sized steps (chunks of 1 and 7 rows) replayed from a captured graph equal the direct launches."""
    ids = smol_text_ids[:48]
    for b in (1, 7):
        direct = cuda_logits(SMOL, ids, tmp_path, batch=b)
        graphed = cuda_logits(SMOL, ids, tmp_path, batch=b, env=dict(os.environ, TACHYON_CUDA_GRAPHS="1"))
        assert np.array_equal(direct, graphed), f"chunks of {b}: max diff {np.abs(direct - graphed).max()}"
