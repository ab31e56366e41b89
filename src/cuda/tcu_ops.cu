// Elementwise and per-row kernels of the transformer block on the device: the math of src/cpu/ops.c
// (ops_rmsnorm, ops_rope, the GLU references), the embedding lookup, the paged KV write and greedy argmax.
#include <math.h>

#include "cuda/tcu_internal.cuh"

#define TCU_NORM_THREADS 256

// --- RMSNorm: one block per row; the sum of squares in double, as ops_rmsnorm
__global__ void k_rmsnorm(float *out, int ld_out, const float *x, int ld_x, const int32_t *rows, int len,
                          const float *w, float eps) {
    __shared__ double part[TCU_NORM_THREADS / 32];
    const int r = blockIdx.x, src = rows ? rows[r] : r;
    const float *xr = x + (size_t)src * ld_x;
    float *o = out + (size_t)r * ld_out;
    double ss = 0.0;
    for (int i = threadIdx.x; i < len; i += blockDim.x) ss += (double)xr[i] * xr[i];
    for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = ss;
    __syncthreads();
    double tot = 0.0;
    for (int i = 0; i < (int)blockDim.x / 32; i++) tot += part[i];
    float scale = (float)(1.0 / sqrt(tot / len + eps));
    // every thread has read part[] before any writes o (o may alias x: same row, read above)
    __syncthreads();
    for (int i = threadIdx.x; i < len; i += blockDim.x) o[i] = w ? xr[i] * scale * w[i] : xr[i] * scale;
}

void tcu_rmsnorm(cudaStream_t s, float *out, int ld_out, const float *x, int ld_x, const int32_t *rows, int n,
                 int len, const float *w, float eps) {
    if (n > 0) k_rmsnorm<<<n, TCU_NORM_THREADS, 0, s>>>(out, ld_out, x, ld_x, rows, len, w, eps);
}

// --- adds
__global__ void k_add_bias(float *x, const float *b, int64_t total, int d) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x)
        x[i] += b[i % d];
}

__global__ void k_add(float *x, const float *y, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        x[i] += y[i];
}

static int grid_for(int64_t n) {
    int64_t g = (n + 255) / 256;
    return (int)(g > 65535 ? 65535 : g < 1 ? 1 : g);
}

void tcu_add_bias(cudaStream_t s, float *x, const float *b, int n, int d) {
    int64_t total = (int64_t)n * d;
    k_add_bias<<<grid_for(total), 256, 0, s>>>(x, b, total, d);
}

void tcu_add(cudaStream_t s, float *x, const float *y, int64_t n) { k_add<<<grid_for(n), 256, 0, s>>>(x, y, n); }

// --- GLU: the scalar references of ops.c (libm-style expf / tanhf; the device's differ by an ulp or two)
__global__ void k_glu(float *g, const float *u, int64_t n, int gelu) {
    const float c = 0.7978845608028654f; // sqrt(2/pi)
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float x = g[i];
        g[i] = gelu ? 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x))) * u[i] : x / (1.0f + expf(-x)) * u[i];
    }
}

void tcu_glu(cudaStream_t s, float *g, const float *u, int64_t n, int gelu) {
    k_glu<<<grid_for(n), 256, 0, s>>>(g, u, n, gelu);
}

// --- embedding: one block per token, one thread per 32-value chunk
__global__ void k_embed(float *x, int type, const uint8_t *e, size_t row_bytes, int dim, const int32_t *tokens,
                        float scale) {
    const int t = blockIdx.x;
    const uint8_t *row = e + (size_t)tokens[t] * row_bytes;
    float *xr = x + (size_t)t * dim;
    float v[TCU_CHUNK];
    for (int c = threadIdx.x; c < (dim + TCU_CHUNK - 1) / TCU_CHUNK; c += blockDim.x) {
        tcu_deq_chunk(type, row, c, dim, v);
        for (int l = 0; l < TCU_CHUNK && c * TCU_CHUNK + l < dim; l++)
            xr[c * TCU_CHUNK + l] = scale != 1.0f ? v[l] * scale : v[l];
    }
}

void tcu_embed(cudaStream_t s, float *x, const tcu_dweight *e, const int32_t *tokens, int n, float scale) {
    if (n > 0) k_embed<<<n, 64, 0, s>>>(x, e->type, e->d, e->row_bytes, (int)e->cols, tokens, scale);
}

// --- RoPE: one thread per (token, head of q then k, pair)
__global__ void k_rope(float *q, float *k, const int32_t *pos, int n, int n_heads, int n_kv, int head_dim,
                       int rope_dim, float scale, const float *inv_freq, int neox) {
    const int half = rope_dim / 2, heads = n_heads + n_kv;
    const int64_t total = (int64_t)n * heads * half;
    for (int64_t id = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; id < total; id += (int64_t)gridDim.x * blockDim.x) {
        int i = (int)(id % half), h = (int)(id / half % heads), t = (int)(id / half / heads);
        float *v = h < n_heads ? q + ((size_t)t * n_heads + h) * head_dim : k + ((size_t)t * n_kv + (h - n_heads)) * head_dim;
        double theta = (double)pos[t] * scale * inv_freq[i];
        float cs = (float)cos(theta), sn = (float)sin(theta);
        int ia = neox ? i : 2 * i, ib = neox ? i + half : 2 * i + 1;
        float a = v[ia], b = v[ib];
        v[ia] = a * cs - b * sn;
        v[ib] = a * sn + b * cs;
    }
}

void tcu_rope(cudaStream_t s, float *q, float *k, const int32_t *pos, int n, int n_heads, int n_kv, int head_dim,
              int rope_dim, float scale, const float *inv_freq, int neox) {
    int64_t total = (int64_t)n * (n_heads + n_kv) * (rope_dim / 2);
    if (total > 0)
        k_rope<<<grid_for(total), 256, 0, s>>>(q, k, pos, n, n_heads, n_kv, head_dim, rope_dim, scale, inv_freq, neox);
}

// --- KV write: one thread per value of (token, kv head, dim); f32 → f16 round to nearest even (as F16C)
__global__ void k_store_kv(__half *kc, __half *vc, const float *k, const float *v, const int32_t *tables, int stride,
                           const int32_t *seq, const int32_t *pos, int n, int n_kv, int head_dim, int block_size) {
    const int64_t total = (int64_t)n * n_kv * head_dim;
    for (int64_t id = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; id < total; id += (int64_t)gridDim.x * blockDim.x) {
        int i = (int)(id % head_dim), h = (int)(id / head_dim % n_kv), t = (int)(id / head_dim / n_kv);
        int p = pos[t], blk = tables[(size_t)seq[t] * stride + p / block_size], slot = p % block_size;
        size_t dst = (((size_t)blk * n_kv + h) * block_size + slot) * head_dim + i;
        kc[dst] = __float2half_rn(k[id]);
        vc[dst] = __float2half_rn(v[id]);
    }
}

void tcu_store_kv(cudaStream_t s, __half *kc, __half *vc, const float *k, const float *v, const int32_t *tables,
                  int stride, const int32_t *seq, const int32_t *pos, int n, int n_kv, int head_dim, int block_size) {
    int64_t total = (int64_t)n * n_kv * head_dim;
    if (total > 0)
        k_store_kv<<<grid_for(total), 256, 0, s>>>(kc, vc, k, v, tables, stride, seq, pos, n, n_kv, head_dim,
                                                   block_size);
}

// --- greedy: one block per row; (value, index) pairs reduced with ties to the lower index, NaN as -inf
__device__ static inline void better(float &bv, int &bi, float v, int i) {
    if (v != v) return;
    if (v > bv || (v == bv && i < bi)) bv = v, bi = i;
}

__global__ void k_argmax(int32_t *out, const float *logits, int n_vocab) {
    __shared__ float sv[32];
    __shared__ int si[32];
    const float *row = logits + (size_t)blockIdx.x * n_vocab;
    float bv = -INFINITY;
    int bi = n_vocab; // "none yet": loses every tie
    for (int i = threadIdx.x; i < n_vocab; i += blockDim.x) better(bv, bi, row[i], i);
    for (int off = 16; off > 0; off >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, bv, off);
        int oi = __shfl_xor_sync(0xffffffffu, bi, off);
        better(bv, bi, ov, oi);
    }
    if (threadIdx.x % 32 == 0) sv[threadIdx.x / 32] = bv, si[threadIdx.x / 32] = bi;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < (int)blockDim.x / 32; w++) better(bv, bi, sv[w], si[w]);
        out[blockIdx.x] = bi < n_vocab ? bi : 0; // an all-NaN row: token 0, as the CPU sampler's -inf everywhere
    }
}

void tcu_argmax_rows(cudaStream_t s, int32_t *out, const float *logits, int n, int n_vocab) {
    if (n > 0) k_argmax<<<n, 256, 0, s>>>(out, logits, n_vocab);
}
