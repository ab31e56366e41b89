#!/usr/bin/env bash
# N tachyon replicas behind HAProxy (and optionally Prometheus) on loopback, for trying and testing a
# scaled-out deployment on one machine. See docs/DEPLOY.md.
#
#   scripts/cluster.sh start N [options] [-- extra `tachyon serve` flags]
#   scripts/cluster.sh status
#   scripts/cluster.sh stop
#
# Options (start):
#   --model PATH          model for every replica (default: models/SmolLM2-135M-Instruct.Q4_1.gguf)
#   --balance hash|roundrobin   prefix/session affinity (default) or plain round-robin, for comparison
#   --prometheus          also run Prometheus scraping every replica (deploy/prometheus.yml + rules.yml)
#   --port P              HAProxy front port (default 8000); replicas use P+1..P+N, the HAProxy stats page
#                         P+N+1, Prometheus P+N+2
#   --threads T           compute threads per replica (default 1)
#   --hash-bytes B        body bytes hashed for affinity (default 256)
#   --timeout S           seconds to wait for the replicas to become healthy (default 120)
# Every command takes --run-dir DIR (default: $TACHYON_CLUSTER_DIR or build/cluster): pids, logs, the
# generated configs and cluster.env (the ports, for scripts) live there.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${TACHYON_BIN:-$ROOT/build/tachyon}
RUN=${TACHYON_CLUSTER_DIR:-$ROOT/build/cluster}
MODEL=$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf
BALANCE="hash"
PROM=0
PORT=8000
THREADS=1
HASH_BYTES=256
TIMEOUT=120
N=

die() { echo "cluster.sh: $*" >&2; exit 1; }
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

CMD=${1:-}
[ -n "$CMD" ] || die "usage: cluster.sh start N [options] | stop | status   (see the header of this file)"
shift
EXTRA=()
while [ $# -gt 0 ]; do
    case "$1" in
    --model) MODEL=$2; shift 2 ;;
    --balance) BALANCE=$2; shift 2 ;;
    --prometheus) PROM=1; shift ;;
    --port) PORT=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --hash-bytes) HASH_BYTES=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --run-dir) RUN=$2; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    [0-9]*) N=$1; shift ;;
    *) die "unknown argument '$1'" ;;
    esac
done
mkdir -p "$RUN"
RUN=$(cd "$RUN" && pwd)

# Waits until URL answers 200 (curl), the pid in PIDFILE dies, or TIMEOUT seconds pass.
wait_ok() {
    local url=$1 pidfile=$2 what=$3 t0=$SECONDS
    while :; do
        curl -fsS -o /dev/null --max-time 2 "$url" 2>/dev/null && return 0
        alive "$pidfile" || die "$what exited during start-up; see its log in $RUN"
        [ $((SECONDS - t0)) -lt "$TIMEOUT" ] || die "$what not ready after ${TIMEOUT}s; see its log in $RUN"
        sleep 0.1
    done
}

# SIGTERM, then wait (up to $2 seconds) for the process to exit; SIGKILL after that.
stop_pid() {
    local pidfile=$1 grace=$2 name
    name=$(basename "$pidfile" .pid)
    [ -e "$pidfile" ] || return 0
    alive "$pidfile" || { rm -f "$pidfile"; echo "$name stopped"; return 0; }
    local pid t0=$SECONDS
    pid=$(cat "$pidfile")
    kill -TERM "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do
        if [ $((SECONDS - t0)) -ge "$grace" ]; then
            echo "$name: still running after ${grace}s, SIGKILL" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
        sleep 0.1
    done
    rm -f "$pidfile"
    echo "$name stopped"
}

start() {
    if [ -z "$N" ] || [ "$N" -lt 1 ]; then die "start needs the number of replicas"; fi
    [ -x "$BIN" ] || die "no tachyon binary at $BIN (make build, or set TACHYON_BIN)"
    [ -f "$MODEL" ] || die "no model at $MODEL"
    command -v haproxy >/dev/null || die "haproxy is not installed (apt-get install haproxy)"
    [ "$PROM" = 0 ] || command -v prometheus >/dev/null ||
        die "prometheus is not installed (apt-get install prometheus)"
    case "$BALANCE" in
    hash) BALANCE_LINES=$'    balance hash var(txn.lb_key)\n    hash-type consistent' ;;
    roundrobin) BALANCE_LINES='    balance roundrobin' ;;
    *) die "--balance must be hash or roundrobin" ;;
    esac
    for f in "$RUN"/*.pid; do alive "$f" && die "a cluster is already running in $RUN (cluster.sh stop first)"; done
    rm -f "$RUN"/*.pid "$RUN"/*.rc "$RUN/cluster.env"
    # A start that fails half-way stops what it started.
    trap 'echo "cluster.sh: start failed, stopping what was started" >&2; stop >&2' EXIT

    local stats=$((PORT + N + 1)) prom=$((PORT + N + 2)) servers="" targets="" ports=""
    for ((i = 0; i < N; i++)); do
        local p=$((PORT + 1 + i))
        # The subshell stays to record the exit status (rN.rc); signals go to the replica's own pid.
        ( "$BIN" serve -m "$MODEL" --host 127.0.0.1 --port "$p" --threads "$THREADS" --served-model-name tachyon \
              "${EXTRA[@]}" </dev/null >"$RUN/r$i.log" 2>&1 &
          echo $! >"$RUN/r$i.pid"; wait $! && rc=0 || rc=$?; echo "$rc" >"$RUN/r$i.rc" ) </dev/null >/dev/null 2>&1 &
        servers+="    server r$i 127.0.0.1:$p"$'\n'
        targets+="${targets:+, }'127.0.0.1:$p'"
        ports+="${ports:+ }$p"
    done
    for ((i = 0; i < N; i++)); do
        while [ ! -s "$RUN/r$i.pid" ]; do sleep 0.05; done
        wait_ok "http://127.0.0.1:$((PORT + 1 + i))/health" "$RUN/r$i.pid" "replica r$i"
    done

    local cfg
    cfg=$(sed -e "s|@FRONT_PORT@|$PORT|g" -e "s|@STATS_PORT@|$stats|g" -e "s|@RUN_DIR@|$RUN|g" \
              -e "s|@HASH_BYTES@|$HASH_BYTES|g" "$ROOT/deploy/haproxy.cfg")
    cfg=${cfg//@BALANCE_LINES@/$BALANCE_LINES}
    cfg=${cfg//@SERVERS@/${servers%$'\n'}}
    printf '%s\n' "$cfg" >"$RUN/haproxy.cfg"
    haproxy -c -q -f "$RUN/haproxy.cfg" || die "generated $RUN/haproxy.cfg is invalid"
    haproxy -db -f "$RUN/haproxy.cfg" </dev/null >"$RUN/haproxy.log" 2>&1 &
    echo $! >"$RUN/haproxy.pid"
    wait_ok "http://127.0.0.1:$stats/" "$RUN/haproxy.pid" "haproxy"

    if [ "$PROM" = 1 ]; then
        sed -e "s|@TARGETS@|$targets|g" -e "s|@HAPROXY@|'127.0.0.1:$stats'|g" \
            -e "s|rules.yml|$RUN/rules.yml|g" "$ROOT/deploy/prometheus.yml" >"$RUN/prometheus.yml"
        cp "$ROOT/deploy/rules.yml" "$RUN/rules.yml"
        prometheus --config.file="$RUN/prometheus.yml" --storage.tsdb.path="$RUN/prometheus-data" \
            --web.listen-address="127.0.0.1:$prom" </dev/null >"$RUN/prometheus.log" 2>&1 &
        echo $! >"$RUN/prometheus.pid"
        wait_ok "http://127.0.0.1:$prom/-/ready" "$RUN/prometheus.pid" "prometheus"
    fi
    trap - EXIT
    cat >"$RUN/cluster.env" <<ENV
FRONT_PORT=$PORT
STATS_PORT=$stats
PROMETHEUS_PORT=$([ "$PROM" = 1 ] && echo $prom)
REPLICA_PORTS="$ports"
BALANCE=$BALANCE
ENV
    echo "cluster up: $N replica(s) ($BALANCE) at http://127.0.0.1:$PORT, stats http://127.0.0.1:$stats/" \
         "$([ "$PROM" = 1 ] && echo ", prometheus http://127.0.0.1:$prom/")  run dir $RUN"
}

stop() {
    # Replicas first, while HAProxy still routes the responses they are finishing; each drains for up to
    # its --shutdown-grace (10 s by default), so wait a bit longer than that.
    local f
    for f in "$RUN"/r*.pid; do [ -e "$f" ] && { kill -TERM "$(cat "$f")" 2>/dev/null || true; }; done
    for f in "$RUN"/r*.pid; do [ -e "$f" ] && stop_pid "$f" 20; done
    for f in haproxy prometheus; do stop_pid "$RUN/$f.pid" 10; done
    wait 2>/dev/null || true
}

status() {
    local f any=0
    for f in "$RUN"/*.pid; do
        [ -e "$f" ] || continue
        any=1
        local name
        name=$(basename "$f" .pid)
        if alive "$f"; then echo "$name: running (pid $(cat "$f"))"
        else echo "$name: exited (status $(cat "$RUN/$name.rc" 2>/dev/null || echo '?'))"; fi
    done
    [ "$any" = 1 ] || { echo "no cluster in $RUN"; return 1; }
    [ -f "$RUN/cluster.env" ] || return 0
    # shellcheck source=/dev/null
    . "$RUN/cluster.env"
    for p in $REPLICA_PORTS; do
        echo "127.0.0.1:$p /health: $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$p/health")"
    done
}

case "$CMD" in
start) start ;;
stop) stop ;;
status) status ;;
*) die "unknown command '$CMD' (start, stop, status)" ;;
esac
