// Main-memory read bandwidth: every pool thread sums its contiguous slice of a buffer much larger than the
// last-level cache; best of a few passes. The buffer (MEMBW_BYTES) is allocated and touched on the first
// call, then freed; the result is cached. The buffer is in huge pages as the weights are (common/hugepage.h): the
// probe measures what the weights' streams can reach.
#include "cpu/cpu.h"
#include "common/hugepage.h"
#include "common/timeutil.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MEMBW_BYTES ((size_t)1024 << 20) // 1 GiB: > 3x the 260 MiB L3 seen on the dev VM
#define MEMBW_PASSES 4

typedef struct membw_ctx {
    const uint64_t *buf; // (n) words
    size_t n;
    uint64_t sink[64]; // per thread, keeps the reads alive
} membw_ctx;

static void membw_job(void *arg, int ith, int nth) {
    membw_ctx *c = arg;
    size_t per = (c->n / (size_t)nth) & ~(size_t)7, i0 = per * (size_t)ith, i1 = ith == nth - 1 ? c->n : i0 + per;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
    for (size_t i = i0; i + 8 <= i1; i += 8) {
        s0 += c->buf[i], s1 += c->buf[i + 1], s2 += c->buf[i + 2], s3 += c->buf[i + 3];
        s4 += c->buf[i + 4], s5 += c->buf[i + 5], s6 += c->buf[i + 6], s7 += c->buf[i + 7];
    }
    c->sink[ith & 63] = s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7;
}

static void membw_touch(void *arg, int ith, int nth) {
    membw_ctx *c = arg;
    size_t per = c->n / (size_t)nth, i0 = per * (size_t)ith, i1 = ith == nth - 1 ? c->n : i0 + per;
    memset((void *)(c->buf + i0), ith + 1, (i1 - i0) * sizeof(uint64_t));
}

static pthread_mutex_t g_membw_lock = PTHREAD_MUTEX_INITIALIZER;
static double g_membw = 0.0; // bytes/second, 0 until measured

double cpu_mem_bandwidth(cpu_pool *pool) {
    pthread_mutex_lock(&g_membw_lock);
    if (g_membw == 0.0) {
        membw_ctx *c = calloc(1, sizeof *c);
        void *buf = NULL;
        if (c && (buf = tc_huge_alloc(MEMBW_BYTES)) != NULL) {
            c->buf = buf;
            c->n = MEMBW_BYTES / sizeof(uint64_t);
            cpu_pool_run(pool, membw_touch, c); // first touch from the threads that will read it
            double best = 1e30;
            for (int p = 0; p < MEMBW_PASSES; p++) {
                double t0 = tc_now();
                cpu_pool_run(pool, membw_job, c);
                double t = tc_now() - t0;
                if (t < best) best = t;
            }
            g_membw = (double)MEMBW_BYTES / best;
        }
        free(buf);
        free(c);
    }
    double bw = g_membw;
    pthread_mutex_unlock(&g_membw_lock);
    return bw;
}
