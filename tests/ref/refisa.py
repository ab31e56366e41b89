"""ISA levels for the reference tests (used by conftest.py and the test modules; a module of its own because
tests/integration has a conftest.py too, and only one module can be imported as `conftest`)."""
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
