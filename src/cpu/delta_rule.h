// The gated delta rule of one value head of a gated DeltaNet layer (Qwen3.5), one row: the recurrence that
// src/model/gdn.c runs for every head of every row. Its state is the head's S (n, n) matrix, key-major:
// S[i][j] pairs key dim i with value dim j.
#ifndef TACHYON_CPU_DELTA_RULE_H
#define TACHYON_CPU_DELTA_RULE_H

#include "cpu/cpu.h"

// With decay = exp(g): S ← decay·S; d = beta·(v − Sᵀk); S ← S + k dᵀ; o = Sᵀq / sqrt(n). q, k: (n) key-side
// (L2-normed by the caller), v, o, d (scratch): (n) value-side. Blocks of value dims whose sums stay in
// registers (delta_rule_impl.h), at the best ISA level; every sum adds over i in order, so the result equals
// cpu_delta_rule_ref's bit for bit at every level.
void cpu_delta_rule(float *S, const float *q, const float *k, const float *v, float g, float beta, float *d,
                    float *o, int n);
// The same at a given level (clamped to what the CPU has): the tests run every level.
void cpu_delta_rule_isa(float *S, const float *q, const float *k, const float *v, float g, float beta, float *d,
                        float *o, int n, cpu_isa isa);
// The levels' instances of delta_rule_impl.h (baseline: SSE2 or NEON); call them through cpu_delta_rule_isa.
void cpu_delta_rule_base(float *S, const float *q, const float *k, const float *v, float g, float beta, float *d,
                         float *o, int n);
void cpu_delta_rule_avx2(float *S, const float *q, const float *k, const float *v, float g, float beta, float *d,
                         float *o, int n);
void cpu_delta_rule_avx512(float *S, const float *q, const float *k, const float *v, float g, float beta, float *d,
                           float *o, int n);
// The same, written as the equations read (four passes, one dot product per value dim): the reference.
void cpu_delta_rule_ref(float *S, const float *q, const float *k, const float *v, float g, float beta, float *d,
                        float *o, int n);

#endif
