// Micro-benchmark for cpu_matmul (not a test). Reports, per ISA level and thread count:
//   GEMV (n_rows = 1): GB/s of weight streaming, "hot" (the same matrix again and again: L2/L3 resident) and
//   "cold" (rotating over copies totalling > 512 MiB, so weights come from DRAM); compare with the
//   measured memory bandwidth printed first.
//   GEMM (n_rows = 128, 512): GFLOP/s (2 * n_rows * k * d per call).
// usage: bench_matmul [seconds per case, default 0.3] [type name]; env BENCH_CPUTIME=1 (1 thread, CPU
// time: for a busy machine), BENCH_NOBW=1 (skip the bandwidth measurement), BENCH_GEMV_ROWS=n (the GEMV table
// with n activation rows, as batched decode and speculative verification run: weight GB/s per call)
#include "common/timeutil.h"
#include "cpu/cpu.h"
#include "cpu/repack.h"
#include "tensor/ttype.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

// Random quant bytes with finite fp16 scales (cheap to build at any size; speed does not depend on values).
static void fill_weights(uint32_t t, uint8_t *w, size_t bytes) {
    const tt_traits *tr = tt_get(t);
    for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)rnd();
    if (!tr->is_quantized) {
        if (t == TT_F32)
            for (size_t i = 0; i < bytes / 4; i++) ((float *)(void *)w)[i] = (float)(rnd() % 1000) * 1e-3f - 0.5f;
        else
            for (size_t i = 0; i < bytes / 2; i++) ((uint16_t *)(void *)w)[i] &= 0x3fff; // finite
        return;
    }
    tt_f16 s = tt_f32_to_f16(0.01f);
    for (size_t o = 0; o + tr->type_size <= bytes; o += tr->type_size) {
        if (t == TT_MXFP4) w[o] = 120; // E8M0 scale 2^-8
        else if (t == TT_Q6_K) memcpy(w + o + 208, &s, 2);
        else {
            memcpy(w + o, &s, 2);
            if (t == TT_Q4_1 || t == TT_Q5_1 || t == TT_Q4_K || t == TT_Q5_K) memcpy(w + o + 2, &s, 2);
        }
    }
}

typedef struct bcase {
    uint32_t type;
    int k, d;
} bcase;

static double secs = 0.3;
static int use_cputime; // BENCH_CPUTIME=1: time with the caller's thread CPU clock (1-thread runs on a busy machine)

static double bnow(void) {
    if (!use_cputime) return tc_now();
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const uint8_t *packed_w; // cpu_repack form of the weight copies (packed_stride apart), or NULL: rows
static size_t packed_stride;     // "isa+r8" use it

// Returns seconds per call (best of batches) cycling over n_copies weight copies.
static double time_case(cpu_pool *pool, cpu_isa isa, const bcase *c, int n_rows, uint8_t *w, int n_copies,
                        const float *x, float *out, void *scratch) {
    size_t wbytes = tt_row_size(c->type, c->k) * (size_t)c->d;
    cpu_matmul_args a = {.out = out, .ld_out = c->d, .x = x, .n_rows = n_rows, .k = c->k, .d = c->d,
                         .w_type = c->type, .w = w, .scratch = scratch, .w_packed = packed_w};
    cpu_matmul_isa(pool, &a, isa); // warm-up
    double best = 1e30, t_end = bnow() + secs;
    int it = 0;
    do {
        int batch = n_copies > 1 ? n_copies : 8;
        double t0 = bnow();
        for (int i = 0; i < batch; i++) {
            a.w = w + (size_t)((it + i) % n_copies) * wbytes;
            if (packed_w) a.w_packed = packed_w + (size_t)((it + i) % n_copies) * packed_stride;
            cpu_matmul_isa(pool, &a, isa);
        }
        double t = (bnow() - t0) / batch;
        if (t < best) best = t;
        it += batch;
    } while (bnow() < t_end);
    return best;
}

int main(int argc, char **argv) {
    if (argc > 1) secs = atof(argv[1]);
    const char *only = argc > 2 ? argv[2] : NULL; // optional: only cases of this type name, e.g. q4_K
    use_cputime = getenv("BENCH_CPUTIME") && atoi(getenv("BENCH_CPUTIME"));
    int gemv_rows = getenv("BENCH_GEMV_ROWS") ? atoi(getenv("BENCH_GEMV_ROWS")) : 1;
    if (gemv_rows < 1 || gemv_rows > 8) gemv_rows = 1;
    int max_threads = use_cputime ? 1 : 2;
    cpu_pool *pool1 = cpu_pool_new(1), *pool2 = cpu_pool_new(2);
    if (!pool1 || !pool2) return 1;
    double bw2 = getenv("BENCH_NOBW") ? 0.0 : cpu_mem_bandwidth(pool2);
    printf("memory read bandwidth (2 threads): %.1f GB/s\n", bw2 * 1e-9);
    const bcase gemv[] = {
        {TT_Q4_K, 2048, 5632}, {TT_Q6_K, 5632, 2048}, {TT_Q6_K, 2048, 5632}, {TT_Q4_K, 5632, 2048},
        {TT_Q4_1, 576, 1536},  {TT_Q8_0, 576, 49152},
        {TT_Q8_0, 2048, 2048}, {TT_Q8_0, 2048, 5632}, {TT_Q8_0, 5632, 2048}, {TT_Q4_0, 2048, 5632},
        {TT_Q4_0, 5632, 2048}, {TT_Q5_K, 2048, 5632}, {TT_F16, 2048, 2048},
        {TT_MXFP4, 2880, 2880}, // a gpt-oss-20b expert's gate, up or down slice
    };
    const bcase gemm[] = {{TT_Q4_K, 2048, 5632}, {TT_Q6_K, 5632, 2048}, {TT_Q4_1, 576, 1536}, {TT_Q4_0, 2048, 5632},
                          {TT_Q8_0, 2048, 2048}, {TT_MXFP4, 2880, 2880}};
    const size_t cold_bytes = (size_t)512 << 20;
    const int max_rows = 512, max_k = 5632, max_d = 49152;
    float *x = malloc(sizeof(float) * (size_t)max_rows * max_k);
    float *out = malloc(sizeof(float) * (size_t)max_rows * max_d);
    void *scratch = malloc(cpu_matmul_scratch_size(TT_Q4_K, max_rows, max_k) + (1 << 20));
    uint8_t *w = malloc(cold_bytes + ((size_t)64 << 20));
    if (!x || !out || !scratch || !w) return 1;
    for (size_t i = 0; i < (size_t)max_rows * max_k; i++) x[i] = (float)(rnd() % 2001) * 1e-3f - 1.0f;
    cpu_isa hw = cpu_best_isa();

    printf("\nGEMV n_rows=%d: weight GB/s (hot = same matrix repeatedly, cold = rotating over > 512 MiB)\n", gemv_rows);
    printf("%-6s %6s %6s %8s | %-6s %3s %9s %9s %9s\n", "type", "k", "d", "MiB", "isa", "thr", "hot GB/s",
           "cold GB/s", "cold us");
    for (size_t ci = 0; ci < sizeof gemv / sizeof gemv[0]; ci++) {
        const bcase *c = &gemv[ci];
        if (only && strcmp(only, tt_name(c->type))) continue;
        size_t wbytes = tt_row_size(c->type, c->k) * (size_t)c->d;
        int copies = (int)(cold_bytes / wbytes) + 1;
        fill_weights(c->type, w, wbytes);
        for (int i = 1; i < copies; i++) memcpy(w + (size_t)i * wbytes, w, wbytes);
        // the same copies, repacked once (the layout does not depend on the ISA level)
        const size_t psz = cpu_repack_size(c->type, c->d, c->k), pstride = (psz + 63) & ~(size_t)63;
        uint8_t *pk = psz ? aligned_alloc(64, pstride * (size_t)copies) : NULL;
        if (pk && cpu_repack(c->type, w, c->d, c->k, pk) == 0)
            for (int i = 1; i < copies; i++) memcpy(pk + (size_t)i * pstride, pk, psz);
        else
            free(pk), pk = NULL;
        const int isa0 = getenv("BENCH_NOSCALAR") ? CPU_ISA_SCALAR + 1 : CPU_ISA_SCALAR;
        for (int isa = isa0; isa <= (int)hw; isa++) {
            for (int th = 1; th <= max_threads; th++) {
                cpu_pool *p = th == 1 ? pool1 : pool2;
                const int n = gemv_rows;
                double hot = time_case(p, (cpu_isa)isa, c, n, w, 1, x, out, scratch);
                double cold =
                    isa == CPU_ISA_SCALAR ? hot : time_case(p, (cpu_isa)isa, c, n, w, copies, x, out, scratch);
                printf("%-6s %6d %6d %8.2f | %-6s %3d %9.2f %9.2f %9.1f\n", tt_name(c->type), c->k, c->d,
                       wbytes / 1048576.0, cpu_isa_name((cpu_isa)isa), th, wbytes / hot * 1e-9, wbytes / cold * 1e-9,
                       cold * 1e6);
                if (pk && isa > CPU_ISA_SCALAR) {
                    packed_w = pk, packed_stride = pstride;
                    double ph = time_case(p, (cpu_isa)isa, c, n, w, 1, x, out, scratch);
                    double pc = time_case(p, (cpu_isa)isa, c, n, w, copies, x, out, scratch);
                    packed_w = NULL;
                    printf("%-6s %6d %6d %8.2f | %-6s+r8 %d %9.2f %9.2f %9.1f\n", tt_name(c->type), c->k, c->d,
                           wbytes / 1048576.0, cpu_isa_name((cpu_isa)isa), th, wbytes / ph * 1e-9, wbytes / pc * 1e-9,
                           pc * 1e6);
                }
            }
        }
        free(pk);
    }
    printf("\nGEMM: GFLOP/s (2 * n_rows * k * d per call)\n");
    printf("%-6s %6s %6s %5s | %-6s %3s %9s %9s\n", "type", "k", "d", "rows", "isa", "thr", "GFLOP/s", "ms");
    for (size_t ci = 0; ci < sizeof gemm / sizeof gemm[0]; ci++) {
        const bcase *c = &gemm[ci];
        if (only && strcmp(only, tt_name(c->type))) continue;
        fill_weights(c->type, w, tt_row_size(c->type, c->k) * (size_t)c->d);
        for (int rows = 128; rows <= 512; rows *= 4) {
            for (int isa = CPU_ISA_SCALAR + 1; isa <= (int)hw; isa++) {
                for (int th = 1; th <= max_threads; th++) {
                    double t = time_case(th == 1 ? pool1 : pool2, (cpu_isa)isa, c, rows, w, 1, x, out, scratch);
                    printf("%-6s %6d %6d %5d | %-6s %3d %9.1f %9.2f\n", tt_name(c->type), c->k, c->d, rows,
                           cpu_isa_name((cpu_isa)isa), th, 2.0 * rows * c->k * c->d / t * 1e-9, t * 1e3);
                    size_t psz = cpu_repack_size(c->type, c->d, c->k);
                    void *pk = psz ? aligned_alloc(64, (psz + 63) & ~(size_t)63) : NULL;
                    if (pk && cpu_repack(c->type, w, c->d, c->k, pk) == 0) {
                        packed_w = pk;
                        t = time_case(th == 1 ? pool1 : pool2, (cpu_isa)isa, c, rows, w, 1, x, out, scratch);
                        packed_w = NULL;
                        printf("%-6s %6d %6d %5d | %-6s+r8 %d %9.1f %9.2f\n", tt_name(c->type), c->k, c->d, rows,
                               cpu_isa_name((cpu_isa)isa), th, 2.0 * rows * c->k * c->d / t * 1e-9, t * 1e3);
                    }
                    free(pk);
                }
            }
        }
    }
    free(w), free(scratch), free(out), free(x);
    cpu_pool_free(pool1), cpu_pool_free(pool2);
    return 0;
}
