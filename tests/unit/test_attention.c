// Attention kernels over the paged f16 KV cache: the scalar kernel against a naive double-precision softmax
// (materialized scores), and every SIMD level this CPU has against the scalar kernel, over GQA group sizes,
// head dims, block sizes, positions that end mid-block, sliding windows (starting mid-block), and a shuffled
// block table.
#include <math.h>
#include <stdlib.h>

#include "cpu/attention.h"
#include "cpu/cpu.h"
#include "tensor/ttype.h"
#include "test_util.h"

static float frand(void) { return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f; }

typedef struct case_data {
    attn_geom g;
    int n_blocks, n_pos;
    uint16_t *k, *v;   // (n_blocks, n_kv_heads, block_size, head_dim) f16
    int32_t *table;    // (n_blocks) a permutation: logical block i lives in physical block table[i]
    float *q;          // (n_rep, head_dim)
} case_data;

static void make_case(case_data *c, int n_kv, int n_rep, int hd, int bs, int n_pos) {
    c->g = (attn_geom){.n_kv_heads = n_kv, .head_dim = hd, .block_size = bs, .n_rep = n_rep,
                       .scale = 1.0f / sqrtf((float)hd)};
    c->n_pos = n_pos;
    c->n_blocks = (n_pos + bs - 1) / bs + 2;
    size_t n = (size_t)c->n_blocks * n_kv * bs * hd;
    c->k = malloc(n * 2), c->v = malloc(n * 2);
    for (size_t i = 0; i < n; i++) c->k[i] = tt_f32_to_f16(2.0f * frand()), c->v[i] = tt_f32_to_f16(frand());
    c->table = malloc(sizeof(int32_t) * (size_t)c->n_blocks);
    for (int i = 0; i < c->n_blocks; i++) c->table[i] = i;
    for (int i = c->n_blocks - 1; i > 0; i--) {
        int j = rand() % (i + 1), t = c->table[i];
        c->table[i] = c->table[j], c->table[j] = t;
    }
    c->q = malloc(sizeof(float) * (size_t)n_rep * hd);
    for (int i = 0; i < n_rep * hd; i++) c->q[i] = 2.0f * frand();
}

static void free_case(case_data *c) { free(c->k), free(c->v), free(c->table), free(c->q); }

// Naive reference: all scores, max-subtracted softmax, weighted sum, in double.
static void naive(const case_data *c, int kv_head, double *out) {
    const attn_geom *g = &c->g;
    double *sc = malloc(sizeof(double) * (size_t)c->n_pos);
    const int first = g->window > 0 && c->n_pos > g->window ? c->n_pos - g->window : 0; // written from the def
    for (int r = 0; r < g->n_rep; r++) {
        double mx = -INFINITY, sum = 0;
        for (int p = first; p < c->n_pos; p++) {
            size_t off = (((size_t)c->table[p / g->block_size] * g->n_kv_heads + kv_head) * g->block_size +
                          p % g->block_size) * g->head_dim;
            double d = 0;
            for (int i = 0; i < g->head_dim; i++) d += (double)c->q[r * g->head_dim + i] * tt_f16_to_f32(c->k[off + i]);
            sc[p] = d * g->scale;
            if (sc[p] > mx) mx = sc[p];
        }
        for (int p = first; p < c->n_pos; p++) sum += sc[p] = exp(sc[p] - mx);
        for (int i = 0; i < g->head_dim; i++) {
            double acc = 0;
            for (int p = first; p < c->n_pos; p++) {
                size_t off = (((size_t)c->table[p / g->block_size] * g->n_kv_heads + kv_head) * g->block_size +
                              p % g->block_size) * g->head_dim;
                acc += sc[p] * tt_f16_to_f32(c->v[off + i]);
            }
            out[r * g->head_dim + i] = acc / sum;
        }
    }
    free(sc);
}

int main(void) {
    srand(7);
    const int reps[] = {1, 3, 4, 8}, hds[] = {16, 64, 128}, bss[] = {16, 32}, poss[] = {1, 5, 16, 17, 100};
    const int wins[] = {0, 7, 16, 40}; // 0: full causal
    cpu_isa hw = cpu_best_isa();
    for (int w = 0; w < 4; w++)
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 3; b++)
            for (int s = 0; s < 2; s++)
                for (int p = 0; p < 5; p++) {
                    case_data c;
                    make_case(&c, 2, reps[a], hds[b], bss[s], poss[p]);
                    c.g.window = wins[w];
                    size_t n = (size_t)reps[a] * hds[b];
                    float *ref = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
                    double *exact = malloc(n * sizeof(double));
                    int kv_head = 1;
                    attn_tile_scalar(ref, c.q, c.k, c.v, c.table, c.n_pos, kv_head, &c.g);
                    naive(&c, kv_head, exact);
                    double worst = 0;
                    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs(ref[i] - exact[i]));
                    // online softmax in float vs exact double: outputs are convex combinations of |v| <= 1
                    CHECK_MSG(worst < 2e-5, "scalar vs naive: rep %d hd %d bs %d pos %d window %d: %g", reps[a],
                              hds[b], bss[s], poss[p], wins[w], worst);
                    tu_isa_ran(CPU_ISA_SCALAR);
                    for (int isa = CPU_ISA_AVX2; isa <= (int)hw; isa++) {
                        tu_isa_ran((cpu_isa)isa);
                        attn_fn f = attn_select((cpu_isa)isa, &c.g);
                        CHECK(f != attn_tile_scalar); // head dims here are multiples of 16
                        f(got, c.q, c.k, c.v, c.table, c.n_pos, kv_head, &c.g);
                        double d = 0;
                        for (size_t i = 0; i < n; i++) d = fmax(d, fabs(got[i] - ref[i]));
                        CHECK_MSG(d < 1e-5, "%s vs scalar: rep %d hd %d bs %d pos %d window %d: %g",
                                  cpu_isa_name((cpu_isa)isa), reps[a], hds[b], bss[s], poss[p], wins[w], d);
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
