"""Scale-out: several tachyon replicas behind real HAProxy (deploy/haproxy.cfg, started by scripts/cluster.sh),
real Prometheus (deploy/prometheus.yml + rules.yml) and real nginx (deploy/nginx.conf), all on loopback.

Covers prefix affinity (cluster prefix-hit rate vs round-robin, same greedy outputs), failover (kill -9 a replica
during a run: nothing lost, a stream on it ends instead of hanging), draining (SIGTERM: /health 503, in-flight
requests finish, exit 0), Prometheus scraping + recording rules, nginx proxying, and the Grafana dashboard naming
only metrics that exist."""
import concurrent.futures as cf
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request

import pytest

from conftest import BIN, ROOT, SERVER_LOGS, SMOL, STORIES

CLUSTER = os.path.join(ROOT, "scripts", "cluster.sh")
DEPLOY = os.path.join(ROOT, "deploy")

pytestmark = [
    pytest.mark.skipif(shutil.which("haproxy") is None,
                       reason="haproxy is not installed (`make test` installs it: apt-get install haproxy)"),
    pytest.mark.skipif(not os.path.exists(BIN), reason="no tachyon binary at %s" % BIN),
]


# --- helpers ---------------------------------------------------------------------------------------------

def port_free(p):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", p))
            return True
        except OSError:
            return False


def free_base(n):
    """A port P with P .. P+n+2 all free (front, replicas, stats, prometheus)."""
    rng = random.Random()
    for _ in range(500):
        base = rng.randrange(20000, 60000)
        if all(port_free(base + i) for i in range(n + 3)):
            return base
    raise RuntimeError("no free port range")


def req(port, method, path, body=None, headers=None, timeout=120):
    """One request on its own connection; returns (status, headers, bytes)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        c.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def post_json(port, path, body, headers=None, timeout=120):
    st, _, data = req(port, "POST", path, body, headers, timeout)
    try:
        return st, json.loads(data)
    except ValueError:
        return st, data


def metrics(port):
    st, _, data = req(port, "GET", "/metrics", timeout=10)
    assert st == 200
    out = {}
    for line in data.decode().splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


class Cluster:
    """scripts/cluster.sh start N ... in a fresh run directory under build/; stop() stops it."""

    def __init__(self, n, model, *extra, balance="hash", prometheus=False):
        os.makedirs(os.path.join(ROOT, "build"), exist_ok=True)
        self.run_dir = tempfile.mkdtemp(prefix="cluster-", dir=os.path.join(ROOT, "build"))
        self.n = n
        self.port = free_base(n)
        cmd = [CLUSTER, "start", str(n), "--model", model, "--balance", balance, "--port", str(self.port),
               "--run-dir", self.run_dir, "--timeout", "90"] + (["--prometheus"] if prometheus else [])
        cmd += ["--"] + [str(a) for a in extra]
        SERVER_LOGS.extend(os.path.join(self.run_dir, "r%d.log" % i) for i in range(n))
        r = subprocess.run(cmd, env=dict(os.environ, TACHYON_BIN=BIN), capture_output=True, text=True, timeout=240)
        if r.returncode != 0:
            raise RuntimeError("cluster.sh start failed (%d):\n%s\n%s" % (r.returncode, r.stdout, r.stderr))
        env = {}
        for line in open(os.path.join(self.run_dir, "cluster.env")):
            k, _, v = line.strip().partition("=")
            env[k] = v.strip('"')
        self.front = int(env["FRONT_PORT"])
        self.stats = int(env["STATS_PORT"])
        self.prom = int(env["PROMETHEUS_PORT"]) if env.get("PROMETHEUS_PORT") else None
        self.replicas = [int(p) for p in env["REPLICA_PORTS"].split()]

    def pid(self, i):
        return int(open(os.path.join(self.run_dir, "r%d.pid" % i)).read())

    def exit_status(self, i, timeout):
        """The replica's exit status, recorded by cluster.sh's wrapper; None if it did not exit in time."""
        path = os.path.join(self.run_dir, "r%d.rc" % i)
        t0 = time.time()
        while time.time() - t0 < timeout:
            if os.path.exists(path) and open(path).read().strip():
                return int(open(path).read())
            time.sleep(0.1)
        return None

    def log(self, name):
        try:
            return open(os.path.join(self.run_dir, name), errors="replace").read()
        except OSError:
            return ""

    def stop(self):
        r = subprocess.run([CLUSTER, "stop", "--run-dir", self.run_dir], capture_output=True, text=True, timeout=90)
        assert r.returncode == 0, r.stderr
        shutil.rmtree(os.path.join(self.run_dir, "prometheus-data"), ignore_errors=True)  # logs stay, the TSDB goes


@pytest.fixture
def cluster_factory():
    made = []

    def make(*a, **kw):
        c = Cluster(*a, **kw)
        made.append(c)
        return c
    yield make
    for c in made:
        c.stop()


# --- prefix affinity ------------------------------------------------------------------------------------

STORY_WORDS = ("the little girl boy dog cat went to park and saw a big red ball tree sun happy sad mom dad "
               "played with friend said one day time there was very wanted look at bird fly sky home").split()


def system_prompts(n, words=130):
    """n distinct system prompts of a few hundred tokens each (stories260K's tokenizer: ~2 tokens a word)."""
    out = []
    for g in range(n):
        r = random.Random(1000 + g)
        out.append("Story %d. " % g + " ".join(r.choice(STORY_WORDS) for _ in range(words)))
    return out


def run_conversations(port, n_conv=12, turns=2, max_tokens=12):
    """n_conv conversations over 4 shared system prompts, `turns` turns each, one request at a time (turn 1 of
    every conversation, then turn 2 of every one ...). Returns the outputs keyed by (conversation, turn)."""
    sysp = system_prompts(4)
    hist = [[{"role": "system", "content": sysp[c % 4]}] for c in range(n_conv)]
    outs = {}
    for t in range(turns):
        for c in range(n_conv):
            hist[c].append({"role": "user", "content": "Tell me about the %s number %d." % (STORY_WORDS[c], t)})
            st, j = post_json(port, "/v1/chat/completions",
                              {"model": "tachyon", "messages": hist[c], "max_tokens": max_tokens, "temperature": 0})
            assert st == 200, (st, j)
            text = j["choices"][0]["message"]["content"]
            outs[(c, t)] = text
            hist[c].append({"role": "assistant", "content": text})
    return outs


def cluster_hit_rate(c):
    hit = query = 0.0
    for p in c.replicas:
        m = metrics(p)
        hit += m["tachyon:prefix_cache_hit_tokens_total"]
        query += m["tachyon:prefix_cache_queries_total"]
    assert query > 0
    return hit / query


def test_prefix_affinity_beats_round_robin(cluster_factory):
    # Each replica's KV pool (0.7 MiB: ~1100 tokens of stories260K; a prompt here is ~320) holds three of the four
    # system prompts, not four. Round-robin makes every replica cycle through all four, and LRU evicts each before
    # it comes back; hashing the body's first bytes sends each system prompt to one replica, which keeps it (here
    # the hash puts three prompts on one replica and one on another). The cache capacity a cluster needs for its
    # shared prefixes is N times smaller with affinity: that is the point of it.
    rates, outs = {}, {}
    for balance in ("hash", "roundrobin"):
        c = cluster_factory(3, STORIES, "--ctx-size", 512, "--kv-cache-mem", 0.7, balance=balance)
        outs[balance] = run_conversations(c.front)
        rates[balance] = cluster_hit_rate(c)
        c.stop()
    print("cluster prefix-hit rate: hash %.3f, round-robin %.3f" % (rates["hash"], rates["roundrobin"]))
    assert outs["hash"] == outs["roundrobin"], "greedy outputs differ between balancing modes"
    assert rates["hash"] >= 3 * rates["roundrobin"] and rates["hash"] > 0.3, rates


def test_session_header_pins_replica(cluster_factory):
    """x-session-id overrides the body hash: different prompts with one session id go to one replica."""
    c = cluster_factory(3, STORIES, "--ctx-size", 512)
    for i in range(6):
        st, _ = post_json(c.front, "/v1/completions",
                          {"model": "tachyon", "prompt": "Once upon a time %d %s" % (i, "x" * (i * 50)),
                           "max_tokens": 2}, headers={"x-session-id": "conversation-42"})
        assert st == 200
    served = [metrics(p)['tachyon:request_success_total{finish_reason="length"}'] for p in c.replicas]
    assert sorted(served) == [0, 0, 6], served


# --- failures -------------------------------------------------------------------------------------------

def start_stream(port, prompt, max_tokens, session=None):
    """Opens a streaming chat request through `port` and waits for its first data event. Returns the response."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    hdr = {"Content-Type": "application/json"}
    if session:
        hdr["x-session-id"] = session
    body = {"model": "tachyon", "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "ignore_eos": True, "temperature": 0, "stream": True}
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body), headers=hdr)
    r = conn.getresponse()
    assert r.status == 200
    while True:
        line = r.fp.readline()
        assert line, "stream ended before its first token"
        if line.startswith(b"data: "):
            return conn, r


def finish_stream(r, limit=60):
    """Reads the rest of a stream. Returns ('done', t) if it ended with [DONE], ('cut', t) if the connection closed
    or broke without it; t = seconds taken."""
    t0 = time.time()
    try:
        while True:
            line = r.fp.readline()
            if not line:
                return "cut", time.time() - t0
            if line.strip() == b"data: [DONE]":
                return "done", time.time() - t0
            assert time.time() - t0 < limit, "stream still running after %ss" % limit
    except (OSError, http.client.HTTPException):
        return "cut", time.time() - t0


def session_ids(c):
    """For each replica, an x-session-id value HAProxy's hash sends to it (found by probing)."""
    ids = {}
    for k in range(200):
        st, h, _ = req(c.front, "POST", "/v1/completions", {"model": "tachyon", "prompt": "hi", "max_tokens": 1},
                       headers={"x-session-id": "session-%d" % k})
        assert st == 200
        ids.setdefault(int(h["x-tachyon-replica"][1:]), "session-%d" % k)
        if len(ids) == c.n:
            return ids
    raise AssertionError("the hash never reached some replica: %s" % ids)


def wait_running(port, n, timeout=30):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if metrics(port)["tachyon:num_requests_running"] >= n:
            return
        time.sleep(0.02)
    raise AssertionError("replica on %d never had %d running requests" % (port, n))


def load(port, sessions, n, workers, max_tokens):
    """n non-streaming completions, `workers` at a time, request i pinned by x-session-id to sessions[i % len].
    Returns a list of (status, completion tokens or error body, replica that answered)."""
    def one(i):
        st, h, data = req(port, "POST", "/v1/completions",
                          {"model": "tachyon", "prompt": "Request %d: the quick brown fox" % i,
                           "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0},
                          headers={"x-session-id": sessions[i % len(sessions)]}, timeout=120)
        j = json.loads(data) if data.startswith(b"{") else data
        return st, j["usage"]["completion_tokens"] if st == 200 else j, h.get("x-tachyon-replica")
    with cf.ThreadPoolExecutor(workers) as ex:
        return list(ex.map(one, range(n)))


def retried_requests(log):
    """HAProxy httplog lines whose retries counter (last of the five connection counters) is non-zero."""
    return re.findall(r" \d+/\d+/\d+/\d+/\+?[1-9]\d* \d+/\d+ \"", log)


def test_kill9_replica_loses_no_request(cluster_factory):
    if not os.path.exists(SMOL):
        pytest.skip("no SmolLM2 model at %s (make models)" % SMOL)
    c = cluster_factory(3, SMOL, "--ctx-size", 1024)
    ids = session_ids(c)
    victim = 0
    conn, stream = start_stream(c.front, "Write a long story about a lighthouse keeper.", 400, ids[victim])
    box = {}
    th = threading.Thread(target=lambda: box.setdefault("r", load(c.front, [ids[0], ids[1], ids[2]], 24, 4, 16)))
    th.start()
    wait_running(c.replicas[victim], 2)  # the stream and at least one non-streaming request
    os.kill(c.pid(victim), signal.SIGKILL)
    how, took = finish_stream(stream)
    conn.close()
    th.join(180)
    assert not th.is_alive(), "the load did not finish"
    results = box["r"]
    assert all(st == 200 and n == 16 for st, n, _ in results), results
    assert how == "cut" and took < 30, (how, took)
    # The requests caught on the killed replica, and those sent to it before the health check noticed, were
    # retried elsewhere: the HAProxy log shows them.
    assert retried_requests(c.log("haproxy.log")), c.log("haproxy.log")[-3000:]


def test_sigterm_replica_drains(cluster_factory):
    if not os.path.exists(SMOL):
        pytest.skip("no SmolLM2 model at %s (make models)" % SMOL)
    c = cluster_factory(3, SMOL, "--ctx-size", 1024, "--shutdown-grace", 60)
    ids = session_ids(c)
    victim = 0
    conn, stream = start_stream(c.front, "Write a long story about a lighthouse keeper.", 120, ids[victim])
    # A keep-alive connection to the victim, opened before the signal, to watch its /health during the drain.
    watch = http.client.HTTPConnection("127.0.0.1", c.replicas[victim], timeout=10)
    watch.request("GET", "/health")
    r = watch.getresponse()
    r.read()
    assert r.status == 200
    box = {}
    th = threading.Thread(target=lambda: box.setdefault("r", load(c.front, [ids[0], ids[1], ids[2]], 24, 4, 16)))
    th.start()
    wait_running(c.replicas[victim], 2)
    os.kill(c.pid(victim), signal.SIGTERM)
    t0 = time.time()
    while True:  # the signal reaches the replica's event loop asynchronously
        watch.request("GET", "/health")
        r = watch.getresponse()
        body = r.read()
        if r.status != 200 or time.time() - t0 > 5:
            break
        time.sleep(0.02)
    assert r.status == 503 and json.loads(body)["status"] == "draining", (r.status, body)
    watch.close()
    how, _ = finish_stream(stream)
    conn.close()
    assert how == "done", "the stream on the draining replica did not finish"
    assert c.exit_status(victim, 60) == 0, c.log("r%d.log" % victim)[-3000:]
    th.join(180)
    assert not th.is_alive()
    results = box["r"]
    assert all(st == 200 and n == 16 for st, n, _ in results), results
    # Requests pinned to the victim: some finished there (in flight at the signal), later ones were sent elsewhere.
    pinned = [rep for i, (_, _, rep) in enumerate(results) if i % 3 == 0]
    assert "r0" in pinned and set(pinned) - {"r0"}, pinned


# --- Prometheus, Grafana, nginx -------------------------------------------------------------------------

def prom_query(port, q):
    with urllib.request.urlopen("http://127.0.0.1:%d/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": q})),
                                timeout=10) as r:
        d = json.load(r)
    assert d["status"] == "success", d
    return d["data"]["result"]


@pytest.mark.skipif(shutil.which("prometheus") is None,
                    reason="prometheus is not installed (`make test` installs it: apt-get install prometheus)")
def test_prometheus_scrapes_every_replica(cluster_factory):
    c = cluster_factory(2, STORIES, "--ctx-size", 512, prometheus=True)
    prompts = system_prompts(2, words=60)
    for i in range(6):
        st, _ = post_json(c.front, "/v1/completions", {"model": "tachyon", "prompt": prompts[i % 2], "max_tokens": 4})
        assert st == 200
    t0, targets, up, hit = time.time(), [], [], []
    while time.time() - t0 < 45:
        with urllib.request.urlopen("http://127.0.0.1:%d/api/v1/targets" % c.prom, timeout=10) as r:
            targets = json.load(r)["data"]["activeTargets"]
        up = prom_query(c.prom, "cluster:tachyon_replicas_up:sum")
        hit = prom_query(c.prom, "cluster:tachyon_prefix_cache_hit_tokens:sum")
        # every target (the replicas and HAProxy's exporter) scraped at least once, and the rules evaluated
        if (targets and all(t["health"] == "up" for t in targets)
                and sum(t["labels"]["job"] == "tachyon" for t in targets) == 2 and up
                and float(up[0]["value"][1]) == 2 and hit and float(hit[0]["value"][1]) > 0):
            break
        time.sleep(1)
    tachyon = sorted(t["labels"]["instance"] for t in targets if t["labels"]["job"] == "tachyon")
    assert tachyon == sorted("127.0.0.1:%d" % p for p in c.replicas), targets
    assert all(t["health"] == "up" for t in targets), targets
    assert up and float(up[0]["value"][1]) == 2, up
    assert hit and float(hit[0]["value"][1]) > 0, hit


def rules_names():
    return set(re.findall(r"^\s*- record: (\S+)", open(os.path.join(DEPLOY, "rules.yml")).read(), re.M))


def test_grafana_dashboard_names_existing_metrics(stories):
    """deploy/grafana-dashboard.json is valid JSON and every series its queries name is either exported by
    tachyon's /metrics (histograms by their _bucket/_sum/_count series) or recorded by deploy/rules.yml."""
    dash = json.load(open(os.path.join(DEPLOY, "grafana-dashboard.json")))
    exported = set()
    for k in stories.metrics():
        exported.add(k.split("{")[0])
    known = exported | rules_names() | {"up"}
    # Written against metrics being added by other work (speculative decoding); allowed by name.
    pending = {"tachyon:spec_accepted_tokens_total", "tachyon:spec_draft_tokens_total"}
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 8
    for e in exprs:
        for name in re.findall(r"((?:cluster|instance|tachyon):[A-Za-z0-9_:]+)", e):
            assert name in known or name in pending, "%s names unknown metric %s" % (e, name)


@pytest.mark.skipif(shutil.which("nginx") is None,
                    reason="nginx is not installed (`make test` installs it: apt-get install nginx)")
def test_nginx_config_proxies_streams_with_session_affinity(cluster_factory):
    c = cluster_factory(2, STORIES, "--ctx-size", 512)
    run = c.run_dir
    port = free_base(0)
    servers = "".join("        server 127.0.0.1:%d max_fails=2 fail_timeout=5s;\n" % p for p in c.replicas)
    conf = open(os.path.join(DEPLOY, "nginx.conf")).read()
    conf = conf.replace("@LISTEN@", "127.0.0.1:%d" % port).replace("@RUN_DIR@", run)
    conf = conf.replace("@SERVERS@\n", servers)
    path = os.path.join(run, "nginx.conf")
    open(path, "w").write(conf)
    t = subprocess.run(["nginx", "-t", "-q", "-c", path, "-e", os.path.join(run, "nginx-error.log")],
                       capture_output=True, text=True, timeout=30)
    assert t.returncode == 0, t.stderr
    proc = subprocess.Popen(["nginx", "-c", path, "-e", os.path.join(run, "nginx-error.log"), "-g", "daemon off;"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        t0 = time.time()
        while port_free(port) and time.time() - t0 < 10:
            time.sleep(0.05)
        for i in range(4):
            st, j = post_json(port, "/v1/completions", {"model": "tachyon", "prompt": "Once upon a time %d" % i,
                                                        "max_tokens": 3}, headers={"x-session-id": "s-1"})
            assert st == 200, j
        served = sorted(metrics(p)['tachyon:request_success_total{finish_reason="length"}'] for p in c.replicas)
        assert served == [0, 4], "x-session-id did not pin the session: %s" % served
        conn, stream = start_stream(port, "Tell me a story.", 20)
        assert finish_stream(stream)[0] == "done"
        conn.close()
    finally:
        proc.send_signal(signal.SIGQUIT)  # graceful: finish requests, then exit
        proc.wait(15)
