"""The test harness itself: a server whose free port is taken before it binds starts on another (two pytest-xdist
workers pick ports at once), and the parallel run's groups (tests/conftest.py) keep a file, the files sharing
the SmolLM2 references, and the deadline and timeout tests together on one worker each."""
import os
import socket

import pytest

import conftest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_server_retries_a_port_taken_before_it_binds(monkeypatch):
    if not os.path.exists(conftest.BIN):
        pytest.skip("no binary at %s" % conftest.BIN)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        taken = held.getsockname()[1]
        picks = []
        real = conftest.free_port

        def first_taken():
            picks.append(taken if not picks else real())
            return picks[-1]

        monkeypatch.setattr(conftest, "free_port", first_taken)
        s = conftest.Server(conftest.STORIES, "--ctx-size", 512)
        try:
            assert picks[0] == taken and len(picks) == 2 and s.port == picks[1], (taken, picks, s.port)
            assert s.request("GET", "/health")[0] == 200
            assert all(str(taken) not in p for p in conftest.SERVER_LOGS), "the failed start's log is still checked"
        finally:
            s.stop()


class _Config:
    """What pytest-xdist's scope scheduler reads of the configuration: `-n 2 --dist loadgroup`."""

    def getvalue(self, name):
        return {"dist": "loadgroup", "tx": ["2*popen"]}[name]


def test_parallel_groups(pytestconfig):
    pytest.importorskip("xdist")
    top = pytestconfig.pluginmanager.get_plugin(os.path.join(ROOT, "tests", "conftest.py"))
    sched = top.pytest_xdist_make_scheduler(config=_Config(), log=None)
    scope = sched._split_scope
    a = "tests/integration/test_api.py::test_models"
    assert scope(a) == scope("tests/integration/test_api.py::test_chat_basic[x]") == "tests/integration/test_api.py"
    assert scope(a) != scope("tests/integration/test_embeddings.py::test_x")
    assert scope("tests/ref/test_model_ref.py::test_a[avx2]") == scope("tests/ref/test_kv_quant_ref.py::test_b")
    assert scope("tests/integration/test_hostile_conn.py::test_a") == scope("tests/integration/test_lifecycle.py::b")
    for g, files in top.GROUPS.items():
        for f in files:
            assert os.path.exists(os.path.join(ROOT, f)), "group %s names a missing file %s" % (g, f)


def test_longest_groups_first(pytestconfig):
    """The scheduler's queue hands out the groups of GROUP_COST longest first, then the others in queue order;
    every group named there is a group of GROUPS or a test file that exists."""
    pytest.importorskip("xdist")
    top = pytestconfig.pluginmanager.get_plugin(os.path.join(ROOT, "tests", "conftest.py"))
    assert top.GROUP_COST, "no group costs"
    for g in top.GROUP_COST:
        assert g in top.GROUPS or os.path.exists(os.path.join(ROOT, g)), "GROUP_COST names a missing group %s" % g
    by_cost = sorted(top.GROUP_COST, key=lambda g: -top.GROUP_COST[g])
    sched = top.pytest_xdist_make_scheduler(config=_Config(), log=None)
    queue = ["tests/integration/test_x_%d.py" % i for i in range(3)] + by_cost[::-1]
    for g in queue:
        sched.workqueue[g] = {g + "::t": False}
    got = [sched.workqueue.popitem(last=False)[0] for _ in range(len(queue))]
    k = len(by_cost)
    assert sorted(got[:k]) == sorted(by_cost) and got[k:] == queue[:3], got
    costs = [top.GROUP_COST[g] for g in got[:k]]
    assert costs == sorted(costs, reverse=True), got
