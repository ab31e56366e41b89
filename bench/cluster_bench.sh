#!/usr/bin/env bash
# Scale-out benchmark: `tachyon bench-serve` against the HAProxy front of 1..3 replicas (1 thread each),
# hash (prefix affinity) vs round-robin, on a shared-prefix workload. Prints one table row per run and keeps
# each run's bench-serve JSON under $OUT. Results and how to read them: docs/PERFORMANCE.md.
#   bench/cluster_bench.sh [MODEL]     (env: REPLICAS="1 2 3" BALANCES="hash roundrobin" N=48 CONC=4 OUT=...)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${TACHYON_BIN:-$ROOT/build/tachyon}
MODEL=${1:-$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf}
OUT=${OUT:-$ROOT/build/cluster-bench}
PORT=${PORT:-18700}
N=${N:-48}
CONC=${CONC:-4}
# 4 system prompts of 256 words (~300 tokens), 32-word user turns, 32 output tokens; the KV pool of each
# KV_MIB limits each replica's KV pool (default: the engine's choice).
WORKLOAD=${WORKLOAD:---dataset shared-prefix --num-groups 4 --prefix-len 256 --input-len 32 --output-len 32}
KV_MIB=${KV_MIB:-}
mkdir -p "$OUT"
printf '%-9s %-10s %8s %9s %10s %10s %9s\n' replicas balance "req/s" "out tok/s" "TTFT p50" "TTFT p99" "hit rate"
printf '%-9s %-10s %8s %9s %10s %10s %9s\n' "" "" "" "" "(ms)" "(ms)" ""
for n in ${REPLICAS:-1 2 3}; do
    for bal in ${BALANCES:-hash roundrobin}; do
        run=$OUT/run-$n-$bal
        extra=(--ctx-size 1024)
        [ -n "$KV_MIB" ] && extra+=(--kv-cache-mem "$KV_MIB")
        "$ROOT/scripts/cluster.sh" start "$n" --model "$MODEL" --balance "$bal" --port "$PORT" --run-dir "$run" \
            -- "${extra[@]}" >/dev/null
        # shellcheck disable=SC2086
        "$BIN" bench-serve --url "http://127.0.0.1:$PORT" --model tachyon --num-requests "$N" \
            --max-concurrency "$CONC" --seed 1 $WORKLOAD --quiet --json "$run/bench.json" >"$run/bench.txt" 2>&1 || {
            cat "$run/bench.txt"; "$ROOT/scripts/cluster.sh" stop --run-dir "$run" >/dev/null; exit 1; }
        hit=0; q=0
        for ((i = 0; i < n; i++)); do
            m=$(curl -s "http://127.0.0.1:$((PORT + 1 + i))/metrics")
            hit=$((hit + $(awk '/^tachyon:prefix_cache_hit_tokens_total/ {printf "%d", $2}' <<<"$m")))
            q=$((q + $(awk '/^tachyon:prefix_cache_queries_total/ {printf "%d", $2}' <<<"$m")))
        done
        "$ROOT/scripts/cluster.sh" stop --run-dir "$run" >/dev/null
        python3 - "$run/bench.json" "$n" "$bal" "$hit" "$q" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["summary"]
print("%-9s %-10s %8.2f %9.1f %10.0f %10.0f %9.3f" % (sys.argv[2], sys.argv[3], j["request_throughput"],
      j["output_throughput"], j["ttft"]["median_ms"], j["ttft"]["p99_ms"], int(sys.argv[4]) / max(1, int(sys.argv[5]))))
PY
    done
done
