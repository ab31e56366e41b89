"""The architectures whose numerics tests/ref checks against llama.cpp and numpy (test_kld_llamacpp.py,
test_arch_ref.py) also serve: each tiny synthetic model behind `tachyon serve` completes a prompt greedily with
the same text as `tachyon run` (one engine for both; this catches a server path that an architecture's
hyper-parameters would break, e.g. a multiplier read in one place and not the other)."""
import json
import subprocess

import pytest

from conftest import BIN

SHAPES = ["granite-tiny", "granitemoe-tiny", "ernie4_5-tiny", "exaone-tiny", "olmo2-tiny", "olmo3-tiny",
          "smollm3-tiny", "phi3-tiny", "mistral3-tiny"]
PROMPT, N = "hello world", 12


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("arch-serve")
    out = {}
    for shape in SHAPES:
        path = str(d / (shape + ".gguf"))
        subprocess.run([BIN, "synth", "-o", path, "--shape", shape, "--type", "q8_0", "--seed", "7"], check=True,
                       capture_output=True)
        out[shape] = path
    return out


@pytest.mark.parametrize("shape", SHAPES)
def test_served_equals_run(make_server, models, shape):
    path = models[shape]
    p = subprocess.run([BIN, "run", "-m", path, "-p", PROMPT, "-n", str(N), "--temp", "0", "--ignore-eos", "-t", "2",
                        "--spec", "off"], capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    s = make_server(path, "--ctx-size", 256, "--spec", "off")
    st, _, body = s.post("/v1/completions", {"prompt": PROMPT, "max_tokens": N, "temperature": 0,
                                             "ignore_eos": True})
    assert st == 200, body
    assert body["usage"]["completion_tokens"] == N
    text = p.stdout[:-1] if p.stdout.endswith(b"\n") else p.stdout  # run ends its output with a newline
    assert body["choices"][0]["text"] == text.decode("utf-8", "replace"), (body, p.stdout)
