// x86-64 feature detection from CPUID, including whether the OS saves the AVX / AVX-512 register state
// (XGETBV). Compiled on x86-64 only (CMakeLists.txt: *_x86.c).
#include "cpu/cpu_detect.h"

#include <cpuid.h>
#include <string.h>

static uint64_t cpu_xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

cpu_isa cpu_detect_hw(cpu_features *f) {
    unsigned a, b, c, d;
    memset(f, 0, sizeof *f);
    unsigned max_leaf = __get_cpuid_max(0, NULL);
    if (max_leaf >= 1 && __get_cpuid(1, &a, &b, &c, &d)) {
        int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
        uint64_t xcr0 = osxsave ? cpu_xgetbv0() : 0;
        int os_avx = (xcr0 & 0x6) == 0x6;       // XMM + YMM state
        int os_avx512 = (xcr0 & 0xe6) == 0xe6;  // + opmask, ZMM_Hi256, Hi16_ZMM
        if (avx && os_avx) {
            f->fma = (c >> 12) & 1;
            f->f16c = (c >> 29) & 1;
            if (max_leaf >= 7) {
                __cpuid_count(7, 0, a, b, c, d);
                f->avx2 = (b >> 5) & 1;
                if (os_avx512) {
                    f->avx512f = (b >> 16) & 1;
                    f->avx512bw = (b >> 30) & 1;
                    f->avx512vl = (b >> 31) & 1;
                    f->avx512vnni = (c >> 11) & 1;
                    int dq = (b >> 17) & 1;
                    if (!dq) f->avx512f = 0; // our AVX-512 level also needs DQ; treat as absent
                    unsigned a1, b1, c1, d1;
                    __cpuid_count(7, 1, a1, b1, c1, d1);
                    (void)b1, (void)c1, (void)d1;
                    f->avx512bf16 = (a1 >> 5) & 1;
                }
            }
        }
    }
    // AVX2 level: AVX2 + FMA + F16C. AVX-512 level: F/BW/VL/DQ + VNNI (kernels use vpdpbusd); a CPU with
    // AVX-512 but no VNNI (Skylake-X) runs the AVX2 level.
    cpu_isa best = CPU_ISA_SCALAR;
    if (f->avx2 && f->fma && f->f16c) best = CPU_ISA_AVX2;
    if (best == CPU_ISA_AVX2 && f->avx512f && f->avx512bw && f->avx512vl && f->avx512vnni) best = CPU_ISA_AVX512;
    return best;
}
