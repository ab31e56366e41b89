// cpu_matmul at every ISA level this machine has, against the scalar level (tensor reference vec_dot):
// every weight type x n_rows in {1,2,3,7,16,33} x odd d, and rows of 1 to 4 blocks. Also: SIMD activation
// quantizers are bit-exact with the reference from_float (all-ties inputs included); the ARM levels agree
// bit for bit; a row's result does not depend on the batch it is in, nor on the thread
// count (bit-exact); bad arguments are rejected.
//
// Error bound: the integer block sums are exact at every level, only the float accumulation order
// differs, so |simd - scalar| <= 2e-5 * M + 1e-6 where M = sum_e |w_e| |x_e| (dequantized weights, f32
// activations): about nb * eps * M for nb <= 64 blocks, with margin.
#include "common/err.h"
#include "cpu/cpu.h"
#include "cpu/cpu_internal.h"
#include "tensor/ttype.h"
#include "test_util.h"

#include <stdint.h>
#include <string.h>

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float rndf(void) { return (float)((rnd() & 0xffffff) / 16777216.0 * 2.0 - 1.0); }

static const uint32_t types[] = {TT_Q4_0, TT_Q4_1, TT_Q5_0, TT_Q5_1, TT_Q8_0, TT_Q4_K,  TT_Q5_K,
                                 TT_Q6_K, TT_F32,  TT_F16,  TT_BF16, TT_Q2_K, TT_Q3_K, TT_IQ4_NL, TT_IQ4_XS, TT_MXFP4};

// Weights (d, k): even rows quantized from random floats with the reference, odd rows random bytes with
// sane fp16 scales (covers every bit pattern of nibbles, high bits, 6-bit scales, int8 -128). Decode-only
// types (no from_float: Q2_K, Q3_K, IQ4_*) get random bytes in every row.
static void make_weights(uint32_t t, int d, int k, uint8_t *w, float *tmp) {
    const tt_traits *tr = tt_get(t);
    size_t rs = tt_row_size(t, k);
    for (int i = 0; i < d; i++) {
        uint8_t *row = w + (size_t)i * rs;
        for (int e = 0; e < k; e++) tmp[e] = rndf() * (1.0f + (float)(e % 7));
        if (tr->from_float) tr->from_float(tmp, row, k);
        if ((!(i & 1) && tr->from_float) || !tr->is_quantized) continue;
        for (size_t b = 0; b < rs; b++) row[b] = (uint8_t)rnd();
        size_t bs = tr->type_size;
        for (size_t o = 0; o < rs; o += bs) { // fix the fp16 scales to finite, modest values
            uint8_t *blk = row + o;
            tt_f16 s1 = tt_f32_to_f16(0.01f + 0.001f * (float)(rnd() % 50));
            tt_f16 s2 = tt_f32_to_f16(0.005f * (float)(rnd() % 20));
            if (t == TT_MXFP4) blk[0] = (uint8_t)(118 + rnd() % 12); // E8M0 byte: 2^-9 .. 2^2
            else if (t == TT_Q6_K) memcpy(blk + 208, &s1, 2);
            else if (t == TT_Q3_K) memcpy(blk + 108, &s1, 2);
            else if (t == TT_Q2_K) memcpy(blk + 80, &s1, 2), memcpy(blk + 82, &s2, 2);
            else {
                memcpy(blk, &s1, 2);
                if (t == TT_Q4_1 || t == TT_Q5_1 || t == TT_Q4_K || t == TT_Q5_K) memcpy(blk + 2, &s2, 2);
            }
        }
    }
}

static void test_quantizers(cpu_isa isa, const cpu_kernels *kt) {
    const uint32_t acts[] = {TT_Q8_0, TT_Q8_1, TT_Q8_K};
    const int k = 1024;
    static float x[1024];
    static uint8_t ref[2048], got[2048];
    for (int trial = 0; trial < 20; trial++) {
        for (int e = 0; e < k; e++) x[e] = rndf() * (trial % 3 == 0 ? 100.0f : 1.0f);
        if (trial == 1)
            for (int e = 0; e < 300; e++) x[e] = 0.0f; // all-zero blocks
        if (trial == 2)
            for (int e = 0; e < k; e++) x[e] = (float)((int)(rnd() % 255) - 127) * 0.5f; // exact ties
        if (trial == 3) // scale 1 per block (127 leads each): every value x.5 is a rounding tie
            for (int e = 0; e < k; e++) x[e] = e % 32 == 0 ? 127.0f : (float)((int)(rnd() % 200) - 100) + 0.5f;
        for (int a = 0; a < 3; a++) {
            if (!kt || !kt->quant[acts[a]]) continue; // none at this level: matmul quantizes with the reference
            size_t n = tt_row_size(acts[a], k);
            memset(ref, 0, n), memset(got, 0, n);
            tt_get(acts[a])->from_float(x, ref, k);
            kt->quant[acts[a]](x, got, k);
            CHECK_MSG(memcmp(ref, got, n) == 0, "%s quantizer %s trial %d differs from reference",
                      cpu_isa_name(isa), tt_name(acts[a]), trial);
        }
    }
}

// M = sum |w| |x| per (row, output) for the error bound.
static void magnitude(uint32_t t, const uint8_t *w, const float *x, int n_rows, int d, int k, float *m,
                      float *wf) {
    const tt_traits *tr = tt_get(t);
    size_t rs = tt_row_size(t, k);
    for (int i = 0; i < d; i++) {
        tr->to_float(w + (size_t)i * rs, wf, k);
        for (int r = 0; r < n_rows; r++) {
            double s = 0;
            for (int e = 0; e < k; e++) s += fabs((double)wf[e] * x[(size_t)r * k + e]);
            m[(size_t)r * d + i] = (float)s;
        }
    }
}

static int run(cpu_pool *pool, uint32_t t, const uint8_t *w, const float *x, int n_rows, int d, int k,
               float *out, int ld, void *scratch, cpu_isa isa) {
    cpu_matmul_args a = {.out = out, .ld_out = ld, .x = x, .n_rows = n_rows, .k = k, .d = d,
                         .w_type = t, .w = w, .scratch = scratch};
    return cpu_matmul_isa(pool, &a, isa);
}

// Rows of 1 to 4 blocks (the kernels' loop heads and tails) at every level, within the bound above, for
// batches whose row count is not a tile multiple. On aarch64 the levels (neon, dotprod, i8mm) promise the
// same bits: their integer block sums are exact and they add the blocks' floats in the same order.
static void test_block_counts(cpu_pool *pool, cpu_isa hw) {
    enum { D = 13, NR = 9, MAXK = 4 * 256 };
    static uint8_t w[D * MAXK * 4], scratch[1 << 20];
    static float x[NR * MAXK], wf[MAXK], mag[NR * D], ref[NR * D], got[NR * D], first[NR * D];
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const uint32_t t = types[ti];
        const int bs = tt_get(t)->block_size;
        for (int kb = 1; kb <= 4; kb++) {
            const int k = bs == QK_K ? 256 * kb : bs == 1 ? 32 * kb + kb % 3 : 32 * (2 * kb - 1);
            make_weights(t, D, k, w, wf);
            for (int e = 0; e < NR * k; e++) x[e] = rndf() * 2.0f;
            magnitude(t, w, x, NR, D, k, mag, wf);
            CHECK_EQ_INT(run(pool, t, w, x, NR, D, k, ref, D, scratch, CPU_ISA_SCALAR), 0);
            for (int isa = TU_ISA_FIRST_SIMD; isa <= (int)hw; isa++) {
                CHECK_EQ_INT(run(pool, t, w, x, NR, D, k, got, D, scratch, (cpu_isa)isa), 0);
                int bad = 0;
                for (int i = 0; i < NR * D; i++) bad += !(fabsf(got[i] - ref[i]) <= 2e-5f * mag[i] + 1e-6f);
                CHECK_MSG(bad == 0, "%s %s k=%d (%d blocks): %d outputs off the scalar bound", tt_name(t),
                          cpu_isa_name((cpu_isa)isa), k, kb, bad);
#if defined(__aarch64__)
                if (isa == TU_ISA_FIRST_SIMD) memcpy(first, got, sizeof got);
                else
                    CHECK_MSG(memcmp(first, got, sizeof got) == 0, "%s %s k=%d differs from %s bit for bit",
                              tt_name(t), cpu_isa_name((cpu_isa)isa), k, cpu_isa_name(TU_ISA_FIRST_SIMD));
#else
                (void)first;
#endif
            }
        }
    }
}

// cpu_matmul_multi equals one cpu_matmul per weight, bit for bit: fused sets (Q4_K + Q6_K + Q4_K share
// Q8_K activations; Q8_0 + Q4_0 share Q8_0) whose row counts put the thread split inside a weight, and a
// set that cannot fuse (Q4_0 with Q4_1: different activation types) which takes the fallback.
static void test_multi(cpu_pool **pools, int n_pools) {
    enum { K = 512, MAXD = 101, NR = 7 };
    static const uint32_t sets[3][3] = {
        {TT_Q4_K, TT_Q6_K, TT_Q4_K}, {TT_Q8_0, TT_Q4_0, TT_Q8_0}, {TT_Q4_0, TT_Q4_1, TT_Q4_0}};
    static const int ds[3] = {37, 101, 20};
    static uint8_t w[3][MAXD * K * 2], scratch[1 << 18];
    static float x[NR * K], wf[K], ref[3][NR * MAXD], got[3][NR * MAXD];
    for (int e = 0; e < NR * K; e++) x[e] = rndf();
    for (int si = 0; si < 3; si++) {
        cpu_matmul_args a[3];
        for (int m = 0; m < 3; m++) {
            make_weights(sets[si][m], ds[m], K, w[m], wf);
            a[m] = (cpu_matmul_args){.ld_out = ds[m], .x = x, .k = K, .d = ds[m], .w_type = sets[si][m],
                                     .w = w[m], .scratch = scratch};
        }
        for (int pi = 0; pi < n_pools; pi++) {
            for (int n = 1; n <= NR; n += NR - 1) {
                for (int m = 0; m < 3; m++) {
                    a[m].n_rows = n;
                    a[m].out = ref[m];
                    CHECK_EQ_INT(cpu_matmul(pools[pi], &a[m]), 0);
                    a[m].out = got[m];
                    memset(got[m], 0, sizeof got[m]);
                }
                CHECK_EQ_INT(cpu_matmul_multi(pools[pi], a, 3), 0);
                for (int m = 0; m < 3; m++)
                    CHECK_MSG(memcmp(ref[m], got[m], sizeof(float) * (size_t)n * ds[m]) == 0,
                              "multi set %d weight %d (%s) n=%d pool %d differs from cpu_matmul", si, m,
                              tt_name(sets[si][m]), n, pi);
            }
        }
    }
    CHECK_EQ_INT(cpu_matmul_multi(pools[0], NULL, 1), TC_ERR_INVALID);
}

// MXFP4 with every E8M0 scale byte: row i's blocks all have e = i (0 and 1 give f32 subnormals, 255 is ggml's
// 2^127), at every level against the scalar reference; k = 32 is a lone (tail) block, 64 one block pair.
static void test_mxfp4_scales(cpu_pool *pool, cpu_isa hw) {
    enum { D = 256, K = 64 };
    static uint8_t w[D * K], scratch[1 << 16];
    static float x[K], wf[K], mag[D], ref[D], got[D];
    for (int k = 32; k <= K; k += 32) {
        const size_t rs = tt_row_size(TT_MXFP4, k);
        for (int i = 0; i < D; i++)
            for (size_t o = 0; o < rs; o++) w[(size_t)i * rs + o] = o % sizeof(tt_block_mxfp4) ? (uint8_t)rnd() : (uint8_t)i;
        for (int e = 0; e < k; e++) x[e] = rndf() * 1e-3f; // small: 2^127 * d_a * sum stays finite
        magnitude(TT_MXFP4, w, x, 1, D, k, mag, wf);
        CHECK_EQ_INT(run(pool, TT_MXFP4, w, x, 1, D, k, ref, D, scratch, CPU_ISA_SCALAR), 0);
        for (int isa = TU_ISA_FIRST_SIMD; isa <= (int)hw; isa++) {
            CHECK_EQ_INT(run(pool, TT_MXFP4, w, x, 1, D, k, got, D, scratch, (cpu_isa)isa), 0);
            int bad = 0;
            for (int i = 0; i < D; i++)
                if (!(fabsf(got[i] - ref[i]) <= 2e-5f * mag[i] + 1e-44f) && bad++ < 3)
                    fprintf(stderr, "mxfp4 %s k=%d e=%d: %.9g vs scalar %.9g\n", cpu_isa_name((cpu_isa)isa), k, i,
                            got[i], ref[i]);
            CHECK_MSG(bad == 0, "mxfp4 %s k=%d: %d scale bytes off the scalar bound", cpu_isa_name((cpu_isa)isa), k,
                      bad);
        }
    }
}

int main(void) {
    cpu_isa hw = cpu_hw_isa();
    printf("hardware level %s, best (env) %s\n", cpu_isa_name(hw), cpu_isa_name(cpu_best_isa()));
    for (int isa = TU_ISA_FIRST_SIMD; isa <= (int)hw; isa++)
        test_quantizers((cpu_isa)isa, cpu_kernels_at((cpu_isa)isa));

    cpu_pool *pool1 = NULL, *pool2 = cpu_pool_new(2), *pool3 = cpu_pool_new(3);
    CHECK(pool2 && pool3);
    const int nrs[] = {1, 2, 3, 7, 16, 33};
    const int ds[] = {37, 101};
    enum { MAXR = 33, MAXD = 101, MAXK = 512 };
    static float x[MAXR * MAXK], ref[MAXR * (MAXD + 3)], got[MAXR * (MAXD + 3)], one[MAXD], mag[MAXR * MAXD],
        wf[MAXK];
    static uint8_t w[MAXD * MAXK * 4], scratch[1 << 20];
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        uint32_t t = types[ti];
        const tt_traits *tr = tt_get(t);
        int k = tr->block_size == QK_K ? 512 : tr->block_size == 32 ? 320 : 45; // F32/F16/BF16: odd k
        for (int di = 0; di < 2; di++) {
            int d = ds[di], ld = d + 3;
            make_weights(t, d, k, w, wf);
            for (int e = 0; e < MAXR * k; e++) x[e] = rndf() * (e % 13 == 0 ? 8.0f : 1.0f);
            magnitude(t, w, x, MAXR, d, k, mag, wf);
            for (size_t ni = 0; ni < sizeof nrs / sizeof nrs[0]; ni++) {
                int n = nrs[ni];
                CHECK(cpu_matmul_scratch_size(t, n, k) <= sizeof scratch);
                CHECK_EQ_INT(run(pool1, t, w, x, n, d, k, ref, ld, scratch, CPU_ISA_SCALAR), 0);
                tu_isa_ran(CPU_ISA_SCALAR);
                for (int isa = TU_ISA_FIRST_SIMD; isa <= (int)hw; isa++) {
                    tu_isa_ran((cpu_isa)isa);
                    for (int pi = 0; pi < 3; pi++) {
                        cpu_pool *p = pi == 0 ? pool1 : pi == 1 ? pool2 : pool3;
                        for (int e = 0; e < n * ld; e++) got[e] = -12345.0f; // padding must stay untouched
                        CHECK_EQ_INT(run(p, t, w, x, n, d, k, got, ld, scratch, (cpu_isa)isa), 0);
                        int bad = 0;
                        for (int r = 0; r < n; r++) {
                            for (int i = 0; i < d; i++) {
                                float g = got[r * ld + i], e = ref[r * ld + i];
                                float tol = 2e-5f * mag[r * d + i] + 1e-6f;
                                if (!(fabsf(g - e) <= tol) && bad++ < 3)
                                    fprintf(stderr, "%s %s n=%d d=%d k=%d threads=%d row %d col %d: %.9g vs scalar %.9g (tol %.3g)\n",
                                            tt_name(t), cpu_isa_name((cpu_isa)isa), n, d, k, pi + 1, r, i, g, e, tol);
                            }
                            for (int i = d; i < ld; i++) bad += got[r * ld + i] != -12345.0f;
                        }
                        CHECK_MSG(bad == 0, "%s %s n=%d d=%d threads=%d: %d mismatches", tt_name(t),
                                  cpu_isa_name((cpu_isa)isa), n, d, pi + 1, bad);
                        // batch invariance: each row equals the same row computed alone, bit for bit
                        if (pi == 1) {
                            int diff = 0;
                            for (int r = 0; r < n; r++) {
                                run(pool1, t, w, x + (size_t)r * k, 1, d, k, one, d, scratch, (cpu_isa)isa);
                                diff += memcmp(one, got + r * ld, (size_t)d * sizeof(float)) != 0;
                            }
                            CHECK_MSG(diff == 0, "%s %s n=%d: %d rows differ from the same row alone",
                                      tt_name(t), cpu_isa_name((cpu_isa)isa), n, diff);
                        }
                    }
                }
            }
        }
    }
    // types on the shared 256-bit tile (Q5_0, Q5_1): AVX2 and AVX-512 give identical integers and the same
    // float sequence, so bit-identical results (Q4_0/Q4_1/Q8_0 and the K-quants have 512-bit tiles whose
    // float summation order differs; they are held to the scalar tolerance above)
#if defined(__x86_64__)
    if (hw >= CPU_ISA_AVX512) {
        make_weights(TT_Q5_0, 37, 512, w, wf);
        run(pool2, TT_Q5_0, w, x, 7, 37, 512, ref, 37, scratch, CPU_ISA_AVX2);
        run(pool2, TT_Q5_0, w, x, 7, 37, 512, got, 37, scratch, CPU_ISA_AVX512);
        CHECK(memcmp(ref, got, 7 * 37 * sizeof(float)) == 0);
    }
#endif
    test_block_counts(pool3, hw);
    test_mxfp4_scales(pool2, hw);
    cpu_pool *pools[3] = {pool1, pool2, pool3};
    test_multi(pools, 3);
    // argument checks
    CHECK_EQ_INT(run(pool2, TT_Q4_0, w, x, 1, 5, 33, got, 5, scratch, TU_ISA_FIRST_SIMD), TC_ERR_INVALID);
    CHECK_EQ_INT(run(pool2, TT_Q8_K, w, x, 1, 5, 256, got, 5, scratch, TU_ISA_FIRST_SIMD), TC_ERR_UNSUPPORTED);
    CHECK_EQ_INT(run(pool2, 16 /* IQ2_XXS */, w, x, 1, 5, 256, got, 5, scratch, TU_ISA_FIRST_SIMD), TC_ERR_UNSUPPORTED);
    CHECK_EQ_INT(run(pool2, TT_Q4_0, w, x, 1, 5, 32, got, 4, scratch, TU_ISA_FIRST_SIMD), TC_ERR_INVALID);
    CHECK_EQ_INT(run(pool2, TT_Q4_0, w, x, 1, 5, 32, got, 5, NULL, TU_ISA_FIRST_SIMD), TC_ERR_INVALID);
    cpu_pool_free(pool2);
    cpu_pool_free(pool3);
    tu_isa_report("test_cpu_matmul");
    TEST_MAIN_END();
}
