// Paged attention on the device over the f16 KV cache (the CPU's layout and block tables), a first version:
// one warp per (token, query head), each lane holding head_dim/32 dims of q and of the output; positions are
// walked in order with the CPU reference's online softmax (attn_tile_scalar: running max, corrected sum).
// The same kernel serves decode rows and prefill chunks (no tiling of K/V across the queries of a chunk yet).
#include <math.h>

#include "cuda/tcu_internal.cuh"

#define TCU_ATT_WARPS 4
#define TCU_ATT_MAX_PER_LANE 8 // head_dim <= 256

__global__ void k_attention(float *out, const float *q, const __half *kc, const __half *vc, const int32_t *tables,
                            int stride, const int32_t *seq, const int32_t *pos, int n, int n_heads, int n_kv,
                            int head_dim, int block_size, float scale, int window) {
    const int lane = threadIdx.x % 32;
    const int64_t wid = (int64_t)blockIdx.x * TCU_ATT_WARPS + threadIdx.x / 32;
    if (wid >= (int64_t)n * n_heads) return;
    const int t = (int)(wid / n_heads), qh = (int)(wid % n_heads), h = qh / (n_heads / n_kv);
    const size_t q_off = ((size_t)t * n_heads + qh) * head_dim;
    float qv[TCU_ATT_MAX_PER_LANE], o[TCU_ATT_MAX_PER_LANE];
    for (int j = 0; j < TCU_ATT_MAX_PER_LANE; j++) {
        int i = lane + 32 * j;
        qv[j] = i < head_dim ? q[q_off + i] : 0.0f;
        o[j] = 0.0f;
    }
    const int n_pos = pos[t] + 1, first = window > 0 && n_pos > window ? n_pos - window : 0;
    const int32_t *blocks = tables + (size_t)seq[t] * stride;
    float m = -INFINITY, l = 0.0f;
    for (int p = first; p < n_pos; p++) {
        size_t row = (((size_t)blocks[p / block_size] * n_kv + h) * block_size + p % block_size) * head_dim;
        float dot = 0.0f;
        for (int j = 0; j < TCU_ATT_MAX_PER_LANE; j++) {
            int i = lane + 32 * j;
            if (i < head_dim) dot += qv[j] * __half2float(kc[row + i]);
        }
        for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
        float s = dot * scale;
        float m_new = s > m ? s : m;
        float corr = expf(m - m_new), w = expf(s - m_new);
        l = l * corr + w;
        for (int j = 0; j < TCU_ATT_MAX_PER_LANE; j++) {
            int i = lane + 32 * j;
            if (i < head_dim) o[j] = o[j] * corr + w * __half2float(vc[row + i]);
        }
        m = m_new;
    }
    float inv = l > 0 ? 1.0f / l : 0.0f;
    for (int j = 0; j < TCU_ATT_MAX_PER_LANE; j++) {
        int i = lane + 32 * j;
        if (i < head_dim) out[q_off + i] = o[j] * inv;
    }
}

void tcu_attention(cudaStream_t s, float *out, const float *q, const __half *kc, const __half *vc,
                   const int32_t *tables, int stride, const int32_t *seq, const int32_t *pos, int n, int n_heads,
                   int n_kv, int head_dim, int block_size, float scale, int window) {
    int64_t warps = (int64_t)n * n_heads;
    if (warps <= 0) return;
    unsigned grid = (unsigned)((warps + TCU_ATT_WARPS - 1) / TCU_ATT_WARPS);
    k_attention<<<grid, 32 * TCU_ATT_WARPS, 0, s>>>(out, q, kc, vc, tables, stride, seq, pos, n, n_heads, n_kv,
                                                     head_dim, block_size, scale, window);
}
