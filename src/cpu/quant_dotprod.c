// ARMv8.2 dotprod level: activation quantizers and GEMM tiles from the shared ARM templates, with SDOT int8
// dot products. Tile shape for batches: 2 weight rows x up to 4 activation rows.
#include "cpu/arm_kernels.h"

#define ARM_FN(name) name##_dotprod
#define ARM_LEVEL 1
#include "cpu/arm_table.h"

const cpu_kernels *cpu_kernels_dotprod(void) { return &ARM_TABLE; }
