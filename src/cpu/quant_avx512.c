// AVX-512 level (F/BW/VL/DQ + VNNI): the shared x86 templates compiled with AVX512-VNNI, so the int8 dot
// products are vpdpbusd / vpdpwssd, and with 32 vector registers the batch tile grows to 2 x 8.
#include "cpu/cpu_internal.h"

#define X86_FN(name) name##_avx512
#define X86_GEMM_NW 2
#define X86_GEMM_NR 8
#include "cpu/x86_act.h"
#include "cpu/x86_gemm.h"
#include "cpu/x86_repack.h"
#include "cpu/x86_repack_q8.h"
#include "cpu/x86_repack_q4.h"
#include "cpu/x86_table.h"

const cpu_kernels *cpu_kernels_avx512(void) { return &X86_TABLE; }
