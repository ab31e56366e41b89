"""Lower classes yield and room for a better class (--sched priority, docs/SCHEDULING.md). Yield: the step
that carries a high-priority prompt's prefill gives a long low-priority prompt that is prefilling beside
it only a small chunk (1/16 of --max-batch-tokens), not the rest of the budget. Seen through /stats'
`batch_tokens` (the tokens of the last step), read just after the high-priority request's reply: with the
test-only TACHYON_FAULT=step_sleep_ms:A:B hook every step takes A ms + B ms per token longer, so the next
step (a full one of the low prompt) is still running when /stats answers (the ITL guard is off: with it,
the room kept for a better class would make that next step short too, sched_yield.h). Room: for
--sched-aging seconds after a priority-0 request, a low-priority prompt prefilling alone runs in
guard-sized steps. Counts tokens; no timing threshold."""
import threading
import time

from conftest import STORIES
from test_sched_policy import LONG, completion, stats  # the same prompt and request helpers


def wait_for(cond, timeout=30):
    t0 = time.time()
    while not cond():
        assert time.time() - t0 < timeout, "condition not reached in %d s" % timeout
        time.sleep(0.01)


def high_step_tokens(make_server, monkeypatch, policy):
    """A ~300-token priority-5 prompt is prefilling (128 tokens a step, ~1.3 s a step); a short priority-0
    prompt arrives. Returns (tokens of the step that answered it, its prompt tokens, greedy texts)."""
    monkeypatch.setenv("TACHYON_FAULT", "step_sleep_ms:5:10")
    srv = make_server(STORIES, "--ctx-size", 512, "--sched", policy, "--max-batch-tokens", 128,
                      "--max-seqs", 4, "--itl-guard", 0)
    low = {}

    def run_low():
        low["st"], _, low["j"] = completion(srv, LONG, 4, priority=5)

    t = threading.Thread(target=run_low)
    t.start()
    wait_for(lambda: stats(srv)["running"] == 1)
    st, _, j = completion(srv, "Once upon a time", 1, priority=0)
    assert st == 200, j
    step = stats(srv)["batch_tokens"]
    t.join(120)
    assert low.get("st") == 200, low
    return step, j["usage"]["prompt_tokens"], (j["choices"][0]["text"], low["j"]["choices"][0]["text"])


def test_low_priority_prefill_yields_to_a_high_priority_prompt(make_server, monkeypatch):
    step, n_high, texts = high_step_tokens(make_server, monkeypatch, "priority")
    # its own prompt, plus at most 128 / 16 = 8 tokens of the low prompt (without the rule: 128)
    assert n_high < step <= n_high + 8, (step, n_high)
    # scheduling never changes tokens: the same greedy texts as under fifo (which plans these steps otherwise)
    _, _, texts_fifo = high_step_tokens(make_server, monkeypatch, "fifo")
    assert texts == texts_fifo, (texts, texts_fifo)


def test_room_for_a_better_class(make_server, monkeypatch):
    # a priority-0 request was served a moment ago: for --sched-aging seconds a low-priority prompt that
    # prefills alone gets steps capped as the ITL guard caps a one-stream step (here ~4 tokens: 50 ms floor,
    # 10 ms a token), not the whole budget (128), so another priority-0 arrival would wait for a short step
    monkeypatch.setenv("TACHYON_FAULT", "step_sleep_ms:5:10")
    srv = make_server(STORIES, "--ctx-size", 512, "--sched", "priority", "--max-batch-tokens", 128,
                      "--max-seqs", 4)
    for n in (1, 5, 20):  # steps of different sizes: the step-cost model learns the (slowed) engine
        assert completion(srv, "Once upon a time " * n, 4, priority=5)[0] == 200
    assert completion(srv, "Once upon a time", 1, priority=0)[0] == 200
    res = {}
    t = threading.Thread(target=lambda: res.update(st=completion(srv, LONG, 1, priority=5)[0]))
    t.start()
    wait_for(lambda: stats(srv)["running"] == 1)
    seen = []
    for _ in range(20):  # ~1 s of its prefill
        s = stats(srv)
        if s["running"] == 1:
            seen.append(s["batch_tokens"])
        time.sleep(0.05)
    t.join(120)
    assert res.get("st") == 200, res
    assert seen and max(seen) < 32, seen
