"""Shared by tests/ref and tests/integration.

1. The key-centering calibration of a quantized K cache (src/model/key_center_cache.h) is kept for the session
in one temporary folder (TACHYON_KV_CENTER_CACHE, unless the caller set it): a scalar-level start calibrates in
about a minute of CPU, and a hit returns the very floats the calibration computes (the file is keyed by the
model's bytes, the ISA level, the thread count and the switches the forward pass reads), so every later start
with the same model and level skips it and computes the same logits. The folder goes at the session's end.

2. Under pytest-xdist (`make pytest PYTEST_WORKERS=N`, run with --dist loadgroup) the tests go to the workers a
group at a time, and one worker runs a group's tests in order (GROUPS and the scheduler below): each file is a
group, so its module-scoped servers and references are made once; the files that share an expensive session
fixture are one group, so it is computed once; and the tests that hold a server to deadlines or timeouts while
it is loaded (hostile connections, cancellations, scheduling under a slowed engine) are one group, so they never
run beside each other. The groups that take longest (GROUP_COST) are handed out first, so that no long group
starts when the other worker is nearly done. The key-centering folder of 1. is made by the controller before the
workers start, and they inherit it (its files are written to a temporary name and renamed into place, so two
workers may write one at once).

3. gguf-py's GGUFReader reads the file through a plain ndarray view of its memory map instead of the np.memmap
itself.

GGUFReader parses every element of an array field with a slice of self.data, and slicing an np.memmap runs
its __array_finalize__ each time: on Gemma 3's 262,144-token vocabulary (three arrays of that length) that is
about 20 s per reader on this project's 2-core CI machine, and several tests open such files. The same bytes
through `memmap.view(np.ndarray)` (the same memory, kept mapped by the view's base; read-only when the map
is) parse about 3x faster. Only the Python type of the arrays changes (ndarray instead of memmap): the bytes,
shapes, dtypes and write flags are the same, and no test uses memmap's own methods."""
import os
import shutil
import tempfile

import gguf
import numpy as np
import pytest

_KVC_DIR = None
if not os.environ.get("TACHYON_KV_CENTER_CACHE"):
    _KVC_DIR = tempfile.mkdtemp(prefix="tachyon-kv-center-")
    os.environ["TACHYON_KV_CENTER_CACHE"] = _KVC_DIR


def pytest_sessionfinish(session, exitstatus):
    if _KVC_DIR:
        shutil.rmtree(_KVC_DIR, ignore_errors=True)


# group name -> the test files (as in their node ids, from the root) of that group; any other file is a group itself
GROUPS = {
    # the SmolLM2 float64 references and tachyon's logits of the 200-token text (tests/ref/conftest.py)
    "smolref": {"tests/ref/test_model_ref.py", "tests/ref/test_kv_quant_ref.py", "tests/ref/test_cuda_ref.py"},
    # deadlines, timeouts and slowed-engine schedules: one at a time
    "timing": {"tests/integration/test_hostile_conn.py", "tests/integration/test_reliability.py",
               "tests/integration/test_robustness.py", "tests/integration/test_lifecycle.py",
               "tests/integration/test_sched_policy.py", "tests/integration/test_sched_yield.py",
               "tests/integration/test_spec_itl.py"},
}
_GROUP_OF = {f: g for g, files in GROUPS.items() for f in files}

# The longest groups, in seconds of one worker (see COST_CMD), handed out first: a group goes to one worker whole,
# so a long one started last would leave the other worker idle until it ends. Groups not listed come after
# them, in pytest-xdist's order (most tests first).
COST_CMD = ("TACHYON_BIN=$PWD/build/tachyon .venv/bin/python -m pytest -q -n 2 --dist loadgroup -m 'not bench' "
            "--ignore=tests/ref/test_arm64.py tests/ref tests/integration --durations=0 (times summed per group)")
GROUP_COST = {  # AVX-512 host (3 levels), 2 workers, under load from other builds
    "tests/integration/test_tool_formats.py": 537, "smolref": 286, "tests/ref/test_kld_llamacpp.py": 203,
    "tests/ref/test_gemma3_ref.py": 168, "tests/ref/test_greedy_margin.py": 149, "timing": 147,
    "tests/integration/test_spec.py": 97, "tests/integration/test_spec_draft.py": 71,
    "tests/integration/test_sampler_fields.py": 70,
}


def group_order(scopes):
    """The order in which the groups are handed out: those of GROUP_COST by cost, longest first, then the others
    in the order given."""
    known = sorted((s for s in scopes if s in GROUP_COST), key=lambda s: -GROUP_COST[s])
    return known + [s for s in scopes if s not in GROUP_COST]


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: ignored where it is not installed
def pytest_xdist_make_scheduler(config, log):
    """--dist loadgroup with the groups of GROUPS. pytest-xdist's own loadgroup reads `xdist_group` marks through a
    node id rewrite that pytest 9 no longer honours (every test became a group of its own), so the grouping is
    made here, from the file of each node id, with xdist's scope scheduler (a scope goes to one worker whole),
    whose queue hands out the groups in group_order."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from collections import OrderedDict

    from xdist.scheduler import LoadScopeScheduling

    class CostQueue(OrderedDict):
        """xdist's work queue (group -> its tests); the scheduler takes the next group with popitem(last=False)."""

        def popitem(self, last=True):
            if last:
                return super().popitem(last=True)
            scope = group_order(list(self))[0]
            return scope, self.pop(scope)

    class GroupScheduling(LoadScopeScheduling):
        def __init__(self, config, log=None):
            super().__init__(config, log)
            self.workqueue = CostQueue()

        def _split_scope(self, nodeid):
            f = nodeid.split("::", 1)[0]
            return _GROUP_OF.get(f, f)

    return GroupScheduling(config, log)


def _data_get(self):
    return self._tachyon_data


def _data_set(self, value):
    self._tachyon_data = value.view(np.ndarray) if isinstance(value, np.memmap) else value


if not isinstance(getattr(gguf.GGUFReader, "data", None), property):
    gguf.GGUFReader.data = property(_data_get, _data_set)
