// aarch64 feature detection from the Linux auxiliary vector (getauxval AT_HWCAP / AT_HWCAP2: the kernel
// reports only what it also lets user space run). Compiled on aarch64 only (CMakeLists.txt: *_arm.c).
#include "cpu/cpu_detect.h"

#include <string.h>
#include <sys/auxv.h>

// The bits of the kernel's uapi asm/hwcap.h, in case the C library's headers predate them.
#ifndef HWCAP_FPHP
#define HWCAP_FPHP (1UL << 9)
#endif
#ifndef HWCAP_ASIMDHP
#define HWCAP_ASIMDHP (1UL << 10)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
#ifndef HWCAP_SVE
#define HWCAP_SVE (1UL << 22)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1UL << 13)
#endif

cpu_isa cpu_detect_hw(cpu_features *f) {
    memset(f, 0, sizeof *f);
    unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    f->asimd = (hw & HWCAP_ASIMD) != 0;
    f->asimddp = (hw & HWCAP_ASIMDDP) != 0;
    f->sve = (hw & HWCAP_SVE) != 0;
    f->fp16 = (hw & HWCAP_FPHP) && (hw & HWCAP_ASIMDHP);
    f->i8mm = (hw2 & HWCAP2_I8MM) != 0;
    // Each level needs the ones below it: i8mm without dotprod (no such CPU is known) stays at NEON.
    cpu_isa best = CPU_ISA_SCALAR;
    if (f->asimd) best = CPU_ISA_NEON;
    if (best == CPU_ISA_NEON && f->asimddp) best = CPU_ISA_DOTPROD;
    if (best == CPU_ISA_DOTPROD && f->i8mm) best = CPU_ISA_I8MM;
    return best;
}
