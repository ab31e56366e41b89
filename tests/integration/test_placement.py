"""Where the load puts the matrices (src/model/model_place.c): one huge-page arena holding each matrix
repacked for the CPU kernels, or else copied unchanged from the file mapping. The arena changes where the bytes
lie, never what is computed: the logits are bit-identical with it (default), without it (TACHYON_HUGE_PAGES=0:
the mapping and small pages) and with the copies instead of the repacked forms (TACHYON_REPACK=0), on SmolLM2
(plain matrices, tied output) and on MoE shapes (experts read as slices of their 3-D tensors: a slice of a
copy must start where the file's did; gpt-oss's MXFP4 experts, in their 16-row layout by default, too).
`tachyon info` says how many bytes were repacked and copied. Whether the kernel grants huge pages (its THP
setting) is not checked: the test must pass on any Linux. Timing free."""
import os
import subprocess

import numpy as np
import pytest

from conftest import BIN, SMOL

IDS = "1,204,34,28,30,253,58,143,82,253,166,30,178,253,112,14,226,30"  # in every vocabulary here (512 tokens up)
MODES = {"arena": {}, "mapping": {"TACHYON_HUGE_PAGES": "0"}, "copies": {"TACHYON_REPACK": "0"},
         "copies-mapping": {"TACHYON_REPACK": "0", "TACHYON_HUGE_PAGES": "0"}}


def run(args, env_extra, **kw):
    env = dict(os.environ, **env_extra)
    for k in ("TACHYON_HUGE_PAGES", "TACHYON_REPACK"):
        if k not in env_extra:
            env.pop(k, None)
    return subprocess.run([BIN] + args, capture_output=True, text=True, env=env, timeout=300, **kw)


def moved(model, env_extra):
    """(MiB repacked, MiB copied) from `tachyon info`."""
    p = run(["info", "-m", model], env_extra)
    assert p.returncode == 0, p.stderr
    line = next(x for x in p.stdout.splitlines() if x.startswith("weights moved"))
    parts = line.split()
    return float(parts[2]), float(parts[5])


def logits(model, env_extra, tmp_path, name):
    out = str(tmp_path / (name + ".f32"))
    p = run(["logits", "-m", model, "--ids", IDS, "-o", out, "-t", "2"], env_extra)
    assert p.returncode == 0, p.stderr
    return np.fromfile(out, dtype=np.float32)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    if not os.path.exists(BIN):
        pytest.skip("no binary at %s" % BIN)
    if not os.path.exists(SMOL):
        pytest.skip("SmolLM2 model not present (run make models)")
    d = tmp_path_factory.mktemp("place")
    out = {"smollm2": SMOL}
    for shape, qtype in (("qwen3moe-tiny", "q8_0"), ("gptoss-tiny", "mxfp4")):
        path = str(d / f"{shape}-{qtype}.gguf")
        p = subprocess.run([BIN, "synth", "-o", path, "--shape", shape, "--type", qtype], capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        out[shape] = path
    return out


@pytest.mark.parametrize("name", ["smollm2", "qwen3moe-tiny", "gptoss-tiny"])
def test_placement_keeps_logits_bit_identical(models, name, tmp_path):
    model = models[name]
    base = logits(model, MODES["copies-mapping"], tmp_path, "base")
    packed_base = logits(model, MODES["mapping"], tmp_path, "packed-base")
    assert base.size > 0 and np.isfinite(base).all()
    for mode, ref in (("arena", packed_base), ("copies", base)):
        got = logits(model, MODES[mode], tmp_path, mode)
        assert got.shape == ref.shape and np.array_equal(got, ref), \
            "%s: logits differ with the %s placement (max |diff| %g)" % (name, mode, np.abs(got - ref).max())


def test_info_reports_what_was_moved(models):
    # SmolLM2 Q4_1: every matrix has a repacked form at the SIMD levels; without repacking they are copied, and
    # the tied output (its bytes are the token embedding's, which lookups read from the file) is not
    rep, cop = moved(models["smollm2"], {"TACHYON_REPACK": "0"})
    assert rep == 0 and cop > 50, (rep, cop)
    rep, cop = moved(models["smollm2"], {"TACHYON_HUGE_PAGES": "0", "TACHYON_REPACK": "0"})
    assert rep == 0 and cop == 0, (rep, cop)
    # gpt-oss MXFP4: every matrix (the MXFP4 experts too) has a repacked form at the SIMD levels
    rep, cop = moved(models["gptoss-tiny"], {})
    assert rep > 0 and cop == 0, (rep, cop)
