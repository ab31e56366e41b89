"""Access control and admission policy of `tachyon serve` against hostile or careless clients: the API key
guards every route but /health (and the dashboard shell), only served model names are accepted, the Host
header is checked (DNS rebinding), POST bodies must be JSON (no cross-site "simple requests"), CORS echoes
listed origins only; --max-queue bounds waiting work only; the real per-request context is reported and
enforced; shutdown cuts are errors, not `length`; flag errors name their flag; log lines carry ISO 8601
times. All on loopback with stories260K."""
import concurrent.futures as cf
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import BIN, ROOT, STORIES


def raw(srv, method, path, body=None, headers=None, timeout=30):
    """One request with exactly the given headers (http.client adds Host unless given, and Content-Length)."""
    c = http.client.HTTPConnection(srv.host, srv.port, timeout=timeout)
    try:
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        c.close()


def check_error(st, data, status, code=None):
    j = json.loads(data) if isinstance(data, (bytes, str)) else data
    assert st == status, (st, j)
    e = j["error"]
    assert set(e) == {"message", "type", "param", "code"} and e["message"], e
    if code is not None:
        assert e["code"] == code, e
    return e


JSON = {"Content-Type": "application/json"}
SMALL = {"prompt": "Once upon a time", "max_tokens": 2, "temperature": 0}


# --- 5. access control -------------------------------------------------------------------------------

def test_api_key_guards_every_route_but_health(make_server):
    srv = make_server(STORIES, "--api-key", "sekrit", "--ctx-size", 256)
    auth = {"Authorization": "Bearer sekrit"}
    for method, path, body in [("GET", "/stats", None), ("GET", "/metrics", None), ("GET", "/v1/models", None),
                               ("POST", "/tokenize", {"content": "hi"}), ("POST", "/v1/completions", SMALL)]:
        st, h, data = raw(srv, method, path, body, JSON)
        check_error(st, data, 401, "invalid_api_key")
        assert h.get("WWW-Authenticate") == "Bearer"
        st, _, data = raw(srv, method, path, body, dict(JSON, **auth))
        assert st == 200, (path, data[:300])
    assert raw(srv, "GET", "/health")[0] == 200
    st, h, page = raw(srv, "GET", "/")  # the dashboard shell (no server data) loads; it asks for the key
    assert st == 200 and h["Content-Type"].startswith("text/html") and b"apikey" in page

    pub = make_server(STORIES, "--api-key", "sekrit", "--ctx-size", 256, "--public-routes", "/metrics,/stats")
    assert raw(pub, "GET", "/metrics")[0] == 200
    assert raw(pub, "GET", "/stats")[0] == 200
    check_error(*raw(pub, "GET", "/v1/models")[::2], 401)


def test_model_path_is_not_a_model_name(stories):
    st, _, data = raw(stories, "POST", "/v1/completions", dict(SMALL, model=STORIES), JSON)
    check_error(st, data, 404, "model_not_found")
    st, _, data = raw(stories, "POST", "/v1/completions", dict(SMALL, model=os.path.abspath(STORIES)), JSON)
    check_error(st, data, 404, "model_not_found")
    for name in ["stories260K", "stories260K.gguf"]:  # served name and file basename
        st, _, data = raw(stories, "POST", "/v1/completions", dict(SMALL, model=name), JSON)
        assert st == 200, (name, data)


def test_host_header_checked(make_server, stories):
    port = stories.port
    for host in ["evil.example", "evil.example:%d" % port, "127.0.0.1.evil.example", "localhost.evil.example:80"]:
        for method, path, body in [("GET", "/v1/models", None), ("POST", "/v1/completions", SMALL),
                                   ("GET", "/", None)]:
            st, _, data = raw(stories, method, path, body, dict(JSON, Host=host))
            check_error(st, data, 403, "host_not_allowed")
    for host in ["127.0.0.1:%d" % port, "localhost:%d" % port, "LOCALHOST", "[::1]:%d" % port, "localhost."]:
        st, _, data = raw(stories, "POST", "/v1/completions", SMALL, dict(JSON, Host=host))
        assert st == 200, (host, data)
    srv = make_server(STORIES, "--ctx-size", 256, "--allowed-hosts", "tachyon.internal, other.example")
    assert raw(srv, "GET", "/v1/models", headers={"Host": "tachyon.internal:8080"})[0] == 200
    assert raw(srv, "GET", "/v1/models", headers={"Host": "other.example"})[0] == 200
    assert raw(srv, "GET", "/v1/models", headers={"Host": "localhost"})[0] == 200
    assert raw(srv, "GET", "/v1/models", headers={"Host": "evil.example"})[0] == 403
    srv = make_server(STORIES, "--ctx-size", 256, "--allowed-hosts", "*")
    assert raw(srv, "GET", "/v1/models", headers={"Host": "anything.example"})[0] == 200


def test_post_needs_json_content_type(stories):
    body = json.dumps(SMALL)
    for ct in [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
               "application/jsonp"]:
        h = {"Content-Type": ct} if ct else {}
        for path, b in [("/v1/completions", body), ("/v1/chat/completions", body), ("/tokenize", '{"content":"x"}')]:
            st, _, data = raw(stories, "POST", path, b, h)
            check_error(st, data, 415, "unsupported_media_type")
    for ct in ["application/json", "application/json; charset=utf-8", "Application/JSON"]:
        st, _, data = raw(stories, "POST", "/v1/completions", body, {"Content-Type": ct})
        assert st == 200, (ct, data)


def test_cors_origin_list(make_server):
    srv = make_server(STORIES, "--ctx-size", 256, "--cors", "http://a.example,http://b.example:3000")
    pre = {"Origin": "http://a.example", "Access-Control-Request-Method": "POST",
           "Access-Control-Request-Headers": "content-type, authorization"}
    st, h, _ = raw(srv, "OPTIONS", "/v1/chat/completions", headers=pre)
    assert st == 204 and h.get("Access-Control-Allow-Origin") == "http://a.example", h
    assert "Origin" in h.get("Vary", ""), h
    st, h, _ = raw(srv, "GET", "/v1/models", headers={"Origin": "http://b.example:3000"})
    assert st == 200 and h.get("Access-Control-Allow-Origin") == "http://b.example:3000", h
    st, h, _ = raw(srv, "POST", "/v1/completions", SMALL, dict(JSON, Origin="http://a.example"))
    assert st == 200 and h.get("Access-Control-Allow-Origin") == "http://a.example", h
    for origin in ["http://evil.example", "http://a.example.evil.example", "null"]:
        st, h, _ = raw(srv, "OPTIONS", "/v1/chat/completions", headers=dict(pre, Origin=origin))
        assert st == 403 and "Access-Control-Allow-Origin" not in h, (origin, h)
        st, h, _ = raw(srv, "GET", "/v1/models", headers={"Origin": origin})
        assert "Access-Control-Allow-Origin" not in h and "Origin" in h.get("Vary", ""), (origin, h)
    star = make_server(STORIES, "--ctx-size", 256, "--cors", "*")
    st, h, _ = raw(star, "GET", "/v1/models", headers={"Origin": "http://evil.example"})
    assert h.get("Access-Control-Allow-Origin") == "*", h


def test_dashboard_asks_for_the_key(make_server):
    sync_api = pytest.importorskip("playwright.sync_api")
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    if not shutil.which(chromium) and not os.path.exists(chromium):
        pytest.skip("chromium not installed")
    srv = make_server(STORIES, "--api-key", "sekrit", "--ctx-size", 256)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        page = browser.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(srv.base + "/")
        page.wait_for_function("() => document.getElementById('state').textContent.includes('API key')",
                               timeout=15000)
        page.fill("#apikey", "sekrit")
        page.dispatch_event("#apikey", "change")
        page.wait_for_function("() => document.getElementById('state').textContent === 'ready'", timeout=15000)
        page.fill("#maxtok", "16")
        page.fill("#temp", "0")
        page.fill("#prompt", "Tell me a story.")
        page.click("#send")
        page.wait_for_selector(".msg[data-done='1']", timeout=30000)
        assert page.query_selector(".msg.error") is None, page.inner_text("#messages")
        assert page.inner_text(".msg.assistant").strip()
        assert not errors, errors
        browser.close()


# --- 6. admission and limits -------------------------------------------------------------------------

def test_max_queue_bounds_waiting_work_only(make_server):
    # 16 running slots and room for 2 waiting: a burst of 18 into an idle server is all admitted (--max-queue
    # bounds the requests that wait for a slot, not those that have a free slot but are not scheduled yet).
    srv = make_server(STORIES, "--max-seqs", 16, "--max-queue", 2, "--ctx-size", 512)
    body = {"prompt": "Once upon a time", "max_tokens": 250, "ignore_eos": True, "temperature": 0}

    def burst(n):
        barrier = threading.Barrier(n)

        def go(_):
            barrier.wait()
            return srv.post("/v1/completions", body, timeout=120)

        with cf.ThreadPoolExecutor(n) as ex:
            return list(ex.map(go, range(n)))

    res = burst(18)
    assert [r[0] for r in res] == [200] * 18, [(r[0], r[2]) for r in res if r[0] != 200]
    assert all(r[2]["usage"]["completion_tokens"] == 250 for r in res)
    # beyond 16 running + 2 waiting the queue is full: 503 with Retry-After
    res = burst(34)
    codes = [r[0] for r in res]
    assert codes.count(200) >= 18 and set(codes) <= {200, 503}, codes
    assert 503 in codes, codes
    for st, h, j in res:
        if st == 503:
            assert h.get("Retry-After") and "queue full" in j["error"]["message"], (h, j)


def test_small_kv_cache_context_is_reported_and_enforced(make_server):
    # 0.05 MiB of KV holds 80 tokens of stories260K: that is the real context, whatever --ctx-size says.
    srv = make_server(STORIES, "--kv-cache-mem", 0.05, "--ctx-size", 512)
    st, _, data = raw(srv, "GET", "/v1/models")
    limit = json.loads(data)["data"][0]["max_model_len"]
    assert limit < 512, limit
    st, _, data = raw(srv, "GET", "/stats")
    assert json.loads(data)["max_model_len"] == limit
    log = srv.read_log()
    assert "ctx %d," % limit in log and "holds only %d tokens" % limit in log, log
    st, _, data = raw(srv, "POST", "/tokenize", {"content": "Once upon a time"}, JSON)
    n_prompt = len(json.loads(data)["tokens"]) + 1  # + BOS
    # a prompt over the limit: 400 context_length_exceeded naming both numbers
    st, _, data = raw(srv, "POST", "/v1/completions", {"prompt": "Once upon a time " * 40, "max_tokens": 1}, JSON)
    e = check_error(st, data, 400, "context_length_exceeded")
    assert e["param"] == "prompt" and str(limit) in e["message"], e
    assert re.search(r"resulted in \d+ tokens", e["message"]), e
    # prompt + max_tokens over the limit: refused as OpenAI does, never silently cut
    body = {"prompt": "Once upon a time", "max_tokens": limit - n_prompt + 1, "ignore_eos": True, "temperature": 0}
    st, _, data = raw(srv, "POST", "/v1/completions", body, JSON)
    e = check_error(st, data, 400, "context_length_exceeded")
    assert e["param"] == "max_tokens" and str(limit) in e["message"] and str(limit + 1) in e["message"], e
    # exactly the limit: all of max_tokens
    body["max_tokens"] = limit - n_prompt
    st, _, j = srv.post("/v1/completions", body)
    assert st == 200 and j["usage"]["completion_tokens"] == limit - n_prompt, j
    # no max_tokens: generation runs until the context is full and finishes with `length`
    del body["max_tokens"]
    st, _, j = srv.post("/v1/completions", body)
    assert st == 200 and j["choices"][0]["finish_reason"] == "length", j
    assert j["usage"]["prompt_tokens"] + j["usage"]["completion_tokens"] == limit, j["usage"]


# --- 7. shutdown, flags, logs, progress, Makefile ----------------------------------------------------

LONG = {"prompt": "Once upon a time", "max_tokens": 1900, "ignore_eos": True, "temperature": 0}


def _open_stream(srv, body):
    c = http.client.HTTPConnection(srv.host, srv.port, timeout=60)
    c.request("POST", "/v1/completions", body=json.dumps(dict(body, stream=True)), headers=JSON)
    r = c.getresponse()
    assert r.status == 200
    first = b""
    while first.count(b"\n\n") < 2:  # two whole events: the stream is generating
        d = r.read1(4096)
        assert d, first
        first += d
    assert first.startswith(b"data: "), first
    return c, r, first


def _events(raw_text):
    out = []
    for block in raw_text.split("\n\n"):
        if block.strip():
            assert block.startswith("data: "), block
            out.append(block[6:] if block[6:] == "[DONE]" else json.loads(block[6:]))
    return out


def test_shutdown_cut_is_an_error_not_length(make_server):
    srv = make_server(STORIES, "--ctx-size", 2048, "--shutdown-grace", 0)
    c, r, first = _open_stream(srv, LONG)
    srv.proc.send_signal(signal.SIGTERM)
    evs = _events((first + r.read()).decode())
    c.close()
    assert srv.proc.wait(30) == 0, srv.read_log()
    assert evs and "[DONE]" not in evs, evs[-3:]
    finishes = [ch.get("finish_reason") for e in evs if "choices" in e for ch in e["choices"]]
    assert "length" not in finishes, evs[-3:]
    err = evs[-1].get("error")
    assert err and err["code"] == "shutting_down" and set(err) == {"message", "type", "param", "code"}, evs[-3:]

    # not streamed: 503 in OpenAI's error shape
    srv = make_server(STORIES, "--ctx-size", 2048, "--shutdown-grace", 0)
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", raw(srv, "POST", "/v1/completions", LONG, JSON, 60)))
    t.start()
    t0 = time.time()
    while json.loads(raw(srv, "GET", "/stats")[2])["running"] < 1:
        assert time.time() - t0 < 20, "request never started"
        time.sleep(0.01)
    srv.proc.send_signal(signal.SIGTERM)
    t.join(60)
    st, h, data = out["r"]
    check_error(st, data, 503, "shutting_down")
    assert srv.proc.wait(30) == 0


def test_second_signal_exits_nonzero(make_server):
    srv = make_server(STORIES, "--ctx-size", 2048, "--shutdown-grace", 60)
    c, r, _ = _open_stream(srv, LONG)
    srv.proc.send_signal(signal.SIGTERM)
    t0 = time.time()
    while "draining 1 request" not in srv.read_log():
        assert time.time() - t0 < 10, srv.read_log()
        time.sleep(0.01)
    srv.proc.send_signal(signal.SIGINT)
    rc = srv.proc.wait(10)
    c.close()
    assert rc == 128 + signal.SIGINT, (rc, srv.read_log())
    assert re.search(r"second signal .* 1 in-flight request\(s\) cut", srv.read_log()), srv.read_log()


SERVE_FLAGS = ["--port", "--ctx-size", "--max-batch-tokens", "--max-seqs", "--kv-cache-mem", "--max-queue",
               "--max-queued-tokens", "--request-timeout", "--shutdown-grace", "--threads", "--itl-guard",
               "--max-body", "--http-timeout", "--kv-type", "--kv-type-k", "--kv-type-v"]
RUN_FLAGS = ["-n", "--n-predict", "-t", "--threads", "-c", "--ctx-size", "--temp", "--top-p", "--top-k", "--min-p",
             "--repeat-penalty", "--seed", "--kv-type", "--kv-type-k", "--kv-type-v"]
BENCH_FLAGS = ["-p", "--n-prompt", "-n", "--n-gen", "-t", "--threads", "-r", "--repetitions", "-b", "--batch",
               "-d", "--depth", "--kv-type", "--kv-type-k", "--kv-type-v"]


@pytest.mark.parametrize("cmd,flag", [("serve", f) for f in SERVE_FLAGS] + [("run", f) for f in RUN_FLAGS] +
                         [("bench", f) for f in BENCH_FLAGS])
def test_flag_errors_name_the_flag(cmd, flag):
    if not os.path.exists(BIN):
        pytest.skip("no binary")
    extra = {"run": ["-p", "hi"], "serve": [], "bench": []}[cmd]
    for bad in ["-5", "abc", "1e99"]:
        if flag in ("--port",) and bad == "-5":
            continue
        p = subprocess.run([BIN, cmd, "-m", STORIES] + extra + [flag, bad], capture_output=True, text=True,
                           timeout=30)
        assert p.returncode == 2, (flag, bad, p.returncode, p.stderr[-500:])
        first = p.stderr.splitlines()[0]
        # the error names this flag (by its short or long form), and no other
        assert re.search(r"(^|[ /])%s( |/|$)" % re.escape(flag), first), (flag, first)
        assert "'%s'" % bad in first, first


def test_log_timestamps_iso8601(stories):
    raw(stories, "POST", "/v1/completions", SMALL, JSON)
    lines = [l for l in open(stories.log_path).read().splitlines() if l.strip()]
    assert lines
    iso = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d{4} (debug|info|warn|error): ")
    bad = [l for l in lines if not iso.match(l)]
    assert not bad, bad[:3]
    stamp = lines[-1].split(" ")[0]
    t = time.mktime(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S"))  # local time
    assert abs(t - time.time()) < 3600, stamp


def test_progress_lines_only_redraw_on_a_tty(tmp_path):
    if not os.path.exists(BIN):
        pytest.skip("no binary")
    out = str(tmp_path / "tiny.gguf")
    cmd = [BIN, "synth", "-o", out, "--shape", "tiny", "--type", "q8_0"]
    p = subprocess.run(cmd, capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert b"\r" not in p.stderr and p.stderr.count(b"\n") >= 2, p.stderr
    assert all(l.startswith(b"synth: ") for l in p.stderr.splitlines()), p.stderr
    master, slave = os.openpty()  # a terminal: the progress line is redrawn in place
    try:
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=slave, timeout=60)
        os.close(slave)
        slave = None
        got = b""
        while True:
            try:
                d = os.read(master, 4096)
            except OSError:
                break
            if not d:
                break
            got += d
    finally:
        os.close(master)
        if slave is not None:
            os.close(slave)
    assert p.returncode == 0 and b"\rsynth: " in got, got


def test_make_serve_installs_no_test_packages():
    if not shutil.which("make"):
        pytest.skip("no make")
    env = dict(os.environ, CI="")
    for target in ["serve", "run"]:
        p = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, env=env, timeout=30)
        assert p.returncode == 0, p.stderr
        assert "libevent-dev" in p.stdout and "chromium" not in p.stdout and "clang" not in p.stdout, target
    p = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, env=env, timeout=30)
    assert p.returncode == 0 and "chromium" in p.stdout and "libevent-dev" in p.stdout, p.stdout[-500:]
