// cpu_matmul_grouped (cpu/matmul_grouped.h): every group's output equals cpu_matmul over that group's gathered
// rows at the same level, bit for bit (with and without the repacked layout, 1 and 2 threads, a partial
// last tile of weight rows, activation rows picked by x_rows with repeats), and is within the matmul bound of the
// scalar level (the reference: traits' vec_dot); bad groups are rejected.
#include "common/err.h"
#include "cpu/cpu.h"
#include "cpu/matmul_grouped.h"
#include "cpu/repack.h"
#include "tensor/ttype.h"
#include "test_util.h"

#include <stdint.h>
#include <string.h>

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float rndf(void) { return (float)((rnd() & 0xffffff) / 16777216.0 * 2.0 - 1.0); }

enum { G = 5, D = 112, K = 512, NX = 6, NACT = 14 }; // D: one full tile of 64 rows and a partial one

// G weights (D, K) quantized from random floats, one after the other (the experts of a 3-D tensor).
static void make_weights(uint32_t t, uint8_t *w) {
    static float tmp[K];
    const size_t rs = tt_row_size(t, K);
    for (int i = 0; i < G * D; i++) {
        for (int e = 0; e < K; e++) tmp[e] = rndf() * (1.0f + (float)(e % 5));
        tt_get(t)->from_float(tmp, w + (size_t)i * rs, K);
    }
}

static void check_type(cpu_pool *pool, uint32_t t) {
    const size_t rs = tt_row_size(t, K), wbytes = rs * G * D, one = cpu_repack_size(t, D, K);
    uint8_t *w = malloc(wbytes), *packed = one ? aligned_alloc(64, (one * G + 63) & ~(size_t)63) : NULL;
    float *x = malloc(sizeof(float) * NX * K), *xg = malloc(sizeof(float) * NACT * K);
    float *got = malloc(sizeof(float) * NACT * D), *want = malloc(sizeof(float) * NACT * D);
    float *ref = malloc(sizeof(float) * NACT * D);
    void *sc = malloc(cpu_matmul_grouped_scratch_size(t, NACT, K));
    void *msc = malloc(cpu_matmul_scratch_size(t, NACT, K) + 64);
    make_weights(t, w);
    if (packed) cpu_repack(t, w, (int64_t)G * D, K, packed);
    for (int i = 0; i < NX * K; i++) x[i] = rndf();
    int32_t xr[NACT];
    for (int i = 0; i < NACT; i++) xr[i] = (int32_t)(rnd() % NX); // repeats: a token routed to several experts
    for (int i = 0; i < NACT; i++) memcpy(xg + (size_t)i * K, x + (size_t)xr[i] * K, sizeof(float) * K);
    // groups: experts 0, 2, 3, 4 with 1, 5, 2 and 6 rows (expert 1 has none)
    const int ge[4] = {0, 2, 3, 4}, gn[4] = {1, 5, 2, 6};
    for (int use_packed = 0; use_packed <= (packed != NULL); use_packed++) {
        cpu_mm_group grp[4];
        for (int g = 0, a0 = 0; g < 4; a0 += gn[g], g++)
            grp[g] = (cpu_mm_group){.w = w + (size_t)ge[g] * D * rs,
                                    .w_packed = use_packed ? (uint8_t *)packed + (size_t)ge[g] * one : NULL,
                                    .a0 = a0, .n = gn[g], .out = got + (size_t)a0 * D};
        memset(got, 0, sizeof(float) * NACT * D);
        cpu_matmul_grouped_args a = {.w_type = t, .k = K, .d = D, .ld_out = D, .x = x, .x_rows = xr,
                                     .n_act = NACT, .groups = grp, .n_groups = 4, .scratch = sc};
        CHECK_EQ_INT(cpu_matmul_grouped(pool, &a), 0);
        for (int g = 0; g < 4; g++) {
            cpu_matmul_args m = {.out = want + (size_t)grp[g].a0 * D, .ld_out = D, .x = xg + (size_t)grp[g].a0 * K,
                                 .n_rows = gn[g], .k = K, .d = D, .w_type = t, .w = grp[g].w, .scratch = msc,
                                 .w_packed = grp[g].w_packed};
            CHECK_EQ_INT(cpu_matmul(pool, &m), 0);
            m.out = ref + (size_t)grp[g].a0 * D, m.w_packed = NULL;
            CHECK_EQ_INT(cpu_matmul_isa(pool, &m, CPU_ISA_SCALAR), 0);
        }
        int same = 1;
        double worst = 0;
        for (int i = 0; i < NACT * D; i++) {
            same &= memcmp(&got[i], &want[i], sizeof(float)) == 0;
            const double e = fabs((double)got[i] - ref[i]) / (1.0 + fabs((double)ref[i]));
            worst = e > worst ? e : worst;
        }
        CHECK_MSG(same, "%s packed %d threads %d: grouped differs from cpu_matmul", tt_name(t), use_packed,
                  cpu_pool_size(pool));
        CHECK_MSG(worst < 1e-4, "%s packed %d: grouped vs scalar reference rel. error %g", tt_name(t), use_packed,
                  worst);
        // one activation row shared by every group (decode: the token's row, quantized once)
        for (int g = 0; g < 4; g++) grp[g].a0 = 0, grp[g].n = 1, grp[g].out = got + (size_t)g * D;
        a.x_rows = NULL, a.n_act = 1;
        CHECK_EQ_INT(cpu_matmul_grouped(pool, &a), 0);
        for (int g = 0; g < 4; g++) {
            cpu_matmul_args m = {.out = want + (size_t)g * D, .ld_out = D, .x = x, .n_rows = 1, .k = K, .d = D,
                                 .w_type = t, .w = grp[g].w, .scratch = msc, .w_packed = grp[g].w_packed};
            CHECK_EQ_INT(cpu_matmul(pool, &m), 0);
        }
        CHECK_MSG(memcmp(got, want, sizeof(float) * 4 * D) == 0, "%s packed %d: one shared row differs", tt_name(t),
                  use_packed);
        // rows outside the activations are refused
        grp[3].a0 = 0, grp[3].n = 2;
        CHECK_EQ_INT(cpu_matmul_grouped(pool, &a), TC_ERR_INVALID);
    }
    free(w), free(packed), free(x), free(xg), free(got), free(want), free(ref), free(sc), free(msc);
}

int main(void) {
    const uint32_t types[] = {TT_Q4_K, TT_Q6_K, TT_Q8_0, TT_Q4_0, TT_MXFP4, TT_F32};
    for (int nt = 1; nt <= 2; nt++) {
        cpu_pool *pool = cpu_pool_new(nt);
        CHECK(pool != NULL);
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
            if (tt_get(types[i])->from_float) check_type(pool, types[i]);
        cpu_pool_free(pool);
    }
    TEST_MAIN_END();
}
