// CPU backend building blocks: feature detection, the persistent thread pool, and quantized matmul.
// Kernels are chosen once at start-up from the CPU's features: on x86-64 from CPUID (AVX-512/VNNI, AVX2,
// scalar), on aarch64 from the Linux auxiliary vector (i8mm, dotprod, NEON, scalar). TACHYON_ISA=<level name>
// in the environment forces a lower level (for tests and for comparing); a name of the other architecture's
// levels is ignored with a warning on stderr.
#ifndef TACHYON_CPU_H
#define TACHYON_CPU_H

#include <stddef.h>
#include <stdint.h>

// ISA levels of the architecture being compiled for; numeric order is capability order (a level implies
// every lower one), and CPU_ISA_TOP is the highest level the code knows, whatever this host has.
#if defined(__aarch64__)
typedef enum {
    CPU_ISA_SCALAR = 0,
    CPU_ISA_NEON = 1,    // ARMv8.0 Advanced SIMD (asimd)
    CPU_ISA_DOTPROD = 2, // + SDOT/UDOT (ARMv8.2 asimddp)
    CPU_ISA_I8MM = 3,    // + SMMLA/UMMLA (ARMv8.6 i8mm)
    CPU_ISA_TOP = CPU_ISA_I8MM
} cpu_isa;
#else
typedef enum { CPU_ISA_SCALAR = 0, CPU_ISA_AVX2 = 1, CPU_ISA_AVX512 = 2, CPU_ISA_TOP = CPU_ISA_AVX512 } cpu_isa;
#endif

// What the CPU and OS support; the fields of the other architecture stay 0.
typedef struct cpu_features {
    int avx2, fma, f16c;                                     // x86-64
    int avx512f, avx512bw, avx512vl, avx512vnni, avx512bf16; // x86-64
    int asimd, asimddp, i8mm, sve, fp16;                     // aarch64 (fp16: FPHP and ASIMDHP)
} cpu_features;

const cpu_features *cpu_get_features(void); // detected once, cached
cpu_isa cpu_best_isa(void);                 // highest usable level, honouring TACHYON_ISA
cpu_isa cpu_hw_isa(void);                   // best level the hardware + OS support, ignoring TACHYON_ISA
const char *cpu_isa_name(cpu_isa isa);
// The level TACHYON_ISA names (a name of this architecture: "scalar", "avx2", "avx512" or "scalar", "neon",
// "dotprod", "i8mm"), or -1 for any other string.
int cpu_isa_parse(const char *name);

// --- thread pool: persistent workers (created once), no per-step thread creation. A job is a function
// called as fn(arg, ith, nth) on every thread (the caller is thread 0); cpu_pool_run returns when all
// have finished. Workers spin briefly between jobs (low wake-up latency for back-to-back kernels) and
// then sleep. Not reentrant: one job at a time, from one caller thread.
typedef struct cpu_pool cpu_pool;
typedef void (*cpu_job_fn)(void *arg, int ith, int nth);

cpu_pool *cpu_pool_new(int n_threads); // NULL on failure; free with cpu_pool_free
void cpu_pool_free(cpu_pool *pool);
int cpu_pool_size(const cpu_pool *pool);
void cpu_pool_run(cpu_pool *pool, cpu_job_fn fn, void *arg);

// --- matmul: out (n_rows, d) = x (n_rows, k) @ W^T, where W is (d, k) in any supported tt_type stored
// row-major (each of the d rows is k elements, tt_row_size(type, k) bytes).
// x is quantized once to the weight type's vec_dot_type (into scratch), then each weight block is read
// once for all n_rows rows (GEMM path) — this is what makes batching pay on a memory-bound machine.
// Work is split over weight rows across the pool's threads. Scratch must hold cpu_matmul_scratch_size bytes;
// the hot path does not allocate.
typedef struct cpu_matmul_args {
    float *out;        // (n_rows, d), row stride ld_out floats
    int ld_out;        // >= d
    const float *x;    // (n_rows, k), row stride k
    int n_rows;        // batch rows
    int k;             // inner dimension (multiple of the weight type's block size)
    int d;             // output features = weight rows
    uint32_t w_type;   // tt_type of W
    const void *w;     // (d, k) weights
    void *scratch;     // >= cpu_matmul_scratch_size(w_type, n_rows, k) bytes
    const void *w_packed; // (optional) cpu_repack(w_type, w, d, k) of the same weights, or NULL (cpu/repack.h)
} cpu_matmul_args;

size_t cpu_matmul_scratch_size(uint32_t w_type, int n_rows, int k);
// Returns 0, or TC_ERR_UNSUPPORTED for a type without a kernel. With TACHYON_PRECISE=1 in the environment
// it runs the reference-precision path instead (weights dequantized to f32, activations not rounded; slow:
// for accuracy checks against full-precision references).
int cpu_matmul(cpu_pool *pool, const cpu_matmul_args *a);
int cpu_precise(void); // 1 when TACHYON_PRECISE is set (read once)
// n matmuls over the same input x (same n_rows and k; e.g. the Q, K, V projections of a layer): x is
// quantized once and all weight rows are split over the threads in one pool dispatch when the weights share
// an activation type; otherwise one cpu_matmul each. Outputs equal those of n separate cpu_matmul calls, bit
// for bit. Each a[m].scratch may be the same buffer (sized for the largest). n <= CPU_MATMUL_MAX_MULTI.
#define CPU_MATMUL_MAX_MULTI 4
int cpu_matmul_multi(cpu_pool *pool, const cpu_matmul_args *a, int n);
// Same computation with a fixed ISA level (tests compare levels against CPU_ISA_SCALAR).
int cpu_matmul_isa(cpu_pool *pool, const cpu_matmul_args *a, cpu_isa isa);

// 1 when the current level (cpu_best_isa) has a kernel over the cpu_repack layout of w_type, so a repacked
// copy would be used (model loading repacks only then; TACHYON_PRECISE never uses one).
int cpu_repack_wanted(uint32_t w_type);

// Measured sequential read bandwidth of main memory, bytes/second (reads a buffer much larger than the
// last-level cache with all pool threads; takes ~0.5 s; cached after the first call).
double cpu_mem_bandwidth(cpu_pool *pool);

#endif
