// f32 → f16 row conversion at every ISA level against the scalar tt_f32_to_f16, bit for bit: random values
// over the whole f16 range, ties (round to nearest even), subnormals, overflow to infinity, signed zeros and
// infinities, at every length 0..40 (the vector body and its tail). NaN stays NaN (its payload may differ).
#include "cpu/convert.h"
#include "tensor/ttype.h"
#include "test_util.h"

#include <stdint.h>
#include <string.h>

enum { N = 4096 };

int main(void) {
    static float x[N];
    static uint16_t ref[N], got[N];
    uint32_t s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 1664525u + 1013904223u;
        float m = (float)((s >> 8) & 0xffff) / 65536.0f * 2.0f - 1.0f;
        x[i] = ldexpf(m, (int)(s % 48) - 30); // 2^-30 .. 2^17: subnormal, normal and overflowing f16
    }
    // ties: f16 has 11 significant bits; 1 + k·2^-11 for odd k is halfway between two f16 values
    for (int i = 0; i < 64; i++) x[i] = 1.0f + (float)(2 * i + 1) * ldexpf(1.0f, -11);
    const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, 65504.0f, 65520.0f, -65519.0f, 6.0e-8f, 2.9e-8f,
                              3.0e-8f, -5.96e-8f, 6.1035e-5f, 1e-45f};
    memcpy(x + 64, specials, sizeof specials);
    x[100] = NAN;
    cvt_f32_f16_scalar(ref, x, N);
    for (int isa = CPU_ISA_SCALAR; isa <= (int)cpu_hw_isa(); isa++) {
        tu_isa_ran((cpu_isa)isa);
        cvt_f32_f16_fn f = cvt_select_f32_f16((cpu_isa)isa);
        memset(got, 0, sizeof got);
        f(got, x, N);
        int bad = 0;
        for (int i = 0; i < N; i++) {
            int same = i == 100 ? (got[i] & 0x7c00) == 0x7c00 && (got[i] & 0x3ff) : got[i] == ref[i];
            if (!same && bad++ < 3)
                fprintf(stderr, "%s: %.9g -> 0x%04x, scalar 0x%04x\n", cpu_isa_name((cpu_isa)isa), x[i], got[i],
                        ref[i]);
        }
        CHECK_MSG(bad == 0, "%s: %d values differ from the scalar conversion", cpu_isa_name((cpu_isa)isa), bad);
        for (int n = 0; n <= 40; n++) { // lengths: vector body + tail; nothing past n is written
            uint16_t out[48];
            for (int i = 0; i < 48; i++) out[i] = 0xbeef;
            f(out, x + 64 - n / 2, n);
            int diff = 0;
            for (int i = 0; i < n; i++) diff += i + 64 - n / 2 != 100 && out[i] != ref[i + 64 - n / 2];
            for (int i = n; i < 48; i++) diff += out[i] != 0xbeef;
            CHECK_MSG(diff == 0, "%s n=%d: %d differences", cpu_isa_name((cpu_isa)isa), n, diff);
        }
    }
    tu_isa_report("test_cpu_convert");
    TEST_MAIN_END();
}
