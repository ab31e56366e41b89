// NEON (ARMv8.0 Advanced SIMD) level: activation quantizers and GEMM tiles from the shared ARM templates,
// with int8 dot products from SMULL / SMLAL2 / SADALP. Tile shape for batches: 2 weight rows x up to 4
// activation rows.
#include "cpu/arm_kernels.h"

#define ARM_FN(name) name##_neon
#define ARM_LEVEL 0
#include "cpu/arm_table.h"

const cpu_kernels *cpu_kernels_neon(void) { return &ARM_TABLE; }
