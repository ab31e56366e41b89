// cpu_matmul: out (n_rows, d) = x (n_rows, k) @ W^T. Dispatch by ISA level and weight type, activation
// quantization into caller scratch, and the split of the d weight rows over the pool's threads. The
// scalar level is the reference: it quantizes with the tensor traits' from_float and dots with their
// vec_dot; float weights (F32/F16/BF16) are dotted with f32 activations at every level.
#include "common/err.h"
#include "cpu/cpu.h"
#include "cpu/cpu_internal.h"
#include "cpu/matmul_ref.h"
#if defined(__aarch64__)
#include "cpu/arm_kernels.h"
#endif
#include "tensor/ttype.h"

#include <stdlib.h>
#include <string.h>

#define MM_ALIGN 64
#define MM_ROW_CHUNK 16 // output columns per thread are a multiple of 16 floats = one cache line

static int mm_is_float(uint32_t t) { return t == TT_F32 || t == TT_F16 || t == TT_BF16; }

// Activation type for weight type t: f32 for float weights, else the traits' vec_dot_type.
static uint32_t mm_act_type(const tt_traits *tr, uint32_t t) {
    return mm_is_float(t) ? TT_F32 : (uint32_t)tr->vec_dot_type;
}

size_t cpu_matmul_scratch_size(uint32_t w_type, int n_rows, int k) {
    const tt_traits *tr = tt_get(w_type);
    if (!tr || n_rows <= 0 || k <= 0 || mm_is_float(w_type)) return 0;
    return MM_ALIGN + (size_t)n_rows * tt_row_size(mm_act_type(tr, w_type), k);
}

// --- scalar reference level
static float mm_wfloat(const uint8_t *w, int e, uint32_t t) {
    if (t == TT_F32) return ((const float *)(const void *)w)[e];
    uint16_t h;
    memcpy(&h, w + 2 * (size_t)e, 2);
    return t == TT_F16 ? tt_f16_to_f32(h) : tt_bf16_to_f32(h);
}

typedef struct mm_scalar_ctx {
    cpu_gemm_job job;
    uint32_t w_type;
    tt_vec_dot_fn vec_dot;
} mm_scalar_ctx;

static void mm_gemm_scalar(const mm_scalar_ctx *c, const cpu_gemm_job *j) {
    for (int r = 0; r < j->n_rows; r++) {
        const uint8_t *a = j->a + (size_t)r * j->a_stride;
        float *out = j->out + (size_t)r * j->ld_out;
        for (int i = j->i0; i < j->i1; i++) {
            const uint8_t *w = j->w + (size_t)i * j->w_stride;
            if (c->vec_dot) {
                out[i] = c->vec_dot(j->k, w, a);
            } else {
                const float *af = (const float *)(const void *)a;
                float s = 0.0f;
                for (int e = 0; e < j->k; e++) s += mm_wfloat(w, e, c->w_type) * af[e];
                out[i] = s;
            }
        }
    }
}

void cpu_gemm_ref(uint32_t w_type, const cpu_gemm_job *j) {
    const tt_traits *tr = tt_get(w_type);
    const mm_scalar_ctx c = {.w_type = w_type, .vec_dot = mm_is_float(w_type) ? NULL : tr->vec_dot};
    mm_gemm_scalar(&c, j);
}

uint32_t cpu_act_type(uint32_t w_type) {
    const tt_traits *tr = tt_get(w_type);
    return tr ? mm_act_type(tr, w_type) : TT_COUNT;
}

// --- threading
typedef struct mm_ctx {
    cpu_gemm_job job; // i0/i1 filled per thread
    // fused matmuls over one input (cpu_matmul_multi): jobs[m] for m < n_jobs, all weight rows split as one
    // range; n_jobs == 0 for a single matmul
    cpu_gemm_job jobs[CPU_MATMUL_MAX_MULTI];
    cpu_gemm_fn gemms[CPU_MATMUL_MAX_MULTI];
    int n_jobs;
    cpu_gemm_fn gemm; // NULL: scalar
    mm_scalar_ctx scalar;
    // activation quantization (parallel over rows when the batch is large)
    const float *x;
    uint8_t *qa;
    size_t qa_stride;
    cpu_quant_fn quant;
    tt_from_float_fn from_float;
} mm_ctx;

static void mm_quant_rows(const mm_ctx *c, int r0, int r1) {
    for (int r = r0; r < r1; r++) {
        const float *xr = c->x + (size_t)r * c->job.k;
        void *yr = c->qa + (size_t)r * c->qa_stride;
        if (c->quant) c->quant(xr, yr, c->job.k);
        else c->from_float(xr, yr, c->job.k);
    }
}

static void mm_quant_job(void *arg, int ith, int nth) {
    const mm_ctx *c = arg;
    int n = c->job.n_rows, per = (n + nth - 1) / nth;
    int r0 = ith * per, r1 = r0 + per < n ? r0 + per : n;
    if (r0 < r1) mm_quant_rows(c, r0, r1);
}

static void mm_gemm_job(void *arg, int ith, int nth) {
    const mm_ctx *c = arg;
    const int d = c->job.i1;
    int chunk = (d + nth - 1) / nth;
    chunk = (chunk + MM_ROW_CHUNK - 1) / MM_ROW_CHUNK * MM_ROW_CHUNK;
    cpu_gemm_job j = c->job;
    j.i0 = ith * chunk;
    j.i1 = j.i0 + chunk < d ? j.i0 + chunk : d;
    if (j.i0 >= j.i1) return;
    if (c->gemm) c->gemm(&j);
    else mm_gemm_scalar(&c->scalar, &j);
}

// Fused: the concatenated rows of all jobs split into one contiguous range per thread (a multiple of 16).
static void mm_multi_job(void *arg, int ith, int nth) {
    const mm_ctx *c = arg;
    int d = 0;
    for (int m = 0; m < c->n_jobs; m++) d += c->jobs[m].i1;
    int chunk = (d + nth - 1) / nth;
    chunk = (chunk + MM_ROW_CHUNK - 1) / MM_ROW_CHUNK * MM_ROW_CHUNK;
    const int g0 = ith * chunk, g1 = g0 + chunk < d ? g0 + chunk : d;
    for (int m = 0, off = 0; m < c->n_jobs; off += c->jobs[m].i1, m++) {
        cpu_gemm_job j = c->jobs[m];
        j.i0 = g0 > off ? g0 - off : 0;
        j.i1 = g1 - off < j.i1 ? g1 - off : j.i1;
        if (j.i0 < j.i1) c->gemms[m](&j);
    }
}

const cpu_kernels *cpu_kernels_at(cpu_isa isa) {
    if (isa > cpu_hw_isa()) isa = cpu_hw_isa(); // never run what the CPU lacks
#if defined(__x86_64__)
    if (isa == CPU_ISA_AVX512) return cpu_kernels_avx512();
    if (isa == CPU_ISA_AVX2) return cpu_kernels_avx2();
#elif defined(__aarch64__)
    if (isa == CPU_ISA_I8MM) return cpu_kernels_i8mm();
    if (isa == CPU_ISA_DOTPROD) return cpu_kernels_dotprod();
    if (isa == CPU_ISA_NEON) return cpu_kernels_neon();
#endif
    return NULL;
}

// Checks shared by every path: shapes, buffers, and a weight type (activation-only Q8_1/Q8_K are not).
static int mm_check_args(const cpu_matmul_args *a, const tt_traits **tr_out) {
    if (!a || !a->out || !a->x || !a->w || a->n_rows <= 0 || a->k <= 0 || a->d <= 0 || a->ld_out < a->d)
        return TC_ERR_INVALID;
    const tt_traits *tr = tt_get(a->w_type);
    if (!tr || a->w_type == TT_Q8_1 || a->w_type == TT_Q8_K) return TC_ERR_UNSUPPORTED;
    if (a->k % tr->block_size) return TC_ERR_INVALID;
    *tr_out = tr;
    return 0;
}

int cpu_matmul_isa(cpu_pool *pool, const cpu_matmul_args *a, cpu_isa isa) {
    const tt_traits *tr;
    int rc = mm_check_args(a, &tr);
    if (rc) return rc;
    const int is_float = mm_is_float(a->w_type);
    const uint32_t act = mm_act_type(tr, a->w_type);
    const tt_traits *atr = tt_get(act);
    if (!is_float && (!tr->vec_dot || !atr || !atr->from_float)) return TC_ERR_UNSUPPORTED;
    if (!is_float && !a->scratch) return TC_ERR_INVALID;

    mm_ctx c;
    memset(&c, 0, sizeof c);
    const cpu_kernels *kt = cpu_kernels_at(isa);
    if (kt && kt->gemm[a->w_type] && kt->act_type[a->w_type] == act &&
        (is_float || kt->quant[act])) {
        c.gemm = kt->gemm[a->w_type];
        c.quant = is_float ? NULL : kt->quant[act];
        if (a->w_packed && kt->gemm_packed[a->w_type]) c.gemm = kt->gemm_packed[a->w_type];
    } else {
        c.scalar.w_type = a->w_type;
        c.scalar.vec_dot = is_float ? NULL : tr->vec_dot;
    }
    const int packed = c.gemm && a->w_packed && c.gemm == kt->gemm_packed[a->w_type];
    c.job.w = packed ? a->w_packed : a->w;
    c.job.w_stride = tt_row_size(a->w_type, a->k); // unused by the packed kernels
    c.job.out = a->out;
    c.job.ld_out = a->ld_out;
    c.job.k = a->k;
    c.job.n_rows = a->n_rows;
    c.job.i0 = 0;
    c.job.i1 = a->d;
    if (is_float) {
        c.job.a = (const uint8_t *)a->x;
        c.job.a_stride = (size_t)a->k * sizeof(float);
    } else {
        uintptr_t p = ((uintptr_t)a->scratch + MM_ALIGN - 1) & ~(uintptr_t)(MM_ALIGN - 1);
        c.x = a->x;
        c.qa = (uint8_t *)p;
        c.qa_stride = tt_row_size(act, a->k);
        c.from_float = atr->from_float;
        if (a->n_rows >= 4 && cpu_pool_size(pool) > 1) cpu_pool_run(pool, mm_quant_job, &c);
        else mm_quant_rows(&c, 0, a->n_rows);
        c.job.a = c.qa;
        c.job.a_stride = c.qa_stride;
    }
    cpu_pool_run(pool, mm_gemm_job, &c);
    return 0;
}

// --- reference precision (TACHYON_PRECISE=1): each weight row is dequantized to f32 (the traits' scalar
// to_float) and dotted with the unrounded f32 activations in double. Orders of magnitude slower; it exists so
// the forward pass can be checked against a full-precision reference without 8-bit activation noise.
typedef struct mm_precise_ctx {
    const cpu_matmul_args *a;
    const tt_traits *tr;
    size_t w_stride;
    int failed; // a thread could not get its row buffer
} mm_precise_ctx;

static void mm_precise_job(void *arg, int ith, int nth) {
    mm_precise_ctx *c = arg;
    const cpu_matmul_args *a = c->a;
    int chunk = (a->d + nth - 1) / nth, i0 = ith * chunk, i1 = i0 + chunk < a->d ? i0 + chunk : a->d;
    if (i0 >= i1) return;
    float *row = malloc(sizeof(float) * (size_t)a->k); // debug path: allocation is acceptable here
    if (!row) {
        c->failed = 1;
        return;
    }
    for (int i = i0; i < i1; i++) {
        c->tr->to_float((const uint8_t *)a->w + (size_t)i * c->w_stride, row, a->k);
        for (int r = 0; r < a->n_rows; r++) {
            const float *x = a->x + (size_t)r * a->k;
            double s = 0.0;
            for (int e = 0; e < a->k; e++) s += (double)row[e] * x[e];
            a->out[(size_t)r * a->ld_out + i] = (float)s;
        }
    }
    free(row);
}

// Fused form: all weights share x, n_rows, k and the activation type, and have a kernel at this level;
// otherwise (or in precise mode) one cpu_matmul per weight. Results are bit-identical either way: the same
// kernel computes each output, only the split over threads differs.
int cpu_matmul_multi(cpu_pool *pool, const cpu_matmul_args *a, int n) {
    if (n <= 0 || n > CPU_MATMUL_MAX_MULTI || !a) return TC_ERR_INVALID;
    const cpu_kernels *kt = cpu_precise() ? NULL : cpu_kernels_at(cpu_best_isa());
    int fuse = kt != NULL;
    for (int m = 0; m < n && fuse; m++) {
        const tt_traits *tr;
        if (mm_check_args(&a[m], &tr) || mm_is_float(a[m].w_type) || !kt->gemm[a[m].w_type]) {
            fuse = 0;
            break;
        }
        const uint32_t act = mm_act_type(tr, a[m].w_type);
        fuse = kt->act_type[a[m].w_type] == act && kt->quant[act] && a[m].scratch &&
               a[m].x == a[0].x && a[m].n_rows == a[0].n_rows && a[m].k == a[0].k &&
               act == mm_act_type(tt_get(a[0].w_type), a[0].w_type);
    }
    if (!fuse) {
        for (int m = 0; m < n; m++) {
            int rc = cpu_matmul(pool, &a[m]);
            if (rc) return rc;
        }
        return 0;
    }
    mm_ctx c;
    memset(&c, 0, sizeof c);
    const uint32_t act = kt->act_type[a[0].w_type];
    uintptr_t p = ((uintptr_t)a[0].scratch + MM_ALIGN - 1) & ~(uintptr_t)(MM_ALIGN - 1);
    c.quant = kt->quant[act];
    c.x = a[0].x;
    c.qa = (uint8_t *)p;
    c.qa_stride = tt_row_size(act, a[0].k);
    c.job.k = a[0].k;
    c.job.n_rows = a[0].n_rows;
    if (a[0].n_rows >= 4 && cpu_pool_size(pool) > 1) cpu_pool_run(pool, mm_quant_job, &c);
    else mm_quant_rows(&c, 0, a[0].n_rows);
    c.n_jobs = n;
    for (int m = 0; m < n; m++) {
        cpu_gemm_job *j = &c.jobs[m];
        const int packed = a[m].w_packed && kt->gemm_packed[a[m].w_type];
        j->w = packed ? a[m].w_packed : a[m].w;
        j->w_stride = tt_row_size(a[m].w_type, a[m].k);
        j->a = c.qa;
        j->a_stride = c.qa_stride;
        j->out = a[m].out;
        j->ld_out = a[m].ld_out;
        j->k = a[m].k;
        j->n_rows = a[m].n_rows;
        j->i0 = 0;
        j->i1 = a[m].d;
        c.gemms[m] = packed ? kt->gemm_packed[a[m].w_type] : kt->gemm[a[m].w_type];
    }
    cpu_pool_run(pool, mm_multi_job, &c);
    return 0;
}

int cpu_repack_wanted(uint32_t w_type) {
    const cpu_kernels *kt = cpu_kernels_at(cpu_best_isa());
    return !cpu_precise() && kt && w_type < TT_COUNT && kt->gemm_packed[w_type] != NULL;
}

int cpu_precise(void) {
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("TACHYON_PRECISE");
        v = e && *e && strcmp(e, "0") != 0;
    }
    return v;
}

int cpu_matmul(cpu_pool *pool, const cpu_matmul_args *a) {
    if (cpu_precise()) {
        const tt_traits *tr;
        int rc = mm_check_args(a, &tr);
        if (rc) return rc;
        mm_precise_ctx c = {a, tr, tt_row_size(a->w_type, a->k), 0};
        cpu_pool_run(pool, mm_precise_job, &c);
        return c.failed ? TC_ERR_NOMEM : 0;
    }
    return cpu_matmul_isa(pool, a, cpu_best_isa());
}
