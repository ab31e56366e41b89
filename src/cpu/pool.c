// Persistent thread pool. The caller publishes (fn, arg) and bumps a generation counter; workers spin on
// that counter for a short while after each job (so back-to-back kernels of one decode step start within
// a few hundred ns) and then sleep on a futex. The caller runs share 0 itself, then waits for a pending
// counter to reach zero (spin, then futex) — that is the end barrier.
#include "cpu/cpu.h"
#include "common/timeutil.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

// How long an idle worker (or the waiting caller) spins before sleeping. Long enough to cover the gap
// between two matmuls of one step (norms, RoPE, attention run on the caller), short enough not to burn a
// shared core between steps.
#define POOL_SPIN_SECONDS 100e-6

// One spin-wait hint: lets the sibling hardware thread run and saves power while a worker polls.
static inline void pool_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield" ::: "memory");
#endif
}

typedef struct pool_worker {
    cpu_pool *pool;
    int ith;
    pthread_t tid;
} pool_worker;

struct cpu_pool {
    int n_threads;
    pool_worker *workers; // (n_threads - 1), thread 0 is the caller
    cpu_job_fn fn;        // current job, published before gen is bumped
    void *arg;
    int stop;
    // Separate cache lines: gen is read by spinning workers, pending is hammered at the end of each job.
    _Alignas(64) atomic_uint gen;
    atomic_int sleepers; // workers blocked in futex_wait on gen
    _Alignas(64) atomic_int pending; // workers still running the current job
    atomic_int caller_sleeping;
};

static void pool_futex_wait(void *addr, int val) {
    syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}
static void pool_futex_wake(void *addr, int n) { syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0); }

static void *pool_worker_main(void *p) {
    pool_worker *w = p;
    cpu_pool *pool = w->pool;
    unsigned seen = 0;
    for (;;) {
        unsigned g = atomic_load_explicit(&pool->gen, memory_order_acquire);
        if (g == seen) {
            double t0 = tc_now();
            for (int i = 1;; i++) {
                pool_pause();
                g = atomic_load_explicit(&pool->gen, memory_order_acquire);
                if (g != seen) break;
                if ((i & 63) == 0) {
                    if (tc_now() - t0 > POOL_SPIN_SECONDS) break;
                    if (i >= 1024) sched_yield(); // oversubscribed machine: let the thread we wait for run
                }
            }
        }
        if (g == seen) {
            atomic_fetch_add(&pool->sleepers, 1);
            while ((g = atomic_load(&pool->gen)) == seen) pool_futex_wait(&pool->gen, (int)seen);
            atomic_fetch_sub(&pool->sleepers, 1);
        }
        seen = g;
        if (pool->stop) break;
        pool->fn(pool->arg, w->ith, pool->n_threads);
        if (atomic_fetch_sub(&pool->pending, 1) == 1 && atomic_load(&pool->caller_sleeping))
            pool_futex_wake(&pool->pending, 1);
    }
    return NULL;
}

cpu_pool *cpu_pool_new(int n_threads) {
    if (n_threads < 1 || n_threads > 1024) return NULL;
    cpu_pool *pool = calloc(1, sizeof *pool);
    if (!pool) return NULL;
    pool->n_threads = n_threads;
    atomic_init(&pool->gen, 0);
    atomic_init(&pool->sleepers, 0);
    atomic_init(&pool->pending, 0);
    atomic_init(&pool->caller_sleeping, 0);
    if (n_threads > 1) {
        pool->workers = calloc((size_t)n_threads - 1, sizeof *pool->workers);
        if (!pool->workers) {
            free(pool);
            return NULL;
        }
    }
    for (int i = 1; i < n_threads; i++) {
        pool_worker *w = &pool->workers[i - 1];
        w->pool = pool;
        w->ith = i;
        if (pthread_create(&w->tid, NULL, pool_worker_main, w) != 0) {
            pool->n_threads = i; // only workers 1..i-1 exist; stop those
            cpu_pool_free(pool);
            return NULL;
        }
    }
    return pool;
}

static void pool_wait_pending(cpu_pool *pool) {
    if (atomic_load_explicit(&pool->pending, memory_order_acquire) == 0) return;
    double t0 = tc_now();
    for (int i = 1;; i++) {
        pool_pause();
        if (atomic_load_explicit(&pool->pending, memory_order_acquire) == 0) return;
        if ((i & 63) == 0) {
            if (tc_now() - t0 > POOL_SPIN_SECONDS) break;
            if (i >= 1024) sched_yield();
        }
    }
    atomic_store(&pool->caller_sleeping, 1);
    int p;
    while ((p = atomic_load(&pool->pending)) != 0) pool_futex_wait(&pool->pending, p);
    atomic_store(&pool->caller_sleeping, 0);
}

static void pool_noop(void *arg, int ith, int nth) { (void)arg, (void)ith, (void)nth; }

void cpu_pool_free(cpu_pool *pool) {
    if (!pool) return;
    if (pool->n_threads > 1) {
        pool->stop = 1;
        pool->fn = pool_noop;
        atomic_store(&pool->pending, pool->n_threads - 1);
        atomic_fetch_add(&pool->gen, 1);
        pool_futex_wake(&pool->gen, INT_MAX);
        for (int i = 1; i < pool->n_threads; i++) pthread_join(pool->workers[i - 1].tid, NULL);
    }
    free(pool->workers);
    free(pool);
}

int cpu_pool_size(const cpu_pool *pool) { return pool ? pool->n_threads : 1; }

void cpu_pool_run(cpu_pool *pool, cpu_job_fn fn, void *arg) {
    if (!pool || pool->n_threads == 1) {
        fn(arg, 0, 1);
        return;
    }
    pool->fn = fn;
    pool->arg = arg;
    atomic_store_explicit(&pool->pending, pool->n_threads - 1, memory_order_relaxed);
    atomic_fetch_add(&pool->gen, 1); // seq_cst: publishes fn/arg/pending, ordered before reading sleepers
    if (atomic_load(&pool->sleepers) > 0) pool_futex_wake(&pool->gen, INT_MAX);
    fn(arg, 0, pool->n_threads);
    pool_wait_pending(pool);
}
