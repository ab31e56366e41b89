// Attention over a quantized KV cache, one thread: (1) the real kernels (attn_select per ISA) over a
// SmolLM2-like geometry (3 query heads per KV head, head dim 64, blocks of 16) at a long context, f16 vs
// q8_0 vs q4_0 cache; (2) at AVX2, the q·k scores of a q8_0 K cache two ways: dequantize 32 values in
// registers and FMA with f32 q (what attention_x86.h does), or quantize q to 8 bits once per head and use
// integer dot products (maddubs/madd, as llama.cpp's vec_dot_q8_0_q8_0).
// (1) also runs a Gemma 3 270M geometry (4 query heads per KV head, head dim 256).
// Built by CMake with the other benches (build/bench_attention [n_pos] [iters]); the AVX2 functions carry
// their own target attribute, and the score comparison is skipped on a CPU without AVX2 (and not built for
// aarch64, where (1) runs the ARM levels).
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/timeutil.h"
#include "cpu/attention.h"
#include "cpu/cpu.h"
#include "tensor/quant_ref.h"
#include "tensor/ttype.h"

enum { HD = 64, REP = 3, BS = 16 };

static float frand(void) { return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f; }

#if defined(__x86_64__)
#define AVX2_FN __attribute__((target("avx2,fma,f16c")))

AVX2_FN static float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// scores[p*REP + r] = q_r · k_p, K rows q8_0 dequantized in registers (8 floats at a time).
AVX2_FN static void scores_dequant(float *sc, const float *q, const tt_block_q8_0 *k, int n) {
    for (int p = 0; p < n; p++) {
        const tt_block_q8_0 *b = k + (size_t)p * (HD / 32);
        __m256 kv[HD / 8];
        for (int c = 0; c < HD / 8; c++) {
            const tt_block_q8_0 *bc = b + c / 4;
            __m256 d = _mm256_set1_ps(_cvtsh_ss(bc->d));
            kv[c] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
                                         _mm_loadl_epi64((const __m128i *)(bc->qs + c % 4 * 8)))));
        }
        for (int r = 0; r < REP; r++) {
            __m256 acc = _mm256_setzero_ps();
            for (int c = 0; c < HD / 8; c++) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + r * HD + c * 8), kv[c], acc);
            sc[p * REP + r] = hsum8(acc);
        }
    }
}

// The same with q quantized to q8_0 once (qq: REP rows of HD/32 blocks): int8 dot products per block.
AVX2_FN static void scores_int8(float *sc, const tt_block_q8_0 *qq, const tt_block_q8_0 *k, int n) {
    for (int p = 0; p < n; p++) {
        const tt_block_q8_0 *b = k + (size_t)p * (HD / 32);
        for (int r = 0; r < REP; r++) {
            __m256 acc = _mm256_setzero_ps();
            for (int j = 0; j < HD / 32; j++) {
                const tt_block_q8_0 *qb = qq + r * (HD / 32) + j;
                __m256i kx = _mm256_loadu_si256((const __m256i *)b[j].qs);
                __m256i qx = _mm256_loadu_si256((const __m256i *)qb->qs);
                __m256i s16 = _mm256_maddubs_epi16(_mm256_sign_epi8(kx, kx), _mm256_sign_epi8(qx, kx));
                __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
                __m256 d = _mm256_set1_ps(_cvtsh_ss(b[j].d) * _cvtsh_ss(qb->d));
                acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s32), acc);
            }
            sc[p * REP + r] = hsum8(acc);
        }
    }
}
#endif

// Part (1) for one geometry: us per (token, KV head) of every kernel and cache type, best of 5 rounds
// (the rounds interleave the kernels, so a burst of load from other processes hits all of them alike).
static void bench_kernels(int n_pos, int iters, int hd, int rep) {
    int n_blocks = (n_pos + BS - 1) / BS;
    size_t rows = (size_t)n_blocks * BS; // one KV head
    float *kf = malloc(rows * hd * sizeof(float)), *vf = malloc(rows * hd * sizeof(float));
    for (size_t i = 0; i < rows * hd; i++) kf[i] = 2.0f * frand(), vf[i] = frand();
    float *q = malloc(sizeof(float) * (size_t)rep * hd), *out = malloc(sizeof(float) * (size_t)rep * hd);
    for (int i = 0; i < rep * hd; i++) q[i] = frand();
    int32_t *table = malloc(sizeof(int32_t) * (size_t)n_blocks);
    for (int i = 0; i < n_blocks; i++) table[i] = i;
    const tt_type types[3] = {TT_F16, TT_Q8_0, TT_Q4_0};
    void *kc[3], *vc[3];
    for (int t = 0; t < 3; t++) {
        size_t rb = tt_row_size(types[t], hd);
        kc[t] = malloc(rows * rb), vc[t] = malloc(rows * rb);
        for (size_t r = 0; r < rows; r++) {
            tt_get(types[t])->from_float(kf + r * hd, (char *)kc[t] + r * rb, hd);
            tt_get(types[t])->from_float(vf + r * hd, (char *)vc[t] + r * rb, hd);
        }
    }
    printf("attention, 1 thread, %d positions, %d query heads per KV head, head dim %d: us per (token, KV head), "
           "best of 5\n", n_pos, rep, hd);
    cpu_isa hw = cpu_best_isa();
    double best[3][3];
    for (int i = 0; i < 9; i++) best[i / 3][i % 3] = 1e9;
    for (int round = 0; round < 5; round++)
        for (int isa = CPU_ISA_SCALAR; isa <= (int)hw; isa++)
            for (int t = 0; t < 3; t++) {
                attn_geom g = {.n_kv_heads = 1, .head_dim = hd, .block_size = BS, .n_rep = rep,
                               .scale = 1.0f / sqrtf((float)hd), .k_type = types[t], .v_type = types[t]};
                attn_fn f = isa == CPU_ISA_SCALAR ? attn_tile_scalar : attn_select((cpu_isa)isa, &g);
                int it = isa == CPU_ISA_SCALAR ? iters / 20 + 1 : iters;
                f(out, q, kc[t], vc[t], table, n_pos, 0, &g);
                double t0 = tc_now();
                for (int i = 0; i < it; i++) f(out, q, kc[t], vc[t], table, n_pos, 0, &g);
                best[isa][t] = fmin(best[isa][t], (tc_now() - t0) / it);
            }
    for (int isa = CPU_ISA_SCALAR; isa <= (int)hw; isa++)
        printf("  %-7s f16 %8.1f us   q8_0 %8.1f us (x%.2f)   q4_0 %8.1f us (x%.2f)\n", cpu_isa_name((cpu_isa)isa),
               best[isa][0] * 1e6, best[isa][1] * 1e6, best[isa][0] / best[isa][1], best[isa][2] * 1e6,
               best[isa][0] / best[isa][2]);
    for (int t = 0; t < 3; t++) free(kc[t]), free(vc[t]);
    free(kf), free(vf), free(q), free(out), free(table);
}

// Part (3): n_q queries of one sequence at consecutive positions (a verification item, a prefill run), us per
// query: n_q one-query calls against one multi-query call (attn_select_multi), f16 and q8_0 caches, best of 5.
static void bench_multi(int n_pos, int iters, int hd, int rep) {
    enum { NQ = 10 };
    int n_blocks = (n_pos + NQ + BS - 1) / BS;
    size_t rows = (size_t)n_blocks * BS;
    float *q = malloc(sizeof(float) * (size_t)NQ * rep * hd), *out = malloc(sizeof(float) * (size_t)NQ * rep * hd);
    for (int i = 0; i < NQ * rep * hd; i++) q[i] = frand();
    int32_t *table = malloc(sizeof(int32_t) * (size_t)n_blocks);
    for (int i = 0; i < n_blocks; i++) table[i] = i;
    cpu_isa hw = cpu_best_isa();
    printf("%d queries at once (rep %d, head dim %d, %d positions), 1 thread: us per query, one-query calls / "
           "one multi-query call, best of 5\n", NQ, rep, hd, n_pos);
    const tt_type types[2] = {TT_F16, TT_Q8_0};
    for (int t = 0; t < 2; t++) {
        size_t rb = tt_row_size(types[t], hd);
        char *kc = malloc(rows * rb), *vc = malloc(rows * rb);
        float *f = malloc(sizeof(float) * (size_t)hd);
        for (size_t r = 0; r < rows; r++) {
            for (int i = 0; i < hd; i++) f[i] = 2.0f * frand();
            tt_get(types[t])->from_float(f, kc + r * rb, hd);
            for (int i = 0; i < hd; i++) f[i] = frand();
            tt_get(types[t])->from_float(f, vc + r * rb, hd);
        }
        for (int isa = CPU_ISA_SCALAR + 1; isa <= (int)hw; isa++) {
            attn_geom g = {.n_kv_heads = 1, .head_dim = hd, .block_size = BS, .n_rep = rep,
                           .scale = 1.0f / sqrtf((float)hd), .k_type = types[t], .v_type = types[t]};
            attn_fn one = attn_select((cpu_isa)isa, &g);
            attn_multi_fn multi = attn_select_multi((cpu_isa)isa, &g);
            const int nq = NQ * rep <= ATTN_MAX_REP ? NQ : attn_max_queries(&g);
            double b1 = 1e9, bm = 1e9;
            for (int round = 0; round < 5; round++) {
                double t0 = tc_now();
                for (int it = 0; it < iters; it++)
                    for (int i = 0; i < nq; i++)
                        one(out + (size_t)i * rep * hd, q + (size_t)i * rep * hd, kc, vc, table, n_pos + i, 0, &g);
                b1 = fmin(b1, (tc_now() - t0) / iters / nq);
                t0 = tc_now();
                for (int it = 0; it < iters; it++)
                    multi(out, (size_t)rep * hd, q, (size_t)rep * hd, nq, kc, vc, table, n_pos, 0, &g);
                bm = fmin(bm, (tc_now() - t0) / iters / nq);
            }
            printf("  %-7s %-5s %d queries: %7.2f us / %7.2f us (x%.2f)\n", cpu_isa_name((cpu_isa)isa),
                   tt_get(types[t])->name, nq, b1 * 1e6, bm * 1e6, b1 / bm);
        }
        free(kc), free(vc), free(f);
    }
    free(q), free(out), free(table);
}

// Part (4): one prefill unit at depth as fwd_attn.c cuts it at 2 threads (10 queries × 3 heads of one KV head,
// SmolLM2's geometry) with the best ISA's multi-query kernel, f16 and q8_0 caches: ms per call and GFLOP/s
// (q·k and p·v, 4·head_dim flops per position and head), best of 5, timed in this thread's CPU time (a busy
// machine's other processes do not count). `bench_attention N ITERS depth` runs it alone.
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void bench_depth(int n_pos, int iters) {
    // The cache holds 3 KV heads per block, as SmolLM2's (a head's blocks are not adjacent), and the calls cycle
    // through NL layers' caches, so a layer's rows come from memory as in a forward pass, not from the L3.
    enum { NQ = 10, NKV = 3, NL = 8 };
    int n_blocks = (n_pos + NQ + BS - 1) / BS;
    size_t rows = (size_t)n_blocks * NKV * BS;
    float *q = malloc(sizeof(float) * NQ * REP * HD), *out = malloc(sizeof(float) * NQ * REP * HD);
    for (int i = 0; i < NQ * REP * HD; i++) q[i] = frand();
    int32_t *table = malloc(sizeof(int32_t) * (size_t)n_blocks);
    for (int i = 0; i < n_blocks; i++) table[i] = i;
    cpu_isa hw = cpu_best_isa();
    printf("prefill unit at depth: %d queries x %d heads of KV head 1 of 3, head dim %d, %d positions, %s, 1 thread, best of 5\n", NQ,
           REP, HD, n_pos, cpu_isa_name(hw));
    const tt_type types[2] = {TT_F16, TT_Q8_0};
    for (int t = 0; t < 2; t++) {
        size_t rb = tt_row_size(types[t], HD);
        char *kc = malloc(NL * rows * rb), *vc = malloc(NL * rows * rb);
        float f[HD];
        for (size_t r = 0; r < rows; r++) {
            for (int i = 0; i < HD; i++) f[i] = 2.0f * frand();
            tt_get(types[t])->from_float(f, kc + r * rb, HD);
            for (int i = 0; i < HD; i++) f[i] = frand();
            tt_get(types[t])->from_float(f, vc + r * rb, HD);
        }
        for (int l = 1; l < NL; l++) memcpy(kc + l * rows * rb, kc, rows * rb), memcpy(vc + l * rows * rb, vc, rows * rb);
        attn_geom g = {.n_kv_heads = NKV, .head_dim = HD, .block_size = BS, .n_rep = REP,
                       .scale = 1.0f / sqrtf((float)HD), .k_type = types[t], .v_type = types[t]};
        attn_multi_fn multi = attn_select_multi(hw, &g);
        double bm = 1e9;
        for (int round = 0; round < 5; round++) {
            double t0 = cpu_now();
            for (int it = 0; it < iters; it++)
                multi(out, (size_t)REP * HD, q, (size_t)REP * HD, NQ, kc + it % NL * rows * rb,
                      vc + it % NL * rows * rb, table, n_pos, 1, &g);
            bm = fmin(bm, (cpu_now() - t0) / iters);
        }
        printf("  %-5s %8.3f ms per call, %6.1f GFLOP/s\n", tt_get(types[t])->name, bm * 1e3,
               4.0 * HD * NQ * REP * (double)n_pos / bm * 1e-9);
        free(kc), free(vc);
    }
    free(q), free(out), free(table);
}

int main(int argc, char **argv) {
    int n_pos = argc > 1 ? atoi(argv[1]) : 2048, iters = argc > 2 ? atoi(argv[2]) : 200;
    if (argc > 3 && strcmp(argv[3], "depth") == 0) {
        bench_depth(n_pos, iters);
        return 0;
    }
    bench_kernels(n_pos, iters, HD, REP); // SmolLM2-135M
    bench_kernels(n_pos, iters / 4 + 1, 256, 4); // Gemma 3 270M (one KV head, 4 query heads, head dim 256)
    bench_multi(n_pos < 512 ? n_pos : 300, iters, HD, REP);
    bench_multi(n_pos < 512 ? n_pos : 300, iters / 4 + 1, 256, 4);
#if defined(__x86_64__)
    if (cpu_best_isa() < CPU_ISA_AVX2) return 0;
    int n_blocks = (n_pos + BS - 1) / BS;
    size_t rows = (size_t)n_blocks * BS;
    float *kf = malloc(rows * HD * sizeof(float)), q[REP * HD];
    for (size_t i = 0; i < rows * HD; i++) kf[i] = 2.0f * frand();
    for (int i = 0; i < REP * HD; i++) q[i] = frand();
    void *kc[2];
    kc[1] = malloc(rows * tt_row_size(TT_Q8_0, HD));
    for (size_t r = 0; r < rows; r++)
        tt_q8_0_from_float(kf + r * HD, (char *)kc[1] + r * tt_row_size(TT_Q8_0, HD), HD);
    // q·k scores only, q8_0 K, AVX2
    float *sc = malloc(sizeof(float) * rows * REP), *sc2 = malloc(sizeof(float) * rows * REP);
    tt_block_q8_0 qq[REP * HD / 32];
    double best[2] = {1e9, 1e9};
    for (int rep = 0; rep < 5; rep++) {
        double t0 = tc_now();
        for (int i = 0; i < iters; i++) scores_dequant(sc, q, kc[1], n_pos);
        double t1 = tc_now();
        for (int i = 0; i < iters; i++) {
            tt_q8_0_from_float(q, qq, REP * HD); // once per (token, KV head), inside the timing
            scores_int8(sc2, qq, kc[1], n_pos);
        }
        double t2 = tc_now();
        best[0] = fmin(best[0], (t1 - t0) / iters), best[1] = fmin(best[1], (t2 - t1) / iters);
    }
    double err = 0;
    for (size_t i = 0; i < (size_t)n_pos * REP; i++) err = fmax(err, fabs(sc[i] - sc2[i]));
    printf("q.k scores over a q8_0 K cache (AVX2): dequantize in registers + f32 FMA %.1f us; q to q8_0 + int8 dot "
           "%.1f us (max |score difference| %.3g, from rounding q to 8 bits)\n", best[0] * 1e6, best[1] * 1e6, err);
#endif
    return 0;
}
