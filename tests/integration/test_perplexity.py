"""`tachyon perplexity` through the CLI: its perplexity equals a numpy computation over `tachyon logits` rows
with llama-perplexity's chunking, the saved-logits file holds what ppl.h says, KL of a run against itself is 0
with full top-1 agreement, a quantized KV cache gives KL > 0, and bad inputs give clear errors."""
import json
import os
import struct
import subprocess

import numpy as np
import pytest

from conftest import BIN, SMOL, STORIES

TEXT = ("Once upon a time there was a little girl named Lily. She loved to play outside in the sunshine with her "
        "dog, Max. One day, Lily and Max went to the park to play on the swings. The sun was warm and the sky was "
        "blue. Lily saw a big red ball under a tree and ran to get it. Max barked and wagged his tail. They played "
        "with the ball all afternoon, and when the sun went down they walked home together, tired and happy. "
        "The next morning, Lily woke up early. She wanted to build a castle in the sand box. Her mom gave her a "
        "bucket and a small shovel. Lily worked very hard. She made tall towers and a wall around them. Then a "
        "little bird landed on the wall and looked at her. Lily smiled and said hello to the bird. The bird sang a "
        "pretty song, and Lily clapped her hands. Her friend Tom came to see the castle. He thought it was the best "
        "castle in the whole world. They decided to make a moat and filled it with water from the garden hose. "
        "When the water ran into the moat, the castle looked like it was in a real story book. ") * 2
CTX, CHUNKS = 64, 3
ROW_HDR = 12


def run(*args, ok=True):
    p = subprocess.run([BIN, "perplexity", *map(str, args)], capture_output=True, text=True, timeout=300)
    if ok:
        assert p.returncode == 0, p.stderr
    return p


def ppl_json(model, text, *extra):
    return json.loads(run("-m", model, "-f", text, "-c", CTX, "--chunks", CHUNKS, "--json", *extra).stdout)


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    p = tmp_path_factory.mktemp("ppl") / "text.txt"
    p.write_text(TEXT)
    return str(p)


def reference_nll(model, tmp_path):
    """Per scored token -log p, from `tachyon tokenize` + `tachyon logits` and numpy (float64 log-softmax)."""
    ids = json.loads(subprocess.run([BIN, "tokenize", "-m", model, TEXT], check=True, capture_output=True,
                                    text=True).stdout)
    no_bos = json.loads(subprocess.run([BIN, "tokenize", "-m", model, "--no-bos", TEXT], check=True,
                                       capture_output=True, text=True).stdout)
    assert len(ids) >= CTX * CHUNKS
    add_bos, first, nll, rows = len(ids) == len(no_bos) + 1, CTX // 2, [], []
    for c in range(CHUNKS):
        chunk = ids[c * CTX:(c + 1) * CTX]
        if add_bos:  # llama-perplexity puts BOS at the start of every chunk (stories260K adds one, SmolLM2 not)
            chunk[0] = ids[0]
        out = tmp_path / f"l{c}.f32"
        subprocess.run([BIN, "logits", "-m", model, "--ids", ",".join(map(str, chunk)), "-o", str(out)], check=True)
        lg = np.fromfile(out, dtype=np.float32).reshape(CTX, -1).astype(np.float64)
        lp = lg - lg.max(1, keepdims=True)
        lp -= np.log(np.exp(lp).sum(1, keepdims=True))
        for r in range(first, CTX - 1):
            nll.append(-lp[r, chunk[r + 1]])
            rows.append(lp[r])
    return np.array(nll), rows


def read_saved(path):
    data = open(path, "rb").read()
    assert data[:8] == b"TCPPL001"
    n_vocab, n_ctx, k, n_rows, n_chunks, _ = struct.unpack("<6I", data[8:32])
    rec = ROW_HDR + 8 * k
    assert len(data) == 32 + n_rows * rec
    rows = []
    for i in range(n_rows):
        b = data[32 + i * rec:32 + (i + 1) * rec]
        target, lpt, lrest = struct.unpack("<iff", b[:ROW_HDR])
        top = np.frombuffer(b[ROW_HDR:], dtype=np.dtype([("id", "<i4"), ("lp", "<f4")]))
        rows.append((target, lpt, lrest, top))
    return dict(n_vocab=n_vocab, n_ctx=n_ctx, k=k, n_chunks=n_chunks), rows


@pytest.mark.parametrize("model", [STORIES, SMOL], ids=["stories260K", "smollm2"])
def test_ppl_matches_numpy_over_logits(model, text, tmp_path):
    nll, lp_rows = reference_nll(model, tmp_path)
    saved = tmp_path / "base.tcppl"
    r = ppl_json(model, text, "--save-logits", saved)
    assert r["chunks"] == CHUNKS and r["scored"] == len(nll) == CHUNKS * (CTX - 1 - CTX // 2)
    ref = float(np.exp(nll.mean()))
    assert r["ppl"] == pytest.approx(ref, rel=2e-4), (r["ppl"], ref)
    # the saved summary: targets, their log-probs and the top-k rows as the numpy rows have them
    hdr, rows = read_saved(saved)
    assert hdr["n_ctx"] == CTX and hdr["n_chunks"] == CHUNKS and hdr["k"] == 64 and len(rows) == len(nll)
    for (target, lpt, lrest, top), n, lp in zip(rows, nll, lp_rows):
        assert lpt == pytest.approx(-n, abs=1e-3)
        assert np.all(np.diff(top["lp"]) <= 0)
        assert np.allclose(top["lp"], np.sort(lp)[::-1][:64], atol=1e-3)
        rest = 1 - np.exp(top["lp"].astype(np.float64)).sum()
        assert lrest == pytest.approx(np.log(max(rest, 1e-30)), abs=1e-2) or rest < 1e-6


def test_kl_against_itself_is_zero(text, tmp_path):
    base = tmp_path / "base.tcppl"
    r0 = ppl_json(SMOL, text, "--save-logits", base)
    r = ppl_json(SMOL, text, "--kl-base", base)
    assert r["kl"] == pytest.approx(0, abs=1e-6) and r["top1"] == 1.0
    assert r["ppl_ratio"] == pytest.approx(1, abs=1e-6) and r["base_ppl"] == pytest.approx(r0["ppl"], rel=1e-6)
    human = run("-m", SMOL, "-f", text, "-c", CTX, "--chunks", CHUNKS, "--kl-base", base).stdout
    assert "mean KL 0.000000" in human and "top-1 agreement 100.00%" in human


def test_q4_0_kv_diverges_from_f16_base(text, tmp_path):
    base = tmp_path / "base.tcppl"
    ppl_json(SMOL, text, "--save-logits", base)
    r = ppl_json(SMOL, text, "--kv-type", "q4_0", "--kl-base", base)
    assert r["kv_k"] == "q4_0" and r["kl"] > 1e-3 and r["kl_lo"] > 0 and r["top1"] < 1.0
    assert r["kl_lo"] <= r["kl"] <= r["kl_hi"]
    r8 = ppl_json(SMOL, text, "--kv-type", "q8_0", "--kl-base", base)
    assert 0 < r8["kl"] < r["kl"]  # 8-bit KV stays closer to the base than 4-bit


def test_bad_inputs(text, tmp_path):
    def err(*args):
        p = run(*args, ok=False)
        assert p.returncode != 0 and "Traceback" not in p.stderr
        return p.stderr

    assert "usage" in err("-m", SMOL)  # no -f
    assert "cannot read" in err("-m", SMOL, "-f", tmp_path / "missing.txt")
    short = tmp_path / "short.txt"
    short.write_text("Too short.")
    assert "fewer than one chunk" in err("-m", SMOL, "-f", short, "-c", 64)
    assert "--kv-type expects f16, q8_0 or q4_0" in err("-m", SMOL, "-f", text, "--kv-type", "q5_1")
    assert "-c/--ctx-size expects" in err("-m", SMOL, "-f", text, "-c", "abc")
    junk = tmp_path / "junk.tcppl"
    junk.write_bytes(b"not a logits file at all, just some bytes...")
    assert "not a tachyon logits file" in err("-m", SMOL, "-f", text, "-c", CTX, "--kl-base", junk)
    base = tmp_path / "base.tcppl"
    ppl_json(SMOL, text, "--save-logits", base)
    assert "-c 32" in err("-m", SMOL, "-f", text, "-c", 32, "--chunks", CHUNKS, "--kl-base", base)
    cut = tmp_path / "cut.tcppl"
    cut.write_bytes(open(base, "rb").read()[:-100])
    assert "truncated" in err("-m", SMOL, "-f", text, "-c", CTX, "--chunks", CHUNKS, "--kl-base", cut)
    other = tmp_path / "other.txt"
    other.write_text(TEXT.replace("Lily", "Anna"))
    assert "another text" in err("-m", SMOL, "-f", other, "-c", CTX, "--chunks", CHUNKS, "--kl-base", base)
    assert "n_vocab" in err("-m", STORIES, "-f", text, "-c", CTX, "--chunks", CHUNKS, "--kl-base", base)
    # a failed run with --save-logits leaves no half-written file behind
    assert "fewer than one chunk" in err("-m", SMOL, "-f", short, "-c", 64, "--save-logits", tmp_path / "x.tcppl")
    assert not os.path.exists(tmp_path / "x.tcppl")
