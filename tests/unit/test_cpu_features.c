// ISA level names and TACHYON_ISA parsing for the architecture this test is built for (x86-64: scalar avx2
// avx512; aarch64: scalar neon dotprod i8mm): every name parses to its level and back, the other
// architecture's names and unknown strings parse to -1, and the detected levels are consistent (the level in
// use never exceeds the hardware's; the feature flags imply the level).
#include "cpu/cpu.h"
#include "test_util.h"

#include <string.h>

int main(void) {
#if defined(__aarch64__)
    const char *mine[] = {"scalar", "neon", "dotprod", "i8mm"}, *other[] = {"avx2", "avx512"};
#else
    const char *mine[] = {"scalar", "avx2", "avx512"}, *other[] = {"neon", "dotprod", "i8mm"};
#endif
    CHECK_EQ_INT(sizeof mine / sizeof mine[0], CPU_ISA_TOP + 1);
    for (int l = 0; l <= CPU_ISA_TOP; l++) {
        CHECK_EQ_INT(cpu_isa_parse(mine[l]), l);
        CHECK_MSG(!strcmp(cpu_isa_name((cpu_isa)l), mine[l]), "level %d is named %s", l, cpu_isa_name((cpu_isa)l));
    }
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) CHECK_EQ_INT(cpu_isa_parse(other[i]), -1);
    const char *bad[] = {"", "NEON", "Scalar", "avx", "i8mm ", "sve"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) CHECK_EQ_INT(cpu_isa_parse(bad[i]), -1);
    CHECK(!strcmp(cpu_isa_name((cpu_isa)(CPU_ISA_TOP + 1)), "?"));

    const cpu_isa hw = cpu_hw_isa(), best = cpu_best_isa();
    const cpu_features *f = cpu_get_features();
    CHECK(best <= hw && hw <= CPU_ISA_TOP);
    const char *env = getenv("TACHYON_ISA");
    int want = env ? cpu_isa_parse(env) : -1;
    CHECK_EQ_INT(best, want >= 0 && want < (int)hw ? want : (int)hw);
#if defined(__aarch64__)
    CHECK_EQ_INT(hw >= CPU_ISA_NEON, f->asimd);
    CHECK(hw < CPU_ISA_DOTPROD || f->asimddp);
    CHECK(hw < CPU_ISA_I8MM || f->i8mm);
    CHECK(!f->avx2 && !f->avx512f);
    printf("aarch64: asimd %d asimddp %d i8mm %d sve %d fp16 %d\n", f->asimd, f->asimddp, f->i8mm, f->sve, f->fp16);
#elif defined(__x86_64__)
    CHECK(hw < CPU_ISA_AVX2 || (f->avx2 && f->fma && f->f16c));
    CHECK(hw < CPU_ISA_AVX512 || (f->avx512f && f->avx512vnni));
    CHECK(!f->asimd && !f->asimddp && !f->i8mm);
#endif
    printf("hardware level %s, in use %s\n", cpu_isa_name(hw), cpu_isa_name(best));
    TEST_MAIN_END();
}
