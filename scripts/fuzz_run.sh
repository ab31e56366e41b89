#!/usr/bin/env bash
# One fuzz target of `make fuzz`: replays its committed seeds (tests/fuzz/seeds/<name>/, the inputs of every
# crash found so far among them), then mutates for SECONDS into its corpus folder fuzz-corpus-<target>/.
# Undefined behaviour is fatal in the fuzz build; an input that takes over 20 s is reported as a hang.
# Prints one line when it passes (libFuzzer's last), the log's tail and "<target> FAILED" when it does not
# (exit 1). Its log stays in build-fuzz/log-<target>.txt, a crash input in build-fuzz/.
# `make fuzz` runs FUZZ_JOBS of these at a time (each is one process on one core), so the output of one target
# is printed in one piece when it ends.
# Usage: scripts/fuzz_run.sh SECONDS build-fuzz/fuzz_<name>
set -u
cd "$(dirname "$0")/.." || exit 2
secs=$1 f=$2
n=$(basename "$f")
mkdir -p "fuzz-corpus-$n"
seeds=tests/fuzz/seeds/${n#fuzz_}
[ -d "$seeds" ] || seeds=
log=build-fuzz/log-$n.txt
# shellcheck disable=SC2086
if ! "$f" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -timeout=20 -artifact_prefix=build-fuzz/ \
        "fuzz-corpus-$n" $seeds > "$log" 2>&1; then
    { tail -n 40 "$log"; echo "$n FAILED"; } >&2
    exit 1
fi
echo "== $n (${secs}s): $(tail -n 1 "$log")"
