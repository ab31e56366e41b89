#!/bin/bash
# Two-tenant flood: tenant B's TTFT alone vs while tenant A floods, with fair share (A and B are
# different tenants in the key file) and without (both keys in one tenant: plain FIFO admission).
# SmolLM2-135M Q4_1, --max-seqs 4. B: 12 requests at 0.5 req/s, 64 prompt / 16 output tokens.
# A: 24 requests at once, 64 / 64. Rounds interleave solo, fair, fifo. Usage: bench/tenant_flood.sh [ROUNDS]
# (SERVE_ARGS="..." adds server options, MODES="solo fair" picks the runs)
set -e
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${TACHYON_BIN:-$ROOT/build/tachyon}
M=$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf
OUT=${OUT:-$(mktemp -d)}
cd "$OUT"
printf 'ka tenant-a\nkb tenant-b\n' > keys_fair.txt
printf 'ka shared\nkb shared\n' > keys_fifo.txt
B_ARGS="--request-rate 0.5 --num-requests 12 --input-len 64 --output-len 16 --endpoint completions --model m --seed 7"
A_ARGS="--request-rate inf --num-requests 24 --input-len 64 --output-len 64 --endpoint completions --model m --seed 3"
serve() {
  PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
  $BIN serve -m "$M" --port $PORT --served-model-name m --max-seqs 4 --ctx-size 1024 --api-key-file $1 \
    --log-level warn $SERVE_ARGS > serve_$2.log 2>&1 &
  SP=$!
  for i in $(seq 300); do curl -s localhost:$PORT/health | grep -q ok && break; sleep 0.2; done
  kill -0 $SP
}
for round in $(seq ${1:-2}); do
  for mode in ${MODES:-solo fair fifo}; do
    kf=keys_fair.txt; [ $mode = fifo ] && kf=keys_fifo.txt
    serve $kf $mode
    $BIN bench-serve --url http://127.0.0.1:$PORT --api-key kb --warmup 2 $B_ARGS --quiet --json b_${mode}_$round.json > /dev/null &
    BP=$!
    if [ $mode != solo ]; then
      sleep 0.5
      $BIN bench-serve --url http://127.0.0.1:$PORT --api-key ka $A_ARGS --quiet --json a_${mode}_$round.json > /dev/null
    fi
    wait $BP
    kill $SP; wait $SP || true
    python3 -c "
import json; d = json.load(open('b_${mode}_$round.json'))['summary']['ttft']
print('round $round %-4s B TTFT p50 %8.0f ms  p99 %8.0f ms' % ('$mode', d['median_ms'], d['p99_ms']))"
  done
done
echo "results in $OUT"
