// The ISA level in use: detected once (cpu_detect_x86.c or cpu_detect_arm.c, by architecture), then lowered
// by TACHYON_ISA. A level name of the other architecture (TACHYON_ISA=avx2 on aarch64, =neon on x86-64) or
// an unknown name is ignored with a warning on stderr: the same environment can serve a mixed fleet.
#include "cpu/cpu.h"
#include "cpu/cpu_detect.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cpu_features g_feat;
static cpu_isa g_best, g_hw;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

// Level names, indexed by cpu_isa, of this architecture and of the other one (for the warning only).
#if defined(__aarch64__)
static const char *const cpu_names[] = {"scalar", "neon", "dotprod", "i8mm"};
static const char *const cpu_other_names[] = {"avx2", "avx512"};
#else
static const char *const cpu_names[] = {"scalar", "avx2", "avx512"};
static const char *const cpu_other_names[] = {"neon", "dotprod", "i8mm"};
#endif
_Static_assert(sizeof cpu_names / sizeof cpu_names[0] == CPU_ISA_TOP + 1, "one name per level");

#if !defined(__x86_64__) && !defined(__aarch64__)
// Any other architecture runs the scalar level.
cpu_isa cpu_detect_hw(cpu_features *f) {
    memset(f, 0, sizeof *f);
    return CPU_ISA_SCALAR;
}
#endif

int cpu_isa_parse(const char *name) {
    for (int l = 0; l <= CPU_ISA_TOP; l++)
        if (!strcmp(name, cpu_names[l])) return l;
    return -1;
}

static void cpu_detect(void) {
    cpu_isa best = cpu_detect_hw(&g_feat);
    g_hw = best;
    const char *env = getenv("TACHYON_ISA");
    if (env && *env) {
        int want = cpu_isa_parse(env);
        if (want < 0) {
            int other = 0;
            for (size_t i = 0; i < sizeof cpu_other_names / sizeof cpu_other_names[0]; i++)
                other |= !strcmp(env, cpu_other_names[i]);
            fprintf(stderr, "tachyon: TACHYON_ISA=%s ignored: %s; the levels here are", env,
                    other ? "a level of another CPU architecture" : "unknown level");
            for (int l = 0; l <= CPU_ISA_TOP; l++) fprintf(stderr, " %s", cpu_names[l]);
            fprintf(stderr, "\n");
        } else if (want < (int)best) {
            best = (cpu_isa)want; // can only lower the level: never run what the CPU lacks
        }
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

const char *cpu_isa_name(cpu_isa isa) { return (int)isa >= 0 && isa <= CPU_ISA_TOP ? cpu_names[isa] : "?"; }

cpu_isa cpu_hw_isa(void) {
    pthread_once(&g_once, cpu_detect);
    return g_hw;
}
