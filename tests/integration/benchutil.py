"""Helpers for the bench-serve tests: start the scripted fake server, run the binary, read /stats."""
import json
import os
import subprocess
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BIN = os.environ.get("TACHYON_BIN", os.path.join(ROOT, "build", "tachyon"))


class FakeServer:
    def __init__(self, *args):
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "fake_openai_server.py"), *map(str, args)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            self.proc.kill()
            raise RuntimeError("fake server did not start: %r %s" % (line, self.proc.stderr.read()))
        self.port = int(line.split()[1])
        self.url = "http://127.0.0.1:%d" % self.port

    def stats(self):
        with urllib.request.urlopen(self.url + "/stats", timeout=10) as r:
            return json.loads(r.read())

    def close(self):
        self.proc.kill()
        self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


def bench(tmp_path, url, *args, name="out.json", timeout=60, check=True):
    """Runs bench-serve, returns (completed process, parsed --json document)."""
    out = os.path.join(str(tmp_path), name)
    cmd = [BIN, "bench-serve", "--url", url, "--json", out, "--quiet", *map(str, args)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check:
        assert p.returncode == 0, "bench-serve failed (%d): %s\n%s" % (p.returncode, p.stderr, p.stdout)
    doc = json.load(open(out)) if os.path.exists(out) else None
    return p, doc


def measured(doc, run=0):
    return [r for r in doc["runs"][run]["requests"] if r["index"] >= 0]
