// cpu_matmul_grouped (cpu.h): many small matmuls of one weight shape in two pool dispatches. Why: a
// mixture-of-experts layer in prefill runs ~100 experts over ~8 rows each; as separate cpu_matmul calls every
// expert paid its own activation quantization and fork-join (four per expert FFN), and the threads split each
// expert's few hundred weight rows in halves, waiting for the slower one. Here the activation rows are quantized
// in one dispatch and the (group, tile of MMG_TILE weight rows) work items of all groups are taken from one
// counter by whichever thread is free, in a second.
#include "common/err.h"
#include "cpu/matmul_grouped.h"
#include "cpu/cpu_internal.h"
#include "cpu/matmul_ref.h"
#include "tensor/ttype.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define MMG_ALIGN 64
#define MMG_TILE 64 // weight rows per work item: a multiple of the repacked groups (8, 16 rows) and of a cache line
                    // of outputs; 64 Q4_K rows of k = 2048 are 72 KiB, L2-resident while all the group's
                    // activation rows pass over them

typedef struct mmg_ctx {
    const cpu_matmul_grouped_args *a;
    const cpu_kernels *kt; // NULL: the scalar reference (cpu_gemm_ref)
    int precise;           // TACHYON_PRECISE: dequantized weights, f32 activations, double sums
    uint32_t act;          // activation type
    cpu_quant_fn quant;    // NULL: the traits' from_float (scalar level), or a copy for f32 activations
    tt_from_float_fn from_float;
    uint8_t *qa; // (n_act, qa_stride) quantized activation rows
    size_t qa_stride;
    int tile;    // weight rows per work item
    int n_tiles; // work items per group
    atomic_int next;
    atomic_int failed; // a precise item could not allocate its row buffer
} mmg_ctx;

static int mmg_is_float(uint32_t t) { return t == TT_F32 || t == TT_F16 || t == TT_BF16; }

size_t cpu_matmul_grouped_scratch_size(uint32_t w_type, int n_act, int k) {
    const uint32_t act = cpu_act_type(w_type);
    if (act >= TT_COUNT || n_act <= 0 || k <= 0) return 0;
    return MMG_ALIGN + (size_t)n_act * tt_row_size(act, k);
}

// Weight rows per work item. Decode (at most MMG_FEW activation rows per group): as few items as keep the threads
// busy, each a long stream prefetched ahead (qwen3moe-30b-a3b Q4_K_M decode, 2 threads, bench/env_ab.py, 4
// processes each: 64-row items median 14.45 t/s, whole experts 15.44, and only the long streams reached the VM's
// high bandwidth level (21 t/s); with 64-row items each thread started cold every 72 KiB, the next item going to
// the other thread). So each group is cut into the fewest parts s (multiples of MMG_TILE rows) for which the
// items fill the threads' rounds to 90% (4 experts on 3 threads: 3 parts each, not 2 rounds of 2 and 1 idle).
// More rows: MMG_TILE, so that the tile stays in L2 while the group's activation rows pass over it.
#define MMG_FEW 4
static int mmg_tile(const cpu_pool *pool, const cpu_matmul_grouped_args *a) {
    int nmax = 0;
    for (int i = 0; i < a->n_groups; i++) nmax = a->groups[i].n > nmax ? a->groups[i].n : nmax;
    if (nmax > MMG_FEW || a->n_groups <= 0) return MMG_TILE;
    const int64_t nth = cpu_pool_size(pool);
    for (int64_t s = 1;; s++) {
        const int64_t tile = ((a->d + s - 1) / s + MMG_TILE - 1) / MMG_TILE * MMG_TILE;
        const int64_t items = a->n_groups * ((a->d + tile - 1) / tile), rounds = (items + nth - 1) / nth;
        if (10 * items >= 9 * nth * rounds || tile <= MMG_TILE) return (int)tile;
    }
}

static const float *mmg_xrow(const cpu_matmul_grouped_args *a, int i) {
    return a->x + (size_t)(a->x_rows ? a->x_rows[i] : i) * (size_t)a->k;
}

static void mmg_quant_rows(const mmg_ctx *c, int r0, int r1) {
    const int k = c->a->k;
    for (int r = r0; r < r1; r++) {
        void *y = c->qa + (size_t)r * c->qa_stride;
        if (c->act == TT_F32) memcpy(y, mmg_xrow(c->a, r), (size_t)k * sizeof(float));
        else if (c->quant) c->quant(mmg_xrow(c->a, r), y, k);
        else c->from_float(mmg_xrow(c->a, r), y, k);
    }
}

static void mmg_quant_job(void *arg, int ith, int nth) {
    const mmg_ctx *c = arg;
    const int n = c->a->n_act, per = (n + nth - 1) / nth;
    const int r0 = ith * per, r1 = r0 + per < n ? r0 + per : n;
    if (r0 < r1) mmg_quant_rows(c, r0, r1);
}

// Weight rows [i0, i1) of group g in reference precision (cpu_matmul's precise path, per group).
static int mmg_precise_item(const mmg_ctx *c, const cpu_mm_group *g, int i0, int i1) {
    const cpu_matmul_grouped_args *a = c->a;
    const tt_traits *tr = tt_get(a->w_type);
    const size_t w_stride = tt_row_size(a->w_type, a->k);
    float *row = malloc(sizeof(float) * (size_t)a->k); // debug path: allocation is acceptable here
    if (!row) return -1;
    for (int i = i0; i < i1; i++) {
        tr->to_float((const uint8_t *)g->w + (size_t)i * w_stride, row, a->k);
        for (int r = 0; r < g->n; r++) {
            const float *x = mmg_xrow(a, g->a0 + r);
            double s = 0.0;
            for (int e = 0; e < a->k; e++) s += (double)row[e] * x[e];
            g->out[(size_t)r * a->ld_out + i] = (float)s;
        }
    }
    free(row);
    return 0;
}

static void mmg_gemm_job(void *arg, int ith, int nth) {
    (void)ith, (void)nth;
    mmg_ctx *c = arg;
    const cpu_matmul_grouped_args *a = c->a;
    const int n_items = a->n_groups * c->n_tiles;
    for (int it; (it = atomic_fetch_add_explicit(&c->next, 1, memory_order_relaxed)) < n_items;) {
        const cpu_mm_group *g = &a->groups[it / c->n_tiles];
        const int i0 = it % c->n_tiles * c->tile, i1 = i0 + c->tile < a->d ? i0 + c->tile : a->d;
        if (c->precise) {
            if (mmg_precise_item(c, g, i0, i1)) atomic_store(&c->failed, 1);
            continue;
        }
        const cpu_gemm_fn packed = c->kt && g->w_packed ? c->kt->gemm_packed[a->w_type] : NULL;
        const cpu_gemm_job j = {.w = packed ? g->w_packed : g->w, .w_stride = tt_row_size(a->w_type, a->k),
                                .a = c->qa + (size_t)g->a0 * c->qa_stride, .a_stride = c->qa_stride,
                                .out = g->out, .ld_out = a->ld_out, .k = a->k, .n_rows = g->n, .i0 = i0, .i1 = i1};
        if (packed) packed(&j);
        else if (c->kt) c->kt->gemm[a->w_type](&j);
        else cpu_gemm_ref(a->w_type, &j);
    }
}

static int mmg_check(const cpu_matmul_grouped_args *a) {
    if (!a || !a->x || a->k <= 0 || a->d <= 0 || a->ld_out < a->d || a->n_act <= 0 || a->n_groups < 0 ||
        (a->n_groups && !a->groups))
        return TC_ERR_INVALID;
    const tt_traits *tr = tt_get(a->w_type);
    if (!tr || a->w_type == TT_Q8_1 || a->w_type == TT_Q8_K) return TC_ERR_UNSUPPORTED;
    if (a->k % tr->block_size) return TC_ERR_INVALID;
    for (int i = 0; i < a->n_groups; i++) {
        const cpu_mm_group *g = &a->groups[i];
        if (!g->w || !g->out || g->n <= 0 || g->a0 < 0 || g->a0 > a->n_act - g->n) return TC_ERR_INVALID;
    }
    return 0;
}

int cpu_matmul_grouped(cpu_pool *pool, const cpu_matmul_grouped_args *a) {
    int rc = mmg_check(a);
    if (rc) return rc;
    mmg_ctx c;
    memset(&c, 0, sizeof c);
    c.a = a;
    c.tile = mmg_tile(pool, a);
    c.n_tiles = (a->d + c.tile - 1) / c.tile;
    atomic_init(&c.next, 0);
    atomic_init(&c.failed, 0);
    if (cpu_precise()) {
        c.precise = 1;
        cpu_pool_run(pool, mmg_gemm_job, &c);
        return atomic_load(&c.failed) ? TC_ERR_NOMEM : 0;
    }
    const tt_traits *tr = tt_get(a->w_type);
    c.act = cpu_act_type(a->w_type);
    const tt_traits *atr = tt_get(c.act);
    if (!mmg_is_float(a->w_type) && (!tr->vec_dot || !atr || !atr->from_float)) return TC_ERR_UNSUPPORTED;
    if (!a->scratch) return TC_ERR_INVALID;
    const cpu_kernels *kt = cpu_kernels_at(cpu_best_isa());
    if (kt && kt->gemm[a->w_type] && kt->act_type[a->w_type] == c.act && (c.act == TT_F32 || kt->quant[c.act])) {
        c.kt = kt;
        c.quant = c.act == TT_F32 ? NULL : kt->quant[c.act];
    }
    c.from_float = atr ? atr->from_float : NULL;
    c.qa = (uint8_t *)(((uintptr_t)a->scratch + MMG_ALIGN - 1) & ~(uintptr_t)(MMG_ALIGN - 1));
    c.qa_stride = tt_row_size(c.act, a->k);
    if (a->n_act >= 4 && cpu_pool_size(pool) > 1) cpu_pool_run(pool, mmg_quant_job, &c);
    else mmg_quant_rows(&c, 0, a->n_act);
    if (a->n_groups) cpu_pool_run(pool, mmg_gemm_job, &c);
    return 0;
}
