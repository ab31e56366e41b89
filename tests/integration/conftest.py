"""Fixtures: start `tachyon serve` on a free port, wait for /health 200, stop it at the end."""
import json
import os
import signal
import socket
import subprocess
import time
import http.client

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("TACHYON_BIN", os.path.join(ROOT, "build", "tachyon"))
STORIES = os.path.join(ROOT, "..", "shared", "testdata", "models", "stories260K.gguf")
SMOL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")


# "gw0-", "gw1-", ... under pytest-xdist (the worker's name), empty when serial: keeps the workers' server logs apart
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "") + ("-" if os.environ.get("PYTEST_XDIST_WORKER") else "")
# Compute threads of a server whose test sets none. Under pytest-xdist the workers fill the cores, and a server at
# two threads ends each matmul and attention job waiting for its second thread, often a whole time slice while the
# other worker's server holds that core (a format test of SmolLM2 took 46 s at two threads, 19 s at one). Tests
# that need the pool pass --threads themselves; TACHYON_TEST_THREADS overrides (0: the server's default).
SERVER_THREADS = os.environ.get("TACHYON_TEST_THREADS", "1" if WORKER else "0")
SERVER_LOGS = []  # every server log of this session, checked for sanitizer reports at the end
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")


@pytest.fixture(scope="session", autouse=True)
def no_sanitizer_reports():
    """With an ASan/UBSan build (make asan), any report in any server's output fails the run."""
    yield
    bad = []
    for path in SERVER_LOGS:
        try:
            text = open(path, errors="replace").read()
        except OSError:
            continue
        if any(m in text for m in SANITIZER_MARKS):
            bad.append("%s:\n%s" % (path, text[-3000:]))
    assert not bad, "sanitizer reports in server output:\n" + "\n".join(bad)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    BIND_TRIES = 3  # a port picked free can be taken before the server binds it (another worker's server or client)

    def __init__(self, model, *args, timeout=90):
        self.host = "127.0.0.1"
        self.model = model
        for attempt in range(self.BIND_TRIES):
            if self._start(model, args, timeout, last=attempt == self.BIND_TRIES - 1):
                break

    def _start(self, model, args, timeout, last):
        """Starts the server on a fresh free port and waits for /health 200. Returns False (the server gone) when
        the port was taken meanwhile and `last` is false; raises on any other failure."""
        self.port = free_port()
        self.base = "http://%s:%d" % (self.host, self.port)
        self.log_path = os.path.join(ROOT, "build", "serve-%s%d.log" % (WORKER, self.port))
        SERVER_LOGS.append(self.log_path)
        os.makedirs(os.path.dirname(self.log_path), exist_ok=True)
        self.log = open(self.log_path, "w")
        cmd = [BIN, "serve", "-m", model, "--host", self.host, "--port", str(self.port)] + [str(a) for a in args]
        if SERVER_THREADS != "0" and not {"-t", "--threads"} & set(cmd):
            cmd += ["--threads", SERVER_THREADS]
        if os.environ.get("TACHYON_TEST_DEVICE"):  # e.g. cuda: every server of the suite on that backend
            cmd += ["--device", os.environ["TACHYON_TEST_DEVICE"]]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, cwd=ROOT)
        self.saw_503 = False
        t0 = time.time()
        while True:
            if self.proc.poll() is not None:
                self.log.close()
                text = self.read_log()
                if not last and "cannot listen on" in text and "in use" in text:
                    SERVER_LOGS.remove(self.log_path)
                    return False
                raise RuntimeError("server exited with %s:\n%s" % (self.proc.returncode, text))
            try:
                st, _, _ = self.request("GET", "/health", timeout=2)
                if st == 200:
                    return True
                if st == 503:
                    self.saw_503 = True
            except OSError:
                pass
            if time.time() - t0 > timeout:
                self.stop()
                raise RuntimeError("server not healthy after %ss:\n%s" % (timeout, self.read_log()))
            time.sleep(0.05)

    def read_log(self):
        try:
            return open(self.log_path).read()[-4000:]
        except OSError:
            return ""

    def request(self, method, path, body=None, headers=None, timeout=60):
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            if body is not None and not isinstance(body, (bytes, str)):
                body = json.dumps(body)
            h = {"Content-Type": "application/json"}
            h.update(headers or {})
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            data = r.read()
            return r.status, dict(r.getheaders()), data
        finally:
            c.close()

    def post(self, path, body, **kw):
        st, h, data = self.request("POST", path, body, **kw)
        try:
            j = json.loads(data)
        except ValueError:
            j = None
        return st, h, j

    def stream(self, path, body, headers=None, timeout=60):
        """POST with stream=true; returns (status, list of parsed data events, raw text)."""
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        c.request("POST", path, body=json.dumps(body), headers=h)
        r = c.getresponse()
        raw = r.read().decode("utf-8")
        c.close()
        events = []
        for block in raw.split("\n\n"):
            if not block.strip() or block.startswith(":"):  # ": ping" keep-alive comments
                continue
            assert block.startswith("data: "), "bad SSE block %r" % block
            d = block[6:]
            events.append(d if d == "[DONE]" else json.loads(d))
        return r.status, events, raw

    def metrics(self):
        st, _, data = self.request("GET", "/metrics")
        assert st == 200
        out = {}
        for line in data.decode().splitlines():
            if line.startswith("#") or not line.strip():
                continue
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
        return out

    def stop(self, sig=signal.SIGTERM, wait=15):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(wait)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


@pytest.fixture(scope="session")
def stories():
    if not os.path.exists(BIN):
        pytest.skip("no binary at %s" % BIN)
    s = Server(STORIES, "--ctx-size", 512)
    yield s
    s.stop()


@pytest.fixture(scope="session")
def smol():
    if not os.path.exists(BIN):
        pytest.skip("no binary at %s" % BIN)
    if not os.path.exists(SMOL):
        pytest.skip("SmolLM2 model not present (run make models)")
    s = Server(SMOL, "--ctx-size", 2048)
    yield s
    s.stop()


@pytest.fixture
def make_server():
    started = []

    def make(model=None, *args):
        if not os.path.exists(BIN):
            pytest.skip("no binary at %s" % BIN)
        s = Server(model or STORIES, *args)
        started.append(s)
        return s

    yield make
    for s in started:
        s.stop()


def chat_body(content, max_tokens=24, **kw):
    b = {"model": "x", "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
         "temperature": 0}
    b.pop("model")
    b.update(kw)
    return b


def stream_text(events, index=0, kind="chat"):
    out = []
    for e in events:
        if e == "[DONE]":
            continue
        for c in e.get("choices", []):
            if c["index"] != index:
                continue
            if kind == "chat":
                out.append(c["delta"].get("content") or "")
            else:
                out.append(c.get("text") or "")
    return "".join(out)
