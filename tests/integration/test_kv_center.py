"""K centering and balancing of a quantized K cache (src/model/key_center.h), through `tachyon
perplexity --kl-base` on SmolLM2: keys written to a q8_0/q4_0 cache have the model's per-layer mean key
(calibrated at load on a built-in text) subtracted, then keys and queries are scaled channel by channel by s
and 1/s. Attention is mathematically unchanged (each query's scores move by one constant; q/s · k·s = q·k),
and the 4-bit blocks do not spend their levels on the keys' shared offset and loud channels.

The tests: an f16 cache is never touched (bit-identical logits with centering on or off); centering cuts the
KL of a q4_0 cache against f16 clearly below the plain cache's, and the balance cuts it further; a K-only q8_0
cache stays as close to f16 as without (a transform that were not exact, e.g. a vector that differed between
the keys a query sees, or keys scaled without the queries, moves the logits far); a bad --kv-center value is
refused. The tests fail when the subtraction is dropped (no KL gain), made per-row, or the queries' inverse
scale is dropped (KL 1.5: checked)."""
import os
import subprocess

import pytest

from conftest import BIN, SMOL
from test_kv_rotate import base, ppl  # noqa: F401 (the same runner and f16 base run: base is a fixture)

pytestmark = pytest.mark.skipif(not os.path.exists(SMOL), reason="SmolLM2 not present")


def test_f16_cache_never_centered(base):
    text, saved, d = base
    off = d / "f16_off.bin"
    ppl("-f", text, "--save-logits", off, "--kv-center", "off")
    assert open(saved, "rb").read() == open(off, "rb").read(), "f16-cache logits changed with centering on"


def test_centering_reduces_q4_0_kl(base):
    text, saved, _ = base
    on = ppl("-f", text, "--kv-type", "q4_0", "--kl-base", saved)
    off = ppl("-f", text, "--kv-type", "q4_0", "--kv-center", "off", "--kl-base", saved)
    env_off = ppl("-f", text, "--kv-type", "q4_0", "--kl-base", saved, env={"TACHYON_KV_CENTER": "0"})
    assert env_off["kl"] == off["kl"], (env_off, off)
    center = ppl("-f", text, "--kv-type", "q4_0", "--kl-base", saved, env={"TACHYON_KV_BALANCE": "0"})
    # measured: KL 0.0176 centered and balanced, 0.0240 centered only (TACHYON_KV_BALANCE=0), 0.0306 plain;
    # centered only 0.0234 / 0.0302 with TACHYON_ISA=avx2, 0.0248 / 0.0317 scalar. On the text of
    # docs/QUALITY.md (SmolLM2, 16 chunks of 512): 0.0210 / 0.0290 / 0.0472.
    assert center["kl"] < 0.85 * off["kl"], (center, off)
    assert on["kl"] < 0.85 * center["kl"], (on, center)


def test_centered_k_only_q8_0_stays_close(base):
    text, saved, _ = base
    on = ppl("-f", text, "--kv-type-k", "q8_0", "--kl-base", saved)
    off = ppl("-f", text, "--kv-type-k", "q8_0", "--kv-center", "off", "--kl-base", saved)
    assert on["kl"] < 0.005 and on["top1"] > 0.93, on
    assert on["kl"] < 1.5 * off["kl"] + 1e-4, (on, off)


def test_bad_value_refused(base):
    text, _, _ = base
    p = subprocess.run([BIN, "perplexity", "-m", SMOL, "-f", text, "--kv-center", "maybe"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode != 0 and "--kv-center expects auto or off" in p.stderr, p.stderr


def test_calibration_cache_is_exact(tmp_path):
    """TACHYON_KV_CENTER_CACHE=DIR (key_center_cache.h): the first quantized-K start writes the calibration
    there, the next ones read it back, and the logits are bit-identical to a run without the cache, also after
    the file was corrupted (a bad file is a miss: calibrated again and rewritten). A balance exponent the file
    was not made with is another file, so a run with TACHYON_KV_BALANCE=0 still differs."""
    ids = "1,504,3575,282,4649,314,7042,30,198,198,504,2988,314"
    cache = tmp_path / "kvc"
    cache.mkdir()
    # without the suite's own cache (tests/conftest.py sets one for every test)
    plain_env = {k: v for k, v in os.environ.items() if k != "TACHYON_KV_CENTER_CACHE"}

    def logits(name, **env):
        out = tmp_path / name
        p = subprocess.run([BIN, "logits", "-m", SMOL, "--ids", ids, "-o", str(out), "--kv-type", "q4_0"],
                           capture_output=True, text=True, timeout=300, env=dict(plain_env, **env))
        assert p.returncode == 0, p.stderr
        return out.read_bytes()

    plain = logits("plain.f32")
    cold = logits("cold.f32", TACHYON_KV_CENTER_CACHE=str(cache))
    files = sorted(cache.iterdir())
    assert len(files) == 1 and files[0].name.startswith("kv-center-"), files
    stamp = files[0].stat().st_mtime_ns
    warm = logits("warm.f32", TACHYON_KV_CENTER_CACHE=str(cache))
    assert files[0].stat().st_mtime_ns == stamp, "a hit rewrote the file"
    assert cold == plain and warm == plain, "logits differ with the calibration cache"
    data = bytearray(files[0].read_bytes())
    data[12 + 4 * 22 + 3] ^= 0x40  # an exponent bit of one center value: the checksum no longer matches
    files[0].write_bytes(bytes(data))
    assert logits("bad.f32", TACHYON_KV_CENTER_CACHE=str(cache)) == plain
    assert files[0].read_bytes() != bytes(data), "a corrupted file was not rewritten"
    assert logits("nobal.f32", TACHYON_KV_CENTER_CACHE=str(cache), TACHYON_KV_BALANCE="0") != plain
    assert len(list(cache.iterdir())) == 2
