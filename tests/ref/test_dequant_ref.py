"""Independent check of the scalar tensor reference (src/tensor/) against the `gguf` Python package.

Our C code is loaded through ctypes from the shared library `libtachyon_ref.so` that the normal CMake build
produces (directory from env TACHYON_BUILD_DIR, default `build`, relative to the repository root). Every
call goes through the traits table (`tt_get`), so the table rows are exercised too.

What is asserted:
  * dequantization is bit-identical to gguf.quants.dequantize for every type both sides know (F32, F16,
    BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_NL, IQ4_XS, MXFP4) on random bytes forming valid blocks (every f16
    scale field a random finite f16), exhaustively for all 65536 F16 and BF16 values, and on real tensors of
    models/SmolLM2-135M-Instruct.Q4_1.gguf (every tensor: 210 Q4_1, the Q8_0 token embedding, 61 F32);
  * quantization is byte-identical to gguf.quants.quantize for the types gguf can quantize (F16, BF16,
    Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) — both are copies of ggml's reference quantizers;
  * for the k-quants (which gguf cannot quantize) our quantized bytes, decoded by gguf, equal our own
    decoding bit for bit (so the bit layout agrees) and are within the per-type error bound below;
  * block and type sizes agree with gguf.GGML_QUANT_SIZES.
"""

import ctypes
import os
import pathlib

import numpy as np
import pytest

import gguf
from gguf import GGMLQuantizationType as Q
from gguf import quants

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"

TO_FLOAT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
FROM_FLOAT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
VEC_DOT = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


class Traits(ctypes.Structure):  # struct tt_traits in src/tensor/ttype.h
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("block_size", ctypes.c_int),
        ("type_size", ctypes.c_size_t),
        ("is_quantized", ctypes.c_int),
        ("to_float", TO_FLOAT),
        ("from_float", FROM_FLOAT),
        ("vec_dot_type", ctypes.c_int),
        ("vec_dot", VEC_DOT),
    ]


SUPPORTED = [Q.F32, Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.Q8_1, Q.Q4_K, Q.Q5_K, Q.Q6_K, Q.Q8_K,
             Q.Q2_K, Q.Q3_K, Q.IQ4_NL, Q.IQ4_XS, Q.MXFP4]
# Types gguf can decode (Q8_1 / Q8_K are activation formats it does not implement).
DEQUANT_TYPES = [Q.F32, Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.Q4_K, Q.Q5_K, Q.Q6_K,
                 Q.Q2_K, Q.Q3_K, Q.IQ4_NL, Q.IQ4_XS, Q.MXFP4]
QUANT_TYPES = [Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0]
# Byte offsets of the f16 scale fields inside one block.
F16_FIELDS = {Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q5_1: [0, 2], Q.Q8_0: [0],
              Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208],
              Q.Q2_K: [80, 82], Q.Q3_K: [108], Q.IQ4_NL: [0], Q.IQ4_XS: [0],
              Q.MXFP4: []}  # MXFP4's scale is an E8M0 byte: every value is a valid scale
# Max |x - dequant(quant(x))| / amax(256-element super-block) for N(0,1) data, as in tests/unit/test_tensor.c.
KQUANT_BOUND = {Q.Q4_K: 0.10, Q.Q5_K: 0.065, Q.Q6_K: 0.022}


@pytest.fixture(scope="module")
def lib():
    build = pathlib.Path(os.environ.get("TACHYON_BUILD_DIR", "build"))
    if not build.is_absolute():
        build = ROOT / build
    path = build / "libtachyon_ref.so"
    if not path.exists():
        pytest.fail(f"{path} not found: build first (cmake --build build), or set TACHYON_BUILD_DIR")
    so = ctypes.CDLL(str(path))
    so.tt_get.restype = ctypes.POINTER(Traits)
    so.tt_get.argtypes = [ctypes.c_uint32]
    return so


def traits(lib, qtype) -> Traits:
    p = lib.tt_get(int(qtype))
    assert p, f"tt_get({qtype.name}) returned NULL"
    return p.contents


def ours_dequant(lib, qtype, raw: np.ndarray) -> np.ndarray:
    t = traits(lib, qtype)
    raw = np.ascontiguousarray(raw).view(np.uint8).reshape(-1)
    assert raw.size % t.type_size == 0
    n = raw.size // t.type_size * t.block_size
    out = np.empty(n, dtype=np.float32)
    t.to_float(raw.ctypes.data, out.ctypes.data, n)
    return out


def ours_quant(lib, qtype, x: np.ndarray) -> np.ndarray:
    t = traits(lib, qtype)
    x = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    assert x.size % t.block_size == 0
    out = np.empty(x.size // t.block_size * t.type_size, dtype=np.uint8)
    t.from_float(x.ctypes.data, out.ctypes.data, x.size)
    return out


def gguf_dequant(qtype, raw: np.ndarray) -> np.ndarray:
    """gguf works row by row (in groups of 16 rows): keep a tensor's rows, cut flat data into 64-block rows."""
    bs, ts = gguf.GGML_QUANT_SIZES[qtype]
    raw = np.ascontiguousarray(raw).view(np.uint8)
    if raw.ndim != 2:
        n_blocks = raw.size // ts
        per_row = max(k for k in range(1, 65) if n_blocks % k == 0)
        raw = raw.reshape(-1, ts * per_row)
    # Random E8M0 scales (MXFP4) reach 2^127: scale * quant overflows to inf in gguf as in ours, bit for bit; numpy
    # would warn about it.
    with np.errstate(over="ignore"):
        return np.asarray(quants.dequantize(raw, qtype), dtype=np.float32).reshape(-1)


def assert_same_bits(ours: np.ndarray, ref: np.ndarray, what: str):
    ours = np.asarray(ours).reshape(-1)
    ref = np.asarray(ref).reshape(-1)
    assert ours.shape == ref.shape, f"{what}: shape {ours.shape} vs {ref.shape}"
    bad = np.flatnonzero(ours.view(np.uint32 if ours.dtype == np.float32 else np.uint8)
                         != ref.view(np.uint32 if ref.dtype == np.float32 else np.uint8))
    if bad.size:
        i = bad[0]
        pytest.fail(f"{what}: {bad.size} of {ours.size} differ; first at {i}: ours {ours[i]!r} ref {ref[i]!r}")


def random_finite_f16(rng, n) -> np.ndarray:
    h = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
    inf_nan = (h & 0x7C00) == 0x7C00
    h[inf_nan] &= 0xBFFF  # clear the top exponent bit: finite
    return h


def random_blocks(rng, qtype, n_blocks) -> np.ndarray:
    bs, ts = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n_blocks, ts), dtype=np.uint8)
    for off in F16_FIELDS[qtype]:
        raw[:, off:off + 2] = random_finite_f16(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    return raw


def test_sizes_match_gguf(lib):
    # Q8_1: gguf-py says 40 bytes (f32 d, s), like our activation block; ggml's C block is 36 (f16 d, s).
    for qtype in SUPPORTED:
        t = traits(lib, qtype)
        assert (t.block_size, t.type_size) == gguf.GGML_QUANT_SIZES[qtype], qtype.name
        assert t.name.decode().lower() == qtype.name.lower()
    for qtype in (Q.IQ2_XXS, Q.IQ3_S, Q.TQ1_0):  # not implemented: the table says so instead of guessing
        assert not lib.tt_get(int(qtype)), f"{qtype.name} unexpectedly has a row"


@pytest.mark.parametrize("qtype", [q for q in DEQUANT_TYPES if q in F16_FIELDS], ids=lambda q: q.name)
def test_dequant_random_blocks(lib, qtype):
    rng = np.random.default_rng(1234 + int(qtype))
    raw = random_blocks(rng, qtype, 4096)
    assert_same_bits(ours_dequant(lib, qtype, raw), gguf_dequant(qtype, raw), f"{qtype.name} random blocks")


def test_dequant_f16_bf16_exhaustive(lib):
    allbits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    for qtype in (Q.F16, Q.BF16):
        assert_same_bits(ours_dequant(lib, qtype, allbits), gguf_dequant(qtype, allbits), qtype.name)


def test_dequant_f32(lib):
    rng = np.random.default_rng(7)
    x = rng.integers(0, 1 << 32, size=4096, dtype=np.uint64).astype(np.uint32).view(np.float32)
    assert_same_bits(ours_dequant(lib, Q.F32, x), gguf_dequant(Q.F32, x), "F32")


def sample_data(rng, block):
    """Blocks of N(0,1) data at scales from 1e-6 to 1e4, plus edge cases: all zero, constant, a single
    non-zero, exact ties of the quantizer grid, tiny (f16-subnormal) and large values."""
    n_blocks = 512
    x = rng.standard_normal((n_blocks, block)).astype(np.float32)
    x *= (10.0 ** rng.uniform(-6, 4, size=(n_blocks, 1))).astype(np.float32)
    x[0] = 0
    x[1] = 3.25
    x[2] = 0
    x[2, 5] = -1.5
    x[3] = (np.arange(block) % 17 - 8).astype(np.float32) * 0.5  # many exact .5 ties
    x[4] = rng.standard_normal(block).astype(np.float32) * 1e-7
    x[5] = rng.standard_normal(block).astype(np.float32) * 6e4
    x[6, :] = np.linspace(-1, 1, block, dtype=np.float32)
    return x.reshape(-1)


@pytest.mark.filterwarnings("ignore:overflow encountered")  # values beyond f16 range are part of the test
@pytest.mark.parametrize("qtype", QUANT_TYPES, ids=lambda q: q.name)
def test_quant_matches_gguf(lib, qtype):
    rng = np.random.default_rng(99 + int(qtype))
    bs, ts = gguf.GGML_QUANT_SIZES[qtype]
    x = sample_data(rng, max(bs, 32))
    ref = np.asarray(quants.quantize(x, qtype)).view(np.uint8).reshape(-1)
    assert_same_bits(ours_quant(lib, qtype, x), ref, f"{qtype.name} quantize")


@pytest.mark.filterwarnings("ignore:overflow encountered")
def test_quant_f16_bf16_bits(lib):
    """F16/BF16 rounding on random f32 bit patterns (all finite exponents, subnormals, overflow)."""
    rng = np.random.default_rng(5)
    x = rng.integers(0, 1 << 32, size=1 << 16, dtype=np.uint64).astype(np.uint32)
    x = x[(x & 0x7F800000) != 0x7F800000].view(np.float32)  # finite (NaN payload rules differ for F16)
    x = np.concatenate([x, np.array([np.inf, -np.inf, 65519.996, 65520.0, 2.0**-25, 2.0**-24 * 1.5],
                                    dtype=np.float32)])
    assert_same_bits(ours_quant(lib, Q.F16, x), x.astype(np.float16).view(np.uint8), "F16 from f32")
    xb = np.concatenate([x, np.array([np.nan, -np.nan], dtype=np.float32)])
    assert_same_bits(ours_quant(lib, Q.BF16, xb), np.asarray(quants.quantize(xb, Q.BF16)).view(np.uint8),
                     "BF16 from f32")


@pytest.mark.parametrize("qtype", list(KQUANT_BOUND), ids=lambda q: q.name)
def test_kquant_layout_and_error(lib, qtype):
    rng = np.random.default_rng(31 + int(qtype))
    x = rng.standard_normal(256 * 256).astype(np.float32)
    x[:256] = 0  # an all-zero super-block
    raw = ours_quant(lib, qtype, x)
    ours = ours_dequant(lib, qtype, raw)
    assert_same_bits(ours, gguf_dequant(qtype, raw), f"{qtype.name} our bytes decoded by gguf")
    xb, yb = x.reshape(-1, 256), ours.reshape(-1, 256)
    amax = np.abs(xb).max(axis=1)
    err = np.abs(xb - yb).max(axis=1)
    assert np.all(err[amax == 0] == 0), f"{qtype.name}: zero block not reproduced"
    rel = err[amax > 0] / amax[amax > 0]
    assert rel.max() <= KQUANT_BOUND[qtype], f"{qtype.name}: max err/amax {rel.max():.4f} > {KQUANT_BOUND[qtype]}"


@pytest.fixture(scope="module")
def model():
    if not MODEL.exists():
        pytest.skip(f"{MODEL} not present (make models)")
    return gguf.GGUFReader(str(MODEL))


def test_real_model_tensors(lib, model):
    counts = {}
    for t in model.tensors:
        qtype = Q(int(t.tensor_type))
        assert qtype in (Q.F32, Q.Q4_1, Q.Q8_0), f"unexpected {qtype.name} in {t.name}"
        raw = np.asarray(t.data)
        assert_same_bits(ours_dequant(lib, qtype, raw), gguf_dequant(qtype, raw), f"{t.name} ({qtype.name})")
        counts[qtype] = counts.get(qtype, 0) + 1
    assert counts.get(Q.Q4_1, 0) > 100 and counts.get(Q.Q8_0, 0) == 1, counts
