// ARMv8.6 i8mm level: as the dotprod level, but a tile of 2 weight rows x 2 or 4 activation rows takes its
// integer sums from SMMLA (a 2 x 8 by 8 x 2 int8 product per instruction: 4 pairs at once); a single
// activation row (or the odd one of a tile) stays on SDOT. Same results as the dotprod level, bit for bit.
#include "cpu/arm_kernels.h"

#define ARM_FN(name) name##_i8mm
#define ARM_LEVEL 2
#include "cpu/arm_table.h"

const cpu_kernels *cpu_kernels_i8mm(void) { return &ARM_TABLE; }
