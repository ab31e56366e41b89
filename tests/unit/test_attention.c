// Attention kernels over the paged KV cache (f16, q8_0, q4_0 rows; K and V types independent): the scalar
// kernel against a naive double-precision softmax (materialized scores) on the rows dequantized by the
// reference to_float, and every SIMD level this CPU has against the scalar kernel, over GQA group sizes,
// head dims, block sizes, positions that end mid-block, sliding windows (starting mid-block), soft-capped
// scores (Gemma 2), attention sinks (gpt-oss) and a shuffled block table.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/attention.h"
#include "cpu/cpu.h"
#include "tensor/quant_ref.h"
#include "tensor/ttype.h"
#include "test_util.h"

static float frand(void) { return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f; }

typedef struct case_data {
    attn_geom g;
    int n_blocks, n_pos;
    uint8_t *k, *v;    // (n_blocks, n_kv_heads, block_size) rows of head_dim values, types g.k_type / g.v_type
    size_t k_row, v_row; // bytes per row
    int32_t *table;    // (n_blocks) a permutation: logical block i lives in physical block table[i]
    float *q;          // (n_rep, head_dim)
    float sinks[2 * ATTN_MAX_REP]; // a sink logit per query head (up to 2 KV heads), set as g.sinks by some cases
} case_data;

static void make_case(case_data *c, int n_kv, int n_rep, int hd, int bs, int n_pos, tt_type kt, tt_type vt) {
    c->g = (attn_geom){.n_kv_heads = n_kv, .head_dim = hd, .block_size = bs, .n_rep = n_rep,
                       .scale = 1.0f / sqrtf((float)hd), .k_type = kt, .v_type = vt};
    c->n_pos = n_pos;
    c->n_blocks = (n_pos + bs - 1) / bs + 2;
    size_t rows = (size_t)c->n_blocks * n_kv * bs;
    c->k_row = tt_row_size(kt, hd), c->v_row = tt_row_size(vt, hd);
    c->k = malloc(rows * c->k_row), c->v = malloc(rows * c->v_row);
    float kf[ATTN_MAX_HEAD_DIM], vf[ATTN_MAX_HEAD_DIM];
    for (size_t r = 0; r < rows; r++) { // quantized with the reference quantizers, as the forward pass does
        float kscale = 1.0f + (float)(r % 5); // rows of different magnitudes: a wrong per-block scale shows
        for (int i = 0; i < hd; i++) kf[i] = 2.0f * kscale * frand(), vf[i] = frand();
        tt_get(kt)->from_float(kf, c->k + r * c->k_row, hd);
        tt_get(vt)->from_float(vf, c->v + r * c->v_row, hd);
    }
    c->table = malloc(sizeof(int32_t) * (size_t)c->n_blocks);
    for (int i = 0; i < c->n_blocks; i++) c->table[i] = i;
    for (int i = c->n_blocks - 1; i > 0; i--) {
        int j = rand() % (i + 1), t = c->table[i];
        c->table[i] = c->table[j], c->table[j] = t;
    }
    c->q = malloc(sizeof(float) * (size_t)n_rep * hd);
    for (int i = 0; i < n_rep * hd; i++) c->q[i] = 2.0f * frand();
    for (int i = 0; i < 2 * ATTN_MAX_REP; i++) c->sinks[i] = 1.0f + 3.0f * frand(); // the scores' range
}

static void free_case(case_data *c) { free(c->k), free(c->v), free(c->table), free(c->q); }

// Row p of one KV head, dequantized by the type's reference to_float.
static void row_at(const case_data *c, const uint8_t *cache, size_t row_bytes, int type, int kv_head, int p,
                   float *dst) {
    const attn_geom *g = &c->g;
    size_t row = ((size_t)c->table[p / g->block_size] * g->n_kv_heads + kv_head) * g->block_size + p % g->block_size;
    tt_get((uint32_t)type)->to_float(cache + row * row_bytes, dst, g->head_dim);
}

// Naive reference: all scores, max-subtracted softmax, weighted sum, in double.
static void naive(const case_data *c, int kv_head, double *out) {
    const attn_geom *g = &c->g;
    float kf[ATTN_MAX_HEAD_DIM], vf[ATTN_MAX_HEAD_DIM];
    double *sc = malloc(sizeof(double) * (size_t)c->n_pos);
    // a quantized K cache is scored against the query rounded to 8 bits per 32-value block (attention.h)
    float qf[ATTN_MAX_REP * ATTN_MAX_HEAD_DIM];
    static attn_q8 qq;
    if (attn_k_quantized(g->k_type)) attn_quantize_q(&qq, c->q, g->n_rep, g->head_dim);
    for (int r = 0; r < g->n_rep; r++)
        for (int i = 0; i < g->head_dim; i++)
            qf[r * g->head_dim + i] = attn_k_quantized(g->k_type) ? qq.d[r][i / 32] * qq.qs[r][i] : c->q[r * g->head_dim + i];
    const int first = g->window > 0 && c->n_pos > g->window ? c->n_pos - g->window : 0; // written from the def
    for (int r = 0; r < g->n_rep; r++) {
        double mx = -INFINITY, sum = 0;
        for (int p = first; p < c->n_pos; p++) {
            row_at(c, c->k, c->k_row, g->k_type, kv_head, p, kf);
            double d = 0;
            for (int i = 0; i < g->head_dim; i++) d += (double)qf[r * g->head_dim + i] * kf[i];
            sc[p] = d * g->scale;
            if (g->softcap > 0) sc[p] = g->softcap * tanh(sc[p] / g->softcap); // Gemma 2's soft-capping
            if (sc[p] > mx) mx = sc[p];
        }
        // an attention sink (gpt-oss): one more logit in the softmax, with no value
        const double sink = g->sinks ? g->sinks[kv_head * g->n_rep + r] : -INFINITY;
        if (sink > mx) mx = sink;
        if (g->sinks) sum += exp(sink - mx);
        for (int p = first; p < c->n_pos; p++) sum += sc[p] = exp(sc[p] - mx);
        for (int i = 0; i < g->head_dim; i++) {
            double acc = 0;
            for (int p = first; p < c->n_pos; p++) {
                row_at(c, c->v, c->v_row, g->v_type, kv_head, p, vf); // slow, but the naive way
                acc += sc[p] * vf[i];
            }
            out[r * g->head_dim + i] = acc / sum;
        }
    }
    free(sc);
}

// The query rounding a quantized K cache is scored with (attention.h), checked from its definition: each
// value within half a step of d·q, the block's largest |x| at ±127, Σq kept, an all-zero block all zero.
static void test_quantize_q(void) {
    float q[3 * 64];
    for (int i = 0; i < 3 * 64; i++) q[i] = 3.0f * frand();
    for (int i = 32; i < 64; i++) q[i] = 0.0f; // row 0, block 1
    static attn_q8 qq;
    attn_quantize_q(&qq, q, 3, 64);
    for (int r = 0; r < 3; r++)
        for (int b = 0; b < 2; b++) {
            float amax = 0;
            int sum = 0, top = 0;
            for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(q[r * 64 + b * 32 + i]));
            for (int i = 0; i < 32; i++) {
                int v = qq.qs[r][b * 32 + i];
                float x = q[r * 64 + b * 32 + i];
                sum += v, top = abs(v) > top ? abs(v) : top;
                CHECK_MSG(fabsf(qq.d[r][b] * v - x) <= 0.5001f * amax / 127.0f, "q row %d block %d value %d: %d·%g vs %g",
                          r, b, i, v, qq.d[r][b], x);
            }
            CHECK_MSG(fabsf(qq.d[r][b] - amax / 127.0f) <= 1e-7f * amax, "row %d block %d scale %g", r, b, qq.d[r][b]);
            CHECK(qq.sum[r][b] == sum);
            CHECK(top == (amax > 0 ? 127 : 0));
        }
}

// The multi-query kernel of every ISA level (attn_select_multi) against its one-query kernel called per query:
// bit for bit (attention.h promises it; the engine's verify rows and decode rows rely on it), over GQA sizes,
// query counts up to the maximum, runs that cross tile ends, sliding windows and cache types. The queries'
// rows are strided as the forward pass lays them out (other KV heads' rows between them).
static void test_multi(void) {
    const int reps[] = {1, 3, 4, 8}, poss[] = {1, 15, 16, 40}, wins[] = {0, 7, 20};
    const tt_type types[][2] = {{TT_F16, TT_F16}, {TT_Q8_0, TT_Q8_0}, {TT_Q4_0, TT_F16}};
    cpu_isa hw = cpu_best_isa();
    for (int ty = 0; ty < 3; ty++)
        for (int a = 0; a < 4; a++)
            for (int hd = 64; hd <= 128; hd += 64)
                for (int bs = 16; bs <= 32; bs += 16)
                    for (int p = 0; p < 4; p++)
                        for (int w = 0; w < 3; w++) {
                            const int rep = reps[a], n_kv = 2, kv_head = 1, stride = n_kv * rep * hd;
                            attn_geom g0 = {.n_rep = rep};
                            const int max_q = attn_max_queries(&g0), nqs[] = {1, 2, 5, max_q};
                            case_data c;
                            make_case(&c, n_kv, rep, hd, bs, poss[p] + max_q, types[ty][0], types[ty][1]);
                            c.g.window = wins[w];
                            c.g.softcap = w == 1 ? 2.5f : 0.0f;
                            c.g.sinks = w == 2 ? c.sinks : NULL;
                            c.g.span = bs == 16 ? 1 : 0; // one tile: runs that cross it merge spans
                            float *q = malloc(sizeof(float) * (size_t)max_q * stride);
                            float *got = calloc((size_t)max_q * stride, sizeof(float));
                            float *want = malloc(sizeof(float) * (size_t)rep * hd);
                            for (int i = 0; i < max_q * stride; i++) q[i] = 2.0f * frand();
                            for (int isa = CPU_ISA_SCALAR; isa <= (int)hw; isa++)
                                for (int k = 0; k < 4; k++) {
                                    const int nq = nqs[k] < max_q ? nqs[k] : max_q;
                                    const size_t off = (size_t)kv_head * rep * hd; // this KV head's query rows
                                    attn_fn one = attn_select((cpu_isa)isa, &c.g);
                                    attn_multi_fn multi = attn_select_multi((cpu_isa)isa, &c.g);
                                    if (isa == CPU_ISA_SCALAR) one = attn_tile_scalar, multi = attn_multi_scalar;
                                    multi(got + off, (size_t)stride, q + off, (size_t)stride, nq, c.k, c.v, c.table,
                                          poss[p], kv_head, &c.g);
                                    for (int i = 0; i < nq; i++) {
                                        one(want, q + off + (size_t)i * stride, c.k, c.v, c.table, poss[p] + i,
                                            kv_head, &c.g);
                                        const float *g = got + off + (size_t)i * stride;
                                        CHECK_MSG(!memcmp(want, g, sizeof(float) * (size_t)rep * hd),
                                                  "%s multi-query != one-query: %s/%s rep %d hd %d bs %d pos %d+%d of %d "
                                                  "window %d", cpu_isa_name((cpu_isa)isa), tt_name(types[ty][0]),
                                                  tt_name(types[ty][1]), rep, hd, bs, poss[p], i, nq, wins[w]);
                                    }
                                }
                            free(q), free(got), free(want);
                            free_case(&c);
                        }
}

// Split attention (flash-decoding, attention.h): every span of a context computed on its own by the span
// kernel of each ISA level, the spans merged in order and finished as the forward pass's split steps do, must
// give the multi-query kernel's result bit for bit (a row's output must not depend on whether its step was
// split), over span lengths, windows that start inside a later span, sinks, query counts and cache types.
static void test_split(void) {
    const tt_type types[][2] = {{TT_F16, TT_F16}, {TT_Q8_0, TT_Q8_0}, {TT_Q4_0, TT_F16}};
    const int wins[] = {0, 150, 70}, spans[] = {64, 128};
    cpu_isa hw = cpu_best_isa();
    for (int ty = 0; ty < 3; ty++)
        for (int w = 0; w < 3; w++)
            for (int sp = 0; sp < 2; sp++)
                for (int nq = 1; nq <= 4; nq += 3) {
                    const int rep = 3, hd = 64, n_kv = 2, kv_head = 1, stride = n_kv * rep * hd, n_pos = 300;
                    case_data c;
                    make_case(&c, n_kv, rep, hd, 16, n_pos + nq, types[ty][0], types[ty][1]);
                    c.g.window = wins[w], c.g.span = spans[sp];
                    c.g.sinks = w == 2 ? c.sinks : NULL;
                    const size_t off = (size_t)kv_head * rep * hd;
                    float *q = malloc(sizeof(float) * (size_t)nq * stride);
                    float *want = calloc((size_t)nq * stride, sizeof(float));
                    float *got = calloc((size_t)nq * stride, sizeof(float));
                    float *parts = malloc(sizeof(float) * 8 * (size_t)nq * rep * hd), ml[8][2 * ATTN_MAX_REP];
                    for (int i = 0; i < nq * stride; i++) q[i] = 2.0f * frand();
                    for (int isa = CPU_ISA_SCALAR; isa <= (int)hw; isa++) {
                        attn_multi_fn multi = attn_select_multi((cpu_isa)isa, &c.g);
                        attn_span_fn span = attn_select_span((cpu_isa)isa, &c.g);
                        if (isa == CPU_ISA_SCALAR) multi = attn_multi_scalar, span = attn_span_scalar;
                        if (!span) continue; // a level that does not split
                        multi(want + off, (size_t)stride, q + off, (size_t)stride, nq, c.k, c.v, c.table, n_pos,
                              kv_head, &c.g);
                        int s0, s1, len = attn_span_len(&c.g);
                        attn_span_range(&c.g, n_pos, nq, &s0, &s1);
                        CHECK(len == spans[sp] && s1 - s0 + 1 <= 8 && s1 > s0);
                        for (int k = s1; k >= s0; k--) // any order: each span is on its own
                            if (k == s0)
                                span(got + off, (size_t)stride, q + off, (size_t)stride, nq, c.k, c.v, c.table, n_pos,
                                     kv_head, &c.g, k * len, (k + 1) * len, ml[0]);
                            else
                                span(parts + (size_t)(k - s0) * nq * rep * hd, (size_t)rep * hd, q + off,
                                     (size_t)stride, nq, c.k, c.v, c.table, n_pos, kv_head, &c.g, k * len,
                                     (k + 1) * len, ml[k - s0]);
                        for (int k = 1; k <= s1 - s0; k++)
                            attn_span_merge(got + off, (size_t)stride, ml[0], parts + (size_t)k * nq * rep * hd,
                                            (size_t)rep * hd, ml[k], nq, rep, hd);
                        attn_span_finish(got + off, (size_t)stride, ml[0], nq, kv_head, &c.g);
                        CHECK_MSG(!memcmp(want, got, sizeof(float) * (size_t)nq * stride),
                                  "%s split != whole: %s/%s window %d span %d queries %d",
                                  cpu_isa_name((cpu_isa)isa),
                                  tt_name(types[ty][0]), tt_name(types[ty][1]), wins[w], spans[sp], nq);
                    }
                    free(q), free(want), free(got), free(parts);
                    free_case(&c);
                }
}

int main(void) {
    srand(7);
    test_quantize_q();
    test_multi();
    test_split();
    const int reps[] = {1, 3, 4, 8}, hds[] = {16, 64, 128}, bss[] = {16, 32}, poss[] = {1, 5, 16, 17, 100};
    const int wins[] = {0, 7, 16, 40}; // 0: full causal
    // (K, V) cache types: f16, both quantized, and mixed as --kv-type-k / --kv-type-v allow
    const tt_type types[][2] = {{TT_F16, TT_F16}, {TT_Q8_0, TT_Q8_0}, {TT_Q4_0, TT_Q4_0}, {TT_Q8_0, TT_F16},
                                {TT_F16, TT_Q4_0}, {TT_Q4_0, TT_Q8_0}};
    cpu_isa hw = cpu_best_isa();
    for (int ty = 0; ty < 6; ty++)
    for (int w = 0; w < 4; w++)
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 3; b++)
            for (int s = 0; s < 2; s++)
                for (int p = 0; p < 5; p++) {
                    tt_type kt = types[ty][0], vt = types[ty][1];
                    if (hds[b] % 32 && (kt != TT_F16 || vt != TT_F16)) continue; // quant blocks are 32 values
                    if (ty > 0 && (a == 1 || s == 1)) continue; // the f16 run covers those; keep the test quick
                    case_data c;
                    make_case(&c, 2, reps[a], hds[b], bss[s], poss[p], kt, vt);
                    c.g.window = wins[w];
                    c.g.softcap = p % 2 ? 2.5f : 0.0f; // scores here reach well past the cap
                    c.g.sinks = w % 2 ? c.sinks : NULL;
                    c.g.span = s ? 0 : 32; // one tile (64 positions): contexts past it merge spans
                    size_t n = (size_t)reps[a] * hds[b];
                    float *ref = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
                    double *exact = malloc(n * sizeof(double));
                    int kv_head = 1;
                    attn_tile_scalar(ref, c.q, c.k, c.v, c.table, c.n_pos, kv_head, &c.g);
                    naive(&c, kv_head, exact);
                    double worst = 0;
                    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs(ref[i] - exact[i]));
                    // online softmax in float vs exact double: outputs are convex combinations of |v| <= 1
                    CHECK_MSG(worst < 2e-5, "scalar vs naive: %s/%s rep %d hd %d bs %d pos %d window %d softcap %g "
                              "sinks %d: %g", tt_name(kt), tt_name(vt), reps[a], hds[b], bss[s], poss[p], wins[w],
                              c.g.softcap, c.g.sinks != NULL, worst);
                    tu_isa_ran(CPU_ISA_SCALAR);
                    for (int isa = TU_ISA_FIRST_SIMD; isa <= (int)hw; isa++) {
                        tu_isa_ran((cpu_isa)isa);
                        attn_fn f = attn_select((cpu_isa)isa, &c.g);
                        CHECK(f != attn_tile_scalar); // head dims here are multiples of 16
                        f(got, c.q, c.k, c.v, c.table, c.n_pos, kv_head, &c.g);
                        double d = 0;
                        for (size_t i = 0; i < n; i++) d = fmax(d, fabs(got[i] - ref[i]));
                        CHECK_MSG(d < 1e-5, "%s vs scalar: %s/%s rep %d hd %d bs %d pos %d window %d softcap %g: %g",
                                  cpu_isa_name((cpu_isa)isa), tt_name(kt), tt_name(vt), reps[a], hds[b], bss[s],
                                  poss[p], wins[w], c.g.softcap, d);
                    }
                    free(ref), free(got), free(exact);
                    free_case(&c);
                }
    // head dims that are not a multiple of 16 (stories260K has 8) always take the scalar kernel
    attn_geom g8 = {.n_kv_heads = 1, .head_dim = 8, .block_size = 16, .n_rep = 2, .scale = 1};
    CHECK(attn_select(hw, &g8) == attn_tile_scalar);
    tu_isa_report("test_attention");
    TEST_MAIN_END();
}
