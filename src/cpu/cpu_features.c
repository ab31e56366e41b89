// CPU feature detection from CPUID, including whether the OS saves the AVX / AVX-512 register state
// (XGETBV). Detected once; the best ISA level can be lowered with TACHYON_ISA=scalar|avx2|avx512.
#include "cpu/cpu.h"
#include "cpu/cpu_internal.h"

#include <cpuid.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static cpu_features g_feat;
static cpu_isa g_best, g_hw;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static uint64_t cpu_xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static void cpu_detect(void) {
    unsigned a, b, c, d;
    memset(&g_feat, 0, sizeof g_feat);
    unsigned max_leaf = __get_cpuid_max(0, NULL);
    if (max_leaf >= 1 && __get_cpuid(1, &a, &b, &c, &d)) {
        int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
        uint64_t xcr0 = osxsave ? cpu_xgetbv0() : 0;
        int os_avx = (xcr0 & 0x6) == 0x6;       // XMM + YMM state
        int os_avx512 = (xcr0 & 0xe6) == 0xe6;  // + opmask, ZMM_Hi256, Hi16_ZMM
        if (avx && os_avx) {
            g_feat.fma = (c >> 12) & 1;
            g_feat.f16c = (c >> 29) & 1;
            if (max_leaf >= 7) {
                __cpuid_count(7, 0, a, b, c, d);
                g_feat.avx2 = (b >> 5) & 1;
                if (os_avx512) {
                    g_feat.avx512f = (b >> 16) & 1;
                    g_feat.avx512bw = (b >> 30) & 1;
                    g_feat.avx512vl = (b >> 31) & 1;
                    g_feat.avx512vnni = (c >> 11) & 1;
                    int dq = (b >> 17) & 1;
                    if (!dq) g_feat.avx512f = 0; // our AVX-512 level also needs DQ; treat as absent
                    unsigned a1, b1, c1, d1;
                    __cpuid_count(7, 1, a1, b1, c1, d1);
                    (void)b1, (void)c1, (void)d1;
                    g_feat.avx512bf16 = (a1 >> 5) & 1;
                }
            }
        }
    }
    // AVX2 level: AVX2 + FMA + F16C. AVX-512 level: F/BW/VL/DQ + VNNI (kernels use vpdpbusd); a CPU with
    // AVX-512 but no VNNI (Skylake-X) runs the AVX2 level.
    cpu_isa best = CPU_ISA_SCALAR;
    if (g_feat.avx2 && g_feat.fma && g_feat.f16c) best = CPU_ISA_AVX2;
    if (best == CPU_ISA_AVX2 && g_feat.avx512f && g_feat.avx512bw && g_feat.avx512vl && g_feat.avx512vnni)
        best = CPU_ISA_AVX512;
    g_hw = best;
    const char *env = getenv("TACHYON_ISA");
    if (env && *env) {
        cpu_isa want = best;
        if (!strcmp(env, "scalar")) want = CPU_ISA_SCALAR;
        else if (!strcmp(env, "avx2")) want = CPU_ISA_AVX2;
        else if (!strcmp(env, "avx512")) want = CPU_ISA_AVX512;
        if (want < best) best = want; // can only lower the level: never run what the CPU lacks
    }
    g_best = best;
}

const cpu_features *cpu_get_features(void) {
    pthread_once(&g_once, cpu_detect);
    return &g_feat;
}

cpu_isa cpu_best_isa(void) {
    pthread_once(&g_once, cpu_detect);
    return g_best;
}

const char *cpu_isa_name(cpu_isa isa) {
    switch (isa) {
    case CPU_ISA_SCALAR: return "scalar";
    case CPU_ISA_AVX2: return "avx2";
    case CPU_ISA_AVX512: return "avx512";
    }
    return "?";
}

cpu_isa cpu_hw_isa(void) {
    pthread_once(&g_once, cpu_detect);
    return g_hw;
}
