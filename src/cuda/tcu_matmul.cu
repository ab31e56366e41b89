// Quantized matmul on the device, dequantize-on-the-fly (a first version, not tuned): one warp per output row;
// lane l reads the row's 32-value chunks l, l + 32, … (tcu_quant.h), dequantizes each once into registers and
// dots it with TN activation rows; the partial sums are reduced across the warp. Decode (n = 1) is a GEMV
// reading each weight byte once; prefill re-reads the weight once per TN activation rows (L2 keeps most of it).
// The same kernel serves every weight type; the type is uniform over the grid, so its branch never diverges.
#include "cuda/tcu_internal.cuh"

#define TCU_MM_WARPS 4 // rows per thread block

template <int TN>
__global__ void k_matmul(float *out, int ld_out, const float *x, int n, int type, const uint8_t *w, int64_t rows,
                         int cols, size_t row_bytes) {
    const int lane = threadIdx.x % 32;
    const int64_t r = (int64_t)blockIdx.x * TCU_MM_WARPS + threadIdx.x / 32;
    const int t0 = blockIdx.y * TN;
    if (r >= rows) return; // whole warps leave together (r is uniform over the warp)
    const uint8_t *row = w + (size_t)r * row_bytes;
    float acc[TN];
#pragma unroll
    for (int t = 0; t < TN; t++) acc[t] = 0.0f;
    const int n_chunks = (cols + TCU_CHUNK - 1) / TCU_CHUNK;
    float wv[TCU_CHUNK];
    for (int c = lane; c < n_chunks; c += 32) {
        tcu_deq_chunk(type, row, c, cols, wv);
        const int nv = cols - c * TCU_CHUNK; // values of this chunk: 32, or fewer in a plain row's last chunk
        const float *xc = x + (size_t)t0 * cols + (size_t)c * TCU_CHUNK;
#pragma unroll
        for (int t = 0; t < TN; t++) {
            if (t0 + t < n) { // predicated, not a loop exit: acc and wv stay in registers
                const float *xr = xc + (size_t)t * cols;
                float s = 0.0f;
#pragma unroll
                for (int l = 0; l < TCU_CHUNK; l++)
                    if (l < nv) s += wv[l] * xr[l];
                acc[t] += s;
            }
        }
    }
#pragma unroll
    for (int t = 0; t < TN; t++) {
        float v = acc[t];
        for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
        if (lane == 0 && t0 + t < n) out[(size_t)(t0 + t) * ld_out + r] = v;
    }
}

void tcu_matmul(cudaStream_t s, float *out, int ld_out, const float *x, int n, const tcu_dweight *w) {
    if (n <= 0) return;
    dim3 block(32 * TCU_MM_WARPS);
    unsigned gx = (unsigned)((w->rows + TCU_MM_WARPS - 1) / TCU_MM_WARPS);
    if (n == 1) {
        k_matmul<1><<<dim3(gx, 1), block, 0, s>>>(out, ld_out, x, n, w->type, w->d, w->rows, (int)w->cols, w->row_bytes);
    } else {
        const int tn = 8;
        k_matmul<8><<<dim3(gx, (unsigned)((n + tn - 1) / tn)), block, 0, s>>>(out, ld_out, x, n, w->type, w->d, w->rows,
                                                                             (int)w->cols, w->row_bytes);
    }
}
