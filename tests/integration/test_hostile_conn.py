"""Hostile clients at the connection level (src/server/srv_conn.c): streams that wait in the queue are not cut
by the idle timeout and get ": ping" comments; slowloris connections are closed by a total read deadline
(408) while normal requests keep being served; a low descriptor limit does not make the server spin or
flood its log; connections beyond --max-connections get 503; buffered request bodies are capped (503) and
the server's memory stays bounded; a multi-megabyte prompt is tokenized off the event loop; HEAD replies
have no body; errors from the HTTP layer itself are OpenAI JSON. Loopback only, each test bounded in time."""
import http.client
import json
import os
import socket
import statistics
import threading
import time

import pytest

import conftest
from conftest import SMOL, STORIES


def ok_request(srv, timeout=30):
    st, _, j = srv.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0},
                        timeout=timeout)
    assert st == 200 and j["choices"][0]["text"] is not None, j


def check_json_error(raw, status):
    """raw: a whole HTTP response (bytes). It must be `status` with an OpenAI error body of the right length."""
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d" % status), raw[:300]
    headers = {k.strip().lower(): v.strip() for k, _, v in
               (line.partition(b":") for line in head.split(b"\r\n")[1:])}
    assert headers.get(b"content-type") == b"application/json", head
    assert int(headers[b"content-length"]) == len(body), (head, body)
    e = json.loads(body)["error"]
    assert set(e) == {"message", "type", "param", "code"} and e["message"], e
    return e


def read_all(sock, timeout=10):
    sock.settimeout(timeout)
    out = b""
    try:
        while True:
            d = sock.recv(65536)
            if not d:
                break
            out += d
    except (socket.timeout, ConnectionResetError):
        pass
    return out


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def log_lines(srv):
    with open(srv.log_path, errors="replace") as f:
        return f.read().splitlines()


# --- 1. a started stream is not cut by the idle timeout ---------------------------------------------------------

QUEUE_S = 12  # seconds the stream waits behind the blocker: 6x --http-timeout


def test_queued_stream_survives_with_pings(make_server):
    if not os.path.exists(SMOL):
        pytest.skip("SmolLM2 model not present (run make models)")
    # pings every 3 s of silence, above --http-timeout: the idle timeout itself must not apply to the stream
    srv = make_server(SMOL, "--ctx-size", 2048, "--max-seqs", 1, "--http-timeout", 2, "--sse-ping", 3)
    # The blocker holds the only sequence slot for QUEUE_S seconds (its own deadline ends it).
    blocker = {}

    def block():
        blocker["r"] = srv.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 2000,
                                                    "ignore_eos": True, "timeout": QUEUE_S}, timeout=QUEUE_S + 60)

    tb = threading.Thread(target=block)
    tb.start()
    time.sleep(0.5)
    # A streamed and a non-streamed request queue behind it, far longer than --http-timeout.
    plain = {}

    def queued_plain():
        plain["r"] = srv.post("/v1/completions", {"prompt": "The little dog", "max_tokens": 3}, timeout=QUEUE_S + 60)

    tp = threading.Thread(target=queued_plain)
    tp.start()
    t0 = time.time()
    c = http.client.HTTPConnection(srv.host, srv.port, timeout=QUEUE_S + 60)
    c.request("POST", "/v1/completions", json.dumps({"prompt": "Lily and Ben", "max_tokens": 3, "stream": True}),
              {"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200
    pings, data, first_data = [], [], None
    while True:
        line = r.fp.readline()
        if not line:
            break
        if line.startswith(b": ping"):
            pings.append(time.time() - t0)
        elif line.startswith(b"data: "):
            data.append(line[6:].strip())
            if first_data is None and line.strip() != b"data: [DONE]":
                first_data = time.time() - t0
    c.close()
    total = time.time() - t0
    tb.join(QUEUE_S + 60)
    tp.join(QUEUE_S + 60)
    print("stream: %d pings, first data after %.1f s, done after %.1f s" % (len(pings), first_data or -1, total))
    assert data and data[-1] == b"[DONE]", (data, srv.read_log())
    assert total > 4, "the stream did not wait behind the blocker (%.1f s): the test proves nothing" % total
    assert len(pings) >= int(total) // 3 - 1, pings  # one per 3 s of silence, generously
    assert blocker["r"][0] == 200 and plain["r"][0] == 200, (blocker, plain)
    assert plain["r"][2]["usage"]["completion_tokens"] == 3, plain
    assert "finish=cancelled" not in srv.read_log()


# --- 2. slowloris and descriptor exhaustion ------------------------------------------------------------------------

def test_slowloris_total_deadline(make_server):
    deadline = 3.0
    srv = make_server(STORIES, "--ctx-size", 512, "--request-read-timeout", deadline, "--http-timeout", 10)
    n = 200
    socks = [socket.create_connection((srv.host, srv.port)) for _ in range(n)]
    request = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" * 50
    t0 = time.time()
    closed = {}  # index -> (seconds after the first byte, what it got)
    got = {i: b"" for i in range(n)}
    stop = threading.Event()
    lat = []

    def normal_client():  # normal traffic on other connections meanwhile
        while not stop.is_set():
            t = time.perf_counter()
            ok_request(srv)
            lat.append(time.perf_counter() - t)
            time.sleep(0.05)

    tn = threading.Thread(target=normal_client)
    tn.start()
    try:
        k = 0
        while len(closed) < n and time.time() - t0 < deadline + 8:
            for i, s in enumerate(socks):  # one byte a second each
                if i in closed:
                    continue
                try:
                    s.send(request[k:k + 1], socket.MSG_DONTWAIT)
                except OSError:
                    pass
            k += 1
            t_round = time.time()
            while time.time() - t_round < 1.0:
                for i, s in enumerate(socks):
                    if i in closed:
                        continue
                    try:
                        d = s.recv(4096, socket.MSG_DONTWAIT)
                    except BlockingIOError:
                        continue
                    except OSError:
                        d = b""
                    got[i] += d
                    if not d or d.endswith(b"}"):
                        closed[i] = (time.time() - t0, got[i])
                time.sleep(0.05)
    finally:
        stop.set()
        tn.join(60)
        for s in socks:
            s.close()
    times = sorted(t for t, _ in closed.values())
    print("slowloris: %d/%d closed, after %.2f..%.2f s (deadline %.1f s)" % (
        len(closed), n, times[0] if times else -1, times[-1] if times else -1, deadline))
    print("normal requests meanwhile: %d, latency p50 %.1f ms, max %.1f ms" % (
        len(lat), 1000 * statistics.median(lat), 1000 * max(lat)))
    assert len(closed) == n, "%d slowloris connections still open after %.0f s" % (n - len(closed), deadline + 8)
    assert times[-1] < deadline + 3, times[-10:]
    for _, raw in closed.values():
        check_json_error(raw, 408)
    assert len(lat) >= 5 and max(lat) < 2.0, lat
    ok_request(srv)


def test_partial_body_gets_408(make_server):
    srv = make_server(STORIES, "--ctx-size", 512, "--request-read-timeout", 1)
    s = socket.create_connection((srv.host, srv.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\"")
    t0 = time.time()
    raw = read_all(s, 10)
    s.close()
    e = check_json_error(raw, 408)
    assert e["code"] == "request_timeout", e
    assert time.time() - t0 < 4
    ok_request(srv)


def limit_wrapper(tmp_path, monkeypatch, ulimits):
    """Servers started after this run under the shell's `ulimit` commands `ulimits`."""
    wrapper = tmp_path / "tachyon-limited"
    wrapper.write_text('#!/bin/sh\n%s || exit 99\nexec "%s" "$@"\n' % (ulimits, conftest.BIN))
    wrapper.chmod(0o755)
    monkeypatch.setattr(conftest, "BIN", str(wrapper))


def nofile_soft(pid):
    with open("/proc/%d/limits" % pid) as f:
        return [int(l.split()[3]) for l in f if l.startswith("Max open files")][0]


@pytest.fixture
def low_nofile(tmp_path, monkeypatch):
    """Servers started in this test run with a descriptor limit of 64 (soft and hard)."""
    limit_wrapper(tmp_path, monkeypatch, "ulimit -n 64")


def test_nofile_raised_to_hard_limit(tmp_path, monkeypatch, make_server):
    limit_wrapper(tmp_path, monkeypatch, "ulimit -S -n 64 && ulimit -H -n 4096")
    srv = make_server(STORIES, "--ctx-size", 512)
    assert nofile_soft(srv.proc.pid) == 4096


def test_descriptor_exhaustion_no_spin(low_nofile, make_server):
    srv = make_server(STORIES, "--ctx-size", 512, "--max-connections", 1000, "--http-timeout", 60)
    assert nofile_soft(srv.proc.pid) == 64, "limit not applied"
    lines0 = len(log_lines(srv))
    socks = []
    for _ in range(120):  # more than the server has descriptors: the rest wait in the listen backlog
        socks.append(socket.create_connection((srv.host, srv.port), timeout=5))
    time.sleep(0.5)
    cpu0 = cpu_seconds(srv.proc.pid)
    time.sleep(3.0)
    cpu = cpu_seconds(srv.proc.pid) - cpu0
    lines = log_lines(srv)[lines0:]
    print("over 3 s at the descriptor limit: %.2f s CPU, %d log lines" % (cpu, len(lines)))
    print("\n".join(lines[:6]))
    assert cpu < 1.0, "the server spins at the descriptor limit (%.2f s CPU in 3 s)" % cpu
    assert any("accept failed" in l for l in lines), lines[:20]
    assert len(lines) < 60, lines[:60]
    for s in socks:
        s.close()
    t0 = time.time()
    while True:  # the backlog drains (each of those connections is closed already)
        try:
            ok_request(srv, timeout=10)
            break
        except (OSError, AssertionError):
            assert time.time() - t0 < 20, srv.read_log()
            time.sleep(0.2)
    for _ in range(5):
        ok_request(srv)
    st, _, _ = srv.request("GET", "/health")
    assert st == 200


def test_max_connections_refused_with_503(make_server):
    srv = make_server(STORIES, "--ctx-size", 512, "--max-connections", 3)
    held = [socket.create_connection((srv.host, srv.port)) for _ in range(3)]
    time.sleep(0.2)
    s = socket.create_connection((srv.host, srv.port))
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    raw = read_all(s, 5)
    s.close()
    e = check_json_error(raw, 503)
    assert b"Retry-After: 1" in raw, raw
    assert e["type"] == "server_error", e
    for h in held:
        h.close()
    time.sleep(0.2)
    ok_request(srv)
    assert "connection refused" in srv.read_log()


# --- 3. buffered bodies and large prompts ---------------------------------------------------------------------------

def test_body_buffer_cap(make_server):
    cap_mib, body_mib, n = 8, 2, 40  # 40 connections holding 2 MiB each would buffer 80 MiB
    srv = make_server(STORIES, "--ctx-size", 512, "--max-body", 4 << 20, "--max-body-buffer", cap_mib << 20)
    ok_request(srv)
    rss0 = rss_mib(srv.proc.pid)
    socks = []
    chunk = b"x" * (body_mib << 20)
    for _ in range(n):
        s = socket.create_connection((srv.host, srv.port))
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % ((body_mib << 20) + 10))
        s.settimeout(10)
        try:
            s.sendall(chunk)  # nearly all of the body; the last 10 bytes never come
        except OSError:
            pass  # refused (and closed) while sending
        socks.append(s)
    time.sleep(0.5)
    rss = rss_mib(srv.proc.pid)
    refused = 0
    for s in socks:
        raw = read_all(s, 0.2)
        if raw:
            check_json_error(raw, 503)
            refused += 1
    print("body cap %d MiB: %d of %d connections refused, RSS %.0f -> %.0f MiB" % (cap_mib, refused, n, rss0, rss))
    assert refused >= n - 2 * cap_mib // body_mib, refused
    assert rss - rss0 < 2 * cap_mib + 24, (rss0, rss)
    for s in socks:
        s.close()
    ok_request(srv)


def test_large_prompt_tokenized_off_loop(make_server):
    model = SMOL if os.path.exists(SMOL) else STORIES
    # one compute thread: a core is left for the network side (on 2 cores, a worker competing with a 2-thread
    # compute pool slows every step, which is CPU contention, not a stalled loop)
    srv = make_server(model, "--ctx-size", 512, "--max-body", 16 << 20, "--threads", 1)
    words = " ".join("w%d" % (i % 9973) for i in range(40000))
    big = json.dumps({"prompt": (words + " ") * 30, "max_tokens": 2})  # ~7 MB
    assert len(big) > 6 << 20
    times = []
    done = threading.Event()

    def stream():
        c = http.client.HTTPConnection(srv.host, srv.port, timeout=120)
        c.request("POST", "/v1/completions", json.dumps({"prompt": "Story: once upon a time", "max_tokens": 400,
                                                          "ignore_eos": True, "stream": True}),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        while not done.is_set():
            line = r.fp.readline()
            if not line:
                break
            if line.startswith(b"data: ") and b"[DONE]" not in line:
                times.append(time.perf_counter())
        c.close()

    ts = threading.Thread(target=stream)
    ts.start()
    while len(times) < 5:
        time.sleep(0.01)
    t_big = time.perf_counter()
    results = []
    for _ in range(2):
        results.append(srv.request("POST", "/v1/completions", big, timeout=120))
    t_big_end = time.perf_counter()
    time.sleep(0.2)
    done.set()
    ts.join(120)
    gaps = [b - a for a, b in zip(times, times[1:]) if a >= t_big - 0.05 and b <= t_big_end + 0.05]
    print("2 prompts of %.1f MB: %.2f s; stream gaps meanwhile: %d, median %.1f ms, max %.1f ms" % (
        len(big) / 1e6, t_big_end - t_big, len(gaps), 1000 * statistics.median(gaps), 1000 * max(gaps)))
    for st, _, data in results:
        assert st == 400 and b"context_length_exceeded" in data, (st, data[:300])
    assert len(gaps) >= 3, "the stream ended before the big prompts were tokenized"
    assert max(gaps) < 0.5, "the stream stalled %.2f s while a big prompt was tokenized" % max(gaps)


# --- 4. HEAD and errors from the HTTP layer --------------------------------------------------------------------------

def test_head_keepalive(stories):
    s = socket.create_connection((stories.host, stories.port))
    s.sendall(b"HEAD /health HTTP/1.1\r\nHost: x\r\n\r\nHEAD /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
              b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    raw = read_all(s, 10)
    s.close()
    parts = raw.split(b"HTTP/1.1 ")
    assert len(parts) == 4, raw  # "", 3 responses
    get_len = None
    for p, method in zip(parts[1:], ["HEAD", "HEAD", "GET"]):
        head, _, body = p.partition(b"\r\n\r\n")
        assert head.startswith(b"200"), p
        clen = [l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
        assert len(clen) == 1, head
        n = int(clen[0].split(b":")[1])
        if method == "HEAD":
            assert body == b"" and n > 0, p
        else:
            assert body == b'{"status":"ok"}' and n == len(body), p
            get_len = n
    h0 = parts[1].partition(b"\r\n\r\n")[0]
    assert int([l for l in h0.split(b"\r\n") if l.lower().startswith(b"content-length:")][0].split(b":")[1]) == get_len


@pytest.mark.parametrize("name,data,status", [
    ("body too large", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\nxxxx", 413),
    ("unknown method", b"BREW /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n", 501),
    ("malformed request line", b"garbage\r\n\r\n", 400),
    ("malformed header", b"GET /health HTTP/1.1\r\nno colon here\r\n\r\n", 400),
    ("bad content-length", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", 400),
], ids=lambda x: x if isinstance(x, str) else None)
def test_http_layer_errors_are_json(stories, name, data, status):
    s = socket.create_connection((stories.host, stories.port))
    s.sendall(data)
    raw = read_all(s, 10)
    s.close()
    assert b"<HTML" not in raw.upper(), raw
    check_json_error(raw, status)
    ok_request(stories)
