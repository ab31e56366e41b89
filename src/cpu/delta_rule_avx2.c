// The gated delta rule of one head at the AVX2 level (delta_rule_impl.h): blocks of 64 value dims, eight vectors.
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "cpu/delta_rule.h"

#define DR_FN cpu_delta_rule_avx2
#define DR_VW 8
#define DR_NV 8
#include "cpu/delta_rule_impl.h"
