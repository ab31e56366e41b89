// The gated delta rule of one head over blocks of DR_BLOCK value dims (delta_rule.h), included by delta_rule.c
// (baseline: SSE2 or NEON), delta_rule_avx2.c and delta_rule_avx512.c with DR_FN (the level's function, declared
// in delta_rule.h), DR_VW (floats per vector) and DR_NV (vectors per block) set: the same C compiled for each
// ISA, a block's sums held in DR_NV registers.
//
// One block of value dims at a time, its sums in DR_NV registers (more independent sums than the add latency
// needs: the measured best). Pass 1 reads the block's state columns to form Sᵀk of the decayed state without
// storing it; pass 2 reads them again, decays them the same way (the same product), adds k dᵀ, stores them and
// sums Sᵀq: S is written once per row instead of twice. Each sum adds over i in order, in separate multiplies and
// adds (ISO C: no contraction into fused multiply-adds), so every level equals cpu_delta_rule_ref bit for bit.

// dr_v: DR_VW floats in one register (GCC/clang vector extension: the same C for SSE2, NEON, AVX2 and AVX-512).
typedef float dr_v __attribute__((vector_size(DR_VW * sizeof(float))));
#define DR_BLOCK (DR_NV * DR_VW)

static inline dr_v dr_load(const float *p) {
    dr_v x;
    memcpy(&x, p, sizeof x);
    return x;
}

void DR_FN(float *S, const float *q, const float *k, const float *v, float g, float beta, float *d, float *o,
           int n) {
    const float decay = expf(g), scale = 1.0f / sqrtf((float)n);
    const dr_v vdecay = (dr_v){0} + decay, vbeta = (dr_v){0} + beta, vscale = (dr_v){0} + scale;
    int j0 = 0;
    for (; j0 + DR_BLOCK <= n; j0 += DR_BLOCK) {
        dr_v acc[DR_NV], db[DR_NV];
        for (int c = 0; c < DR_NV; c++) acc[c] = (dr_v){0};
        for (int i = 0; i < n; i++) {
            const float *row = S + (size_t)i * n + j0;
            const dr_v ki = (dr_v){0} + k[i];
            for (int c = 0; c < DR_NV; c++) acc[c] += (dr_load(row + c * DR_VW) * vdecay) * ki;
        }
        for (int c = 0; c < DR_NV; c++) {
            db[c] = (dr_load(v + j0 + c * DR_VW) - acc[c]) * vbeta;
            memcpy(d + j0 + c * DR_VW, &db[c], sizeof db[c]);
            acc[c] = (dr_v){0};
        }
        for (int i = 0; i < n; i++) {
            float *row = S + (size_t)i * n + j0;
            const dr_v ki = (dr_v){0} + k[i], qi = (dr_v){0} + q[i];
            for (int c = 0; c < DR_NV; c++) {
                const dr_v r = dr_load(row + c * DR_VW) * vdecay + ki * db[c];
                memcpy(row + c * DR_VW, &r, sizeof r);
                acc[c] += r * qi;
            }
        }
        for (int c = 0; c < DR_NV; c++) {
            const dr_v oc = acc[c] * vscale;
            memcpy(o + j0 + c * DR_VW, &oc, sizeof oc);
        }
    }
    if (j0 == n) return;
    // the last n % DR_BLOCK value dims: the same arithmetic, one dim at a time
    for (int j = j0; j < n; j++) {
        float acc = 0.0f;
        for (int i = 0; i < n; i++) acc += (S[(size_t)i * n + j] * decay) * k[i];
        d[j] = (v[j] - acc) * beta;
    }
    for (int j = j0; j < n; j++) {
        float acc = 0.0f;
        for (int i = 0; i < n; i++) {
            const float r = S[(size_t)i * n + j] * decay + k[i] * d[j];
            S[(size_t)i * n + j] = r;
            acc += r * q[i];
        }
        o[j] = acc * scale;
    }
}
