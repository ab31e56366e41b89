"""Reliability under faults and hostile clients: shutdown while embeddings run, embeddings cancelled
when the client leaves, a stream whose client stops reading, stalled requests answered 408, strict HTTP framing,
lingering close for early refusals, and the small defects (SIGHUP without a key file, content null, wrong types
of ignored fields, a huge /tokenize body). Loopback only; each test bounded in time."""
import json
import os
import signal
import socket
import threading
import time

import pytest

from conftest import SMOL, STORIES
from test_hostile_conn import check_json_error, ok_request, read_all


def raw_exchange(srv, data, timeout=10):
    s = socket.create_connection((srv.host, srv.port))
    s.sendall(data)
    raw = read_all(s, timeout)
    s.close()
    return raw


def long_inputs(n, words=400):
    return ["once upon a time there was a little dog " * (words // 10) + str(i) for i in range(n)]


def metric(srv, name):
    m = srv.metrics()
    return sum(v for k, v in m.items() if k.split("{")[0] == name)


# --- 1. SIGTERM while an embeddings request runs ----------------------------------------------------------

def test_sigterm_during_embeddings_answers_and_exits_cleanly(make_server):
    srv = make_server(STORIES, "--ctx-size", 512, "--shutdown-grace", 0.5, "--max-batch-tokens", 64)
    body = json.dumps({"input": long_inputs(256)}).encode()
    s = socket.create_connection((srv.host, srv.port))
    s.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    time.sleep(0.5)
    srv.proc.send_signal(signal.SIGTERM)
    raw = read_all(s, 20)
    s.close()
    rc = srv.proc.wait(20)
    assert rc == 0, "exit %s:\n%s" % (rc, srv.read_log())
    # a final answer within the grace (+ the engine's 2 s to acknowledge), or the whole result
    assert raw.startswith(b"HTTP/1.1 503") or raw.startswith(b"HTTP/1.1 200"), raw[:300]


# --- 3. embeddings cancelled when the client leaves -------------------------------------------------------

def test_abandoned_embeddings_are_cancelled(make_server):
    srv = make_server(STORIES, "--ctx-size", 512, "--max-batch-tokens", 64)
    body = json.dumps({"input": long_inputs(256)}).encode()
    s = socket.create_connection((srv.host, srv.port))
    s.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    time.sleep(0.5)
    s.close()
    t0 = time.time()
    while True:  # the engine lets go of every input soon after the client left
        running = metric(srv, "tachyon:num_requests_running") + metric(srv, "tachyon:num_requests_waiting")
        if running == 0:
            break
        assert time.time() - t0 < 5, "%d embedding inputs still in the engine 5 s after the client left" % running
        time.sleep(0.1)
    ok_request(srv)


def test_chat_not_stuck_behind_an_embeddings_batch(make_server):
    srv = make_server(STORIES, "--ctx-size", 512, "--max-batch-tokens", 64, "--max-seqs", 4)
    done = {}

    def embed():
        st, _, _ = srv.post("/v1/embeddings", {"input": long_inputs(32, 200)}, timeout=300)
        done["embed"] = (st, time.time())

    t = threading.Thread(target=embed)
    t.start()
    time.sleep(0.5)
    t0 = time.time()
    st, _, j = srv.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8},
                        timeout=300)
    t_chat = time.time()
    assert st == 200, j
    t.join(300)
    assert done["embed"][0] == 200
    emb_left = done["embed"][1] - t0
    print("chat %.2f s; the embeddings batch ended %.2f s after the chat was sent" % (t_chat - t0, emb_left))
    # the chat gets its share of the slots at once instead of queueing behind every input sent before it
    assert t_chat - t0 < 0.5 * emb_left, (t_chat - t0, emb_left)


# --- 4. slow clients at the connection cap -----------------------------------------------------------------

def test_drippers_at_the_cap_make_room(make_server):
    srv = make_server(STORIES, "--ctx-size", 512, "--max-connections", 12, "--request-read-timeout", 60,
                      "--http-timeout", 60)
    drippers = []
    for _ in range(12):  # every slot holds a partial request that a byte at a time never finishes
        d = socket.create_connection((srv.host, srv.port))
        d.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
        drippers.append(d)
    time.sleep(1.3)
    try:
        for _ in range(3):
            st, _, _ = srv.request("GET", "/health", timeout=10)
            assert st == 200
            ok_request(srv)
        evicted = [read_all(d, 0.5) for d in drippers]
        assert any(raw.startswith(b"HTTP/1.1 408") for raw in evicted), evicted
    finally:
        for d in drippers:
            d.close()


def test_per_client_address_limit_near_the_cap(make_server):
    srv = make_server(STORIES, "--ctx-size", 512, "--max-connections", 16, "--max-connections-per-client", 4)
    held = []
    try:
        for _ in range(11):  # one address holds just under 3/4 of the cap: allowed while the server is not near it
            c = socket.socket()
            c.bind(("127.0.0.2", 0))
            c.connect((srv.host, srv.port))
            held.append(c)
        # The next one reaches 3/4 of the cap and is refused once the server has accepted those 11 (on a loaded
        # machine that can take a while: a 200 before then is correct, so ask again until the limit shows or 20 s
        # have passed).
        deadline = time.time() + 20
        while True:
            time.sleep(0.5)
            c = socket.socket()
            c.bind(("127.0.0.2", 0))
            c.connect((srv.host, srv.port))
            c.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            raw = read_all(c, 5)
            c.close()
            if not raw.startswith(b"HTTP/1.1 200") or time.time() > deadline:
                break
        check_json_error(raw, 503)
        st, _, _ = srv.request("GET", "/health", timeout=10)  # another address still gets in
        assert st == 200
        assert "one client address" in srv.read_log()
    finally:
        for c in held:
            c.close()


# --- 6. a client that stops reading a stream ---------------------------------------------------------------

def test_stream_reader_that_stops_is_cut(make_server):
    if not os.path.exists(SMOL):
        pytest.skip("SmolLM2 model not present")
    srv = make_server(SMOL, "--ctx-size", 2048, "--http-timeout", 2)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect((srv.host, srv.port))
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 1800, "ignore_eos": True, "stream": True,
                       "temperature": 0, "logprobs": 5}).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    t0 = time.time()
    try:
        while True:  # never read: the request must be cancelled and its slot freed
            if metric(srv, "tachyon:requests_cancelled_total") >= 1:
                break
            assert time.time() - t0 < 20, "a stream nobody reads is still generating after 20 s"
            time.sleep(0.2)
        # The cancel reaches the engine at its next step boundary: the slot is freed soon after, not at once.
        while metric(srv, "tachyon:num_requests_running") != 0:
            assert time.time() - t0 < 30, "a cancelled stream still holds its slot"
            time.sleep(0.1)
    finally:
        s.close()
    assert "stopped reading" in srv.read_log()
    ok_request(srv)


# --- 7. stalled requests get 408 ---------------------------------------------------------------------------

@pytest.mark.parametrize("data", [
    b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le",
    b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"prompt\"",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
], ids=["headers", "body", "binary"])
def test_stalled_request_gets_408(make_server, data):
    srv = make_server(STORIES, "--ctx-size", 512, "--http-timeout", 1, "--request-read-timeout", 60)
    t0 = time.time()
    raw = raw_exchange(srv, data, 10)
    e = check_json_error(raw, 408)
    assert e["code"] == "request_timeout", e
    assert time.time() - t0 < 6
    ok_request(srv)


# --- 8. strict framing -------------------------------------------------------------------------------------

GET_MODELS = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


@pytest.mark.parametrize("data", [
    b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
    b"Content-Length: %d\r\n\r\n{}" % (2 + len(GET_MODELS)) + GET_MODELS,
    b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n",
    b"GET /health HTTP/1.1\r\n\r\n",
    b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: a\x00b\r\n\r\n",
    b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
    b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b"Transfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
], ids=["duplicate-content-length", "duplicate-host", "http11-no-host", "nul-in-header", "bad-chunk-size",
        "te-and-cl"])
def test_strict_framing_400(stories, data):
    raw = raw_exchange(stories, data, 5)
    check_json_error(raw, 400)
    assert raw.count(b"HTTP/1.1 ") == 1, raw  # nothing smuggled after the body
    ok_request(stories)


def test_pipelined_requests_still_served(stories):
    raw = raw_exchange(stories, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 2 +
                       b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", 5)
    assert raw.count(b"HTTP/1.1 200") == 3, raw
    st, _, _ = stories.request("GET", "/health")  # HTTP/1.0 without Host stays fine
    assert st == 200


# --- 9. lingering close ------------------------------------------------------------------------------------

def test_refused_uploads_read_their_503(make_server):
    srv = make_server(STORIES, "--ctx-size", 512, "--max-connections", 2)
    held = [socket.create_connection((srv.host, srv.port)) for _ in range(2)]
    time.sleep(0.2)
    body = b"x" * (4 << 20)
    got = []

    def upload():  # like an HTTP client: the whole request is sent before the reply is read
        s = socket.create_connection((srv.host, srv.port))
        try:
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(body) + body[:65536])
            time.sleep(0.5)  # the refusal is written meanwhile
            s.sendall(body[65536:])
            got.append(read_all(s, 10))
        except OSError as e:
            got.append(repr(e).encode())
        s.close()

    threads = [threading.Thread(target=upload) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for h in held:
        h.close()
    assert len(got) == 4
    for raw in got:
        check_json_error(raw, 503)


# --- 10. small defects --------------------------------------------------------------------------------------

def test_sighup_without_key_file_is_harmless(make_server):
    srv = make_server(STORIES, "--ctx-size", 512)
    srv.proc.send_signal(signal.SIGHUP)
    time.sleep(0.3)
    assert srv.proc.poll() is None, srv.read_log()
    ok_request(srv)


@pytest.mark.parametrize("body,param", [
    ({"messages": [{"role": "user", "content": None}]}, "messages[0].content"),
    ({"messages": [{"role": "system", "content": "hi"}, {"role": "user"}]}, "messages[1].content"),
    ({"messages": [{"role": "user", "content": "hi"}], "user": 5}, "user"),
    ({"messages": [{"role": "user", "content": "hi"}], "store": "yes"}, "store"),
    ({"messages": [{"role": "user", "content": "hi"}], "metadata": [1]}, "metadata"),
    ({"messages": [{"role": "user", "content": "hi"}], "service_tier": {}}, "service_tier"),
])
def test_chat_wrong_types_400(stories, body, param):
    st, _, j = stories.post("/v1/chat/completions", dict(body, max_tokens=2))
    assert st == 400 and j["error"]["param"] == param, (st, j)


def test_ignored_fields_of_the_right_type_accepted(stories):
    st, _, j = stories.post("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None},
                     {"role": "user", "content": "again"}],
        "max_tokens": 2, "user": "u1", "store": False, "metadata": {"a": "b"}, "service_tier": "auto"})
    assert st == 200, j


def test_tokenize_huge_body_refused_fast(stories):
    t0 = time.time()
    st, _, j = stories.post("/tokenize", {"content": "hello world " * 200000})
    assert st == 413 and j["error"]["message"], (st, j)
    assert time.time() - t0 < 5
    st, _, j = stories.post("/tokenize", {"content": "hello world"})
    assert st == 200 and j["tokens"], j
