"""Reference tests run at every ISA level this host supports: any test that takes an `isa` argument is
parametrized over scalar / avx2 / avx512 and runs tachyon with TACHYON_ISA set to that level. Levels the host
cannot run are reported as skips with the reason (visible with `pytest -rs`) and in the header and summary,
so a green run on an AVX2-only machine cannot hide that the AVX-512 kernels went untested (and vice versa)."""
import os
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("TACHYON_BIN", os.path.join(ROOT, "build", "tachyon"))
ALL_ISAS = ("scalar", "avx2", "avx512")


def host_isas():
    """Levels this host runs, from `tachyon info --cpu` ("cpu isa X (host levels: scalar avx2 ...")."""
    out = subprocess.run([BIN, "info", "--cpu"], capture_output=True, text=True, timeout=30).stdout
    levels = out.split("host levels:", 1)[1].split(";")[0].split(")")[0].split()
    assert levels and set(levels) <= set(ALL_ISAS), f"unexpected `tachyon info --cpu` output: {out!r}"
    return levels


HOST_ISAS = host_isas()


def isa_env(isa, **extra):
    return dict(os.environ, TACHYON_ISA=isa, **extra)


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
