"""Every prompt whose greedy text a test asserts (tests/greedy_cases.json) has a clear top-1/top-2 logit gap at
every step the test depends on, at every ISA level of this host, so a near-tie fails here, loudly and with its
gap, instead of as a wrong text in some other test on someone else's CPU. A case's margin must also exceed
the gap differences measured between this host's levels at any one step (so it covers the levels the host
lacks: quantized weights in the default mode move by up to ~0.3 between levels).

To try a new prompt before a test relies on it: scripts/greedy_margin.py --add-case '{...}'."""
import importlib.util
import os

import pytest

from refisa import HOST_ISAS

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
_spec = importlib.util.spec_from_file_location("greedy_margin", os.path.join(ROOT, "scripts", "greedy_margin.py"))
gm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gm)

BIN = os.environ.get("TACHYON_BIN", os.path.join(ROOT, "build", "tachyon"))


def test_registry_names_its_users():
    cases = gm.load_cases()
    assert cases, "no cases"
    for c in cases:
        assert c["model"] in gm.MODELS and c["kind"] in ("chat", "text") and c["n"] >= 1, c
        path, _, name = c["used_by"].partition("::")
        assert name and ("def " + name + "(") in open(os.path.join(ROOT, path)).read(), c["used_by"]


@pytest.mark.timeout(1800)  # one server per model and level; reference-precision cases are slow at scalar
def test_greedy_margins():
    cases = [c for c in gm.load_cases() if os.path.exists(gm.MODELS[c["model"]])]
    if not cases:
        pytest.skip("no model of the registry is present")
    res = gm.measure(BIN, cases, HOST_ISAS)
    bad = gm.problems(cases, HOST_ISAS, res)
    assert not bad, "greedy paths that tests rely on are fragile:\n" + "\n".join(bad)
