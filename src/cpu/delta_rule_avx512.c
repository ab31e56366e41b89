// The gated delta rule of one head at the AVX-512 level (delta_rule_impl.h): blocks of 128 value dims, eight vectors.
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "cpu/delta_rule.h"

#define DR_FN cpu_delta_rule_avx512
#define DR_VW 16
#define DR_NV 8
#include "cpu/delta_rule_impl.h"
