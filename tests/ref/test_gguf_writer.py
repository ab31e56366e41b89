"""Our GGUF writer, checked by an independent reader: `tachyon synth` writes small synthetic models and the
`gguf` PyPI package (GGUFReader + its numpy dequantizers) must accept them and see what we meant to write."""
import os
import subprocess

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

BIN = os.environ.get("TACHYON_BIN", "build/tachyon")
TYPES = ["f16", "q8_0", "q4_0", "q4_k_m"]
# tiny shape: dim 256, 2 layers, 4 heads, 2 kv heads, ffn 512, vocab 512
DIM, LAYERS, HEADS, KV_HEADS, FFN, VOCAB = 256, 2, 4, 2, 512, 512


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    if not os.path.exists(BIN):
        pytest.skip(f"{BIN} not built")
    d = tmp_path_factory.mktemp("synth")
    out = {}
    for t in TYPES:
        p = str(d / f"tiny-{t}.gguf")
        r = subprocess.run([BIN, "synth", "-o", p, "--shape", "tiny", "--type", t, "--seed", "7"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        out[t] = p
    return out


def field(r, key):
    f = r.fields[key]
    return f.contents()


def weights(r):
    return {t.name: t for t in r.tensors}


@pytest.mark.parametrize("t", TYPES)
def test_metadata_and_vocab(files, t):
    r = gguf.GGUFReader(files[t])
    assert field(r, "general.architecture") == "llama"
    assert field(r, "llama.embedding_length") == DIM
    assert field(r, "llama.block_count") == LAYERS
    assert field(r, "llama.attention.head_count") == HEADS
    assert field(r, "llama.attention.head_count_kv") == KV_HEADS
    assert field(r, "llama.feed_forward_length") == FFN
    assert field(r, "llama.rope.dimension_count") == DIM // HEADS
    assert field(r, "general.file_type") == {"f16": 1, "q8_0": 7, "q4_0": 2, "q4_k_m": 15}[t]
    assert field(r, "tokenizer.ggml.model") == "llama"
    assert field(r, "tokenizer.ggml.bos_token_id") == 1 and field(r, "tokenizer.ggml.eos_token_id") == 2
    toks = field(r, "tokenizer.ggml.tokens")
    types = field(r, "tokenizer.ggml.token_type")
    scores = field(r, "tokenizer.ggml.scores")
    assert len(toks) == len(types) == len(scores) == VOCAB
    assert toks[:3] == ["<unk>", "<s>", "</s>"]
    assert toks[3:259] == ["<0x%02X>" % i for i in range(256)]
    assert set(types[3:259]) == {6} and set(types[259:]) == {1}
    assert len(set(toks)) == VOCAB, "tokens must be unique"
    assert all(s.startswith("\u2581") for s in toks[259:])


@pytest.mark.parametrize("t", TYPES)
def test_tensors(files, t):
    r = gguf.GGUFReader(files[t])
    w = weights(r)
    assert len(w) == 2 + 9 * LAYERS + 1
    kv = DIM // HEADS * KV_HEADS
    assert list(w["token_embd.weight"].shape) == [DIM, VOCAB]
    assert list(w["blk.0.attn_k.weight"].shape) == [DIM, kv]
    assert list(w["blk.1.ffn_down.weight"].shape) == [FFN, DIM]
    assert list(w["blk.1.ffn_norm.weight"].shape) == [DIM]
    Q = gguf.GGMLQuantizationType
    for name, x in w.items():
        if name.endswith("_norm.weight"):
            assert x.tensor_type == Q.F32
            assert np.all(gguf.quants.dequantize(x.data, x.tensor_type) == 1.0)
    if t == "q4_k_m":
        # llama.cpp's use_more_bits rule for attn_v / ffn_down, everything else Q4_K, output Q6_K
        def more_bits(i, n):
            return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2

        assert w["token_embd.weight"].tensor_type == Q.Q4_K
        assert w["output.weight"].tensor_type == Q.Q6_K
        for i in range(LAYERS):
            hi = Q.Q6_K if more_bits(i, LAYERS) else Q.Q4_K
            assert w[f"blk.{i}.attn_v.weight"].tensor_type == hi
            assert w[f"blk.{i}.ffn_down.weight"].tensor_type == hi
            for n in ("attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"):
                assert w[f"blk.{i}.{n}.weight"].tensor_type == Q.Q4_K
    if t == "q4_0":
        assert w["output.weight"].tensor_type == Q.Q6_K and w["blk.0.attn_q.weight"].tensor_type == Q.Q4_0


@pytest.mark.parametrize("t,tol", [("q8_0", 0.01), ("q4_0", 0.15), ("q4_k_m", 0.15)])
def test_quantized_weights_match_f16(files, t, tol):
    # Same seed, same random stream per (tensor, row): every quantized tensor, dequantized by the independent
    # reader, must be the f16 one up to the quantization error (relative RMS error below tol).
    ref = weights(gguf.GGUFReader(files["f16"]))
    got = weights(gguf.GGUFReader(files[t]))
    for name, x in got.items():
        a = gguf.quants.dequantize(ref[name].data, ref[name].tensor_type).astype(np.float64)
        b = gguf.quants.dequantize(x.data, x.tensor_type).astype(np.float64)
        assert a.shape == b.shape, name
        if name.endswith("_norm.weight"):
            continue
        assert abs(a.std() - 0.02) < 0.002, f"{name}: std {a.std()}"
        rel = np.sqrt(np.mean((a - b) ** 2)) / a.std()
        assert rel < tol, f"{name} ({x.tensor_type.name}): relative RMS error {rel:.4f} >= {tol}"


def test_output_independent_of_threads(files, tmp_path):
    p = str(tmp_path / "one-thread.gguf")
    r = subprocess.run([BIN, "synth", "-o", p, "--shape", "tiny", "--type", "q4_k_m", "--seed", "7", "--threads", "1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    with open(p, "rb") as a, open(files["q4_k_m"], "rb") as b:
        assert a.read() == b.read()


def test_bad_arguments(tmp_path):
    if not os.path.exists(BIN):
        pytest.skip(f"{BIN} not built")
    for args in (["--shape", "nope"], ["--type", "q9_9"], []):
        out = [] if not args else ["-o", str(tmp_path / "x.gguf")]
        r = subprocess.run([BIN, "synth"] + out + args, capture_output=True, text=True, timeout=10)
        assert r.returncode == 2 and "usage" in r.stderr
    assert not os.path.exists(tmp_path / "x.gguf")
