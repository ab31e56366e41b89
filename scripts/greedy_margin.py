#!/usr/bin/env python3
"""Greedy margins of the prompts that tests assert generated text for.

A test that asserts a greedy output (a golden continuation, a substring, a token count or a finish reason that
follows from the text) holds on another CPU only when no step of that greedy path is a near-tie: SIMD levels
sum in different orders and round activations differently, so logits move by a few hundredths between levels,
and a top-1/top-2 gap smaller than that flips the token on someone else's machine.

For every case of tests/greedy_cases.json this tool serves the case's model with `tachyon serve` at each ISA
level (TACHYON_ISA), asks for the greedy path with the top-2 logprobs of every step (the difference of two
logprobs of one step is the difference of their logits), and prints the smallest top-1/top-2 gap over the
first `n` generated tokens, where it is, and the text. Exit status 1 when a case's gap is below its margin
at some level.

    scripts/greedy_margin.py [--bin build/tachyon] [--isa scalar,avx2] [--case NAME] [--add-case JSON]

--add-case adds a case given as JSON (the registry's fields) for this run only: the way to try a new prompt
before a test relies on it.
"""
import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SHARED = os.path.abspath(os.path.join(ROOT, "..", "shared", "testdata"))
REGISTRY = os.path.join(ROOT, "tests", "greedy_cases.json")
MODELS = {
    "stories260K": os.path.join(SHARED, "models", "stories260K.gguf"),
    "smollm2": os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    "gemma3": os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf"),
}


def load_cases(path=REGISTRY):
    """The registry's cases, with golden files expanded into one case per line."""
    with open(path) as f:
        reg = json.load(f)
    cases = []
    for c in reg["cases"]:
        if "golden" not in c:
            cases.append(c)
            continue
        gpath = c["golden"].replace("$SHARED", SHARED)
        gpath = gpath if os.path.isabs(gpath) else os.path.join(ROOT, gpath)
        with open(gpath) as f:
            for i, line in enumerate(ln for ln in f if ln.startswith("{")):
                g = json.loads(line)
                d = {k: v for k, v in c.items() if k != "golden"}
                d.update(name="%s#%d" % (c["name"], i), prompt=g["prompt"], n=g["n_predict"])
                cases.append(d)
    return cases


def host_isas(binary):
    out = subprocess.run([binary, "info", "--cpu"], capture_output=True, text=True, timeout=30).stdout
    return out.split("host levels:", 1)[1].split(";")[0].split(")")[0].split()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Serve:
    """`tachyon serve` for one model at one ISA level (and extra environment), stopped on exit."""

    def __init__(self, binary, model, env, ctx=2048):
        self.port = free_port()
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([binary, "serve", "-m", model, "--host", "127.0.0.1", "--port",
                                      str(self.port), "--ctx-size", str(ctx), "--spec", "off"],
                                     env=env, stdout=self.log, stderr=subprocess.STDOUT)
        t0 = time.time()
        while True:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise RuntimeError("server exited: %s" % self.log.read().decode(errors="replace")[-2000:])
            try:
                if self.post("GET", "/health")[0] == 200:
                    return
            except OSError:
                pass
            if time.time() - t0 > 300:
                self.close()
                raise RuntimeError("server not healthy after 300 s")
            time.sleep(0.05)

    def post(self, method, path, body=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        try:
            c.request(method, path, json.dumps(body) if body is not None else None,
                      {"Content-Type": "application/json"})
            r = c.getresponse()
            data = r.read()
            return r.status, json.loads(data) if data[:1] == b"{" else data
        finally:
            c.close()

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def n_at(case, isa):
    """How many greedy tokens the case's test asserts at this level: "n", or its first half at the scalar
    level for a case with "scalar_half" (a test that checks only that much there, as test_smollm2_greedy_golden
    does: measuring further would cost scalar time and protect no assertion)."""
    return case["n"] // 2 if isa == "scalar" and case.get("scalar_half") else case["n"]


def greedy_steps(srv, case, n):
    """[(token, top-1/top-2 gap)] of the first n greedy tokens."""
    body = {"max_tokens": n, "temperature": 0}
    if case.get("ignore_eos"):
        body["ignore_eos"] = True
    if case["kind"] == "chat":
        body.update(messages=case["messages"], logprobs=True, top_logprobs=2)
        st, j = srv.post("POST", "/v1/chat/completions", body)
        assert st == 200, j
        lp = j["choices"][0]["logprobs"]["content"]
        steps = [(e["token"], [x["logprob"] for x in e["top_logprobs"]]) for e in lp]
    else:
        body.update(prompt=case["prompt"], logprobs=2)
        st, j = srv.post("POST", "/v1/completions", body)
        assert st == 200, j
        lp = j["choices"][0]["logprobs"]
        steps = list(zip(lp["tokens"], lp["top_logprobs"]))
    out = []
    for tok, top in steps:
        vals = sorted(top.values() if isinstance(top, dict) else top, reverse=True)
        out.append((tok, vals[0] - vals[1] if len(vals) > 1 else float("inf")))
    return out


def model_path(case, workdir, binary):
    """The case's model file; a requantized variant ("requant": [TYPE, ...]) is written into workdir once."""
    path = MODELS[case["model"]]
    for typ in case.get("requant", []):
        out = os.path.join(workdir, "%s-%s.gguf" % (os.path.basename(path)[:-5], typ))
        if not os.path.exists(out):
            p = subprocess.run([binary, "quantize", "--quiet", path, out, typ], capture_output=True, text=True,
                               timeout=300)
            if p.returncode:
                raise RuntimeError("quantize %s: %s" % (typ, p.stderr))
        path = out
    return path


def measure(binary, cases, isas, log=print):
    """{(case name, isa): {"gaps": [...], "tokens": [...], "text": str, "min": gap, "at": index}}."""
    res = {}
    with tempfile.TemporaryDirectory() as work:
        groups = {}
        for c in cases:
            key = (model_path(c, work, binary), json.dumps(c.get("env", {}), sort_keys=True))
            groups.setdefault(key, []).append(c)
        for (path, env_json), group in groups.items():
            for isa in isas:
                env = dict(os.environ, TACHYON_ISA=isa, **json.loads(env_json))
                srv = Serve(binary, path, env)
                try:
                    for c in group:
                        steps = greedy_steps(srv, c, n_at(c, isa))
                        gaps = [g for _, g in steps]
                        i = min(range(len(gaps)), key=gaps.__getitem__) if gaps else 0
                        r = res[(c["name"], isa)] = {
                            "gaps": gaps, "tokens": [t for t, _ in steps], "text": "".join(t for t, _ in steps),
                            "min": gaps[i] if gaps else float("inf"), "at": i}
                        log("%-28s %-7s min gap %7.3f at token %2d %-12r margin %.2f  %r" %
                            (c["name"], isa, r["min"], i, r["tokens"][i] if gaps else "", margin(c),
                             r["text"][:60]))
                finally:
                    srv.close()
    return res


def margin(case):
    return case.get("margin", 0.5)


def problems(cases, isas, res):
    """Why each case fails, if it does: a gap below its margin at some level, a greedy text that differs
    between levels, or levels whose gaps at one step differ by more than the margin (then the margin would not
    cover the levels this host cannot run). Levels are compared over the tokens both measured (n_at)."""
    out = []
    for c in cases:
        rs = [res[(c["name"], isa)] for isa in isas]
        for isa, r in zip(isas, rs):
            if r["min"] < margin(c):
                out.append("%s at %s: gap %.4f below its margin %.2f at token %d (%r) of %r" %
                           (c["name"], isa, r["min"], margin(c), r["at"], r["tokens"][r["at"]], r["text"]))
        for isa, r in zip(isas[1:], rs[1:]):
            k = min(len(r["tokens"]), len(rs[0]["tokens"]))
            if r["tokens"][:k] != rs[0]["tokens"][:k]:
                out.append("%s: greedy text differs between %s and %s: %r vs %r" %
                           (c["name"], isas[0], isa, rs[0]["text"], r["text"]))
                continue
            spread = max((abs(a - b) for a, b in zip(rs[0]["gaps"][:k], r["gaps"][:k])), default=0.0)
            if spread > margin(c):
                out.append("%s: gaps differ by %.4f between %s and %s, more than the margin %.2f" %
                           (c["name"], spread, isas[0], isa, margin(c)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.environ.get("TACHYON_BIN", os.path.join(ROOT, "build", "tachyon")))
    ap.add_argument("--isa", help="comma-separated levels (default: every level the host has)")
    ap.add_argument("--case", action="append", help="only these case names (prefix match)")
    ap.add_argument("--add-case", action="append", default=[], help="an extra case as JSON")
    a = ap.parse_args()
    cases = load_cases() + [json.loads(x) for x in a.add_case]
    if a.case:
        cases = [c for c in cases if any(c["name"].startswith(p) for p in a.case)]
    isas = a.isa.split(",") if a.isa else host_isas(a.bin)
    res = measure(a.bin, cases, isas)
    bad = problems(cases, isas, res)
    for b in bad:
        print("NEAR-TIE: " + b)
    return 1 if bad else 0

if __name__ == "__main__":
    sys.exit(main())
