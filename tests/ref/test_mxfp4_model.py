"""MXFP4 matrices through the public interface: a tiny llama model with every matrix but the embeddings in
MXFP4 (ggml type 39, gpt-oss's expert format), F32 elsewhere, gives `tachyon logits` equal to the numpy reference
(llama_ref.py: weights decoded by the `gguf` package, activations rounded to Q8_0 as the engine's kernels do)
at every ISA level this host has. Two producers of the file: the `gguf` package's writer and quantizer, and
`tachyon quantize ... MXFP4` from the F32 model (whose matrices must be byte-identical to gguf's)."""
import os
import subprocess
import sys

import numpy as np
import gguf

sys.path.insert(0, os.path.dirname(__file__))
from llama_ref import LlamaRef  # noqa: E402
from refisa import isa_env  # noqa: E402
from test_arch_ref import BIN, VOCAB, write_model  # noqa: E402

MX = gguf.GGMLQuantizationType.MXFP4
IDS = [int(x) for x in np.random.default_rng(3).integers(0, VOCAB, 40)]


def logits(tmp_path, path, isa, batch):
    out = tmp_path / "logits.f32"
    p = subprocess.run([BIN, "logits", "-m", str(path), "--ids", ",".join(map(str, IDS)), "-o", str(out),
                        "--batch", str(batch)], capture_output=True, text=True, env=isa_env(isa))
    assert p.returncode == 0, p.stderr
    return np.fromfile(out, dtype=np.float32).reshape(len(IDS), VOCAB)


def check(ours, ref, what):
    diff = np.abs(ours - ref).max()
    assert diff < 2e-3, f"{what}: max diff {diff}"
    assert (ours.argmax(1) == ref.argmax(1)).all(), what


def test_gguf_written_mxfp4_model(tmp_path, isa):
    path = tmp_path / "llama-mxfp4.gguf"
    write_model(str(path), "llama", 16, seed=5, qtype=MX)
    types = {gguf.GGMLQuantizationType(int(t.tensor_type)) for t in gguf.GGUFReader(str(path)).tensors}
    assert MX in types, types
    ref = LlamaRef(str(path), act_quant=True).forward(IDS)
    for batch in (40, 3):  # one batch (the multi-row tiles), and chunks of 3 rows
        check(logits(tmp_path, path, isa, batch), ref, f"batch {batch}")
    f32 = tmp_path / "llama-f32.gguf"  # teeth: the unquantized weights give other logits
    write_model(str(f32), "llama", 16, seed=5)
    assert np.abs(LlamaRef(str(f32), act_quant=True).forward(IDS) - ref).max() > 0.01


def test_tachyon_quantize_mxfp4(tmp_path, isa):
    src, dst, ref_path = tmp_path / "f32.gguf", tmp_path / "mx.gguf", tmp_path / "ref.gguf"
    write_model(str(src), "llama", 16, seed=9)
    write_model(str(ref_path), "llama", 16, seed=9, qtype=MX)
    p = subprocess.run([BIN, "quantize", "--quiet", str(src), str(dst), "MXFP4"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    ours = {t.name: t for t in gguf.GGUFReader(str(dst)).tensors}
    n_mx = 0
    for t in gguf.GGUFReader(str(ref_path)).tensors:
        o = ours[t.name]
        if int(t.tensor_type) == int(MX):
            assert int(o.tensor_type) == int(MX), t.name
            assert np.array_equal(np.asarray(o.data).view(np.uint8), np.asarray(t.data).view(np.uint8)), t.name
            n_mx += 1
    assert n_mx >= 7 * 2, n_mx  # q, k, v, o, gate, up, down in each of the two layers
    ref = LlamaRef(str(dst), act_quant=True).forward(IDS)
    check(logits(tmp_path, dst, isa, 40), ref, "tachyon quantize MXFP4")
