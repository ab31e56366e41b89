"""Several models in one server: stories260K ("tiny") and SmolLM2 ("smol") side by side, each with its
own engine. Routing by the request's `model` (outputs equal to each model served alone, greedy, also with both
engines busy at once), /v1/models, the 404 model_not_found shape, a router alias ("auto") and its policy, graceful
degradation under an induced overload (the test-only TACHYON_FAULT_ROUTE_TTFT makes every large model's
predicted TTFT huge: no timing involved), metrics and /stats labelled by model, and a three-model server with
Gemma 3."""
import json
import os
import threading

import openai
import pytest

from conftest import ROOT, SMOL, STORIES, Server

GEMMA = os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf")
MSGS = [{"role": "user", "content": "Tell me a story about a cat."}]
SHORT = "Once upon a time"  # 4-5 tokens in either vocabulary
LONG = "Once upon a time there was a little girl who lived in a small house near the forest with her family"


def need(*paths):
    for p in paths:
        if not os.path.exists(p):
            pytest.skip("model not present: %s" % p)


@pytest.fixture(scope="module")
def duo():
    need(STORIES, SMOL)
    s = Server("tiny=" + STORIES, "-m", "smol=" + SMOL, "--router", "auto=tiny,smol", "--route-max-prompt-tokens", 16,
               "--route-max-tokens", 16, "--kv-cache-mem", 32, "--ctx-size", 512)
    yield s
    s.stop()


def client(srv):
    return openai.OpenAI(base_url=srv.base + "/v1", api_key="unused", max_retries=0)


def solo_name(srv):
    st, _, j = srv.request("GET", "/v1/models")
    return json.loads(j)["data"][0]["id"]


def chat(srv, model, max_tokens=12, messages=MSGS):
    r = client(srv).chat.completions.with_raw_response.create(model=model, messages=messages,
                                                              max_tokens=max_tokens, temperature=0)
    return r.parse(), r.headers


def completion(srv, model, prompt=SHORT, **kw):
    kw.setdefault("max_tokens", 12)
    r = client(srv).completions.with_raw_response.create(model=model, prompt=prompt, temperature=0, **kw)
    return r.parse(), r.headers


def test_models_lists_every_model_and_router(duo):
    ids = [m.id for m in client(duo).models.list().data]
    assert ids == ["tiny", "smol", "auto"], ids
    st, _, data = duo.request("GET", "/v1/models")
    auto = [m for m in json.loads(data)["data"] if m["id"] == "auto"][0]
    assert auto["router"]["small"] == "tiny" and auto["router"]["large"] == "smol"
    assert auto["router"]["degrade"] is False  # off by default


def test_route_by_name_equals_solo(duo, stories, smol):
    for alias, solo in (("tiny", stories), ("smol", smol)):
        want_chat, _ = chat(solo, solo_name(solo))
        want_compl, _ = completion(solo, solo_name(solo))
        got_chat, h = chat(duo, alias)
        assert got_chat.model == alias and h["x-tachyon-routed-model"] == alias
        assert got_chat.choices[0].message.content == want_chat.choices[0].message.content, alias
        assert got_chat.usage.prompt_tokens == want_chat.usage.prompt_tokens
        got_compl, h = completion(duo, alias)
        assert got_compl.model == alias and h["x-tachyon-routed-model"] == alias
        assert got_compl.choices[0].text == want_compl.choices[0].text, alias
    # the two models really differ (different vocabularies): routing is not a no-op
    a, _ = completion(duo, "tiny")
    b, _ = completion(duo, "smol")
    assert a.usage.prompt_tokens != b.usage.prompt_tokens or a.choices[0].text != b.choices[0].text


def test_both_engines_at_once_equal_solo(duo, stories, smol):
    want = {m: completion(solo, solo_name(solo), max_tokens=24)[0].choices[0].text
            for m, solo in (("tiny", stories), ("smol", smol))}
    got, errs = {}, []

    def one(i, model):
        try:
            got[i] = (model, completion(duo, model, max_tokens=24)[0].choices[0].text)
        except Exception as e:  # noqa: BLE001 - reported below
            errs.append(repr(e))

    ts = [threading.Thread(target=one, args=(i, "tiny" if i % 2 else "smol")) for i in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not errs, errs
    assert len(got) == 6
    for model, text in got.values():
        assert text == want[model], model


def test_unknown_model_is_404_in_openai_shape(duo):
    with pytest.raises(openai.NotFoundError) as ei:
        client(duo).chat.completions.create(model="no-such-model", messages=MSGS, max_tokens=4)
    err = ei.value.body
    assert err["code"] == "model_not_found" and err["type"] == "invalid_request_error" and err["param"] == "model"
    assert "no-such-model" in err["message"]
    for path, body in (("/v1/completions", {"model": "gpt-4", "prompt": "x"}),
                       ("/v1/embeddings", {"model": "gpt-4", "input": "x"}),
                       ("/tokenize", {"model": "gpt-4", "content": "x"})):
        st, _, j = duo.post(path, body)
        assert st == 404 and j["error"]["code"] == "model_not_found", (path, st, j)


def test_embeddings_and_tokenize_route(duo):
    e_tiny = client(duo).embeddings.create(model="tiny", input="hello", encoding_format="float")
    e_smol = client(duo).embeddings.create(model="smol", input="hello", encoding_format="float")
    assert e_tiny.model == "tiny" and e_smol.model == "smol"
    assert len(e_tiny.data[0].embedding) == 64 and len(e_smol.data[0].embedding) == 576  # each model's width
    toks = {m: duo.post("/tokenize", {"model": m, "content": LONG})[2]["tokens"] for m in ("tiny", "smol")}
    assert toks["tiny"] != toks["smol"]
    st, _, j = duo.post("/detokenize", {"model": "smol", "tokens": toks["smol"]})
    assert st == 200 and j["content"] == LONG


def routed(srv):
    m = srv.metrics()
    return {r: m.get('tachyon:routed_requests_total{alias="auto",model="%s",reason="%s"}' % (mod, r), 0)
            for mod, r in (("tiny", "short"), ("smol", "long"), ("tiny", "degraded"))}


def test_router_policy(duo):
    before = routed(duo)
    cases = [  # (prompt, max_tokens, expected model): small only when both are small
        (SHORT, 8, "tiny"),
        (SHORT, 16, "tiny"),
        (SHORT, 17, "smol"),     # asks for more than --route-max-tokens
        (SHORT, None, "smol"),   # no max_tokens: unbounded, so large
        (LONG, 8, "smol"),       # prompt longer than --route-max-prompt-tokens (in tiny's tokens)
    ]
    for prompt, mt, want in cases:
        kw = {} if mt is None else {"max_tokens": mt}
        if mt is None:  # keep the unbounded request short in time: a stop string that ends it early
            kw["stop"] = ["."]
            kw["max_tokens"] = None
        r, h = completion(duo, "auto", prompt=prompt, **kw)
        assert h["x-tachyon-routed-model"] == want and r.model == want, (prompt, mt, h.get("x-tachyon-routed-model"))
    # a chat counts its rendered template tokens, in the small model's vocabulary (what /tokenize gives)
    n_short = 2
    for content in ("Hi", "Hi " * 40):
        msgs = [{"role": "user", "content": content}]
        n = len(duo.post("/tokenize", {"model": "tiny", "messages": msgs})[2]["tokens"])
        c, h = chat(duo, "auto", max_tokens=8, messages=msgs)
        assert c.model == ("tiny" if n <= 16 else "smol"), (n, c.model)
        n_short += n <= 16
    after = routed(duo)
    assert after["short"] - before["short"] == n_short
    assert after["long"] - before["long"] == 7 - n_short
    assert after["degraded"] == before["degraded"]  # degradation is off for this alias


def test_router_output_is_the_chosen_models(duo):
    a, _ = completion(duo, "auto", max_tokens=8)
    b, _ = completion(duo, "tiny", max_tokens=8)
    assert a.model == "tiny" and a.choices[0].text == b.choices[0].text


def test_degrade_under_induced_overload(tmp_path, monkeypatch):
    """--config routers: "auto" degrades (degrade: true, SLO 0.5 s), "strict" does not (the default). With the
    large model's predicted TTFT forced to 100 s a long request to "auto" goes to the small model and is counted
    as degraded; "strict" still waits for the large one; forced to 0.1 s (under the SLO) "auto" keeps it."""
    need(STORIES, SMOL)
    cfg = {"models": [{"alias": "smol", "path": SMOL, "threads": 1, "kv_cache_mem_mib": 32, "max_seqs": 4}],
           "routers": [{"alias": "auto", "small": "tiny", "large": "smol", "max_prompt_tokens": 8, "max_tokens": 8,
                        "degrade": True, "ttft_slo": 0.5},
                       {"alias": "strict", "small": "tiny", "large": "smol", "max_prompt_tokens": 8,
                        "max_tokens": 8}]}
    p = tmp_path / "models.json"
    p.write_text(json.dumps(cfg))
    for fault, want_auto in (("100", "tiny"), ("0.1", "smol")):
        monkeypatch.setenv("TACHYON_FAULT_ROUTE_TTFT", fault)  # test-only: the large models' predicted TTFT
        # conftest's Server always passes -m: tiny comes from it, smol from the config (listed first: the default)
        s = Server("tiny=" + STORIES, "--config", str(p), "--ctx-size", 512)
        try:
            ids = [m.id for m in client(s).models.list().data]
            assert ids == ["smol", "tiny", "auto", "strict"], ids
            r, h = completion(s, "auto", prompt=LONG, max_tokens=4)
            assert r.model == want_auto and h["x-tachyon-routed-model"] == want_auto, fault
            r, h = completion(s, "auto", prompt=SHORT, max_tokens=4)
            assert r.model == "tiny"  # short requests go to the small model whatever the load
            r, h = completion(s, "strict", prompt=LONG, max_tokens=4)
            assert r.model == "smol"  # degradation is off unless configured
            m = s.metrics()
            deg = m.get('tachyon:routed_requests_total{alias="auto",model="tiny",reason="degraded"}')
            assert deg == (1 if want_auto == "tiny" else 0), m
            assert m['tachyon:routed_requests_total{alias="strict",model="smol",reason="long"}'] == 1
        finally:
            assert s.stop() == 0


def test_metrics_and_stats_labelled_by_model(duo):
    before = duo.metrics()
    completion(duo, "smol", max_tokens=5)
    after = duo.metrics()
    key = 'tachyon:generation_tokens_total{model="%s"}'
    assert after[key % "smol"] - before[key % "smol"] == 5
    assert after[key % "tiny"] == before[key % "tiny"]
    assert 'tachyon:kv_blocks_total{model="tiny"}' in after and 'tachyon:kv_blocks_total{model="smol"}' in after
    st, _, data = duo.request("GET", "/metrics")
    text = data.decode()
    # one HELP/TYPE per family and its samples contiguous, as Prometheus expects
    assert text.count("# TYPE tachyon:generation_tokens_total ") == 1
    lines = [ln for ln in text.splitlines() if ln.startswith("tachyon:generation_tokens_total")]
    i = text.index(lines[0])
    assert text[i:].startswith("\n".join(lines))
    st, _, data = duo.request("GET", "/stats")
    stats = json.loads(data)
    assert set(stats["models"]) == {"tiny", "smol"}
    assert stats["models"]["smol"]["model"] == "smol" and stats["models"]["smol"]["max_model_len"] == 512
    assert stats["models"]["tiny"]["kv_blocks_total"] > 0


def test_single_model_unchanged(stories):
    """One plain -m: no routing header, unlabelled metrics, one model listed."""
    st, h, _ = stories.post("/v1/completions", {"prompt": SHORT, "max_tokens": 2})
    assert st == 200 and "x-tachyon-routed-model" not in {k.lower() for k in h}
    assert "tachyon:generation_tokens_total" in stories.metrics()
    st, _, data = stories.request("GET", "/stats")
    assert "models" not in json.loads(data)


def test_bad_config_is_a_clear_error(tmp_path):
    import subprocess
    from conftest import BIN
    p = tmp_path / "bad.json"
    for text, want in (('{"models": [{"path": "a.gguf", "treads": 2}]}', "unknown field 'treads'"),
                       ('{"models": [{"path": "a.gguf"}], "routers": [{"alias": "r", "small": "a", "large": "b"}]}',
                        "no model named 'b'"),
                       ("{not json", "invalid JSON")):
        p.write_text(text)
        r = subprocess.run([BIN, "serve", "--config", str(p), "--port", "0"], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 2 and want in r.stderr, (text, r.returncode, r.stderr)
    r = subprocess.run([BIN, "serve", "-m", "a=x.gguf", "-m", "a=y.gguf", "--port", "0"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2 and "two models are named 'a'" in r.stderr


def test_three_models_with_gemma(make_server):
    need(STORIES, SMOL, GEMMA)
    s = make_server("tiny=" + STORIES, "-m", "smol=" + SMOL, "-m", "gemma=" + GEMMA, "--kv-cache-mem", 32,
                    "--ctx-size", 512)
    solo = make_server(GEMMA, "--kv-cache-mem", 32, "--ctx-size", 512)
    assert [m.id for m in client(s).models.list().data] == ["tiny", "smol", "gemma"]
    want, _ = chat(solo, solo_name(solo), max_tokens=10)
    got, h = chat(s, "gemma", max_tokens=10)
    assert got.model == "gemma" and h["x-tachyon-routed-model"] == "gemma"
    assert got.choices[0].message.content == want.choices[0].message.content
    for m in ("tiny", "smol"):
        assert chat(s, m, max_tokens=4)[0].model == m


def test_dashboard_shows_each_model(duo):
    sync_api = pytest.importorskip("playwright.sync_api")
    import shutil
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    if not shutil.which(chromium) and not os.path.exists(chromium):
        pytest.skip("chromium not installed")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(duo.base + "/")
        page.wait_for_function("() => document.getElementById('modelsel').options.length == 3", timeout=15000)
        assert page.is_visible("#modelbox")
        page.wait_for_function("() => /tiny: .*smol: /.test(document.getElementById('models').textContent)",
                               timeout=15000)
        page.select_option("#modelsel", "smol")
        page.fill("#maxtok", "8")
        page.fill("#temp", "0")
        page.fill("#prompt", "Tell me a story about a dog.")
        page.click("#send")
        page.wait_for_selector(".msg.assistant[data-done='1']", timeout=30000)
        assert page.get_attribute(".msg.assistant", "data-model") == "smol"
        # the header and the charts follow the picked model
        page.wait_for_function("() => document.getElementById('model').textContent == 'smol'", timeout=15000)
        assert not errors, errors
        browser.close()


def cpus_of_threads(pid):
    out = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            st = open("/proc/%d/task/%s/status" % (pid, tid)).read()
        except OSError:
            continue
        line = [ln for ln in st.splitlines() if ln.startswith("Cpus_allowed_list:")][0]
        out.append(line.split(":", 1)[1].strip())
    return out


def test_engines_pinned_to_disjoint_cores(duo):
    """Default threads: the cores are split equally (here 1 thread each on 2+ cores): each engine's threads run
    on its own core(s), disjoint from the other's; the HTTP loop keeps every core."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("one core: engines are not pinned")
    lists = cpus_of_threads(duo.proc.pid)
    if len(allowed) == 2:  # one thread each: exactly one core each, the first model on the first core
        assert str(allowed[0]) in lists and str(allowed[1]) in lists, lists
    single = [x for x in lists if x.isdigit()]
    assert len(set(single)) >= 2, lists  # two engines on two different single cores
    assert any(not x.isdigit() for x in lists), lists  # the main (HTTP) thread keeps every core
    assert "model tiny: 1 compute thread(s) on core(s) %d" % allowed[0] in open(duo.log_path).read()


def test_not_pinned_when_threads_exceed_cores(make_server):
    need(STORIES, SMOL)
    n = len(os.sched_getaffinity(0))
    s = make_server("tiny=" + STORIES, "-m", "smol=" + SMOL, "--threads", 2 * n + 2, "--kv-cache-mem", 16,
                    "--ctx-size", 256)
    assert "engines not pinned" in s.read_log()
    lists = cpus_of_threads(s.proc.pid)
    assert len(set(lists)) == 1, lists  # every thread keeps the process's cores
    assert completion(s, "smol", max_tokens=2)[0].model == "smol"


def test_streaming_through_router_and_single_alias(duo, make_server):
    st, events, raw = duo.stream("/v1/completions", {"model": "auto", "prompt": LONG, "max_tokens": 4,
                                                     "temperature": 0, "stream": True})
    assert st == 200 and events[-1] == "[DONE]"
    assert {e["model"] for e in events[:-1]} == {"smol"}  # every chunk names the chosen model
    # one model under an alias: served under that name only (unknown names stay 404, as with one plain -m)
    s = make_server("tiny=" + STORIES, "--ctx-size", 256)
    assert [m.id for m in client(s).models.list().data] == ["tiny"]
    assert completion(s, "tiny", max_tokens=2)[0].model == "tiny"
    st, _, j = s.post("/v1/completions", {"model": "smol", "prompt": "x", "max_tokens": 1})
    assert st == 404 and j["error"]["code"] == "model_not_found"
