#!/usr/bin/env python3
"""Scheduling benchmarks on SmolLM2, one script: overload, mixed lengths, priorities and a tenant flood.

  overload  Poisson arrivals at 1x, 2x, 5x the measured capacity, TTFT SLO 1 s sent per request:
            goodput and late accepted requests (TTFT > 1.2 s) of --sched slo vs fifo.
  mixed     mixed-length (90% 100-word, 10% 4000-word prompts): p99 TTFT of the short requests,
            --sched priority vs fifo.
  prio      two priority classes (10% priority 0, 90% priority 5) at 5x capacity: p99 TTFT of the
            high class vs the same high-class requests sent alone, at the same arrival times
            (bench-serve --only-priority 0), with --sched priority, and fifo for contrast.
  tenant    bench/tenant_flood.sh (solo and fair only), tenant B's p99 TTFT alone vs while A floods.

Every policy is measured in the same round, back to back, alternating which goes first; rounds repeat
(--rounds) and the summary gives medians. A fresh server per run (no prefix cache carried over).
Usage: bench/sched_bench.py [--rounds 2] [--threads 2] [--only overload,mixed,prio,tenant] [--out DIR]
Needs build/tachyon and models/SmolLM2-135M-Instruct.Q4_1.gguf. Only loopback.
"""
import argparse, json, os, socket, statistics, subprocess, sys, tempfile, time, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.abspath(os.environ.get("TACHYON_BIN", os.path.join(ROOT, "build", "tachyon")))
MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
SLO_MS = 1000.0  # --slo-ms overrides


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Server:
    def __init__(self, out, tag, args):
        self.port = free_port()
        self.log = open(os.path.join(out, "serve_%s.log" % tag), "w")
        cmd = [BIN, "serve", "-m", MODEL, "--port", str(self.port), "--served-model-name", "m",
               "--log-level", "warn"] + args
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(600):
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/health" % self.port, timeout=1) as r:
                    if r.status == 200:
                        return
            except Exception:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError("server exited, see " + self.log.name)
            time.sleep(0.2)
        raise RuntimeError("server did not start")

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def bench(srv, out, name, args):
    path = os.path.join(out, name + ".json")
    cmd = [BIN, "bench-serve", "--url", "http://127.0.0.1:%d" % srv.port, "--model", "m",
           "--endpoint", "completions", "--quiet", "--json", path] + args
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(path) as f:
        return json.load(f)


def pct(xs, q):
    """Nearest-rank percentile (q in 0..100); None for no samples."""
    if not xs:
        return None
    xs = sorted(xs)
    k = max(0, min(len(xs) - 1, int(-(-q * len(xs) // 100)) - 1))
    return xs[k]


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def runs_of(doc):
    if "runs" in doc and doc["runs"]:
        return doc["runs"]
    return [{"label": "", "summary": doc["summary"], "requests": doc["requests"]}]


def serve_args(a, policy, extra=()):
    return ["--threads", str(a.threads), "--sched", policy] + list(extra)


# --- 1. overload -------------------------------------------------------------------------------------

OVL_WL = ["--dataset", "random", "--input-len", "64", "--output-len", "16", "--seed", "5"]


def capacity(a, out):
    srv = Server(out, "capacity", serve_args(a, "fifo", ["--max-seqs", "8"]))
    try:
        d = bench(srv, out, "capacity", OVL_WL + ["--num-requests", "24", "--request-rate", "inf",
                                                   "--max-concurrency", "8", "--warmup", "2"])
    finally:
        srv.close()
    return d["summary"]["request_throughput"]


def overload(a, out, cap, rnd):
    res = {}
    order = ["fifo", "slo"] if rnd % 2 == 0 else ["slo", "fifo"]
    for pol in order:
        srv = Server(out, "ovl_%s_%d" % (pol, rnd), serve_args(a, pol, ["--max-seqs", "8"]))
        try:
            d = bench(srv, out, "ovl_%s_%d" % (pol, rnd),
                      OVL_WL + ["--num-requests", str(a.ovl_n), "--warmup", "2", "--sweep", "overload=1,2,5",
                                "--capacity", "%.3f" % cap, "--ttft-slo-ms", "%d" % SLO_MS])
        finally:
            srv.close()
        for run in runs_of(d):
            reqs = run["requests"]
            ok = [r for r in reqs if r.get("ok")]
            good = [r for r in ok if r["ttft_ms"] <= SLO_MS]
            late = [r for r in ok if r["ttft_ms"] > 1.2 * SLO_MS]
            dur = run["summary"]["duration_s"]
            res[(pol, run["label"])] = {
                "goodput": len(good) / dur if dur > 0 else 0.0, "ok": len(ok), "good": len(good),
                "refused": len(reqs) - len(ok), "late20": len(late),
                "worst_ttft": max((r["ttft_ms"] for r in ok), default=None)}
    return res


# --- 2. mixed lengths --------------------------------------------------------------------------------


def mixed(a, out, rnd):
    res = {}
    order = ["fifo", "priority"] if rnd % 2 == 0 else ["priority", "fifo"]
    for pol in order:
        srv = Server(out, "mix_%s_%d" % (pol, rnd), serve_args(a, pol, ["--max-seqs", "8", "--ctx-size", "8192"]))
        try:
            d = bench(srv, out, "mix_%s_%d" % (pol, rnd),
                      ["--dataset", "mixed-length", "--input-len", "100", "--long-len", "4000", "--long-frac", "0.1",
                       "--output-len", "16", "--num-requests", str(a.mix_n), "--request-rate", str(a.mix_rate),
                       "--seed", "9", "--warmup", "2"])
        finally:
            srv.close()
        reqs = runs_of(d)[0]["requests"]
        short = [r["ttft_ms"] for r in reqs if r.get("ok") and r.get("length_class") == "short"]
        lng = [r["ttft_ms"] for r in reqs if r.get("ok") and r.get("length_class") == "long"]
        res[pol] = {"short_p50": pct(short, 50), "short_p99": pct(short, 99), "long_p50": pct(lng, 50),
                    "long_p99": pct(lng, 99), "n_short": len(short), "n_long": len(lng),
                    "failed": sum(1 for r in reqs if not r.get("ok"))}
    return res


# --- 3. two priority classes -------------------------------------------------------------------------


def prio(a, out, cap, rnd):
    res = {}
    wl = OVL_WL + ["--warmup", "2"]
    # solo: the same high-class requests at the same arrival times, without the low class (--only-priority)
    runs = [("solo", "priority", ["--priority-mix", "0:0.1,5:0.9", "--num-requests", str(a.prio_n),
                                  "--request-rate", "%.3f" % (5 * cap), "--only-priority", "0"]),
            ("priority", "priority", ["--priority-mix", "0:0.1,5:0.9", "--num-requests", str(a.prio_n),
                                      "--request-rate", "%.3f" % (5 * cap)]),
            ("fifo", "fifo", ["--priority-mix", "0:0.1,5:0.9", "--num-requests", str(a.prio_n),
                              "--request-rate", "%.3f" % (5 * cap)])]
    if rnd % 2:
        runs = [runs[0], runs[2], runs[1]]
    for tag, pol, extra in runs:
        srv = Server(out, "prio_%s_%d" % (tag, rnd), serve_args(a, pol, ["--max-seqs", "8"]))
        try:
            d = bench(srv, out, "prio_%s_%d" % (tag, rnd), wl + extra)
        finally:
            srv.close()
        reqs = runs_of(d)[0]["requests"]
        hi = [r["ttft_ms"] for r in reqs if r.get("ok") and r.get("priority") == 0]
        lo = [r["ttft_ms"] for r in reqs if r.get("ok") and r.get("priority") == 5]
        res[tag] = {"hi_p50": pct(hi, 50), "hi_p99": pct(hi, 99), "lo_p99": pct(lo, 99), "n_hi": len(hi)}
    return res


# --- 4. tenants --------------------------------------------------------------------------------------


def tenant(a, out):
    env = dict(os.environ, OUT=out, MODES="solo fair", SERVE_ARGS="--threads %d" % a.threads, TACHYON_BIN=BIN)
    subprocess.run(["bash", os.path.join(ROOT, "bench", "tenant_flood.sh"), str(a.rounds)], check=True, env=env)
    res = []
    for rnd in range(1, a.rounds + 1):
        row = {}
        for mode in ("solo", "fair"):
            with open(os.path.join(out, "b_%s_%d.json" % (mode, rnd))) as f:
                t = json.load(f)["summary"]["ttft"]
            row[mode] = (t["median_ms"], t["p99_ms"])
        res.append(row)
    return res


def fmt(x, unit=""):
    if x is None:
        return "-"
    return "%.0f%s" % (x, unit) if abs(x) >= 10 or float(x).is_integer() else "%.2f%s" % (x, unit)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default="overload,mixed,prio,tenant")
    ap.add_argument("--out", default=None)
    ap.add_argument("--capacity", type=float, default=0.0, help="req/s; measured when 0")
    ap.add_argument("--slo-ms", type=float, default=1000.0, help="TTFT SLO of the overload runs")
    ap.add_argument("--ovl-n", type=int, default=20)
    ap.add_argument("--mix-n", type=int, default=20)
    ap.add_argument("--mix-rate", type=float, default=0.25)
    ap.add_argument("--prio-n", type=int, default=40)
    a = ap.parse_args()
    global SLO_MS
    SLO_MS = a.slo_ms
    out = a.out or tempfile.mkdtemp(prefix="sched_bench_")
    os.makedirs(out, exist_ok=True)
    only = set(a.only.split(","))
    print("out:", out, "| uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    cap = a.capacity
    if not cap and only & {"overload", "prio"}:
        cap = capacity(a, out)
    if cap:
        print("capacity: %.2f req/s (64-word prompt, 16 output tokens, 8 concurrent, fifo)" % cap)
    print("lscpu:", subprocess.run("lscpu | grep -E 'Model name|^CPU\\(s\\)'", shell=True, capture_output=True, text=True).stdout.replace("\n", " "))
    summary = {"capacity_rps": cap}

    if "overload" in only:
        rs = [overload(a, out, cap, r) for r in range(a.rounds)]
        summary["overload"] = {"%s %s" % k: [r[k] for r in rs] for k in rs[0]}
        print("\n== overload: TTFT SLO %.0f ms, %d requests per point (medians of %d rounds)" % (SLO_MS, a.ovl_n, a.rounds))
        print("%-6s %-10s %9s %5s %5s %8s %9s %11s" % ("sched", "load", "goodput/s", "ok", "good", "refused",
                                                        "late>20%", "worst TTFT"))  # refused: 503 at arrival or dropped waiting
        for pol in ("fifo", "slo"):
            for lab in ("overload=1x", "overload=2x", "overload=5x"):
                v = [r[(pol, lab)] for r in rs if (pol, lab) in r]
                print("%-6s %-10s %9.2f %5s %5s %8s %9s %11s" % (
                    pol, lab, med([x["goodput"] for x in v]), fmt(med([x["ok"] for x in v])),
                    fmt(med([x["good"] for x in v])), fmt(med([x["refused"] for x in v])),
                    "/".join(str(x["late20"]) for x in v), "/".join(fmt(x["worst_ttft"], "ms") for x in v)))
        for pol in ("fifo", "slo"):
            g1 = med([r[(pol, "overload=1x")]["goodput"] for r in rs])
            g5 = med([r[(pol, "overload=5x")]["goodput"] for r in rs])
            print("%s: goodput 5x / 1x = %.2f" % (pol, g5 / g1 if g1 else float("nan")))

    if "mixed" in only:
        rs = [mixed(a, out, r) for r in range(a.rounds)]
        summary["mixed"] = rs
        print("\n== mixed lengths: %d requests at %.2f req/s (per round)" % (a.mix_n, a.mix_rate))
        for i, r in enumerate(rs):
            for pol in ("fifo", "priority"):
                x = r[pol]
                print("round %d %-8s short TTFT p50 %7s p99 %7s (n=%d) | long p50 %7s p99 %7s (n=%d) failed %d" % (
                    i + 1, pol, fmt(x["short_p50"], "ms"), fmt(x["short_p99"], "ms"), x["n_short"],
                    fmt(x["long_p50"], "ms"), fmt(x["long_p99"], "ms"), x["n_long"], x["failed"]))
            print("round %d short p99 priority/fifo = %.2f" % (i + 1, r["priority"]["short_p99"] / r["fifo"]["short_p99"]))
        print("median ratio: %.2f" % med([r["priority"]["short_p99"] / r["fifo"]["short_p99"] for r in rs]))

    if "prio" in only:
        rs = [prio(a, out, cap, r) for r in range(a.rounds)]
        summary["prio"] = rs
        print("\n== two priority classes: %d requests at 5x capacity, 10%% priority 0 (high), 90%% priority 5" % a.prio_n)
        for i, r in enumerate(rs):
            s = r["solo"]["hi_p99"]
            for tag in ("solo", "priority", "fifo"):
                x = r[tag]
                print("round %d %-8s high TTFT p50 %7s p99 %7s (n=%d) ratio %.2f | low p99 %7s" % (
                    i + 1, tag, fmt(x["hi_p50"], "ms"), fmt(x["hi_p99"], "ms"), x["n_hi"], x["hi_p99"] / s,
                    fmt(x["lo_p99"], "ms")))
        print("median high p99 ratio (priority / solo): %.2f" % med([r["priority"]["hi_p99"] / r["solo"]["hi_p99"] for r in rs]))

    if "tenant" in only:
        rs = tenant(a, out)
        summary["tenant"] = rs
        print("\n== tenant flood (bench/tenant_flood.sh, solo and fair)")
        for i, r in enumerate(rs):
            print("round %d B alone p50/p99 %s/%s  while A floods %s/%s  p99 ratio %.2f" % (
                i + 1, fmt(r["solo"][0], "ms"), fmt(r["solo"][1], "ms"), fmt(r["fair"][0], "ms"),
                fmt(r["fair"][1], "ms"), r["fair"][1] / r["solo"][1]))
        print("median p99 ratio: %.2f" % med([r["fair"][1] / r["solo"][1] for r in rs]))

    print("\nuptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, default=str)
    print("results in", out)


if __name__ == "__main__":
    sys.exit(main())
