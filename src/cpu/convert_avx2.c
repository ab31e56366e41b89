#include <immintrin.h>

#include "cpu/convert.h"

void cvt_f32_f16_avx2(uint16_t *dst, const float *src, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    if (i < n) cvt_f32_f16_scalar(dst + i, src + i, n - i);
}
