// AVX2 + FMA instance of the GLU activations (ops_x86.h).
#include "cpu/x86_vec256.h"
#define OPS_GLU_FN ops_glu_avx2
#include "cpu/ops_x86.h"
