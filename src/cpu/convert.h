// Row conversions between f32 and f16, with F16C where the CPU has it.
#ifndef TACHYON_CPU_CONVERT_H
#define TACHYON_CPU_CONVERT_H

#include <stdint.h>

#include "cpu/cpu.h"

typedef void (*cvt_f32_f16_fn)(uint16_t *dst, const float *src, int n); // round to nearest even
void cvt_f32_f16_scalar(uint16_t *dst, const float *src, int n);
#if defined(__x86_64__)
void cvt_f32_f16_avx2(uint16_t *dst, const float *src, int n); // needs F16C
#elif defined(__aarch64__)
void cvt_f32_f16_neon(uint16_t *dst, const float *src, int n); // FCVTN: part of ARMv8.0 Advanced SIMD
#endif
cvt_f32_f16_fn cvt_select_f32_f16(cpu_isa isa);

#endif
