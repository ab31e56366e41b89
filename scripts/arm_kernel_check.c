// Standalone check of the ARM64 kernels (src/cpu/*_neon.c, *_dotprod.c, *_i8mm.c) against the scalar
// reference of src/tensor/, for cross-building with aarch64-linux-gnu-gcc and running under qemu-aarch64
// (-cpu max has dotprod and i8mm) before the CMake ARM64 build exists; scripts/arm_kernel_check.sh builds
// and runs it. Checks, at the three levels:
//   - the activation quantizers are bit-exact with the traits' from_float;
//   - every GEMM kernel x n_rows {1,2,3,4,5,7,9} x odd d x k of several block multiples is within
//     2e-5 * M + 1e-6 of the reference vec_dot (M = sum |w| |x|, the bound of tests/unit/test_cpu_matmul.c);
//   - the levels agree bit for bit and a row's result does not depend on the batch it is in;
//   - ops_glu_neon (SiLU, tanh-GELU) within the bound of tests/unit/test_ops.c of the libm reference, and a
//     value's result does not depend on the call's length;
//   - attn_tile_neon within 1e-5 of attn_tile_scalar (tests/unit/test_attention.c's bound) over f16 / q8_0 /
//     q4_0 K and V, GQA groups, head dims, block sizes, windows and a shuffled block table; attn_multi_neon
//     equal to the one-query kernel bit for bit.
#include "cpu/arm_kernels.h"
#include "tensor/quant_ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int n_fail;
#define CHECK(c, ...)                                                                                        \
    do {                                                                                                     \
        if (!(c)) {                                                                                          \
            if (n_fail++ < 20) fprintf(stderr, __VA_ARGS__), fputc('\n', stderr);                             \
        }                                                                                                    \
    } while (0)

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float rndf(void) { return (float)((rnd() & 0xffffff) / 16777216.0 * 2.0 - 1.0); }

static const uint32_t types[] = {TT_Q4_0, TT_Q4_1, TT_Q5_0, TT_Q5_1, TT_Q8_0, TT_Q4_K,  TT_Q5_K,  TT_Q6_K,
                                 TT_F32,  TT_F16,  TT_BF16, TT_Q2_K, TT_Q3_K, TT_IQ4_NL, TT_IQ4_XS, TT_MXFP4};
static const char *level_name[3] = {"neon", "dotprod", "i8mm"};

// As tests/unit/test_cpu_matmul.c: even rows quantized from floats, odd rows random bytes with sane scales.
static void make_weights(uint32_t t, int d, int k, uint8_t *w, float *tmp) {
    const tt_traits *tr = tt_get(t);
    size_t rs = tt_row_size(t, k);
    for (int i = 0; i < d; i++) {
        uint8_t *row = w + (size_t)i * rs;
        for (int e = 0; e < k; e++) tmp[e] = rndf() * (1.0f + (float)(e % 7));
        if (tr->from_float) tr->from_float(tmp, row, k);
        if ((!(i & 1) && tr->from_float) || !tr->is_quantized) continue;
        for (size_t b = 0; b < rs; b++) row[b] = (uint8_t)rnd();
        for (size_t o = 0; o < rs; o += tr->type_size) {
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

static void check_quantizers(int lvl, const cpu_kernels *kt) {
    const uint32_t acts[] = {TT_Q8_0, TT_Q8_1, TT_Q8_K};
    static float x[1024];
    static uint8_t ref[2048], got[2048];
    for (int trial = 0; trial < 20; trial++) {
        for (int e = 0; e < 1024; e++) x[e] = rndf() * (trial % 3 == 0 ? 100.0f : 1.0f);
        if (trial == 1)
            for (int e = 0; e < 300; e++) x[e] = 0.0f;
        if (trial == 2)
            for (int e = 0; e < 1024; e++) x[e] = (float)((int)(rnd() % 255) - 127) * 0.5f;
        if (trial == 3) // scale 1 per block: every value x.5 is a rounding tie (away from zero vs to even)
            for (int e = 0; e < 1024; e++) x[e] = e % 32 == 0 ? 127.0f : (float)((int)(rnd() % 200) - 100) + 0.5f;
        for (int a = 0; a < 3; a++) {
            size_t n = tt_row_size(acts[a], 1024);
            memset(ref, 0, n), memset(got, 0, n);
            tt_get(acts[a])->from_float(x, ref, 1024);
            kt->quant[acts[a]](x, got, 1024);
            CHECK(memcmp(ref, got, n) == 0, "%s quantizer %s trial %d differs", level_name[lvl], tt_name(acts[a]), trial);
        }
    }
}

static void run_gemm(const cpu_kernels *kt, uint32_t t, const uint8_t *w, size_t rs, const uint8_t *a, size_t as,
                     int n, int d, int k, float *out) {
    cpu_gemm_job j = {.w = w, .w_stride = rs, .a = a, .a_stride = as, .out = out, .ld_out = d, .k = k,
                      .n_rows = n, .i0 = 0, .i1 = d};
    kt->gemm[t](&j);
}

static void check_type(uint32_t t, const cpu_kernels *kts[3]) {
    const tt_traits *tr = tt_get(t);
    const int bs = tr->block_size, ns[] = {1, 2, 3, 4, 5, 7, 9}, d = 13;
    const int is_float = !tr->is_quantized;
    const uint32_t at = is_float ? TT_F32 : tr->vec_dot_type;
    for (int kb = 1; kb <= 4; kb++) {
        const int k = bs == QK_K ? 256 * kb : bs == 1 ? 32 * kb + kb % 3 : 32 * (2 * kb - 1);
        const size_t rs = tt_row_size(t, k), as = tt_row_size(at, k);
        uint8_t *w = malloc(rs * d), *a = malloc(as * 9);
        float *x = malloc(sizeof(float) * k * 9), *wf = malloc(sizeof(float) * k * d), *tmp = malloc(sizeof(float) * k);
        float *ref = malloc(sizeof(float) * 9 * d), *got = malloc(sizeof(float) * 9 * d), *first = malloc(sizeof(float) * 9 * d),
              *one = malloc(sizeof(float) * d);
        make_weights(t, d, k, w, tmp);
        for (int i = 0; i < d; i++) tr->to_float(w + i * rs, wf + (size_t)i * k, k);
        for (int e = 0; e < 9 * k; e++) x[e] = rndf() * 2.0f;
        for (int r = 0; r < 9; r++) {
            if (is_float) memcpy(a + r * as, x + (size_t)r * k, as);
            else tt_get(at)->from_float(x + (size_t)r * k, a + r * as, k);
        }
        for (int r = 0; r < 9; r++)
            for (int i = 0; i < d; i++) {
                if (is_float) {
                    double s = 0;
                    for (int e = 0; e < k; e++) s += (double)wf[(size_t)i * k + e] * x[(size_t)r * k + e];
                    ref[r * d + i] = (float)s;
                } else ref[r * d + i] = tr->vec_dot(k, w + i * rs, a + r * as);
            }
        for (int lvl = 0; lvl < 3; lvl++) {
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
                const int n = ns[ni];
                run_gemm(kts[lvl], t, w, rs, a, as, n, d, k, got);
                for (int r = 0; r < n; r++)
                    for (int i = 0; i < d; i++) {
                        double m = 0;
                        for (int e = 0; e < k; e++) m += fabs((double)wf[(size_t)i * k + e] * x[(size_t)r * k + e]);
                        const float g = got[r * d + i], e = ref[r * d + i], tol = 2e-5f * (float)m + 1e-6f;
                        CHECK(fabsf(g - e) <= tol, "%s %s n=%d k=%d row %d col %d: %.9g vs ref %.9g (tol %.3g)",
                              tt_name(t), level_name[lvl], n, k, r, i, g, e, tol);
                    }
                if (lvl == 0 && n == 9) memcpy(first, got, sizeof(float) * 9 * d);
                if (lvl > 0 && n == 9)
                    CHECK(memcmp(first, got, sizeof(float) * 9 * d) == 0, "%s %s k=%d differs from neon bit for bit",
                          tt_name(t), level_name[lvl], k);
                for (int r = 0; r < n; r++) { // each row alone gives the same bits as in the batch
                    run_gemm(kts[lvl], t, w, rs, a + r * as, as, 1, d, k, one);
                    CHECK(memcmp(one, got + r * d, sizeof(float) * d) == 0, "%s %s n=%d k=%d row %d: batch-dependent",
                          tt_name(t), level_name[lvl], n, k, r);
                }
            }
        }
        free(w), free(a), free(x), free(wf), free(tmp), free(ref), free(got), free(first), free(one);
    }
}

static void check_glu(int gelu) {
    enum { GN = 4099 };
    static float x[GN], u[GN], got[GN], one[1];
    for (int i = 0; i < GN; i++) {
        x[i] = i < 40 ? (float)(i - 20) * 4.5f : rndf() * (i % 3 ? 6.0f : 90.0f);
        u[i] = rndf() * 2.0f;
    }
    memcpy(got, x, sizeof got);
    ops_glu_neon(got, u, GN, gelu);
    for (int i = 0; i < GN; i++) {
        const float c = 0.7978845608028654f, v = x[i];
        const float ref = gelu ? 0.5f * v * (1.0f + tanhf(c * (v + 0.044715f * v * v * v))) * u[i]
                               : v / (1.0f + expf(-v)) * u[i];
        const float tol = 4e-6f * fabsf(ref) + 2e-7f * fabsf(v * u[i]) + 1e-30f;
        CHECK(isfinite(got[i]) && fabsf(got[i] - ref) <= tol, "glu gelu=%d x=%g u=%g: %.9g vs libm %.9g", gelu, v,
              u[i], got[i], ref);
    }
    for (int i = 0; i < GN; i += 37) {
        one[0] = x[i];
        ops_glu_neon(one, u + i, 1, gelu);
        CHECK(memcmp(one, got + i, sizeof one) == 0, "glu gelu=%d: value %d changes with the call's length", gelu, i);
    }
}

static void check_attention(int kt, int vt, int rep, int hd, int bs, int n_pos, int window) {
    const int n_kv = 2, kv_head = 1, max_q = 3, n_blocks = (n_pos + max_q + bs - 1) / bs + 2;
    attn_geom g = {.n_kv_heads = n_kv, .head_dim = hd, .block_size = bs, .n_rep = rep,
                   .scale = 1.0f / sqrtf((float)hd), .window = window, .k_type = kt, .v_type = vt};
    const size_t rows = (size_t)n_blocks * n_kv * bs, k_row = tt_row_size(kt, hd), v_row = tt_row_size(vt, hd);
    uint8_t *k = malloc(rows * k_row), *v = malloc(rows * v_row);
    float kf[ATTN_MAX_HEAD_DIM], vf[ATTN_MAX_HEAD_DIM];
    for (size_t r = 0; r < rows; r++) {
        const float ks = 1.0f + (float)(r % 5);
        for (int i = 0; i < hd; i++) kf[i] = 2.0f * ks * rndf(), vf[i] = rndf();
        tt_get(kt)->from_float(kf, k + r * k_row, hd);
        tt_get(vt)->from_float(vf, v + r * v_row, hd);
    }
    int32_t *table = malloc(sizeof(int32_t) * n_blocks);
    for (int i = 0; i < n_blocks; i++) table[i] = i;
    for (int i = n_blocks - 1; i > 0; i--) {
        int j = (int)(rnd() % (uint32_t)(i + 1)), t = table[i];
        table[i] = table[j], table[j] = t;
    }
    const size_t n = (size_t)rep * hd;
    float *q = malloc(sizeof(float) * n * max_q), *ref = malloc(sizeof(float) * n), *got = malloc(sizeof(float) * n),
          *multi = malloc(sizeof(float) * n * max_q);
    for (size_t i = 0; i < n * max_q; i++) q[i] = 2.0f * rndf();
    attn_tile_scalar(ref, q, k, v, table, n_pos, kv_head, &g);
    attn_tile_neon(got, q, k, v, table, n_pos, kv_head, &g);
    double d = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs(got[i] - ref[i]));
    CHECK(d < 1e-5, "attention %s/%s rep %d hd %d bs %d pos %d window %d: %g from scalar", tt_name(kt), tt_name(vt),
          rep, hd, bs, n_pos, window, d);
    attn_multi_neon(multi, n, q, n, max_q, k, v, table, n_pos, kv_head, &g);
    for (int i = 0; i < max_q; i++) {
        attn_tile_neon(got, q + i * n, k, v, table, n_pos + i, kv_head, &g);
        CHECK(memcmp(got, multi + i * n, sizeof(float) * n) == 0, "attention multi != one: %s/%s rep %d hd %d query %d",
              tt_name(kt), tt_name(vt), rep, hd, i);
    }
    free(k), free(v), free(table), free(q), free(ref), free(got), free(multi);
}

static void check_attentions(void) {
    const int reps[] = {1, 3, 4, 8}, hds[] = {16, 64, 128}, bss[] = {16, 32}, poss[] = {1, 5, 16, 17, 100, 150};
    const int wins[] = {0, 7, 16, 40};
    const int types[][2] = {{TT_F16, TT_F16}, {TT_Q8_0, TT_Q8_0}, {TT_Q4_0, TT_Q4_0},
                            {TT_Q8_0, TT_F16}, {TT_F16, TT_Q4_0}, {TT_Q4_0, TT_Q8_0}};
    for (int ty = 0; ty < 6; ty++)
        for (int w = 0; w < 4; w++)
            for (int a = 0; a < 4; a++)
                for (int b = 0; b < 3; b++)
                    for (int s = 0; s < 2; s++)
                        for (int p = 0; p < 6; p++) {
                            if (hds[b] % 32 && (types[ty][0] != TT_F16 || types[ty][1] != TT_F16)) continue;
                            check_attention(types[ty][0], types[ty][1], reps[a], hds[b], bss[s], poss[p], wins[w]);
                        }
}

int main(void) {
    check_attentions();
    printf("attn    %s\n", n_fail ? "FAIL" : "ok");
    check_glu(0);
    check_glu(1);
    printf("glu     %s\n", n_fail ? "FAIL" : "ok");
    const cpu_kernels *kts[3] = {cpu_kernels_neon(), cpu_kernels_dotprod(), cpu_kernels_i8mm()};
    for (int lvl = 0; lvl < 3; lvl++) check_quantizers(lvl, kts[lvl]);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const tt_traits *tr = tt_get(types[ti]);
        for (int lvl = 0; lvl < 3; lvl++) {
            const cpu_kernels *kt = kts[lvl];
            CHECK(kt->gemm[types[ti]] != NULL, "%s: no %s kernel", level_name[lvl], tt_name(types[ti]));
            CHECK(kt->act_type[types[ti]] == (tr->is_quantized ? (uint32_t)tr->vec_dot_type : TT_F32),
                  "%s %s: act_type differs from the traits", level_name[lvl], tt_name(types[ti]));
        }
        if (n_fail) break;
        check_type(types[ti], kts);
        printf("%-7s %s\n", tt_name(types[ti]), n_fail ? "FAIL" : "ok");
    }
    printf("%s (%d failures)\n", n_fail ? "FAIL" : "all ok", n_fail);
    return n_fail ? 1 : 0;
}
