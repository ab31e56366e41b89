"""Reference tests run at every ISA level this host supports: any test that takes an `isa` argument is
parametrized over scalar / avx2 / avx512 and runs tachyon with TACHYON_ISA set to that level. Levels the host
cannot run are reported as skips with the reason (visible with `pytest -rs`) and in the header and summary,
so a green run on an AVX2-only machine cannot hide that the AVX-512 kernels went untested (and vice versa)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from refisa import ALL_ISAS, HOST_ISAS  # noqa: E402
import smolref  # noqa: E402


def pytest_generate_tests(metafunc):
    if "isa" in metafunc.fixturenames:
        metafunc.parametrize("isa", [
            pytest.param(l, marks=() if l in HOST_ISAS else
                         pytest.mark.skip(reason=f"ISA level {l} is not available on this host"))
            for l in ALL_ISAS])


def _isa_line():
    missing = [l for l in ALL_ISAS if l not in HOST_ISAS]
    return "ISA levels tested: %s; not available on this host: %s" % (
        " ".join(HOST_ISAS), " ".join(missing) or "-")


def pytest_report_header(config):
    return _isa_line()


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line("tests/ref " + _isa_line())


# --- SmolLM2 on the 200-token text, once per session (smolref.py)

@pytest.fixture(scope="session")
def smol_text_ids():
    return smolref.text_ids()


@pytest.fixture(scope="session")
def smol_ref_f16kv(smol_text_ids):
    """Full-precision activations, K/V rounded to f16 like the engine's cache (what precise mode computes)."""
    return smolref.reference(smol_text_ids, act_quant=False, kv_f16=True)


@pytest.fixture(scope="session")
def smol_ref_exact(smol_text_ids):
    """The exact model: full-precision activations and K/V (the yardstick for quality, as for llama.cpp's)."""
    return smolref.reference(smol_text_ids, act_quant=False)


@pytest.fixture(scope="session")
def smol_ref_act8(smol_text_ids):
    """The reference with llama.cpp-style 8-bit activation rounding emulated."""
    return smolref.reference(smol_text_ids, act_quant=True)


@pytest.fixture(scope="session")
def smol_logits(smol_text_ids, tmp_path_factory):
    """smol_logits(isa): tachyon's default-mode logits of the text at that level (f16 KV cache), computed once."""
    return smolref.LogitsCache(smol_text_ids, str(tmp_path_factory.mktemp("smol_logits")))
