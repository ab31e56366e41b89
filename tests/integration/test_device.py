"""--device: the backend is chosen per process; cpu is the default and what every other test runs.
Where --device cuda cannot work (a binary built without nvcc, or no GPU), each command that takes the flag
must refuse it with a clear message and a plain error exit — never a crash, never a server that starts without
its backend. On a machine where CUDA works these failure checks skip (tests/ref/test_cuda_ref.py then runs)."""
import os
import socket
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("TACHYON_BIN", os.path.join(ROOT, "build", "tachyon"))
STORIES = os.path.join(ROOT, "..", "shared", "testdata", "models", "stories260K.gguf")

CUDA_WHY = ("built without CUDA", "no CUDA device", "cannot use device")


def tachyon(*args, timeout=60):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def cuda_works():
    p = tachyon("run", "-m", STORIES, "-p", "Once", "-n", "1", "--device", "cuda")
    return p.returncode == 0


needs_no_cuda = pytest.mark.skipif(os.path.exists(BIN) and cuda_works(),
                                   reason="a CUDA device works here: the refusal path cannot be reached")


def assert_clear_refusal(p):
    assert p.returncode == 1, f"exit {p.returncode} (a negative value is a signal): {p.stderr}"
    assert "--device cuda" in p.stderr and any(w in p.stderr for w in CUDA_WHY), p.stderr


@needs_no_cuda
def test_run_device_cuda_refused():
    assert_clear_refusal(tachyon("run", "-m", STORIES, "-p", "Once upon a time", "-n", "4", "--device", "cuda"))


@needs_no_cuda
def test_bench_device_cuda_refused():
    assert_clear_refusal(tachyon("bench", "-m", STORIES, "-p", "8", "-n", "4", "-r", "1", "--device", "cuda"))


@needs_no_cuda
def test_logits_device_cuda_refused(tmp_path):
    assert_clear_refusal(tachyon("logits", "-m", STORIES, "--ids", "1,2", "-o", str(tmp_path / "l.f32"),
                                 "--device", "cuda"))


@needs_no_cuda
def test_serve_device_cuda_refused_at_startup():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = tachyon("serve", "-m", STORIES, "--host", "127.0.0.1", "--port", str(port), "--device", "cuda", timeout=60)
    assert p.returncode != 0 and p.returncode > 0, f"exit {p.returncode}: {p.stderr}"
    out = p.stdout + p.stderr
    assert "--device cuda" in out and any(w in out for w in CUDA_WHY), out


@pytest.mark.parametrize("cmd", [["run", "-p", "x"], ["bench"], ["serve"]])
def test_unknown_device_rejected(cmd):
    p = tachyon(cmd[0], "-m", STORIES, *cmd[1:], "--device", "tpu")
    assert p.returncode == 2, f"exit {p.returncode}: {p.stderr}"
    assert "--device expects cpu or cuda, got 'tpu'" in p.stderr, p.stderr


def test_device_cpu_is_the_default():
    a = tachyon("run", "-m", STORIES, "-p", "Once upon a time", "-n", "16", "--ignore-eos")
    b = tachyon("run", "-m", STORIES, "-p", "Once upon a time", "-n", "16", "--ignore-eos", "--device", "cpu")
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert a.stdout == b.stdout and len(a.stdout) > 8
