"""API keys, tenants, rate limits, fair share and prefix-cache isolation, through the real server
with the official openai client and raw HTTP on loopback. No timing thresholds: rate limits are set so a
bucket cannot refill within the test (rpm/tpm refill per minute), and fair share is checked by the order in
which requests finish."""
import json
import os
import signal
import threading
import time

import openai
import pytest

from conftest import SMOL, STORIES

LONG = ("Once upon a time there was a little girl named Lily. She liked to play in the park with her dog, "
        "and every day she found a new stick under the big old tree next to the pond where the ducks swam.")


def keyfile(tmp_path, text, name="keys.txt"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def client(srv, key):
    return openai.OpenAI(base_url=srv.base + "/v1", api_key=key, max_retries=0)


def bearer(key):
    return {"Authorization": "Bearer " + key}


def check_error(e, status, code, typ=None):
    assert e.status_code == status, e
    body = e.response.json()
    assert set(body) == {"error"}, body
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"], err
    assert err["code"] == code, err
    if typ:
        assert err["type"] == typ, err
    return err


def completion(srv, key, prompt=LONG, max_tokens=4, **kw):
    return client(srv, key).completions.create(model="x", prompt=prompt, max_tokens=max_tokens, temperature=0, **kw)


def cached(r):
    return r.usage.prompt_tokens_details.cached_tokens


def wait_for(cond, what, limit=30):
    t0 = time.time()
    while not cond():
        assert time.time() - t0 < limit, "timed out waiting for " + what
        time.sleep(0.02)


# --- 401 -----------------------------------------------------------------------------------------------

def test_401_shape_and_legacy_key(make_server, tmp_path):
    kf = keyfile(tmp_path, "# tenants\nsk-a acme\nsk-b beta tpm=100000\n")
    srv = make_server(STORIES, "--served-model-name", "x", "--ctx-size", 256, "--api-key-file", kf, "--api-key", "legacy")
    for bad in ["sk-c", "sk-", "SK-A", "sk-ax", "x" * 300]:
        with pytest.raises(openai.AuthenticationError) as ex:
            completion(srv, bad)
        check_error(ex.value, 401, "invalid_api_key", "invalid_request_error")
        assert ex.value.response.headers.get("WWW-Authenticate") == "Bearer"
    st, _, _ = srv.request("GET", "/v1/models")  # no header at all
    assert st == 401
    for key in ["sk-a", "sk-b", "legacy"]:  # --api-key keeps working, as tenant "default"
        assert completion(srv, key).choices[0].text is not None
    st, _, data = srv.request("GET", "/stats", headers=bearer("sk-a"))
    ten = json.loads(data)["tenants"]
    assert ten["acme"]["requests"] == 1 and ten["beta"]["requests"] == 1 and ten["default"]["requests"] == 1, ten
    m = srv.request("GET", "/metrics", headers=bearer("sk-a"))[2].decode()
    assert 'tachyon:tenant_requests_total{tenant="acme"} 1' in m, m[-2000:]
    assert 'tachyon:tenant_prompt_tokens_total{tenant="beta"}' in m


def test_bad_key_file_refuses_to_start(tmp_path):
    import subprocess
    from conftest import BIN
    kf = keyfile(tmp_path, "sk-a acme\nsk-b beta rpm=fast\n")
    p = subprocess.run([BIN, "serve", "-m", STORIES, "--port", "0", "--api-key-file", kf], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode != 0
    assert "line 2: rpm must be an integer" in p.stderr, p.stderr


# --- 429 -----------------------------------------------------------------------------------------------

def test_429_requests_per_minute(make_server, tmp_path):
    kf = keyfile(tmp_path, "sk-a acme rpm=2\nsk-b beta\n")
    srv = make_server(STORIES, "--served-model-name", "x", "--ctx-size", 256, "--api-key-file", kf)
    c = client(srv, "sk-a")
    r = c.completions.with_raw_response.create(model="x", prompt="Hi", max_tokens=2)
    h = r.headers
    assert h["x-ratelimit-limit-requests"] == "2" and h["x-ratelimit-remaining-requests"] == "1", dict(h)
    assert h["x-ratelimit-reset-requests"].endswith("s")
    assert "x-ratelimit-limit-tokens" not in h  # no tpm for this tenant
    r.parse()
    completion(srv, "sk-a")
    with pytest.raises(openai.RateLimitError) as ex:
        completion(srv, "sk-a")
    err = check_error(ex.value, 429, "rate_limit_exceeded", "requests")
    assert "acme" in err["message"]
    h = ex.value.response.headers
    assert 1 <= int(h["Retry-After"]) <= 60, dict(h)
    assert int(h["retry-after-ms"]) > 0
    assert h["x-ratelimit-limit-requests"] == "2" and h["x-ratelimit-remaining-requests"] == "0"
    assert h["x-ratelimit-reset-requests"].endswith("s")
    # streams are refused the same way, before any SSE byte
    st, hh, data = srv.request("POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 2, "stream": True},
                               headers=bearer("sk-a"))
    assert st == 429 and "Retry-After" in hh and json.loads(data)["error"]["code"] == "rate_limit_exceeded"
    # another tenant is unaffected
    assert completion(srv, "sk-b").usage.completion_tokens >= 1
    st, _, data = srv.request("GET", "/stats", headers=bearer("sk-b"))
    assert json.loads(data)["tenants"]["acme"]["rate_limited"] == 2
    m = srv.request("GET", "/metrics", headers=bearer("sk-b"))[2].decode()
    assert 'tachyon:tenant_rate_limited_total{tenant="acme"} 2' in m


def test_embeddings_count_against_the_tenant(make_server, tmp_path):
    # /v1/embeddings takes from the same buckets as completions (a tenant cannot bypass its limits there)
    kf = keyfile(tmp_path, "sk-a acme rpm=2\nsk-b beta tpm=20\n")
    srv = make_server(STORIES, "--served-model-name", "x", "--ctx-size", 256, "--api-key-file", kf)
    assert len(client(srv, "sk-a").embeddings.create(model="x", input="Once upon a time").data) == 1
    completion(srv, "sk-a")  # the second request of the minute
    with pytest.raises(openai.RateLimitError) as ex:
        client(srv, "sk-a").embeddings.create(model="x", input="Once upon a time")
    check_error(ex.value, 429, "rate_limit_exceeded", "requests")
    assert ex.value.response.headers["x-ratelimit-remaining-requests"] == "0"
    with pytest.raises(openai.RateLimitError) as ex:  # tokens: 8 inputs of ~5 tokens > 20 per minute
        client(srv, "sk-b").embeddings.create(model="x", input=["Once upon a time"] * 8)
    check_error(ex.value, 429, "rate_limit_exceeded", "tokens")
    with pytest.raises(openai.AuthenticationError):
        client(srv, "sk-zz").embeddings.create(model="x", input="Hi")
    st, _, data = srv.request("GET", "/stats", headers=bearer("sk-b"))
    ten = json.loads(data)["tenants"]
    assert ten["acme"]["requests"] == 2 and ten["acme"]["prompt_tokens"] > 0 and ten["acme"]["in_flight"] == 0, ten


def test_429_tokens_per_minute_and_refund(make_server, tmp_path):
    kf = keyfile(tmp_path, "sk-a acme tpm=300\n")
    srv = make_server(STORIES, "--served-model-name", "x", "--ctx-size", 512, "--api-key-file", kf)
    c = client(srv, "sk-a")
    # 3-token prompt + max_tokens 200 reserved; it stops early (stop string / eos) or at 200: the unused
    # part comes back, so remaining afterwards = 300 - prompt - completion tokens (up to the refill)
    r = c.completions.with_raw_response.create(model="x", prompt="Hi there", max_tokens=200, temperature=0,
                                               stop=["."])
    h = r.headers
    body = r.parse()
    assert h["x-ratelimit-limit-tokens"] == "300"
    assert int(h["x-ratelimit-remaining-tokens"]) <= 300 - 200 - body.usage.prompt_tokens + 1, dict(h)
    st, _, data = srv.request("GET", "/stats", headers=bearer("sk-a"))
    rem = json.loads(data)["tenants"]["acme"]["remaining_tokens"]
    used = body.usage.prompt_tokens + body.usage.completion_tokens
    assert 300 - used - 1 <= rem <= 300 - used + 20, (rem, used)  # refunded (+ a little refill)
    # larger than the bucket can ever hold: 429 naming the tokens limit
    with pytest.raises(openai.RateLimitError) as ex:
        c.completions.create(model="x", prompt="Hi", max_tokens=320)
    err = check_error(ex.value, 429, "rate_limit_exceeded", "tokens")
    assert "too large" in err["message"]
    # fits the cap but not what is left now: 429 with Retry-After
    c.completions.create(model="x", prompt="Hi", max_tokens=min(rem - 5, 240), temperature=0, extra_body={"ignore_eos": True})
    with pytest.raises(openai.RateLimitError) as ex:
        c.completions.create(model="x", prompt="Hi", max_tokens=200)
    check_error(ex.value, 429, "rate_limit_exceeded", "tokens")
    h = ex.value.response.headers
    assert int(h["Retry-After"]) >= 1 and h["x-ratelimit-limit-tokens"] == "300", dict(h)


# --- SIGHUP reload -------------------------------------------------------------------------------------

def test_sighup_reload(make_server, tmp_path):
    if not os.path.exists(SMOL):
        pytest.skip("SmolLM2 model not present")
    kf = keyfile(tmp_path, "sk-a acme\nsk-b beta\n")
    # SmolLM2 is slow enough that a 400-token stream is still running while the keys are reloaded
    srv = make_server(SMOL, "--served-model-name", "x", "--ctx-size", 1024, "--api-key-file", kf)
    stream = client(srv, "sk-a").chat.completions.create(
        model="x", messages=[{"role": "user", "content": "Count to one thousand."}], max_tokens=400,
        temperature=0, stream=True, stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
    it = iter(stream)
    first = next(it)
    assert first.choices[0].delta.role == "assistant"

    def stats():
        return json.loads(srv.request("GET", "/stats", headers=bearer("sk-a"))[2])

    with open(kf, "w") as f:
        f.write("sk-a acme\nsk-c carol rpm=100\n")  # sk-b removed, sk-c added
    srv.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: srv.request("GET", "/v1/models", headers=bearer("sk-c"))[0] == 200, "sk-c to work")
    assert stats()["tenants"]["acme"]["in_flight"] == 1, "the stream ended before the reload: test proves nothing"
    with pytest.raises(openai.AuthenticationError):
        completion(srv, "sk-b")
    # a bad file keeps the old keys and says why
    with open(kf, "w") as f:
        f.write("sk-a acme\nsk-d dave share=-1\n")
    srv.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "keeping the previous API keys" in srv.read_log(), "the reload error in the log")
    assert "line 2: share must be a number" in srv.read_log()
    assert srv.request("GET", "/v1/models", headers=bearer("sk-c"))[0] == 200
    assert srv.request("GET", "/v1/models", headers=bearer("sk-d"))[0] == 401
    # the in-flight stream survived both reloads
    rest = list(it)
    assert rest[-1].usage.completion_tokens == 400, rest[-1]
    assert [c.choices[0].finish_reason for c in rest if c.choices and c.choices[0].finish_reason] == ["length"]
    assert completion(srv, "sk-a").usage.completion_tokens >= 1


# --- prefix-cache isolation ----------------------------------------------------------------------------

def test_tenant_never_hits_another_tenants_cache(make_server, tmp_path):
    kf = keyfile(tmp_path, "sk-a acme\nsk-b beta\nsk-a2 acme\n")
    srv = make_server(STORIES, "--served-model-name", "x", "--ctx-size", 512, "--api-key-file", kf)
    a1 = completion(srv, "sk-a")
    assert a1.usage.prompt_tokens >= 40
    assert cached(completion(srv, "sk-a")) > 0  # A hits its own prompt
    assert cached(completion(srv, "sk-a2")) > 0  # another key of the same tenant shares it
    assert cached(completion(srv, "sk-b")) == 0  # B never sees A's blocks ...
    b = completion(srv, "sk-b")
    assert cached(b) > 0  # ... only its own (second request of B)
    # a longer prompt sharing A's prefix: still nothing for B beyond what B itself computed
    c = completion(srv, "sk-b", prompt=LONG + " The end.")
    assert cached(c) <= cached(b)
    st, _, data = srv.request("GET", "/stats", headers=bearer("sk-a"))
    assert json.loads(data)["tenants"]["beta"]["requests"] == 3


def test_tenant_b_first_request_misses(make_server, tmp_path):
    """The strict form: B's very first request with A's warm prompt gets cached_tokens == 0."""
    kf = keyfile(tmp_path, "sk-a acme\nsk-b beta\n")
    srv = make_server(STORIES, "--served-model-name", "x", "--ctx-size", 512, "--api-key-file", kf)
    completion(srv, "sk-a")
    assert cached(completion(srv, "sk-a")) > 0
    assert cached(completion(srv, "sk-b")) == 0
    assert cached(completion(srv, "sk-a")) > 0


def test_cache_salt(make_server):
    srv = make_server(STORIES, "--served-model-name", "x", "--ctx-size", 512)
    c = client(srv, "unused")

    def run(salt=None):
        return cached(c.completions.create(model="x", prompt=LONG, max_tokens=2, temperature=0,
                                           extra_body={"cache_salt": salt} if salt else None))

    assert run("s1") == 0
    assert run("s1") > 0
    assert run("s2") == 0  # another salt: no hit
    assert run() == 0      # unsalted requests never see salted blocks
    assert run() > 0       # and share among themselves
    with pytest.raises(openai.BadRequestError) as ex:
        run(salt=5)
    assert ex.value.response.json()["error"]["param"] == "cache_salt"


# --- fair share ----------------------------------------------------------------------------------------

def test_fair_share_flooding_tenant_leaves_slot(make_server, tmp_path, monkeypatch):
    # every step takes >= 15 ms (TACHYON_FAULT hook), so each of A's requests runs >= 1.8 s: the flood is
    # still queued when it is polled and B arrives long before A's first wave can end, on any CPU speed
    monkeypatch.setenv("TACHYON_FAULT", "step_sleep_ms:15:0")
    kf = keyfile(tmp_path, "sk-a acme\nsk-b beta\n")
    srv = make_server(STORIES, "--served-model-name", "x", "--ctx-size", 512, "--max-seqs", 2, "--api-key-file", kf)
    done = []  # (key, index) in the order responses completed
    lock = threading.Lock()

    texts = []

    def go(key, i):
        r = completion(srv, key, prompt="Once upon a time", max_tokens=120, extra_body={"ignore_eos": True})
        with lock:
            done.append((key, i))
            texts.append(r.choices[0].text)

    def waiting():
        return json.loads(srv.request("GET", "/stats", headers=bearer("sk-a"))[2])["waiting"]

    ts = [threading.Thread(target=go, args=("sk-a", i)) for i in range(6)]
    for t in ts:
        t.start()
    wait_for(lambda: waiting() >= 4, "A's flood to queue", 60)
    tb = threading.Thread(target=go, args=("sk-b", 0))
    tb.start()
    wait_for(lambda: waiting() >= 5, "B to queue", 60)
    for t in ts + [tb]:
        t.join(120)
    order = [k for k, _ in done]
    assert len(order) == 7, order
    after_b = order[order.index("sk-b") + 1:]
    # FIFO would run B last (after all 6 of A); fair share gives B the next free slot: A's last waves follow
    assert after_b.count("sk-a") >= 2, order
    # B took its slot by preempting one of A's requests (none of A's can have ended yet: slow steps);
    # greedy output is the same for all (the preempted one is recomputed)
    st, _, data = srv.request("GET", "/stats", headers=bearer("sk-a"))
    assert json.loads(data)["preemptions"] >= 1
    assert len(set(texts)) == 1, texts


# --- bench-serve per-tenant breakdown ------------------------------------------------------------------

def test_bench_serve_per_tenant(make_server, tmp_path):
    from benchutil import bench
    kf = keyfile(tmp_path, "sk-a acme\nsk-b beta rpm=3\n")
    srv = make_server(STORIES, "--served-model-name", "x", "--ctx-size", 256, "--api-key-file", kf)
    p, doc = bench(tmp_path, srv.base, "--num-requests", 16, "--input-len", 16, "--output-len", 8, "--model", "x",
                   "--endpoint", "completions", "--tenant", "sk-a:1", "--tenant", "sk-b:1")
    ten = doc["tenants"]
    assert set(ten) == {"t1 (sk-a)", "t2 (sk-b)"}, ten
    a, b = ten["t1 (sk-a)"], ten["t2 (sk-b)"]
    assert a["completed"] + a["failed"] + b["completed"] + b["failed"] == 16
    assert 5 <= a["completed"] + a["failed"] <= 11  # split close to 1:1
    assert a["failed"] == 0 and a["completed"] > 0
    assert b["completed"] == 3 and b["http_429"] == b["failed"] > 0, b  # rpm=3: the rest get 429
    assert {r["tenant"] for r in doc["requests"]} == {0, 1}
    assert "Per tenant" in p.stdout and "t2 (sk-b)" in p.stdout
