// AVX2 + FMA + F16C level: activation quantizers and GEMM tiles from the shared x86 templates, built with
// vpmaddubsw/vpmaddwd int8 dot products. Tile shape for batches: 2 weight rows x 4 activation rows.
#include "cpu/cpu_internal.h"

#define X86_FN(name) name##_avx2
#define X86_GEMM_NW 2
#define X86_GEMM_NR 4
#include "cpu/x86_act.h"
#include "cpu/x86_gemm.h"
#include "cpu/x86_repack.h"
#include "cpu/x86_repack_q8.h"
#include "cpu/x86_repack_q4.h"
#include "cpu/x86_table.h"

const cpu_kernels *cpu_kernels_avx2(void) { return &X86_TABLE; }
