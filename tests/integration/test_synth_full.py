"""The full-size synth shapes through the command line: `tachyon synth --shape llama3-8b|qwen3-8b|gptoss-20b`
writes the real configuration (parameter count within 1% of the real model, head size, layers, expert types),
`tachyon info` reads it and `tachyon bench` runs it. They write 5-12 GB each, so they are marked `bench` (out of
`make test`); the files go to TACHYON_BIG_DIR (default: pytest's temporary folder) and are deleted after."""
import os
import re
import subprocess

import pytest

from conftest import BIN

pytestmark = pytest.mark.bench

# shape, type, parameters of the real model (millions), head dim, layers, "type xN" that must appear in info
CASES = [
    ("llama3-8b", "q4_k_m", 8030, 128, 32, "q6_k x"),
    ("qwen3-8b", "q4_k_m", 8191, 128, 36, "q4_k x"),
    ("gptoss-20b", "mxfp4", 20914, 64, 24, "mxfp4 x72"),
]


@pytest.mark.parametrize("shape,qtype,params_m,head_dim,layers,types", CASES, ids=[c[0] for c in CASES])
def test_full_shape(shape, qtype, params_m, head_dim, layers, types, tmp_path):
    folder = os.environ.get("TACHYON_BIG_DIR", str(tmp_path))
    out = os.path.join(folder, "test-%s-%s.gguf" % (shape, qtype))
    try:
        r = subprocess.run([BIN, "synth", "-o", out, "--shape", shape, "--type", qtype], capture_output=True,
                           text=True, timeout=900)
        assert r.returncode == 0, r.stderr[-2000:]
        info = subprocess.run([BIN, "info", "-m", out], capture_output=True, text=True, timeout=120)
        assert info.returncode == 0, info.stderr[-2000:]
        m = re.search(r"parameters\s+([0-9.]+) M", info.stdout)
        assert m and abs(float(m.group(1)) - params_m) <= 0.01 * params_m, info.stdout
        assert "head dim %d," % head_dim in info.stdout and "layers %d," % layers in info.stdout, info.stdout
        assert types in info.stdout.lower(), info.stdout  # ggml's names: q4_K, q6_K
        b = subprocess.run([BIN, "bench", "-m", out, "-p", "8", "-n", "2", "-t", "2", "-r", "1"], capture_output=True,
                           text=True, timeout=900)
        assert b.returncode == 0, b.stderr[-2000:]
        assert re.search(r"\|\s+tg2\s+\|\s+[0-9.]+ ", b.stdout), b.stdout
    finally:
        if os.path.exists(out):
            os.unlink(out)
