// AVX-512 instance of the GLU activations (ops_x86.h).
#include "cpu/x86_vec512.h"
#define OPS_GLU_FN ops_glu_avx512
#include "cpu/ops_x86.h"
