"""Request lifecycle paths through the real server: cancel (client gone) and deadline during a long chunked
prefill and while queued; drain grace expiry on SIGTERM; 503 on a kept-alive connection while draining;
--max-queued-tokens; n > 1 admitted in part then rejected; engine errors as HTTP 500 / an SSE error event
(through the test-only TACHYON_FAULT hook of src/engine/engine.c); UTF-8 split across tokens through SSE."""
import http.client
import json
import os
import re
import signal
import socket
import threading
import time

import pytest

from conftest import SMOL, STORIES, chat_body, stream_text


def wait_for(pred, timeout=10.0, what="condition"):
    t0 = time.time()
    while time.time() - t0 < timeout:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    pytest.fail("timed out after %.0f s waiting for %s" % (timeout, what))


def metric(srv, name):
    return srv.metrics().get(name, 0.0)


def send_raw(srv, body, path="/v1/completions"):
    """Sends a POST on a new socket and returns the socket (the caller reads or just closes it)."""
    s = socket.create_connection((srv.host, srv.port))
    data = json.dumps(body)
    s.sendall(("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
               % (path, len(data), data)).encode())
    return s


def read_until(sock, marker, timeout=30):
    sock.settimeout(timeout)
    got = b""
    while marker not in got:
        d = sock.recv(65536)
        assert d, "connection closed before %r; got %r" % (marker, got[-300:])
        got += d
    return got


def blocker(srv, tokens=1900):
    """A streamed request that decodes for seconds (ignore_eos); returns its socket once tokens flow."""
    s = send_raw(srv, {"prompt": "Once upon a time", "max_tokens": tokens, "ignore_eos": True, "stream": True})
    got = read_until(s, b"data: ")
    assert got.startswith(b"HTTP/1.1 200"), got[:200]
    return s


def idle(srv):
    return (metric(srv, "tachyon:num_requests_running") == 0 and metric(srv, "tachyon:num_requests_waiting") == 0
            and metric(srv, "tachyon:kv_blocks_used") == 0)


def ok_request(srv):
    st, _, j = srv.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0})
    assert st == 200, j


# --- long chunked prefill -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def slow_prefill():
    """SmolLM2 with 16-token prefill chunks: a ~1500-token prompt takes many steps (seconds on 2 cores)."""
    if not os.path.exists(SMOL):
        pytest.skip("SmolLM2 model not present (run make models)")
    from conftest import Server, BIN
    if not os.path.exists(BIN):
        pytest.skip("no binary at %s" % BIN)
    srv = Server(SMOL, "--ctx-size", 2048, "--max-batch-tokens", 16, "--max-seqs", 2)
    yield srv
    srv.stop()


LONG = "The quick brown fox jumps over the lazy dog while the cat sleeps in the sun. " * 90  # ~1500 tokens


def test_cancel_during_long_prefill(slow_prefill):
    srv = slow_prefill
    n_long = len(srv.post("/tokenize", {"content": LONG})[2]["tokens"])
    assert 1000 < n_long < 1900, n_long
    gen0, canc0 = metric(srv, "tachyon:generation_tokens_total"), metric(srv, "tachyon:requests_cancelled_total")
    for stream in (False, True):
        s = send_raw(srv, {"prompt": LONG, "max_tokens": 8, "stream": stream})
        wait_for(lambda: metric(srv, "tachyon:num_requests_running") == 1, what="prefill to start")
        time.sleep(0.2)
        s.close()
        wait_for(lambda: idle(srv), what="the cancelled prefill to free its sequence and KV blocks")
    # no token came out: both were cut during the prefill, not after it
    assert metric(srv, "tachyon:generation_tokens_total") == gen0, srv.metrics()
    wait_for(lambda: metric(srv, "tachyon:requests_cancelled_total") == canc0 + 2, what="two cancellations counted")
    ok_request(srv)


def test_deadline_during_long_prefill(slow_prefill):
    srv = slow_prefill
    gen0 = metric(srv, "tachyon:generation_tokens_total")
    t0 = time.time()
    st, _, j = srv.post("/v1/completions", {"prompt": LONG, "max_tokens": 8, "timeout": 0.3})
    dt = time.time() - t0
    assert st == 200, j
    assert j["usage"]["completion_tokens"] == 0 and j["choices"][0]["text"] == "", (j, dt)
    assert j["choices"][0]["finish_reason"] == "length"
    assert "request %s choice 0: deadline reached after 0 tokens" % j["id"] in srv.read_log()
    assert metric(srv, "tachyon:generation_tokens_total") == gen0
    wait_for(lambda: idle(srv), what="KV freed after the deadline")


# --- queued -------------------------------------------------------------------------------------------

@pytest.fixture
def one_seq(make_server):
    """stories260K with one running sequence at most: a second request waits in the queue."""
    return make_server(STORIES, "--ctx-size", 2048, "--max-seqs", 1, "--max-queue", 4)


def test_cancel_while_queued(one_seq):
    srv = one_seq
    b = blocker(srv)
    q = send_raw(srv, {"prompt": "The little dog", "max_tokens": 8})
    wait_for(lambda: metric(srv, "tachyon:num_requests_waiting") == 1, what="the second request to queue")
    canc0 = metric(srv, "tachyon:requests_cancelled_total")
    q.close()
    wait_for(lambda: metric(srv, "tachyon:num_requests_waiting") == 0 and
             metric(srv, "tachyon:requests_cancelled_total") == canc0 + 1, what="the queued request to be dropped")
    assert metric(srv, "tachyon:num_requests_running") == 1  # the blocker is untouched
    b.close()
    wait_for(lambda: idle(srv), what="idle")
    ok_request(srv)


def test_deadline_while_queued(one_seq):
    srv = one_seq
    b = blocker(srv)
    st, _, j = srv.post("/v1/completions", {"prompt": "The little dog", "max_tokens": 8, "timeout": 0.3})
    assert st == 200 and j["usage"]["completion_tokens"] == 0, j
    assert metric(srv, "tachyon:num_requests_running") == 1  # still behind the blocker when cut
    assert "request %s choice 0: deadline reached after 0 tokens" % j["id"] in srv.read_log()
    b.close()
    wait_for(lambda: idle(srv), what="idle")


def test_max_queued_tokens(make_server):
    srv = make_server(STORIES, "--ctx-size", 2048, "--max-seqs", 1, "--max-queued-tokens", 50)
    p30 = list(range(3, 33))  # 30 prompt token ids
    b = blocker(srv)
    a = send_raw(srv, {"prompt": p30, "max_tokens": 2})
    wait_for(lambda: metric(srv, "tachyon:num_requests_waiting") == 1, what="the first 30 tokens to queue")
    st, h, j = srv.post("/v1/completions", {"prompt": p30, "max_tokens": 2})  # 30 + 30 > 50
    assert st == 503 and h.get("Retry-After"), (st, j)
    assert j["error"]["code"] == "queue_full" and "prompt tokens" in j["error"]["message"], j
    c = send_raw(srv, {"prompt": p30[:15], "max_tokens": 2})  # 30 + 15 <= 50: admitted
    wait_for(lambda: metric(srv, "tachyon:num_requests_waiting") == 2, what="the 15-token request to queue")
    assert metric(srv, "tachyon:requests_rejected_total") == 1
    b.close()
    for s in (a, c):
        assert read_until(s, b"}}").startswith(b"HTTP/1.1 200")
        s.close()
    wait_for(lambda: idle(srv), what="idle")


def test_n_partial_admission_rejected_cleanly(make_server):
    # Two queue slots, n=3: choices 0 and 1 get in, choice 2 is refused; the request is answered 503 and the
    # two admitted choices must not linger in the queue or run.
    srv = make_server(STORIES, "--ctx-size", 2048, "--max-seqs", 1, "--max-queue", 2)
    b = blocker(srv)
    gen0 = metric(srv, "tachyon:generation_tokens_total")
    st, h, j = srv.post("/v1/completions", {"prompt": "The little dog", "max_tokens": 8, "n": 3})
    assert st == 503 and h.get("Retry-After") and j["error"]["code"] == "queue_full", (st, j)
    wait_for(lambda: metric(srv, "tachyon:num_requests_waiting") == 0, what="admitted choices to be withdrawn")
    b.close()
    wait_for(lambda: idle(srv), what="idle")
    st, _, j = srv.post("/v1/completions", {"prompt": "The little dog", "max_tokens": 8, "n": 2})
    assert st == 200 and len(j["choices"]) == 2, j
    assert metric(srv, "tachyon:generation_tokens_total") - gen0 <= 1900 + 16  # nothing ran for the 503


# --- shutdown -----------------------------------------------------------------------------------------

def test_drain_grace_expiry_cuts_stream(make_server):
    srv = make_server(STORIES, "--ctx-size", 2048, "--shutdown-grace", 0.5)
    out = {}

    def run():
        out["r"] = srv.stream("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 1900,
                                                  "ignore_eos": True, "stream": True,
                                                  "stream_options": {"include_usage": True}}, timeout=60)

    t = threading.Thread(target=run)
    t.start()
    wait_for(lambda: metric(srv, "tachyon:generation_tokens_total") > 0 or
             metric(srv, "tachyon:num_requests_running") == 1, what="the stream to start")
    t_sig = time.time()
    srv.proc.send_signal(signal.SIGTERM)
    rc = srv.proc.wait(30)
    t.join(30)
    assert rc == 0, srv.read_log()
    assert time.time() - t_sig < 0.5 + 5  # grace + generous slack, far below the ~4+ s the stream needs
    st, events, _ = out["r"]
    # A stream cut by the grace is not a normal finish: it ends with an error event (no finish_reason
    # "length", no [DONE]) after the tokens it got.
    assert st == 200 and events[-1]["error"]["code"] == "shutting_down", events[-3:]
    assert "[DONE]" not in events
    assert not any(c.get("finish_reason") for e in events[:-1] for c in e.get("choices", [])), events[-3:]
    n_tok = sum(1 for e in events[:-1] if e.get("choices"))
    assert 0 < n_tok < 1900, n_tok
    assert re.search(r"draining 1 request", srv.read_log()), srv.read_log()


def test_503_on_keepalive_connection_while_draining(make_server):
    srv = make_server(STORIES, "--ctx-size", 2048, "--shutdown-grace", 30)
    ka = http.client.HTTPConnection(srv.host, srv.port, timeout=30)
    body = json.dumps({"prompt": "Hi", "max_tokens": 2})
    hdr = {"Content-Type": "application/json"}
    ka.request("POST", "/v1/completions", body, hdr)
    r = ka.getresponse()
    r.read()
    assert r.status == 200 and (r.getheader("Connection") or "").lower() != "close"
    b = blocker(srv)
    srv.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: "stop accepting, draining" in srv.read_log(), what="the drain to start")
    ka.request("POST", "/v1/completions", body, hdr)  # same socket: accepted before the drain began
    r = ka.getresponse()
    j = json.loads(r.read())
    assert r.status == 503 and j["error"]["code"] == "shutting_down", (r.status, j)
    ka.close()
    b.close()  # the blocker goes away; the server then exits on its own
    assert srv.proc.wait(30) == 0, srv.read_log()


# --- engine errors ------------------------------------------------------------------------------------

def test_engine_error_is_500(make_server, monkeypatch):
    monkeypatch.setenv("TACHYON_FAULT", "forward_pos:40")  # test-only hook: any step reaching position 40 fails
    srv = make_server(STORIES, "--ctx-size", 512)
    body = {"prompt": "Once upon a time", "max_tokens": 100, "ignore_eos": True}
    st, _, j = srv.post("/v1/completions", body)
    assert st == 500, j
    assert j["error"]["type"] == "server_error" and "injected fault" in j["error"]["message"], j
    st, events, raw = srv.stream("/v1/completions", dict(body, stream=True))
    assert st == 200 and events[-1] == "[DONE]", raw[-300:]
    errs = [e for e in events[:-1] if "error" in e]
    assert len(errs) == 1 and "injected fault" in errs[0]["error"]["message"], raw[-500:]
    assert stream_text(events, kind="cmpl"), "tokens before the fault were streamed"
    assert not [c for e in events[:-1] for c in e.get("choices", []) if c.get("finish_reason") == "length"]
    st, events, _ = srv.stream("/v1/chat/completions", dict(chat_body("Tell me a story.", 100), ignore_eos=True,
                                                            stream=True))
    assert st == 200 and any("error" in e for e in events[:-1])
    ok_request(srv)  # a short request (positions < 40) still works: the server survived
    assert srv.proc.poll() is None


# --- UTF-8 through SSE ----------------------------------------------------------------------------------

def test_utf8_split_across_tokens_streams_valid_text(smol):
    # SmolLM2's byte-level BPE splits these Japanese characters over several tokens (checked below via the
    # bytes of each token's logprob entry), so the server must hold back incomplete sequences when streaming.
    body = chat_body("Write 'cat' in Japanese.", 40)
    st, _, full = smol.post("/v1/chat/completions", dict(body, logprobs=True))
    assert st == 200, full
    split = 0
    for e in full["choices"][0]["logprobs"]["content"]:
        try:
            bytes(e["bytes"]).decode("utf-8")
        except UnicodeDecodeError:
            split += 1
    assert split > 0, "precondition: no token of this output is a partial UTF-8 sequence"
    want = full["choices"][0]["message"]["content"]
    assert "\ufffd" not in want and any(ord(ch) > 0x7FF for ch in want), want
    c = http.client.HTTPConnection(smol.host, smol.port, timeout=60)
    c.request("POST", "/v1/chat/completions", json.dumps(dict(body, stream=True)),
              {"Content-Type": "application/json"})
    raw = c.getresponse().read()
    c.close()
    text = []
    for block in raw.split(b"\n\n"):
        if not block.strip() or block == b"data: [DONE]":
            continue
        d = block[6:].decode("utf-8")  # each event on its own is valid UTF-8 (raises otherwise)
        for ch in json.loads(d)["choices"]:
            delta = ch["delta"].get("content") or ""
            assert "\ufffd" not in delta, (delta, d)
            text.append(delta)
    assert "".join(text) == want
