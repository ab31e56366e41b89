// GEMV/GEMM over repacked Q4_K and Q6_K weights (cpu_q4k_r8, cpu_q6k_r8, see repack.c) x Q8_K activations,
// 256-bit. Template: included by quant_avx2.c and quant_avx512.c (X86_FN names the instantiation); with
// AVX512-VNNI the int16 dot products become vpdpwssd, the integers are the same.
//
// A tile is one group of 8 weight rows x NR activation rows. Per super-block and step (jj, l) one load gives
// 4 quant bytes of each of the 8 rows (8 low-nibble and 8 high-nibble quants per row); the 4 matching
// activation bytes of each sub-block are broadcast to all lanes, so vpmaddubsw leaves each row's partial
// sums in its own 32-bit lane. The 8 steps of a sub-block are summed in int16 (|pair| <= 2 * 15 * 128,
// x 8 = 30720 < 2^15: exact), in order (X86_KEEP), and scaled once per sub-block with vpmaddwd; the mins go
// through the activations' bsums. The float work per super-block is two FMAs for all 8 rows, and the lanes are
// the 8 outputs: no horizontal sums. With AVX512-VNNI (32 registers) the Q4_K tile sums
// each sub-block in int32 with one vpdpbusd per step, then multiplies by the scale (vpmulld): fewer ops than
// the int16 pair sums (+20% prefill on a TinyLlama-shape Q4_K_M); GEMM tiles take two groups (16 rows) in
// 512-bit registers (+12% more, bench_matmul). Every (weight row, activation row) pair
// sees the same operations whatever NR is, so results do not depend on the batch.
#ifndef TACHYON_CPU_X86_REPACK_H
#define TACHYON_CPU_X86_REPACK_H

#include "cpu/repack.h"
#include "cpu/x86_common.h"

// Activation rows per tile: 8 at both levels. With 32 registers (EVEX) the weight unpack serves 8 rows; with
// 16 the per-row sums stay in registers and the totals spill once per sub-block (AVX2 Q4_K GEMM +2-5% over 4).
#define X86_R8_NR 8
#define X86_R8_PF 8 // GEMV: prefetch this many repacked blocks (1184 / 1680 bytes) ahead, into L2: 22-23 GB/s
                    // per thread from DRAM, against 12 (Q6_K) / 20 (Q4_K) prefetching into L1 (T0, 4 ahead).
// The prefetches cost compute (from L2, Q4_K GEMV 45 GB/s without them, 40 with, one Zen 4 core) and pay it back
// in the whole engine: TinyLlama-shape Q4_K_M decode, 2 threads, binaries alternated, 38 t/s without them against
// 45 in the VM's low bandwidth level and 46 against 61-68 in the high one; every line counts (every other line
// only: 35-43 t/s), 16 blocks ahead is no better than 8.

// 8 bytes (one per row) -> 8 int32 lanes holding the byte in both int16 halves, for vpmaddwd: one in-lane
// shuffle of the 8 bytes broadcast to every quarter (byte r of lane r twice, zero-extended).
XI __m256i x86_r8_dup16(const uint8_t *p) {
    int64_t q;
    memcpy(&q, p, 8);
    const __m256i ctl = _mm256_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1, //
                                         4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7, -1);
    return _mm256_shuffle_epi8(_mm256_set1_epi64x(q), ctl);
}

XI __m256i x86_r8_bcast4(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

// The activation block's sums per 32-element sub-block, bsums[2s] + bsums[2s + 1] (|.| <= 32 * 128), as
// int16: the pair of sub-blocks (2p, 2p + 1) at int16 offset X86_B2_OFF(p) (vpackssdw works per 128-bit
// lane).
#define X86_B2_OFF(p) (((p) & 2) * 4 + ((p) & 1) * 2)
XI void x86_r8_b2(const tt_block_q8_K *a, int16_t b2[16]) {
    const __m256i bs = _mm256_loadu_si256((const __m256i *)(const void *)a->bsums);
    const __m256i s = _mm256_madd_epi16(bs, _mm256_set1_epi16(1));
    _mm256_storeu_si256((__m256i *)(void *)b2, _mm256_packs_epi32(s, s));
}

// out lanes of rows [8g, 8g + 8) that lie in [i0, i1) (a thread's range may start or end inside a group).
XI void x86_r8_store(const cpu_gemm_job *j, int g, int r, __m256 v) {
    float *o = j->out + (size_t)r * j->ld_out;
    const int i = 8 * g;
    if (i >= j->i0 && i + 8 <= j->i1) {
        _mm256_storeu_ps(o + i, v);
        return;
    }
    float t[8];
    _mm256_storeu_ps(t, v);
    for (int e = 0; e < 8; e++)
        if (i + e >= j->i0 && i + e < j->i1) o[i + e] = t[e];
}

#if X86_VNNI
XI __m512i x86_r16_a8(const void *p) { // 8 bytes in the low lanes (vpermd picks from them)
    return _mm512_castsi128_si512(_mm_loadl_epi64((const __m128i *)p));
}
#endif

XI void x86_r8_tile_q4k(const cpu_gemm_job *j, int g, int r, const int NR) {
    const int nb = j->k / QK_K;
    const cpu_q4k_r8 *blk = (const cpu_q4k_r8 *)(const void *)j->w + (size_t)g * nb;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[X86_R8_NR];
    X86_UNROLL for (int rr = 0; rr < NR; rr++) acc[rr] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const cpu_q4k_r8 *p = blk + b;
        if (NR == 1) // one sequential stream; a few blocks ahead keeps more misses in flight
            x86_prefetch_block_l2((const uint8_t *)(p + X86_R8_PF), sizeof *p);
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p->d));
        const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p->dmin));
        const tt_block_q8_K *a[X86_R8_NR];
        __m256i sumi[X86_R8_NR], summ[X86_R8_NR];
        X86_UNROLL for (int rr = 0; rr < NR; rr++) {
            a[rr] = (const void *)(x86_arow(j, r + rr) + b * sizeof(tt_block_q8_K));
            summ[rr] = sumi[rr] = _mm256_setzero_si256();
        }
        // mins: sum over sub-blocks s of mn[s][row] * (bsums[2s] + bsums[2s + 1]), two sub-blocks per
        // vpmaddwd
        int16_t b2[X86_R8_NR][16];
        X86_UNROLL for (int rr = 0; rr < NR; rr++) x86_r8_b2(a[rr], b2[rr]);
        X86_UNROLL for (int q = 0; q < 4; q++) {
            const __m256i mn = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)p->mn[q]));
            X86_UNROLL for (int rr = 0; rr < NR; rr++) summ[rr] =
                x86_dot_i16(summ[rr], mn, x86_r8_bcast4(&b2[rr][X86_B2_OFF(q)]));
        }
        X86_UNROLL for (int rr = 0; rr < NR; rr++) {
            const __m256 ad = _mm256_set1_ps(a[rr]->d);
            acc[rr] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(summ[rr]), _mm256_mul_ps(dmin, ad), acc[rr]);
        }
#if X86_VNNI
        if (NR == 1) {
            // Decode: two 4-byte steps per 512-bit vpdpbusd (steps l, l + 1 of the 8 rows lie side by side;
            // vpermd spreads the activation's 8 bytes to the halves), the halves added per sub-block pair;
            // otherwise as the few-row path below (the same integer sums).
            const uint8_t *aq = (const uint8_t *)a[0]->qs;
            const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
            const __m512i m4z = _mm512_set1_epi8(0x0f), m4hz = _mm512_set1_epi8((char)0xf0);
            X86_UNROLL for (int jj = 0; jj < 4; jj++) {
                __m512i sl = _mm512_setzero_si512(), sh = _mm512_setzero_si512();
                X86_UNROLL for (int l = 0; l < 8; l += 2) {
                    const __m512i v = _mm512_loadu_si512((const void *)p->qs[jj][l]);
                    const __m512i al = _mm512_permutexvar_epi32(idx, x86_r16_a8(aq + 64 * jj + 4 * l));
                    const __m512i ah = _mm512_permutexvar_epi32(idx, x86_r16_a8(aq + 64 * jj + 32 + 4 * l));
                    sl = _mm512_dpbusd_epi32(sl, _mm512_and_si512(v, m4z), al);
                    sh = _mm512_dpbusd_epi32(sh, _mm512_and_si512(v, m4hz), ah);
                }
                const __m256i sl8 =
                    _mm256_add_epi32(_mm512_castsi512_si256(sl), _mm512_extracti64x4_epi64(sl, 1));
                const __m256i sh8 =
                    _mm256_add_epi32(_mm512_castsi512_si256(sh), _mm512_extracti64x4_epi64(sh, 1));
                const __m256i s0 =
                    _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p->sc[2 * jj]));
                const __m256i s1 =
                    _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p->sc[2 * jj + 1]));
                sumi[0] = _mm256_add_epi32(_mm256_add_epi32(sumi[0], _mm256_mullo_epi32(sl8, s0)),
                                           _mm256_mullo_epi32(_mm256_srai_epi32(sh8, 4), s1));
            }
        } else if (NR <= 4) {
            // Verify and small batches (2-4 rows): both sub-blocks of a pair from one load, the high nibbles
            // left in place (v & 0xF0 = 16 * q, |16 * sum| <= 32 * 240 * 128) and divided back exactly
            // (vpsrad 4) once per sub-block: no shifts per step, half the loads. The same integer sums as
            // below.
            const __m256i m4h = _mm256_set1_epi8((char)0xf0);
            for (int jj = 0; jj < 4; jj++) {
                __m256i sl[X86_R8_NR], sh[X86_R8_NR];
                X86_UNROLL for (int rr = 0; rr < NR; rr++) sl[rr] = sh[rr] = _mm256_setzero_si256();
                X86_UNROLL for (int l = 0; l < 8; l++) {
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)p->qs[jj][l]);
                    const __m256i ql = _mm256_and_si256(v, m4), qh = _mm256_and_si256(v, m4h);
                    X86_UNROLL for (int rr = 0; rr < NR; rr++) {
                        sl[rr] = _mm256_dpbusd_epi32(sl[rr], ql, x86_r8_bcast4(a[rr]->qs + 64 * jj + 4 * l));
                        sh[rr] = _mm256_dpbusd_epi32(sh[rr], qh, x86_r8_bcast4(a[rr]->qs + 64 * jj + 32 + 4 * l));
                    }
                }
                const __m256i s0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p->sc[2 * jj]));
                const __m256i s1 =
                    _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p->sc[2 * jj + 1]));
                X86_UNROLL for (int rr = 0; rr < NR; rr++) sumi[rr] = _mm256_add_epi32(
                    _mm256_add_epi32(sumi[rr], _mm256_mullo_epi32(sl[rr], s0)),
                    _mm256_mullo_epi32(_mm256_srai_epi32(sh[rr], 4), s1));
            }
        } else {
            // int32 sub-block sums in one vpdpbusd per step (|sum| <= 32 * 15 * 128), times the 6-bit scale
            // (|sumi| <= 8 * 61440 * 63 < 2^31: exact, as the int16 path). One sub-block at a time: 8 sums, 8
            // totals and 8 accumulators fit the 32 registers (both halves at once spilled).
            for (int sb = 0; sb < 8; sb++) { // not unrolled: the register allocator spilled the 512-op block
                const int jj = sb / 2, hi = sb & 1;
                __m256i ss[X86_R8_NR];
                X86_UNROLL for (int rr = 0; rr < NR; rr++) ss[rr] = _mm256_setzero_si256();
                X86_UNROLL for (int l = 0; l < 8; l++) {
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)p->qs[jj][l]);
                    const __m256i q = _mm256_and_si256(_mm256_srli_epi16(v, 4 * hi), m4);
                    X86_UNROLL for (int rr = 0; rr < NR; rr++) ss[rr] =
                        _mm256_dpbusd_epi32(ss[rr], q, x86_r8_bcast4(a[rr]->qs + 64 * jj + 32 * hi + 4 * l));
                }
                const __m256i sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p->sc[sb]));
                X86_UNROLL for (int rr = 0; rr < NR; rr++) sumi[rr] =
                    _mm256_add_epi32(sumi[rr], _mm256_mullo_epi32(ss[rr], sc));
            }
        }
#else
        if (NR <= 2) {
            // Decode (few rows): both sub-blocks of a pair from one load; the same int16 sums as below.
            for (int jj = 0; jj < 4; jj++) {
                __m256i sl[X86_R8_NR], sh[X86_R8_NR];
                X86_UNROLL for (int rr = 0; rr < NR; rr++) sl[rr] = sh[rr] = _mm256_setzero_si256();
                X86_UNROLL for (int l = 0; l < 8; l++) {
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)p->qs[jj][l]);
                    const __m256i ql = _mm256_and_si256(v, m4), qh = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                    X86_UNROLL for (int rr = 0; rr < NR; rr++) {
                        sl[rr] = _mm256_add_epi16(
                            sl[rr], _mm256_maddubs_epi16(ql, x86_r8_bcast4(a[rr]->qs + 64 * jj + 4 * l)));
                        sh[rr] = _mm256_add_epi16(
                            sh[rr], _mm256_maddubs_epi16(qh, x86_r8_bcast4(a[rr]->qs + 64 * jj + 32 + 4 * l)));
                        X86_KEEP(sl[rr]);
                        X86_KEEP(sh[rr]);
                    }
                }
                const __m256i s0 = x86_r8_dup16(p->sc[2 * jj]), s1 = x86_r8_dup16(p->sc[2 * jj + 1]);
                X86_UNROLL for (int rr = 0; rr < NR; rr++) sumi[rr] =
                    x86_dot_i16(x86_dot_i16(sumi[rr], sl[rr], s0), sh[rr], s1);
            }
        } else {
            // int16 sub-block sums (8 steps of vpmaddubsw, |.| <= 8 * 2 * 15 * 128 < 2^15), then x scale with
            // vpmaddwd. One sub-block at a time, not unrolled: 16 registers hold the 4 sums, 4 totals and 4
            // accumulators (both halves at once spilled half the loop to the stack).
            for (int sb = 0; sb < 8; sb++) {
                const int jj = sb / 2, hi = sb & 1;
                __m256i ss[X86_R8_NR];
                X86_UNROLL for (int rr = 0; rr < NR; rr++) ss[rr] = _mm256_setzero_si256();
                X86_UNROLL for (int l = 0; l < 8; l++) {
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)p->qs[jj][l]);
                    const __m256i q = _mm256_and_si256(_mm256_srli_epi16(v, 4 * hi), m4);
                    X86_UNROLL for (int rr = 0; rr < NR; rr++) {
                        ss[rr] = _mm256_add_epi16(
                            ss[rr], _mm256_maddubs_epi16(q, x86_r8_bcast4(a[rr]->qs + 64 * jj + 32 * hi + 4 * l)));
                        X86_KEEP(ss[rr]);
                    }
                }
                const __m256i sc = x86_r8_dup16(p->sc[sb]);
                X86_UNROLL for (int rr = 0; rr < NR; rr++) sumi[rr] = x86_dot_i16(sumi[rr], ss[rr], sc);
            }
        }
#endif
        X86_UNROLL for (int rr = 0; rr < NR; rr++) {
            const __m256 ad = _mm256_set1_ps(a[rr]->d);
            acc[rr] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[rr]), _mm256_mul_ps(d, ad), acc[rr]);
        }
    }
    X86_UNROLL for (int rr = 0; rr < NR; rr++) x86_r8_store(j, g, r + rr, acc[rr]);
}

// The 4 six-bit quants of each of the 8 rows of group gg (elements 128n + 32gg + 4c..) at step (n, c).
XI __m256i x86_q6r_quants(const cpu_q6k_r8 *p, int n, int c, int gg) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(3), m30 = _mm256_set1_epi8(0x30);
    const __m256i L = _mm256_loadu_si256((const __m256i *)(const void *)(gg & 1 ? p->qlb[n][c] : p->qla[n][c]));
    const __m256i H = _mm256_loadu_si256((const __m256i *)(const void *)p->qh[n][c]);
    const __m256i lo = _mm256_and_si256(gg < 2 ? L : _mm256_srli_epi16(L, 4), m4);
    switch (gg) {
    case 0: return _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(H, m3), 4));
    case 1: return _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(H, 2), m30));
    case 2: return _mm256_or_si256(lo, _mm256_and_si256(H, m30));
    default: return _mm256_or_si256(lo, _mm256_and_si256(_mm256_srli_epi16(H, 2), m30));
    }
}

// Q6_K (cpu_q6k_r8): x = d * sc * (q - 32), sc int8 per 16. Step (n, c) loads 4 bytes of ql (two vectors)
// and of qh per row and makes the 4 quants of each of the groups gg = 0..3 (elements 128n + 32gg + 4c..);
// the scale changes every 16 elements (4 steps): with VNNI each vpmaddubsw result (|pair| <= 2 * 63 * 128) goes
// through vpdpwssd at once, at AVX2 two steps are added in int16 first, then one vpmaddwd. The -32 offset goes
// through the bsums once per super-block: -32 * sum(sc * bsum).
XI void x86_r8_tile_q6k(const cpu_gemm_job *j, int g, int r, const int NR) {
    const int nb = j->k / QK_K;
    const cpu_q6k_r8 *blk = (const cpu_q6k_r8 *)(const void *)j->w + (size_t)g * nb;
    __m256 acc[X86_R8_NR];
    X86_UNROLL for (int rr = 0; rr < NR; rr++) acc[rr] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const cpu_q6k_r8 *p = blk + b;
        if (NR == 1)
            x86_prefetch_block_l2((const uint8_t *)(p + X86_R8_PF), sizeof *p);
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p->d));
        const tt_block_q8_K *a[X86_R8_NR];
        __m256i sumi[X86_R8_NR], soff[X86_R8_NR];
        X86_UNROLL for (int rr = 0; rr < NR; rr++) {
            a[rr] = (const void *)(x86_arow(j, r + rr) + b * sizeof(tt_block_q8_K));
            soff[rr] = sumi[rr] = _mm256_setzero_si256();
        }
        X86_UNROLL for (int t = 0; t < 8; t++) {
            const __m256i sv = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)p->scp[t]));
            X86_UNROLL for (int rr = 0; rr < NR; rr++) soff[rr] =
                x86_dot_i16(soff[rr], sv, x86_r8_bcast4(&a[rr]->bsums[2 * t]));
        }
#if X86_VNNI
        const int few = NR <= 2;
        if (few) {
            // Decode (few rows): each group's 4 steps summed in int32 by vpdpbusd (|.| <= 16 * 63 * 128), then
            // times its scale (vpmulld; vpmaddwd picks the scale's int16 out of the pair): one multiply-pipe op
            // per step and group instead of two. The same integer sums as below.
            X86_UNROLL for (int n = 0; n < 2; n++) X86_UNROLL for (int h = 0; h < 2; h++) {
                __m256i ss[X86_R8_NR][4];
                X86_UNROLL for (int rr = 0; rr < NR; rr++) X86_UNROLL for (int gg = 0; gg < 4; gg++) ss[rr][gg] =
                    _mm256_setzero_si256();
                X86_UNROLL for (int c = 4 * h; c < 4 * h + 4; c++) {
                    __m256i q[4];
                    X86_UNROLL for (int gg = 0; gg < 4; gg++) q[gg] = x86_q6r_quants(p, n, c, gg);
                    X86_UNROLL for (int rr = 0; rr < NR; rr++) X86_UNROLL for (int gg = 0; gg < 4; gg++) ss[rr][gg] =
                        _mm256_dpbusd_epi32(ss[rr][gg], q[gg], x86_r8_bcast4(a[rr]->qs + 128 * n + 32 * gg + 4 * c));
                }
                const __m256i pick = _mm256_set1_epi32(h ? 0x10000 : 1);
                X86_UNROLL for (int gg = 0; gg < 4; gg++) {
                    const __m256i sv = _mm256_madd_epi16(
                        _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)p->scp[4 * n + gg])), pick);
                    X86_UNROLL for (int rr = 0; rr < NR; rr++) sumi[rr] =
                        _mm256_add_epi32(sumi[rr], _mm256_mullo_epi32(ss[rr][gg], sv));
                }
            }
        }
#else
        const int few = 0;
#endif
        if (!few) {
            X86_UNROLL for (int n = 0; n < 2; n++) X86_UNROLL for (int h = 0; h < 2; h++) {
                __m256i sd[4]; // scale of group gg for steps c = 4h..4h+3: element (8n + 2gg + h), both int16 halves
                X86_UNROLL for (int gg = 0; gg < 4; gg++) {
                    const __m256i sv =
                        _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)p->scp[4 * n + gg]));
                    sd[gg] = h ? _mm256_shufflehi_epi16(_mm256_shufflelo_epi16(sv, 0xF5), 0xF5)
                               : _mm256_shufflehi_epi16(_mm256_shufflelo_epi16(sv, 0xA0), 0xA0);
                }
#if X86_VNNI
                X86_UNROLL for (int c = 4 * h; c < 4 * h + 4; c++) {
                    __m256i q[4];
                    X86_UNROLL for (int gg = 0; gg < 4; gg++) q[gg] = x86_q6r_quants(p, n, c, gg);
                    X86_UNROLL for (int rr = 0; rr < NR; rr++) X86_UNROLL for (int gg = 0; gg < 4; gg++) {
                        const __m256i av = x86_r8_bcast4(a[rr]->qs + 128 * n + 32 * gg + 4 * c);
                        sumi[rr] = x86_dot_i16(sumi[rr], _mm256_maddubs_epi16(q[gg], av), sd[gg]);
                    }
                }
#else
                // two steps' products summed in int16 (|.| <= 2 * 2 * 63 * 128 = 32256) before the one vpmaddwd by
                // their common scale: 3 multiplies per 64 products instead of 4; the vpaddd chain kept in order
                // (X86_KEEP: reassociated, it spilled)
                X86_UNROLL for (int c = 4 * h; c < 4 * h + 4; c += 2) X86_UNROLL for (int gg = 0; gg < 4; gg++) {
                    const __m256i q0 = x86_q6r_quants(p, n, c, gg), q1 = x86_q6r_quants(p, n, c + 1, gg);
                    X86_UNROLL for (int rr = 0; rr < NR; rr++) {
                        const int8_t *ap = a[rr]->qs + 128 * n + 32 * gg + 4 * c;
                        const __m256i t = _mm256_add_epi16(_mm256_maddubs_epi16(q0, x86_r8_bcast4(ap)),
                                                           _mm256_maddubs_epi16(q1, x86_r8_bcast4(ap + 4)));
                        sumi[rr] = _mm256_add_epi32(sumi[rr], _mm256_madd_epi16(t, sd[gg]));
                        X86_KEEP(sumi[rr]);
                    }
                }
#endif
            }
        }
        X86_UNROLL for (int rr = 0; rr < NR; rr++) {
            const __m256i s = _mm256_sub_epi32(sumi[rr], _mm256_slli_epi32(soff[rr], 5));
            acc[rr] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(d, _mm256_set1_ps(a[rr]->d)), acc[rr]);
        }
    }
    X86_UNROLL for (int rr = 0; rr < NR; rr++) x86_r8_store(j, g, r + rr, acc[rr]);
}

#if defined(__AVX512F__) && X86_VNNI
// Two adjacent groups (rows 8g .. 8g + 15) in 512-bit registers: the same integer and float operations per
// lane as x86_r8_tile_q4k's VNNI path (so results are identical bit for bit, whichever tile a row lands in),
// with half the instructions and half the activation broadcasts per row.
XI __m512i x86_r16_cat(const void *p0, const void *p1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p0)),
                              _mm256_loadu_si256((const __m256i *)p1), 1);
}
XI __m128i x86_r16_cat8(const void *p0, const void *p1) { // 8 bytes of each group -> 16 bytes
    return _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)p0), _mm_loadl_epi64((const __m128i *)p1));
}
XI __m512 x86_r16_f16(const void *p0, const void *p1) { // 8 fp16 of each group -> 16 floats
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)p0)),
                                                   _mm_loadu_si128((const __m128i *)p1), 1));
}

XI void x86_r16_tile_q4k(const cpu_gemm_job *j, int g, int r, const int NR) {
    const int nb = j->k / QK_K;
    const cpu_q4k_r8 *blk0 = (const cpu_q4k_r8 *)(const void *)j->w + (size_t)g * nb, *blk1 = blk0 + nb;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512 acc[X86_R8_NR];
    X86_UNROLL for (int rr = 0; rr < NR; rr++) acc[rr] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const cpu_q4k_r8 *p0 = blk0 + b, *p1 = blk1 + b;
        const __m512 d = x86_r16_f16(p0->d, p1->d), dmin = x86_r16_f16(p0->dmin, p1->dmin);
        const tt_block_q8_K *a[X86_R8_NR];
        __m512i sumi[X86_R8_NR], summ[X86_R8_NR];
        X86_UNROLL for (int rr = 0; rr < NR; rr++) {
            a[rr] = (const void *)(x86_arow(j, r + rr) + b * sizeof(tt_block_q8_K));
            summ[rr] = sumi[rr] = _mm512_setzero_si512();
        }
        int16_t b2[X86_R8_NR][16];
        X86_UNROLL for (int rr = 0; rr < NR; rr++) x86_r8_b2(a[rr], b2[rr]);
        X86_UNROLL for (int q = 0; q < 4; q++) {
            const __m128i m0 = _mm_loadu_si128((const __m128i *)(const void *)p0->mn[q]);
            const __m128i m1 = _mm_loadu_si128((const __m128i *)(const void *)p1->mn[q]);
            const __m512i mn =
                _mm512_cvtepu8_epi16(_mm256_inserti128_si256(_mm256_castsi128_si256(m0), m1, 1));
            X86_UNROLL for (int rr = 0; rr < NR; rr++) {
                int32_t bs;
                memcpy(&bs, &b2[rr][X86_B2_OFF(q)], 4);
                summ[rr] = _mm512_dpwssd_epi32(summ[rr], mn, _mm512_set1_epi32(bs));
            }
        }
        X86_UNROLL for (int rr = 0; rr < NR; rr++) {
            const __m512 ad = _mm512_set1_ps(a[rr]->d);
            acc[rr] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(summ[rr]), _mm512_mul_ps(dmin, ad), acc[rr]);
        }
        if (NR <= 4) { // both sub-blocks of a pair from one load, as x86_r8_tile_q4k's few-row path
            const __m512i m4h = _mm512_set1_epi8((char)0xf0);
            for (int jj = 0; jj < 4; jj++) {
                __m512i sl[X86_R8_NR], sh[X86_R8_NR];
                X86_UNROLL for (int rr = 0; rr < NR; rr++) sl[rr] = sh[rr] = _mm512_setzero_si512();
                X86_UNROLL for (int l = 0; l < 8; l++) {
                    const __m512i v = x86_r16_cat(p0->qs[jj][l], p1->qs[jj][l]);
                    const __m512i ql = _mm512_and_si512(v, m4), qh = _mm512_and_si512(v, m4h);
                    X86_UNROLL for (int rr = 0; rr < NR; rr++) {
                        int32_t a0, a1;
                        memcpy(&a0, a[rr]->qs + 64 * jj + 4 * l, 4);
                        memcpy(&a1, a[rr]->qs + 64 * jj + 32 + 4 * l, 4);
                        sl[rr] = _mm512_dpbusd_epi32(sl[rr], ql, _mm512_set1_epi32(a0));
                        sh[rr] = _mm512_dpbusd_epi32(sh[rr], qh, _mm512_set1_epi32(a1));
                    }
                }
                const __m512i s0 = _mm512_cvtepu8_epi32(x86_r16_cat8(p0->sc[2 * jj], p1->sc[2 * jj]));
                const __m512i s1 = _mm512_cvtepu8_epi32(x86_r16_cat8(p0->sc[2 * jj + 1], p1->sc[2 * jj + 1]));
                X86_UNROLL for (int rr = 0; rr < NR; rr++) sumi[rr] = _mm512_add_epi32(
                    _mm512_add_epi32(sumi[rr], _mm512_mullo_epi32(sl[rr], s0)),
                    _mm512_mullo_epi32(_mm512_srai_epi32(sh[rr], 4), s1));
            }
        } else {
            for (int sb = 0; sb < 8; sb++) {
                const int jj = sb / 2, hi = sb & 1;
                __m512i ss[X86_R8_NR];
                X86_UNROLL for (int rr = 0; rr < NR; rr++) ss[rr] = _mm512_setzero_si512();
                X86_UNROLL for (int l = 0; l < 8; l++) {
                    const __m512i v = x86_r16_cat(p0->qs[jj][l], p1->qs[jj][l]);
                    const __m512i q = _mm512_and_si512(_mm512_srli_epi16(v, 4 * hi), m4);
                    X86_UNROLL for (int rr = 0; rr < NR; rr++) {
                        int32_t av;
                        memcpy(&av, a[rr]->qs + 64 * jj + 32 * hi + 4 * l, 4);
                        ss[rr] = _mm512_dpbusd_epi32(ss[rr], q, _mm512_set1_epi32(av));
                    }
                }
                const __m512i sc = _mm512_cvtepu8_epi32(x86_r16_cat8(p0->sc[sb], p1->sc[sb]));
                X86_UNROLL for (int rr = 0; rr < NR; rr++) sumi[rr] =
                    _mm512_add_epi32(sumi[rr], _mm512_mullo_epi32(ss[rr], sc));
            }
        }
        X86_UNROLL for (int rr = 0; rr < NR; rr++) {
            const __m512 ad = _mm512_set1_ps(a[rr]->d);
            acc[rr] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[rr]), _mm512_mul_ps(d, ad), acc[rr]);
        }
    }
    const int i = CPU_REPACK_ROWS * g;
    uint32_t msk = 0xffff;
    if (i < j->i0) msk &= 0xffffu << (j->i0 - i);
    if (i + 16 > j->i1) msk &= 0xffffu >> (i + 16 - j->i1);
    X86_UNROLL for (int rr = 0; rr < NR; rr++)
        _mm512_mask_storeu_ps(j->out + (size_t)(r + rr) * j->ld_out + i, (__mmask16)msk, acc[rr]);
}
#define X86_R16_Q4K 1
#else
#define X86_R16_Q4K 0
#define x86_r16_tile_q4k x86_r8_tile_q4k
#endif

// j->w is the repacked weight (groups of 8 rows); rows [i0, i1) of the original are computed. Panels of
// groups sized for L2, activation tiles of X86_R8_NR rows inside (as x86_gemm).
XI void x86_r8_gemm(const cpu_gemm_job *j, const int T) {
    const int g0 = j->i0 / CPU_REPACK_ROWS, g1 = (j->i1 + CPU_REPACK_ROWS - 1) / CPU_REPACK_ROWS;
    const size_t gbytes = (size_t)(j->k / QK_K) * (T == TT_Q4_K ? sizeof(cpu_q4k_r8) : sizeof(cpu_q6k_r8));
    int panel = (int)((256 * 1024) / gbytes);
    panel = panel < 1 ? 1 : panel;
    for (int p0 = g0; p0 < g1; p0 += panel) {
        const int p1 = p0 + panel < g1 ? p0 + panel : g1;
        for (int r = 0; r < j->n_rows;) {
            const int nr = j->n_rows - r < X86_R8_NR ? j->n_rows - r : X86_R8_NR;
            for (int g = p0; g < p1; g++) {
                // Q4_K prefill at AVX512-VNNI: two groups per 512-bit tile. GEMV keeps the 8-row stream: two
                // streams were faster from cache but slower from DRAM (bench_matmul 1 thread, Zen 4, both
                // prefetching: hot 47 against 40 GB/s, cold 15 against 24)
                const int two = X86_R16_Q4K && T == TT_Q4_K && nr > 1 && g + 1 < p1;
#define X86_R8_CALL(NR)                                                                                      \
    (T == TT_Q4_K ? (two ? x86_r16_tile_q4k(j, g, r, NR) : x86_r8_tile_q4k(j, g, r, NR))                      \
                  : x86_r8_tile_q6k(j, g, r, NR))
                switch (nr) {
                case 1: X86_R8_CALL(1); break;
                case 2: X86_R8_CALL(2); break;
                case 3: X86_R8_CALL(3); break;
#if X86_R8_NR > 4
                case 4: X86_R8_CALL(4); break;
                case 5: X86_R8_CALL(5); break;
                case 6: X86_R8_CALL(6); break;
                case 7: X86_R8_CALL(7); break;
#endif
                default: X86_R8_CALL(X86_R8_NR); break;
                }
#undef X86_R8_CALL
                g += two;
            }
            r += nr;
        }
    }
}

__attribute__((unused)) static void X86_FN(gemm_q4_k_r8)(const cpu_gemm_job *j) { x86_r8_gemm(j, TT_Q4_K); }
__attribute__((unused)) static void X86_FN(gemm_q6_k_r8)(const cpu_gemm_job *j) { x86_r8_gemm(j, TT_Q6_K); }

#endif
