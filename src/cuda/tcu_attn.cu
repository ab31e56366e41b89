// Paged attention on the device over the f16 KV cache (the CPU's layout and block tables), tiled over
// queries: the batch's rows are cut into tiles of up to TCU_ATT_TQ consecutive positions of one sequence (a
// prefill chunk gives full tiles, a decode row a tile of one); one thread block per (tile, query head) walks
// the sequence's positions in K/V tiles of TCU_ATT_TK positions staged in shared memory once for all its query
// rows. Each warp owns one query row, each lane head_dim/32 of its dims, and applies the CPU reference's online
// softmax (attn_tile_scalar: running max, corrected sum) position by position, in order; a row's arithmetic
// does not depend on its tile, so logits do not depend on how a batch was chunked.
#include <math.h>

#include "cuda/tcu_internal.cuh"

#define TCU_ATT_MAX_PER_LANE 8 // head_dim <= 256

__global__ void k_attention(float *out, const float *q, const __half *kc, const __half *vc, const int32_t *tables,
                            int stride, const int32_t *seq, const int32_t *pos, const int32_t *tiles, int n_heads,
                            int n_kv, int head_dim, int block_size, float scale, int window) {
    __shared__ __half ks[TCU_ATT_TK * 256], vs[TCU_ATT_TK * 256];
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
    const int tile = tiles[blockIdx.x], t0 = tile & ((1 << TCU_TILE_SHIFT) - 1), nt = tile >> TCU_TILE_SHIFT;
    const int qh = blockIdx.y, h = qh / (n_heads / n_kv);
    const int t = t0 + (w < nt ? w : nt - 1); // idle warps shadow the last row and write nothing
    const size_t q_off = ((size_t)t * n_heads + qh) * head_dim;
    float qv[TCU_ATT_MAX_PER_LANE], o[TCU_ATT_MAX_PER_LANE];
#pragma unroll
    for (int j = 0; j < TCU_ATT_MAX_PER_LANE; j++) {
        int i = lane + 32 * j;
        qv[j] = i < head_dim ? q[q_off + i] : 0.0f;
        o[j] = 0.0f;
    }
    const int n_pos = pos[t] + 1, first = window > 0 && n_pos > window ? n_pos - window : 0;
    // the tile's span: from the first row's first position to the last row's last
    const int last_pos = pos[t0 + nt - 1];
    const int first0 = window > 0 && pos[t0] + 1 > window ? pos[t0] + 1 - window : 0;
    const int32_t *blocks = tables + (size_t)seq[t0] * stride;
    float m = -INFINITY, l = 0.0f;
    for (int p0 = first0; p0 <= last_pos; p0 += TCU_ATT_TK) {
        const int np = last_pos + 1 - p0 < TCU_ATT_TK ? last_pos + 1 - p0 : TCU_ATT_TK;
        __syncthreads(); // the previous tile is consumed
        for (int e = threadIdx.x; e < np * head_dim; e += blockDim.x) {
            int pp = e / head_dim, i = e % head_dim, p = p0 + pp;
            size_t row = (((size_t)blocks[p / block_size] * n_kv + h) * block_size + p % block_size) * head_dim;
            ks[pp * head_dim + i] = kc[row + i];
            vs[pp * head_dim + i] = vc[row + i];
        }
        __syncthreads();
        for (int pp = 0; pp < np; pp++) {
            const int p = p0 + pp;
            if (p < first || p >= n_pos) continue; // uniform over the warp
            float dot = 0.0f;
#pragma unroll
            for (int j = 0; j < TCU_ATT_MAX_PER_LANE; j++) {
                int i = lane + 32 * j;
                if (i < head_dim) dot += qv[j] * __half2float(ks[pp * head_dim + i]);
            }
            for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
            float s = dot * scale;
            float m_new = s > m ? s : m;
            float corr = expf(m - m_new), wgt = expf(s - m_new);
            l = l * corr + wgt;
#pragma unroll
            for (int j = 0; j < TCU_ATT_MAX_PER_LANE; j++) {
                int i = lane + 32 * j;
                if (i < head_dim) o[j] = o[j] * corr + wgt * __half2float(vs[pp * head_dim + i]);
            }
            m = m_new;
        }
    }
    if (w >= nt) return;
    float inv = l > 0 ? 1.0f / l : 0.0f;
#pragma unroll
    for (int j = 0; j < TCU_ATT_MAX_PER_LANE; j++) {
        int i = lane + 32 * j;
        if (i < head_dim) out[q_off + i] = o[j] * inv;
    }
}

void tcu_attention(cudaStream_t s, float *out, const float *q, const __half *kc, const __half *vc,
                   const int32_t *tables, int stride, const int32_t *seq, const int32_t *pos, const int32_t *tiles,
                   int n_tiles, int n_heads, int n_kv, int head_dim, int block_size, float scale, int window) {
    if (n_tiles <= 0) return;
    k_attention<<<dim3((unsigned)n_tiles, (unsigned)n_heads), 32 * TCU_ATT_TQ, 0, s>>>(
        out, q, kc, vc, tables, stride, seq, pos, tiles, n_heads, n_kv, head_dim, block_size, scale, window);
}
