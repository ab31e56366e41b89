"""Bit-exact quantization against an independent implementation, on every `make test` run.

tachyon's scalar quantizers (src/tensor/quant_ref_*.c, reached through the traits table of the
libtachyon_ref.so that the normal build produces, the same function pointers `tachyon synth` and the
GGUF writer use) must give byte-identical blocks to the `gguf` Python package's numpy port of ggml's
reference quantizers, for every type gguf can quantize. test_ggml_bitexact.py compares against ggml's C
source itself, but only when TACHYON_GGML_SRC points at a ggml tree; this file is the check that always runs.

Which types: whatever gguf.quants.quantize implements among the types tachyon quantizes (with gguf 0.19:
Q4_0, Q4_1, Q5_0, Q5_1, Q8_0; the k-quants Q4_K/Q5_K/Q6_K are not implemented in gguf-py, and are compared
automatically if a later gguf adds them; until then their bit layout and error are checked by
test_dequant_ref.py and their bytes against ggml by the optional test_ggml_bitexact.py).

Data: block families chosen where quantizers differ in the details (which element is "the max" on a tie of
|+m| and |-m|, zero and constant blocks, f16 underflow and overflow of the scale, negative-only and
positive-only blocks, exact .5 ties on the grid), each in many random variants, plus random normal blocks at
scales over 60 decades. A failure names the family and the first differing block.
"""

import ctypes
import os
import pathlib
import warnings

import numpy as np
import pytest

import gguf
from gguf import GGMLQuantizationType as Q
from gguf import quants

ROOT = pathlib.Path(__file__).resolve().parents[2]

FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


class Traits(ctypes.Structure):  # struct tt_traits in src/tensor/ttype.h
    _fields_ = [("name", ctypes.c_char_p), ("block_size", ctypes.c_int), ("type_size", ctypes.c_size_t),
                ("is_quantized", ctypes.c_int), ("to_float", FN), ("from_float", FN), ("vec_dot_type", ctypes.c_int),
                ("vec_dot", ctypes.c_void_p)]


# Types tachyon quantizes (weights); Q8_1/Q8_K are activation formats with no gguf-py counterpart.
OURS = [Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.Q4_K, Q.Q5_K, Q.Q6_K, Q.MXFP4]
LEGACY = {Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.MXFP4}  # MXFP4: gguf-py has ggml's quantizer too
SCALE_OFFSET = {Q.Q6_K: 208}  # byte offset of the block's f16 scale d (0 for the others)


def gguf_can_quantize(qtype) -> bool:
    try:
        quants.quantize(np.zeros(gguf.GGML_QUANT_SIZES[qtype][0], dtype=np.float32), qtype)
        return True
    except NotImplementedError:
        return False


COMPARED = [q for q in OURS if gguf_can_quantize(q)]


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


def ours_quant(lib, qtype, x: np.ndarray) -> np.ndarray:
    p = lib.tt_get(int(qtype))
    assert p, f"tt_get({qtype.name}) returned NULL"
    t = p.contents
    x = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    out = np.empty(x.size // t.block_size * t.type_size, dtype=np.uint8)
    t.from_float(x.ctypes.data, out.ctypes.data, x.size)
    return out


def families(rng, bs: int, n: int = 64) -> dict:
    """name -> (n, bs) float32 blocks."""
    def normal(scale=1.0):
        return (rng.standard_normal((n, bs)) * scale).astype(np.float32)

    def with_tie(sign_first):
        # |+m| == |-m| both present: which one is "the max" decides the sign of the scale
        x = normal() * 0.5
        i, j = rng.integers(0, bs, size=(2, n))
        j = np.where(i == j, (j + 1) % bs, j)
        m = np.float32(3.0)
        x[np.arange(n), i] = sign_first * m
        x[np.arange(n), j] = -sign_first * m
        return x

    grid = (rng.integers(-16, 17, size=(n, bs)) * 0.5).astype(np.float32)  # exact .5 ties after scaling
    fam = {
        "zeros": np.zeros((n, bs), np.float32),
        "negative_zeros": np.full((n, bs), -0.0, np.float32),
        "constant_pos": np.full((n, bs), 1.25, np.float32) * rng.uniform(0.1, 10, (n, 1)).astype(np.float32),
        "constant_neg": np.full((n, bs), -1.25, np.float32) * rng.uniform(0.1, 10, (n, 1)).astype(np.float32),
        "negative_only": -np.abs(normal()) - rng.uniform(0, 2, (n, 1)).astype(np.float32),
        "positive_only": np.abs(normal()) + rng.uniform(0, 2, (n, 1)).astype(np.float32),
        "single_nonzero": np.zeros((n, bs), np.float32),
        "tie_pos_first": with_tie(1),
        "tie_neg_first": with_tie(-1),
        "grid_ties": grid,
        "grid_ties_scaled": grid * np.float32(0.1),
        "tiny_f16_subnormal": normal(1e-6),   # scale below f16's normal range
        "tiny_f16_underflow": normal(1e-9),   # scale rounds to f16 zero
        "tiny_f32_subnormal": normal(1e-39),  # the data itself is f32-subnormal
        "huge_f16_edge": normal(6e4),         # scale near f16's max
        "huge_f16_overflow": normal(1e8),     # scale overflows f16 to inf
        "huge_f32": normal(1e37),
        "outlier": normal() + np.where(rng.random((n, bs)) < 1.0 / bs, 1e4, 0).astype(np.float32),
        "linspace": np.tile(np.linspace(-1, 1, bs, dtype=np.float32), (n, 1)),
        "random_scales": normal() * (10.0 ** rng.uniform(-30, 30, (n, 1))).astype(np.float32),
    }
    fam["single_nonzero"][np.arange(n), rng.integers(0, bs, n)] = rng.standard_normal(n).astype(np.float32) * 3
    return fam


def test_legacy_types_are_compared():
    """gguf-py has the five legacy quantizers: if a gguf version lost them, this check would silently shrink."""
    missing = LEGACY - set(COMPARED)
    assert not missing, f"gguf {getattr(gguf, '__version__', '?')} cannot quantize {[q.name for q in missing]}"
    print("compared bit for bit with gguf.quants:", " ".join(q.name for q in COMPARED),
          "| not quantizable by gguf-py:", " ".join(q.name for q in OURS if q not in COMPARED) or "-")


@pytest.mark.parametrize("qtype", COMPARED, ids=lambda q: q.name)
def test_quantize_bitexact(lib, qtype):
    bs, ts = gguf.GGML_QUANT_SIZES[qtype]
    rng = np.random.default_rng(20260 + int(qtype))
    bad, tolerated = [], {}
    for name, x in families(rng, bs).items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # overflow to inf is part of the test
            ref = np.asarray(quants.quantize(x, qtype)).view(np.uint8).reshape(len(x), ts)
        ours = ours_quant(lib, qtype, x).reshape(len(x), ts)
        differ = (ours != ref).any(axis=1)
        # The one allowed difference: blocks whose f16 scale is zero (+0 or -0) on both sides, and which decode
        # to the same numbers. There ggml's C reference and gguf-py disagree with each other: for an all -0.0
        # block ggml stores d = -0 (its running max starts at +0.0, and +0.0 / -8 = -0.0) where gguf-py stores
        # +0; for f32-subnormal data ggml's 1/d overflows to inf and converting inf to an integer is undefined
        # behaviour in C (x86 and numpy give 0; tachyon clamps). The block's values are 0 (or m) either way.
        off = SCALE_OFFSET.get(qtype, 0)
        zero_scale = ((ours[:, off:off + 2].view(np.uint16) & 0x7FFF) == 0).ravel() & \
                     ((ref[:, off:off + 2].view(np.uint16) & 0x7FFF) == 0).ravel()
        if (differ & zero_scale).any():
            k = np.flatnonzero(differ & zero_scale)
            a = np.asarray(quants.dequantize(ours[k], qtype), dtype=np.float32)
            b = np.asarray(quants.dequantize(ref[k], qtype), dtype=np.float32)
            same = (a == b).all(axis=1)  # as numbers: -0 == +0
            differ[k[same]] = False
            tolerated[name] = int(same.sum())
        if qtype == Q.MXFP4:
            # Blocks with amax < 2^-125: ggml's exponent floor(log2(amax)) - 2 + 127 is negative, and its
            # conversion to uint8_t is undefined behaviour in C (numpy wraps it to a huge scale and all-zero
            # codes); tachyon takes the smallest scale, e = 0, and must then be within half a step of x.
            tiny = differ & (np.abs(x).max(axis=1) < np.float32(2.0 ** -125))
            if tiny.any():
                dec = np.asarray(quants.dequantize(ours[tiny], qtype), dtype=np.float32)
                assert (ours[tiny][:, 0] == 0).all(), f"{name}: tiny block without e = 0"
                assert np.abs(dec - x[tiny]).max() <= 2.0 ** -127, f"{name}: tiny block off by more than a step"
                differ &= ~tiny
                tolerated[name] = tolerated.get(name, 0) + int(tiny.sum())
        diff = np.flatnonzero(differ)
        if diff.size:
            i = diff[0]
            bad.append(f"{name}: {diff.size}/{len(x)} blocks differ; block {i}: x[:8]={x[i, :8].tolist()}\n"
                       f"    ours {ours[i].tobytes().hex()}\n    gguf {ref[i].tobytes().hex()}")
    print(f"{qtype.name}: zero-scale blocks with other quant bytes but the same values:", tolerated or "none")
    assert not bad, f"{qtype.name} quantization differs from gguf.quants:\n" + "\n".join(bad)
