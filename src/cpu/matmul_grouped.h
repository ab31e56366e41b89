// The grouped matmul of the CPU backend (the experts of a mixture-of-experts layer, src/model/moe.c).
#ifndef TACHYON_CPU_MATMUL_GROUPED_H
#define TACHYON_CPU_MATMUL_GROUPED_H

#include <stddef.h>
#include <stdint.h>

#include "cpu/cpu.h"

// n_groups independent matmuls whose weights share one type and shape (d, k), each over its own activation rows:
// out_g (n_g, d) = rows [a0, a0 + n_g) of the activations @ W_gᵀ. Activation row i is x row x_rows[i] (x row i when x_rows is NULL). Every activation row is
// quantized once (one pool dispatch when there are several), then the threads share all (group, weight-row tile)
// work items in one more dispatch: two fork-joins for all the experts of a layer instead of two per expert.
// Each output equals the one cpu_matmul would give for that group alone (the same kernel per output, with
// w_packed used when the level has a kernel for it), bit for bit; TACHYON_PRECISE runs the precise path per group.
typedef struct cpu_mm_group {
    const void *w;        // (d, k) weights
    const void *w_packed; // (optional) cpu_repack(w_type, w, d, k), or NULL
    int a0, n;            // its activation rows [a0, a0 + n), n >= 1
    float *out;           // (n, d), row stride ld_out floats
} cpu_mm_group;

typedef struct cpu_matmul_grouped_args {
    uint32_t w_type;        // tt_type of every group's W
    int k, d, ld_out;       // inner dimension, weight rows, output row stride (>= d)
    const float *x;         // f32 rows of k elements
    const int32_t *x_rows;  // (n_act) the x row of each activation row, or NULL (the identity)
    int n_act;              // activation rows
    const cpu_mm_group *groups;
    int n_groups;
    void *scratch; // >= cpu_matmul_grouped_scratch_size(w_type, n_act, k) bytes
} cpu_matmul_grouped_args;

size_t cpu_matmul_grouped_scratch_size(uint32_t w_type, int n_act, int k);
// 0, TC_ERR_INVALID (shapes, rows outside [0, n_act)), TC_ERR_UNSUPPORTED (a type without a kernel) or
// TC_ERR_NOMEM (precise path).
int cpu_matmul_grouped(cpu_pool *pool, const cpu_matmul_grouped_args *a);

#endif
