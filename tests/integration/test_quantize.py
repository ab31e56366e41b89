"""`tachyon quantize` through the binary: outputs load in tachyon and in the `gguf` package, bytes equal gguf-py's
quantizers from the same f32 input, dequantized values equal gguf-py's dequantization of our output, the Q4_K_M
mix equals llama.cpp's on a file llama.cpp made, metadata is copied, --keep-layers truncates, errors are clear,
and llama.cpp's greedy output on a Q8_0 we made agrees with tachyon's (golden from tests/ref/make_quant_golden.py).
"""
import hashlib
import json
import os
import subprocess

import numpy as np
import pytest

import gguf
from gguf import GGMLQuantizationType as Q
from gguf import quants

from conftest import BIN, ROOT, SMOL, STORIES

GEMMA = os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf")
GOLDEN = os.path.join(ROOT, "tests", "ref", "golden", "smollm2-%s-quantized-llamacpp.json")  # % "q8_0" / "q4_0"
TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K", "Q4_K_M"]


def quantize(src, dst, typ, *extra, check=True):
    p = subprocess.run([BIN, "quantize", "--quiet", str(src), str(dst), typ] + [str(e) for e in extra],
                       capture_output=True, text=True, timeout=240)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def run_greedy(model, prompt, n, env=None):
    p = subprocess.run([BIN, "run", "-m", str(model), "-p", prompt, "-n", str(n), "--spec", "off", "-t", "2"],
                       capture_output=True, text=True, timeout=240, env=env)
    assert p.returncode == 0, p.stderr
    return p.stdout


def gguf_can_quantize(qtype):
    try:
        quants.quantize(np.zeros(gguf.GGML_QUANT_SIZES[qtype][0], dtype=np.float32), qtype)
        return True
    except NotImplementedError:
        return False


def as_f32(t, rows=None):
    """A 2-D tensor of a GGUFReader as float32 (rows, ne0), dequantized by gguf-py (only `rows` if given)."""
    data = t.data if rows is None else np.asarray(t.data)[rows]
    if t.tensor_type in (Q.F32, Q.F16):
        return np.asarray(data, dtype=np.float32).reshape(-1, int(t.shape[0]))
    if t.tensor_type == Q.BF16:
        return quants.dequantize(data, Q.BF16).reshape(-1, int(t.shape[0])).astype(np.float32)
    return quants.dequantize(data, t.tensor_type).reshape(-1, int(t.shape[0])).astype(np.float32)


@pytest.fixture(scope="module")
def smol_f16(tmp_path_factory):
    out = tmp_path_factory.mktemp("quant") / "smol-f16.gguf"
    quantize(SMOL, out, "F16")
    return out


@pytest.fixture(scope="module")
def smol_q(smol_f16, tmp_path_factory):
    """smol_q(TYPE): that F16 quantized to TYPE, made once for the module's tests (the quantizers are
    deterministic: test_greedy_agrees_with_llama_cpp checks the file's sha256)."""
    d, made = tmp_path_factory.mktemp("quant_q"), {}

    def get(typ):
        if typ not in made:
            made[typ] = d / ("smol-%s.gguf" % typ)
            quantize(smol_f16, made[typ], typ)
        return made[typ]
    return get


# --- every type, on a small F32 model whose 64/172-wide rows exercise the fallbacks

@pytest.mark.parametrize("typ", TYPES)
def test_stories_every_type(tmp_path, typ):
    out = tmp_path / ("s-%s.gguf" % typ)
    quantize(STORIES, out, typ)
    src, dst = gguf.GGUFReader(STORIES), gguf.GGUFReader(out)
    want = {"F32": Q.F32, "F16": Q.F16, "BF16": Q.BF16, "Q8_0": Q.Q8_0, "Q4_0": Q.Q4_0, "Q4_1": Q.Q4_1,
            "Q5_0": Q.Q5_0, "Q5_1": Q.Q5_1, "Q4_K": Q.Q5_0, "Q5_K": Q.Q5_1, "Q6_K": Q.Q8_0, "Q4_K_M": None}[typ]
    d = {t.name: t for t in dst.tensors}
    assert sorted(d) == sorted(t.name for t in src.tensors)
    for t in src.tensors:
        o = d[t.name]
        assert list(o.shape) == list(t.shape), t.name
        if len(t.shape) == 1:
            assert o.tensor_type == t.tensor_type, t.name
            continue
        if int(t.shape[0]) % 32:  # 172-wide ffn_down rows: no 32-block divides them -> F16 (llama.cpp's fallback)
            assert o.tensor_type == (Q.F32 if typ == "F32" else Q.BF16 if typ == "BF16" else Q.F16), t.name
        elif want is not None:
            assert o.tensor_type == want, (t.name, o.tensor_type)
        # gguf-py's quantizer on the same f32 input gives the same bytes
        if o.tensor_type not in (Q.F32,) and gguf_can_quantize(o.tensor_type):
            ref = quants.quantize(as_f32(t), o.tensor_type)
            assert np.array_equal(np.asarray(o.data).view(np.uint8).reshape(-1),
                                  np.asarray(ref).view(np.uint8).reshape(-1)), (t.name, o.tensor_type)
    # it runs
    assert run_greedy(out, "Once upon a time", 8).strip()


# --- SmolLM2: real-size tensors, our dequantization vs gguf-py's, bytes vs gguf-py's quantizer

@pytest.mark.parametrize("typ", ["Q8_0", "Q5_1", "Q4_K_M"])
def test_smollm2_bytes_and_dequant(tmp_path, smol_f16, smol_q, typ):
    """tachyon's dequantization (the file re-quantized to F32) equals gguf-py's: whole tensors for the first and
    last blocks, the embeddings and the first tensor of every (type, shape) in the file (each kernel and row
    width), the first and last rows of every other tensor (each tensor's data is where the file says); the bytes
    of the first and last blocks and the embeddings equal gguf-py's quantizer's on the same input."""
    out, back = smol_q(typ), tmp_path / "back-f32.gguf"
    quantize(out, back, "F32")  # tachyon's own dequantization, written as F32
    src, q, f = gguf.GGUFReader(smol_f16), gguf.GGUFReader(out), gguf.GGUFReader(back)
    qd, fd = {t.name: t for t in q.tensors}, {t.name: t for t in f.tensors}
    n_cmp, kinds = 0, set()
    for t in src.tensors:
        if len(t.shape) == 1:
            continue
        o = qd[t.name]
        kind = (o.tensor_type, tuple(int(x) for x in o.shape))
        ours = as_f32(fd[t.name])
        if t.name.startswith(("blk.0.", "blk.29.", "token_embd")) or kind not in kinds:
            kinds.add(kind)
            assert np.array_equal(as_f32(o), ours), "dequantized %s (%s) differs" % (t.name, o.tensor_type)
        else:
            ends = [0, int(o.data.shape[0]) - 1]
            assert np.array_equal(as_f32(o, ends), ours[ends]), "dequantized %s (%s) differs" % (t.name, o.tensor_type)
        if gguf_can_quantize(o.tensor_type) and t.name.startswith(("blk.0.", "blk.29.", "token_embd")):
            ref = quants.quantize(as_f32(t), o.tensor_type)
            assert np.array_equal(np.asarray(o.data).view(np.uint8).reshape(-1),
                                  np.asarray(ref).view(np.uint8).reshape(-1)), (t.name, o.tensor_type)
            n_cmp += 1
    assert n_cmp >= 5
    text = run_greedy(out, "The capital of France is", 6)
    # Q4_0/Q5_1 of an already 4-bit model lose the answer; the near-lossless ones keep it
    assert "Paris" in text if typ in ("Q8_0", "Q4_K_M") else text.strip()


def test_q4_k_m_mix_of_smollm2(smol_q):
    """The rule on a model whose 576-wide rows no 256-block divides: Q4_K falls back to Q5_0, Q6_K to Q8_0."""
    out = smol_q("Q4_K_M")
    ty = {t.name: t.tensor_type for t in gguf.GGUFReader(out).tensors}
    assert ty["token_embd.weight"] == Q.Q8_0  # tied output head: Q6_K -> Q8_0
    more = [i for i in range(30) if i < 3 or i >= 26 or (i - 3) % 3 == 2]
    for i in range(30):
        assert ty["blk.%d.ffn_down.weight" % i] == (Q.Q6_K if i in more else Q.Q4_K), i  # 1536-wide rows
        assert ty["blk.%d.attn_v.weight" % i] == (Q.Q8_0 if i in more else Q.Q5_0), i
        assert ty["blk.%d.attn_q.weight" % i] == Q.Q5_0
        assert ty["blk.%d.attn_norm.weight" % i] == Q.F32


@pytest.mark.skipif(not os.path.exists(GEMMA), reason="gemma-3-270m-q4_k_m.gguf not present")
def test_q4_k_m_matches_llama_cpp_file(tmp_path):
    """A Q4_K_M file made by llama.cpp, re-quantized to Q4_K_M, keeps every tensor's type (so our mix is
    llama.cpp's) and, since no type changes, every byte; all metadata keys survive."""
    out = tmp_path / "g.gguf"
    quantize(GEMMA, out, "Q4_K_M")
    a, b = gguf.GGUFReader(GEMMA), gguf.GGUFReader(out)
    bd = {t.name: t for t in b.tensors}
    assert len(bd) == len(a.tensors)
    for t in a.tensors:
        assert bd[t.name].tensor_type == t.tensor_type, (t.name, t.tensor_type, bd[t.name].tensor_type)
        assert np.array_equal(np.asarray(t.data), np.asarray(bd[t.name].data)), t.name
    assert set(a.fields) == set(b.fields)


def test_metadata_copied(tmp_path):
    out = tmp_path / "q.gguf"
    quantize(SMOL, out, "Q8_0")
    a, b = gguf.GGUFReader(SMOL), gguf.GGUFReader(out)
    for k, fa in a.fields.items():
        if k.startswith("GGUF.") or k in ("general.file_type", "general.alignment"):
            continue
        fb = b.fields[k]
        assert fb.types == fa.types, k
        assert all(np.array_equal(pa, pb) for pa, pb in zip(fa.parts[1:], fb.parts[1:])), k
    assert int(b.fields["general.file_type"].parts[-1][0]) == 7  # LLAMA_FTYPE_MOSTLY_Q8_0
    assert int(b.fields["general.quantization_version"].parts[-1][0]) == 2


def test_keep_layers(tmp_path):
    out = tmp_path / "k.gguf"
    quantize(SMOL, out, "Q8_0", "--keep-layers", 4)
    r = gguf.GGUFReader(out)
    assert int(r.fields["llama.block_count"].parts[-1][0]) == 4
    names = [t.name for t in r.tensors]
    assert "blk.3.ffn_down.weight" in names and not any(n.startswith("blk.4.") for n in names)
    assert run_greedy(out, "The capital of France is", 8).strip()
    p = quantize(SMOL, tmp_path / "k2.gguf", "Q8_0", "--keep-layers", 31, check=False)
    assert p.returncode == 1 and "--keep-layers 31 is not in [1, 30]" in p.stderr
    assert not (tmp_path / "k2.gguf").exists()


def test_errors(tmp_path):
    out = tmp_path / "o.gguf"
    p = quantize(STORIES, out, "Q3_K", check=False)
    assert p.returncode == 2 and "unsupported type 'Q3_K'" in p.stderr and "Q4_K_M" in p.stderr
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf file at all" * 10)
    p = quantize(bad, out, "Q8_0", check=False)
    assert p.returncode == 1 and "gguf" in p.stderr and not out.exists()
    p = quantize(tmp_path / "missing.gguf", out, "Q8_0", check=False)
    assert p.returncode == 1 and "missing.gguf" in p.stderr
    quantize(STORIES, out, "Q8_0")
    p = quantize(STORIES, out, "Q4_0", check=False)
    assert p.returncode == 1 and "exists" in p.stderr and "--force" in p.stderr
    assert gguf.GGUFReader(out).tensors[0].tensor_type == Q.Q8_0  # untouched
    # --force, even in place: the output goes to a temporary file renamed at the end
    quantize(out, out, "Q4_0", "--force")
    assert gguf.GGUFReader(out).tensors[0].tensor_type == Q.Q4_0
    assert [f.name for f in tmp_path.iterdir() if ".tmp." in f.name] == []


# --- agreement with llama.cpp on the same file

@pytest.mark.parametrize("typ", ["Q8_0", "Q4_0"])
def test_greedy_agrees_with_llama_cpp(tmp_path, smol_q, typ):
    """llama.cpp (llama-cpp-python 0.3.36) decoded greedily on a Q8_0 / Q4_0 made by `tachyon quantize` from the
    F16 made from SmolLM2 Q4_1 (the default SIMD path: repacked 16-row kernels for both); the file is re-made here (same sha256, our quantizers are deterministic). Teacher
    forced on llama.cpp's tokens, tachyon's argmax must be llama.cpp's token at every step where llama.cpp's
    top-2 logit margin is at least MARGIN (below it, the order of float additions may legitimately decide),
    and the free-running greedy text must agree up to the first such near-tie."""
    MARGIN = 0.5
    g = json.load(open(GOLDEN % typ.lower()))
    out = smol_q(typ)
    assert hashlib.sha256(out.read_bytes()).hexdigest() == g["sha256"], "the quantized file is not the golden's"
    n_checked = 0
    for r in g["results"]:
        ids = r["prompt_ids"] + r["ids"][:-1]
        lf = tmp_path / "l.f32"
        p = subprocess.run([BIN, "logits", "-m", str(out), "--ids", ",".join(map(str, ids)), "-o", str(lf),
                            "-t", "2"], capture_output=True, text=True, timeout=240)
        assert p.returncode == 0, p.stderr
        logits = np.fromfile(lf, dtype=np.float32).reshape(len(ids), -1)
        ours = logits[len(r["prompt_ids"]) - 1:].argmax(axis=1)
        for j, (want, margin) in enumerate(zip(r["ids"], r["margins"])):
            if margin >= MARGIN:
                assert ours[j] == want, "prompt %r step %d: tachyon %d, llama.cpp %d (margin %.3f)" % (
                    r["prompt"], j, ours[j], want, margin)
                n_checked += 1
        first_tie = next((j for j, m in enumerate(r["margins"]) if m < MARGIN), len(r["ids"]))
        text = run_greedy(out, r["prompt"], first_tie + 1)
        expect = r["text"]
        # the text of the tokens before the first near-tie (detokenized by llama.cpp, whole tokens)
        prefix = subprocess.run([BIN, "detokenize", "-m", str(out)] + [str(t) for t in r["ids"][:first_tie]],
                                capture_output=True, text=True, timeout=60).stdout.rstrip("\n")
        assert expect.startswith(prefix) and text.startswith(prefix), (r["prompt"], text, prefix)
    assert n_checked >= 40
