#!/bin/sh
# Cross-builds scripts/arm_kernel_check.c with the ARM64 kernels and the scalar reference, and runs it under
# qemu-aarch64 -cpu max (every level: NEON, dotprod, i8mm). Needs gcc-aarch64-linux-gnu and qemu-user.
set -e
cd "$(dirname "$0")/.."
out=${1:-/tmp/arm_kernel_check}
mkdir -p "$out"
CC=${CC:-aarch64-linux-gnu-gcc}
FLAGS="-O2 -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -Isrc"
objs=""
# compile $1 with flags $2 unless its object is newer than it and every src/cpu header
cc1() {
    o="$out/$(basename "$1" .c).o"
    if [ ! -f "$o" ] || [ -n "$(find "$1" src/cpu/*.h src/tensor/*.h -newer "$o" 2>/dev/null | head -1)" ]; then
        $CC $FLAGS $2 -c "$1" -o "$o"
    fi
    objs="$objs $o"
}
for f in src/tensor/*.c src/cpu/attention.c scripts/arm_kernel_check.c scripts/arm_kernel_stubs.c; do
    cc1 "$f" "-march=armv8-a"
done
for f in src/cpu/*_neon.c; do cc1 "$f" "-O3 -march=armv8-a"; done
for f in src/cpu/*_dotprod.c; do cc1 "$f" "-O3 -march=armv8.2-a+dotprod"; done
for f in src/cpu/*_i8mm.c; do cc1 "$f" "-O3 -march=armv8.6-a+i8mm"; done
$CC -o "$out/arm_kernel_check" $objs -lm -lpthread
qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu max "$out/arm_kernel_check"
