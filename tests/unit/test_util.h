// Minimal test harness: CHECK* macros print what differed and count failures; TEST_MAIN reports
// "N passed, N failed" and the exit status. Header-only so each test is one self-contained file.
#ifndef TACHYON_TEST_UTIL_H
#define TACHYON_TEST_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/cpu_internal.h"

static int tu_pass, tu_fail;

#define CHECK(cond)                                                                                          \
    do {                                                                                                     \
        if (cond) tu_pass++;                                                                                 \
        else {                                                                                               \
            tu_fail++;                                                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                         \
        }                                                                                                    \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                                 \
    do {                                                                                                     \
        if (cond) tu_pass++;                                                                                 \
        else {                                                                                               \
            tu_fail++;                                                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);                         \
            fprintf(stderr, __VA_ARGS__);                                                                    \
            fputc('\n', stderr);                                                                             \
        }                                                                                                    \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                                   \
    CHECK_MSG((long long)(a) == (long long)(b), "%lld != %lld", (long long)(a), (long long)(b))

#define CHECK_NEAR(a, b, tol)                                                                                \
    CHECK_MSG(fabs((double)(a) - (double)(b)) <= (tol), "%.9g vs %.9g (tol %.3g)", (double)(a), (double)(b), \
              (double)(tol))

#define TEST_MAIN_END()                                                                                      \
    do {                                                                                                     \
        printf("%d passed, %d failed\n", tu_pass, tu_fail);                                                  \
        return tu_fail ? 1 : 0;                                                                              \
    } while (0)

// --- tests that run kernels at every ISA level: mark each level as it runs (tu_isa_ran), then
// tu_isa_report prints one line, e.g. "test_attention: ISA levels tested: scalar avx2 avx512; not available on
// this host: -", which `make unit` repeats after ctest, so a green run on a host without AVX-512 says so.
// A level this host and TACHYON_ISA allow that the test did not run is a failure (a loop bound gone wrong
// would otherwise pass quietly).
// The lowest SIMD level of this architecture (avx2 on x86-64, neon on aarch64): tests loop from here up to
// cpu_hw_isa() and compare each level with CPU_ISA_SCALAR.
#define TU_ISA_FIRST_SIMD (CPU_ISA_SCALAR + 1)

static inline unsigned *tu_isa_mask(void) {
    static unsigned mask; // bit per cpu_isa level that ran
    return &mask;
}

static inline void tu_isa_ran(cpu_isa isa) { *tu_isa_mask() |= 1u << isa; }

static inline void tu_isa_report(const char *test) {
    cpu_isa hw = cpu_hw_isa(), best = cpu_best_isa();
    char lists[4][64] = {"", "", "", ""}; // tested, not on this host, off by TACHYON_ISA, missed (a failure)
    for (int l = CPU_ISA_SCALAR; l <= CPU_ISA_TOP; l++) {
        int did = (*tu_isa_mask() >> l) & 1;
        char *dst = lists[did ? 0 : l > (int)hw ? 1 : l > (int)best ? 2 : 3];
        snprintf(dst + strlen(dst), 64 - strlen(dst), "%s%s", dst[0] ? " " : "", cpu_isa_name((cpu_isa)l));
        CHECK_MSG(did || l > (int)best, "ISA level %s is available here but was not tested", cpu_isa_name((cpu_isa)l));
    }
    printf("%s: ISA levels tested: %s; not available on this host: %s%s%s%s%s\n", test, lists[0][0] ? lists[0] : "-",
           lists[1][0] ? lists[1] : "-", lists[2][0] ? "; off by TACHYON_ISA: " : "", lists[2],
           lists[3][0] ? "; NOT TESTED: " : "", lists[3]);
}

#endif
