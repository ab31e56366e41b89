#!/bin/sh
# Every header under src/ compiles on its own: `#include "x.h"` alone in a translation unit, with the project's
# warnings as errors. A header that needs another one includes it; nothing depends on what its includer
# happened to include first. Run by CTest (check_headers) from the repository root; usage:
#   scripts/check_headers.sh [CC]
#
# Per-ISA headers of src/cpu (x86_*.h, *_x86.h) are compiled with the ISA flags of their .c files: once with the
# AVX2 flags and once with the AVX-512 ones (those with 512 in the name need AVX-512 and get only those).
# Templates (headers compiled once per ISA level, parameterized by macros that their instance file defines
# first) are checked as their instance includes them: after the lines of the instance file that precede its
# #include of the template, and nothing else. The table below names each template's instance per level.
# Headers of one CPU architecture are checked only by a compiler for it (the target of CC -dumpmachine): the x86
# ones above for x86-64, the ARM ones (arm_*.h, *_arm.h) for aarch64: the ARM templates once per level with its
# flags and instance (quant_neon.c, quant_dotprod.c, quant_i8mm.c), the others with the flags of the highest
# level (ARMv8.6-A + i8mm, which implies dotprod and NEON); `make test-arm64` runs this script with the cross
# compiler.
# CUDA headers (*.cuh) are not C and are compiled by nvcc with the CUDA sources; the C headers of src/cuda/
# are checked like every other.
#
# scripts/check_headers.allow lists headers known to fail, one per line with the reason; the check fails when
# a header not listed fails, and also when a listed one passes (so the list only shrinks).
set -u
CC=${1:-${CC:-cc}}
cd "$(dirname "$0")/.." || exit 2
# The libraries' flags: those CMake found for this build when it runs the check (TACHYON_DEPS_CFLAGS, the
# target's packages in a cross build), else the host's pkg-config.
DEPS=${TACHYON_DEPS_CFLAGS-$(pkg-config --cflags libevent jansson libpcre2-8 libxxhash libcurl 2>/dev/null)}
AVX2="-mavx2 -mfma -mf16c"
AVX512="-mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx2 -mfma -mf16c"
ARM_NEON="-march=armv8-a"
ARM_DOTPROD="-march=armv8.2-a+dotprod"
ARM="-march=armv8.6-a+i8mm+dotprod"
case "$($CC -dumpmachine 2>/dev/null)" in
x86_64*) ARCH=x86_64 ;;
aarch64*) ARCH=aarch64 ;;
*) ARCH=other ;;
esac
ALLOW=scripts/check_headers.allow
TMP=$(mktemp -d) || exit 2
trap 'rm -rf "$TMP"' EXIT

# template header -> its AVX2 instance and its AVX-512 instance, or its one instance (paths under src/)
instance() {
    case "$1" in
    cpu/x86_act.h | cpu/x86_gemm.h | cpu/x86_repack.h | cpu/x86_repack_q8.h | cpu/x86_repack_mxfp4.h | cpu/x86_repack_q4.h | cpu/x86_table.h)
        echo "cpu/quant_avx2.c cpu/quant_avx512.c" ;;
    cpu/ops_x86.h) echo "cpu/ops_avx2.c cpu/ops_avx512.c" ;;
    cpu/attention_x86.h) echo "cpu/attention_avx2.c cpu/attention_avx512.c" ;;
    cpu/x86_vexp.h) echo "cpu/x86_vec256.h cpu/x86_vec512.h" ;;
    cpu/delta_rule_impl.h) echo "cpu/delta_rule.c" ;; # the baseline level's instance (any architecture)
    cpu/arm_common.h | cpu/arm_act.h | cpu/arm_gemm.h | cpu/arm_unpack.h | cpu/arm_table.h)
        echo "cpu/quant_neon.c cpu/quant_dotprod.c cpu/quant_i8mm.c" ;;
    *) echo "" ;;
    esac
}

# compile_one HEADER FLAGS [INSTANCE]: 0 if it compiles
compile_one() {
    : >"$TMP/tu.c"
    if [ -n "${3:-}" ]; then
        # the instance's lines before its #include of the header
        sed "\\|#include \"$1\"|,\$d" "src/$3" >"$TMP/tu.c"
    fi
    printf '#include "%s"\n' "$1" >>"$TMP/tu.c"
    # A header alone uses none of its static functions: unused ones are expected here, not a fault.
    # shellcheck disable=SC2086 # flag lists are meant to split
    $CC -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-unused-function $2 $DEPS -Isrc -fsyntax-only \
        "$TMP/tu.c" >"$TMP/err" 2>&1
}

check() { # check HEADER: 0 if it compiles in every configuration it is built in
    inst=$(instance "$1")
    case "$1" in
    cpu/x86_* | cpu/*_x86.h) [ "$ARCH" = x86_64 ] || return 0 ;;
    cpu/arm_* | cpu/*_arm.h) [ "$ARCH" = aarch64 ] || return 0 ;;
    esac
    case "$1" in
    cpu/arm_* | cpu/*_arm.h)
        if [ -n "$inst" ]; then
            compile_one "$1" "$ARM_NEON" "$(echo "$inst" | cut -d' ' -f1)" &&
                compile_one "$1" "$ARM_DOTPROD" "$(echo "$inst" | cut -d' ' -f2)" &&
                compile_one "$1" "$ARM" "$(echo "$inst" | cut -d' ' -f3)"
        else
            compile_one "$1" "$ARM"
        fi ;;
    cpu/*512*) compile_one "$1" "$AVX512" "$(echo "$inst" | cut -s -d' ' -f2)" ;;
    cpu/x86_* | cpu/*_x86.h)
        compile_one "$1" "$AVX2" "$(echo "$inst" | cut -s -d' ' -f1)" &&
            compile_one "$1" "$AVX512" "$(echo "$inst" | cut -s -d' ' -f2)" ;;
    *) compile_one "$1" "" "$inst" ;;
    esac
}

fail=0
n=0
for h in $(cd src && find . -name '*.h' | sed 's|^\./||' | sort); do
    n=$((n + 1))
    listed=0
    grep -q "^$h[[:space:]]" "$ALLOW" 2>/dev/null && listed=1
    if check "$h"; then
        if [ $listed = 1 ]; then
            echo "check_headers: $h compiles on its own now: remove it from $ALLOW"
            fail=1
        fi
    elif [ $listed = 0 ]; then
        echo "check_headers: src/$h does not compile on its own:"
        head -n 5 "$TMP/err"
        fail=1
    fi
done
k=$(grep -c "^[^#[:space:]]" "$ALLOW" 2>/dev/null)
[ $fail = 0 ] && echo "check_headers: $n headers, each compiles on its own (known failures: ${k:-0}; those of" \
    "another CPU architecture than $ARCH skipped)"
exit $fail
