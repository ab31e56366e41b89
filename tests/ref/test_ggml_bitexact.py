"""Byte-for-byte comparison of our quantizers (and dequantizers) with ggml's C reference implementation.

ggml is not a dependency: set TACHYON_GGML_SRC to a ggml tree (the directory containing src/ggml-quants.c
and include/ggml.h — e.g. vendor/llama.cpp/ggml inside the llama-cpp-python sdist, which
`pip download --no-deps --no-binary :all: llama-cpp-python` fetches). Without it the test is skipped.
The harness (tests/ref/ggml_bitexact.c) quantizes 60 x 16384 values per type from six distributions
(normal, heavy-tailed, positive offset, lattice values with exact ties, sparse, 12 decades of scale) with
both implementations and requires identical blocks and identical dequantized floats for Q4_0, Q4_1, Q5_0,
Q5_1, Q8_0, Q4_K, Q5_K, Q6_K and Q8_K.

This is the optional extra (it is the only bit-exact check of the k-quant quantizers). The check that runs in
every `make test` is tests/ref/test_quant_bitexact.py: the same quantizers against the `gguf` package's numpy
port of ggml's reference, for every type gguf-py can quantize, on edge-case block families.
"""

import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_ggml_bitexact(tmp_path):
    src = os.environ.get("TACHYON_GGML_SRC")
    if not src:
        pytest.skip("TACHYON_GGML_SRC not set (path to a ggml source tree); "
                    "test_quant_bitexact.py is the always-on check against gguf-py")
    ggml = pathlib.Path(src)
    quants_c = ggml / "src" / "ggml-quants.c"
    assert quants_c.exists(), f"{quants_c} not found"
    tensor_src = sorted(str(p) for p in (ROOT / "src" / "tensor").glob("*.c"))
    exe = tmp_path / "ggml_bitexact"
    cmd = ["cc", "-O2", "-std=gnu11", "-w", f"-I{ROOT / 'src'}", f"-I{ggml / 'include'}", f"-I{ggml / 'src'}",
           str(ROOT / "tests" / "ref" / "ggml_bitexact.c"), str(quants_c), *tensor_src, "-lm", "-o", str(exe)]
    build = subprocess.run(cmd, capture_output=True, text=True)
    assert build.returncode == 0, f"build failed:\n{build.stderr[-3000:]}"
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    print(run.stdout)
    assert run.returncode == 0, f"ours and ggml differ:\n{run.stdout}\n{run.stderr[-3000:]}"
    assert run.stdout.count("0 dequantized values differ") == 9, run.stdout
