// Repacked Q4_K, Q6_K, Q8_0, Q5_0, Q4_0, Q4_1 and MXFP4 weights (cpu/repack.h): the layout round-trips bit for bit to the original rows (the layout's
// scalar reference is "unpack, then the traits' vec_dot"); cpu_matmul with w_packed at every SIMD level the
// host has equals the scalar level on the original rows within the float-order bound of test_cpu_matmul
// (|simd - scalar| <= 2e-5 * sum |w| |x| + 1e-6), for GEMV and GEMM row counts, 1-3 threads, thread ranges
// that start inside a group of 8 (16 for Q8_0) rows (through cpu_matmul_multi), and is batch invariant (bit for bit).
#include "common/err.h"
#include "cpu/cpu.h"
#include "cpu/repack.h"
#include "tensor/ttype.h"
#include "test_util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float rndf(void) { return (float)((rnd() & 0xffffff) / 16777216.0 * 2.0 - 1.0); }

enum { K = 768, D = 48, MAXR = 9, DSMALL = 12 };

// Even rows quantized from floats, odd rows random bytes with modest fp16 d/dmin (every nibble and 6-bit
// scale pattern).
static void make_w(uint32_t t, uint8_t *w, int d, int k) {
    const tt_traits *tr = tt_get(t);
    static float tmp[K];
    const size_t rs = tt_row_size(t, k);
    for (int i = 0; i < d; i++) {
        uint8_t *row = w + (size_t)i * rs;
        for (int e = 0; e < k; e++) tmp[e] = rndf() * (1.0f + (float)(e % 5));
        tr->from_float(tmp, row, k);
        if (!(i & 1)) continue;
        for (size_t b = 0; b < rs; b++) row[b] = (uint8_t)rnd();
        for (size_t o = 0; o < rs; o += tr->type_size) {
            tt_f16 s1 = tt_f32_to_f16(0.01f + 0.001f * (float)(rnd() % 50)), s2 = tt_f32_to_f16(0.005f * (float)(rnd() % 20));
            if (t == TT_MXFP4) row[o] = (uint8_t)(118 + rnd() % 12); // E8M0 byte: 2^-10 .. 2^1 (all bytes: below)
            else if (t == TT_Q6_K) memcpy(row + o + 208, &s1, 2);
            else if (t == TT_Q8_0 || t == TT_Q5_0 || t == TT_Q4_0) memcpy(row + o, &s1, 2); // every byte pattern
            else {
                memcpy(row + o, &s1, 2);
                memcpy(row + o + 2, &s2, 2);
            }
        }
    }
}

// sum_e |w_e| |x_e| per (row r, weight row i): the scale of the float rounding error.
static void magnitude(uint32_t t, const uint8_t *w, const float *x, int n, int d, int k, float *m) {
    static float wf[K];
    for (int i = 0; i < d; i++) {
        tt_get(t)->to_float(w + (size_t)i * tt_row_size(t, k), wf, k);
        for (int r = 0; r < n; r++) {
            double s = 0;
            for (int e = 0; e < k; e++) s += fabs((double)wf[e] * x[(size_t)r * k + e]);
            m[r * d + i] = (float)s;
        }
    }
}

static int compare(const char *what, const float *got, const float *ref, const float *mag, int n, int d, int ld) {
    int bad = 0;
    for (int r = 0; r < n; r++)
        for (int i = 0; i < d; i++) {
            float g = got[r * ld + i], e = ref[r * ld + i], tol = 2e-5f * mag[r * d + i] + 1e-6f;
            if (!(fabsf(g - e) <= tol) && bad++ < 3)
                fprintf(stderr, "%s: row %d col %d: %.9g vs scalar %.9g (tol %.3g)\n", what, r, i, g, e, tol);
        }
    return bad;
}

// Everything for one weight type: round trip, packed matmul vs scalar, batch invariance, a split inside a group.
// Batch invariance: the rows of got (n, d), computed together by a at isa, that differ from the same row of x
// (rows of k) computed alone (one: d floats of scratch).
static int rows_unlike_alone(const cpu_matmul_args *a, const float *x, int k, const float *got, int n, int d,
                             cpu_isa isa, float *one) {
    int diff = 0;
    for (int r = 0; r < n; r++) {
        cpu_matmul_args b = *a;
        b.out = one, b.x = x + (size_t)r * k, b.n_rows = 1;
        cpu_matmul_isa(NULL, &b, isa);
        diff += memcmp(one, got + (size_t)r * d, (size_t)d * sizeof *one) != 0;
    }
    return diff;
}

static void test_type(uint32_t t, cpu_pool **pools) {
    static uint8_t w[D * K / 32 * 34], back[sizeof w], small[DSMALL * K / 32 * 34], scratch[1 << 20];
    static float x[MAXR * K], ref[MAXR * D], got[MAXR * D], one[D], mag[MAXR * D], sref[MAXR * DSMALL],
        sgot[MAXR * DSMALL];
    const char *tn = tt_name(t);
    const size_t psize = cpu_repack_size(t, D, K), wbytes = tt_row_size(t, K) * D;
    // Q4_K: 1184 bytes per 8 x 144 (the scales expanded to bytes); Q6_K, Q8_0: the same bytes reordered; Q5_0:
    // 34 bytes per 22 (quants expanded to bytes)
    CHECK_EQ_INT((int)psize, (int)(t == TT_Q4_K ? wbytes / 1152 * 1184 : t == TT_Q5_0 ? wbytes / 22 * 34 : wbytes));
    uint8_t *packed = aligned_alloc(64, (psize + 63) & ~(size_t)63); // C11: size a multiple of the alignment
    CHECK(packed != NULL);
    if (!packed) return;

    make_w(t, w, D, K);
    make_w(t, small, DSMALL, K);
    CHECK_EQ_INT(cpu_repack(t, w, D, K, packed), 0);
    CHECK_EQ_INT(cpu_repack_unpack(t, packed, D, K, back), 0);
    CHECK_MSG(memcmp(w, back, wbytes) == 0, "%s: repack then unpack does not give the original rows back", tn);

    for (int e = 0; e < MAXR * K; e++) x[e] = rndf() * (e % 11 == 0 ? 8.0f : 1.0f);
    magnitude(t, w, x, MAXR, D, K, mag);
    const cpu_isa hw = cpu_hw_isa();
    const int nrs[] = {1, 2, 3, 4, 5, 6, 7, 8, 9}; // every remainder of the 4- and 8-row activation tiles
    for (size_t ni = 0; ni < sizeof nrs / sizeof nrs[0]; ni++) {
        const int n = nrs[ni];
        cpu_matmul_args a = {.out = ref, .ld_out = D, .x = x, .n_rows = n, .k = K, .d = D, .w_type = t,
                             .w = w, .scratch = scratch};
        CHECK_EQ_INT(cpu_matmul_isa(NULL, &a, CPU_ISA_SCALAR), 0);
        tu_isa_ran(CPU_ISA_SCALAR);
        a.w_packed = packed;
        for (int isa = TU_ISA_FIRST_SIMD; isa <= (int)hw; isa++) {
            tu_isa_ran((cpu_isa)isa);
            for (int pi = 0; pi < 3; pi++) {
                char what[96];
                snprintf(what, sizeof what, "packed %s %s n=%d threads=%d", tn, cpu_isa_name((cpu_isa)isa), n, pi + 1);
                a.out = got;
                memset(got, 0, sizeof got);
                CHECK_EQ_INT(cpu_matmul_isa(pools[pi], &a, (cpu_isa)isa), 0);
                CHECK_MSG(compare(what, got, ref, mag, n, D, D) == 0, "%s: mismatches", what);
            }
            // batch invariance: each row equals the same row alone, bit for bit
            int diff = rows_unlike_alone(&a, x, K, got, n, D, (cpu_isa)isa, one);
            CHECK_MSG(diff == 0, "packed %s %s n=%d: %d rows differ from the same row alone", tn,
                      cpu_isa_name((cpu_isa)isa), n, diff);
        }
    }

    // cpu_matmul_multi with an unpacked 12-row weight first: the packed weight's thread range then starts
    // at row 20 (inside a group of 8); results must equal separate cpu_matmul calls of the same weights.
    if (cpu_best_isa() >= TU_ISA_FIRST_SIMD) {
        const int n = 3;
        cpu_matmul_args m[2] = {
            {.out = sgot, .ld_out = DSMALL, .x = x, .n_rows = n, .k = K, .d = DSMALL, .w_type = t, .w = small,
             .scratch = scratch},
            {.out = got, .ld_out = D, .x = x, .n_rows = n, .k = K, .d = D, .w_type = t, .w = w,
             .scratch = scratch, .w_packed = packed},
        };
        cpu_matmul_args s0 = m[0], s1 = m[1];
        s0.out = sref, s1.out = ref;
        CHECK_EQ_INT(cpu_matmul(pools[1], &s0), 0);
        CHECK_EQ_INT(cpu_matmul(pools[1], &s1), 0);
        memset(got, 0, sizeof got);
        CHECK_EQ_INT(cpu_matmul_multi(pools[1], m, 2), 0);
        CHECK_MSG(memcmp(got, ref, sizeof(float) * (size_t)n * D) == 0 &&
                      memcmp(sgot, sref, sizeof(float) * (size_t)n * DSMALL) == 0,
                  "%s: cpu_matmul_multi with a packed weight split inside a group differs from cpu_matmul", tn);
    }
    free(packed);
}

// A tall weight (BIG_D rows = 66 groups of 8, one super-block): the AVX2 GEMM walks the groups in panels of at
// most 64, so rows after the first panel, and the short last one, must match the scalar level and the GEMV.
enum { BIG_D = 528, BIG_K = 256, BIG_N = 5 };
static void test_tall(uint32_t t, cpu_pool *pool) {
    static uint8_t w[BIG_D * 210], scratch[1 << 16];
    static float x[BIG_N * BIG_K], ref[BIG_N * BIG_D], got[BIG_N * BIG_D], one[BIG_D], mag[BIG_N * BIG_D];
    const size_t psize = cpu_repack_size(t, BIG_D, BIG_K);
    uint8_t *packed = aligned_alloc(64, (psize + 63) & ~(size_t)63);
    CHECK(packed != NULL);
    if (!packed) return;
    make_w(t, w, BIG_D, BIG_K);
    CHECK_EQ_INT(cpu_repack(t, w, BIG_D, BIG_K, packed), 0);
    for (int e = 0; e < BIG_N * BIG_K; e++) x[e] = rndf();
    magnitude(t, w, x, BIG_N, BIG_D, BIG_K, mag);
    cpu_matmul_args a = {.out = ref, .ld_out = BIG_D, .x = x, .n_rows = BIG_N, .k = BIG_K, .d = BIG_D,
                         .w_type = t, .w = w, .scratch = scratch};
    CHECK_EQ_INT(cpu_matmul_isa(NULL, &a, CPU_ISA_SCALAR), 0);
    a.w_packed = packed;
    for (int isa = TU_ISA_FIRST_SIMD; isa <= (int)cpu_hw_isa(); isa++) {
        char what[64];
        snprintf(what, sizeof what, "tall packed %s %s", tt_name(t), cpu_isa_name((cpu_isa)isa));
        a.out = got;
        memset(got, 0, sizeof got);
        CHECK_EQ_INT(cpu_matmul_isa(pool, &a, (cpu_isa)isa), 0);
        CHECK_MSG(compare(what, got, ref, mag, BIG_N, BIG_D, BIG_D) == 0, "%s: mismatches", what);
        int diff = rows_unlike_alone(&a, x, BIG_K, got, BIG_N, BIG_D, (cpu_isa)isa, one);
        CHECK_MSG(diff == 0, "%s: %d rows differ from the same row alone", what, diff);
    }
    free(packed);
}

// MXFP4 with every E8M0 scale byte through the packed kernels: row i's blocks all have e = i (0 and 1 give
// f32 subnormals, 255 is ggml's 2^127; the kernels widen the bytes arithmetically, not by table), against the
// scalar level on the original rows; GEMV and a GEMM tile.
static void test_mxfp4_scales(void) {
    enum { SD = 256, SK = 64, SN = 3 };
    static uint8_t w[SD * SK / 32 * 17], scratch[1 << 16];
    static float x[SN * SK], mag[SN * SD], ref[SN * SD], got[SN * SD];
    const size_t rs = tt_row_size(TT_MXFP4, SK), psize = cpu_repack_size(TT_MXFP4, SD, SK);
    uint8_t *packed = aligned_alloc(64, (psize + 63) & ~(size_t)63);
    CHECK(packed != NULL);
    if (!packed) return;
    for (int i = 0; i < SD; i++)
        for (size_t o = 0; o < rs; o++) w[(size_t)i * rs + o] = o % sizeof(tt_block_mxfp4) ? (uint8_t)rnd() : (uint8_t)i;
    for (int e = 0; e < SN * SK; e++) x[e] = rndf() * 1e-3f; // small: 2^127 * d_a * sum stays finite
    CHECK_EQ_INT(cpu_repack(TT_MXFP4, w, SD, SK, packed), 0);
    magnitude(TT_MXFP4, w, x, SN, SD, SK, mag);
    for (int n = 1; n <= SN; n += SN - 1) {
        cpu_matmul_args a = {.out = ref, .ld_out = SD, .x = x, .n_rows = n, .k = SK, .d = SD, .w_type = TT_MXFP4,
                             .w = w, .scratch = scratch};
        CHECK_EQ_INT(cpu_matmul_isa(NULL, &a, CPU_ISA_SCALAR), 0);
        a.w_packed = packed, a.out = got;
        for (int isa = TU_ISA_FIRST_SIMD; isa <= (int)cpu_hw_isa(); isa++) {
            char what[64];
            snprintf(what, sizeof what, "mxfp4 scales packed %s n=%d", cpu_isa_name((cpu_isa)isa), n);
            CHECK_EQ_INT(cpu_matmul_isa(NULL, &a, (cpu_isa)isa), 0);
            int bad = 0;
            for (int r = 0; r < n; r++)
                for (int i = 0; i < SD; i++) {
                    const float g = got[r * SD + i], e = ref[r * SD + i];
                    if (!(fabsf(g - e) <= 2e-5f * mag[r * SD + i] + 1e-44f) && bad++ < 3)
                        fprintf(stderr, "%s: row %d e=%d: %.9g vs scalar %.9g\n", what, r, i, g, e);
                }
            CHECK_MSG(bad == 0, "%s: %d outputs off the scalar bound", what, bad);
        }
    }
    free(packed);
}

int main(void) {
    static uint8_t buf[1 << 16];
    CHECK_EQ_INT((int)cpu_repack_size(TT_Q4_K, 44, K), 0); // rows not a multiple of 8
    CHECK_EQ_INT((int)cpu_repack_size(TT_Q4_K, D, 320), 0); // columns not a multiple of 256
    CHECK_EQ_INT((int)cpu_repack_size(TT_Q5_K, D, K), 0);  // no layout for this type
    CHECK_EQ_INT(cpu_repack(TT_Q5_1, buf, D, K, buf), -1);
    CHECK_EQ_INT((int)cpu_repack_size(TT_Q4_1, 40, K), 0);        // rows not a multiple of 16
    CHECK_EQ_INT((int)cpu_repack_size(TT_Q8_0, 40, K), 0);        // rows not a multiple of 16
    CHECK_EQ_INT((int)cpu_repack_size(TT_Q8_0, D, 32 * 1025), 0); // more blocks than the kernels' stack sums
    cpu_pool *pools[3] = {NULL, cpu_pool_new(2), cpu_pool_new(3)};
    CHECK(pools[1] && pools[2]);
    test_type(TT_Q4_K, pools);
    test_type(TT_Q6_K, pools);
    test_type(TT_Q8_0, pools);
    test_type(TT_Q5_0, pools);
    test_type(TT_Q4_0, pools);
    test_type(TT_Q4_1, pools);
    test_type(TT_MXFP4, pools);
    test_mxfp4_scales();
    test_tall(TT_Q4_K, NULL);
    test_tall(TT_Q6_K, NULL);
    cpu_pool_free(pools[1]);
    cpu_pool_free(pools[2]);
    tu_isa_report("test_cpu_repack");
    TEST_MAIN_END();
}
