#!/usr/bin/env bash
# Byte-for-byte comparison of `tachyon logits` between two binaries: every model given, at each ISA level and
# KV cache type, in one prefill batch and in small chunks (chunked prefill over the paged cache). A change
# that must not move the CPU's arithmetic (a refactor of the forward pass) passes when every line says "same" (or "skip", below).
#
#   scripts/logits_identity.sh BEFORE_BIN AFTER_BIN MODEL.gguf [MODEL.gguf ...]
#
# Environment: ISAS (default "scalar avx2"), KV_TYPES (default "f16 q8_0 q4_0"), BATCHES (default "512 7"),
# THREADS (default 2), IDS (comma-separated token ids; default 48 ids valid in every vocabulary of 256+),
# KEEP (a directory: the outputs stay there; default a temporary directory, removed at the end).
# Before-outputs already in KEEP are reused, so a second run against a new AFTER_BIN runs only that binary.
# A combination a model does not allow (quantized KV with a head dim under 32) passes when both binaries refuse
# it with the same message. Exit status: 0 when every output is identical, 1 when any differs or a run fails,
# 2 on bad usage.
set -u
if [ $# -lt 3 ]; then
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
before=$1 after=$2
shift 2
isas=${ISAS:-scalar avx2}
kv_types=${KV_TYPES:-f16 q8_0 q4_0}
batches=${BATCHES:-512 7}
threads=${THREADS:-2}
ids=${IDS:-1,42,17,99,3,250,7,64,128,5,200,31,8,77,150,2,19,240,66,101,13,55,180,9,222,45,88,130,6,210,37,71,160,4,199,28,93,141,11,233,52,84,175,21,248,60,117,190}
if [ -n "${KEEP:-}" ]; then
    out=$KEEP
    mkdir -p "$out"
else
    out=$(mktemp -d)
    trap 'rm -rf "$out"' EXIT
fi
fail=0
for model in "$@"; do
    name=$(basename "$model" .gguf)
    for isa in $isas; do
        for kv in $kv_types; do
            for batch in $batches; do
                tag="$name.$isa.$kv.b$batch"
                args=(logits -m "$model" --ids "$ids" --batch "$batch" -t "$threads" --kv-type "$kv")
                if [ ! -s "$out/$tag.before.f32" ] &&
                    ! TACHYON_ISA=$isa "$before" "${args[@]}" -o "$out/$tag.before.f32" 2>"$out/$tag.before.err"; then
                    # a combination the model does not allow (a quantized cache with a small head dim): the
                    # after binary must refuse it with the same message
                    if ! TACHYON_ISA=$isa "$after" "${args[@]}" -o "$out/$tag.after.f32" 2>"$out/$tag.after.err" &&
                        cmp -s "$out/$tag.before.err" "$out/$tag.after.err"; then
                        echo "skip   $tag: both refuse: $(cat "$out/$tag.after.err")"
                    else
                        echo "FAIL   $tag: before: $(cat "$out/$tag.before.err")"
                        fail=1
                    fi
                    rm -f "$out/$tag.before.f32"
                    continue
                fi
                if ! TACHYON_ISA=$isa "$after" "${args[@]}" -o "$out/$tag.after.f32" 2>"$out/$tag.after.err"; then
                    echo "FAIL   $tag: after: $(cat "$out/$tag.after.err")"
                    fail=1
                    continue
                fi
                if cmp -s "$out/$tag.before.f32" "$out/$tag.after.f32"; then
                    echo "same   $tag ($(stat -c %s "$out/$tag.after.f32") bytes)"
                else
                    echo "DIFFER $tag: $(cmp "$out/$tag.before.f32" "$out/$tag.after.f32" 2>&1 | head -1)"
                    fail=1
                fi
            done
        done
    done
done
exit $fail
