// Test hooks (tcu.h): single kernels on host data, so that tests/unit/test_cuda_kernels.c can compare each
// against the CPU's scalar reference on a machine with a GPU. Not used by the forward pass.
#include <stdlib.h>
#include <string.h>

#include "cuda/tcu_internal.cuh"

// Frees what it was given on every path.
struct tcu_scratch {
    void *p[8];
    int n;
    cudaStream_t s;
    ~tcu_scratch() {
        if (s) cudaStreamDestroy(s);
        for (int i = 0; i < n; i++) cudaFree(p[i]);
    }
};

static cudaError_t up(tcu_scratch &sc, void **d, const void *h, size_t bytes) {
    cudaError_t e = cudaMalloc(d, bytes ? bytes : 1);
    if (e != cudaSuccess) return e;
    sc.p[sc.n++] = *d;
    return h ? cudaMemcpy(*d, h, bytes, cudaMemcpyHostToDevice) : cudaSuccess;
}

extern "C" int tcu_test_matmul(int type, const void *w, int64_t rows, int64_t cols, size_t row_bytes, const float *x,
                               int n, float *out, char *msg, size_t msg_cap) {
    int rc = tcu_device_check(msg, msg_cap);
    if (rc) return rc;
    if (!tcu_type_ok(type, cols) || n <= 0 || rows <= 0)
        return tcu_fail(msg, msg_cap, TC_ERR_INVALID, "tcu_test_matmul: type %d, %lld x %lld, n %d", type,
                        (long long)rows, (long long)cols, n);
    tcu_scratch sc = {};
    void *dw, *dx, *dout;
    TCU_TRY(cudaStreamCreate(&sc.s), "stream");
    TCU_TRY(up(sc, &dw, w, row_bytes * (size_t)rows), "weights");
    TCU_TRY(up(sc, &dx, x, sizeof(float) * (size_t)n * cols), "x");
    TCU_TRY(up(sc, &dout, NULL, sizeof(float) * (size_t)n * rows), "out");
    tcu_dweight dwt = {type, (const uint8_t *)dw, rows, cols, row_bytes};
    tcu_matmul(sc.s, (float *)dout, (int)rows, (const float *)dx, n, &dwt);
    TCU_TRY(cudaGetLastError(), "matmul launch");
    TCU_TRY(cudaStreamSynchronize(sc.s), "matmul");
    TCU_TRY(cudaMemcpy(out, dout, sizeof(float) * (size_t)n * rows, cudaMemcpyDeviceToHost), "download");
    return 0;
}

extern "C" int tcu_test_attention(const float *q, const uint16_t *k, const uint16_t *v, int n_blocks,
                                  const int32_t *blocks, int n_rows, int n_pos, int n_heads, int n_kv, int head_dim,
                                  int block_size, float scale, int window, float *out, char *msg, size_t msg_cap) {
    int rc = tcu_device_check(msg, msg_cap);
    if (rc) return rc;
    if (head_dim > 256 || n_kv <= 0 || n_heads % n_kv || n_rows <= 0 || n_rows > 4096 || n_pos < n_rows)
        return tcu_fail(msg, msg_cap, TC_ERR_INVALID, "tcu_test_attention: bad geometry");
    const size_t cache = (size_t)n_blocks * n_kv * block_size * head_dim * sizeof(uint16_t);
    const size_t q_bytes = sizeof(float) * (size_t)n_rows * n_heads * head_dim;
    const int n_tab = (n_pos + block_size - 1) / block_size;
    int32_t *ints = (int32_t *)malloc(sizeof(int32_t) * 3 * (size_t)n_rows); // seq, pos, tiles
    if (!ints) return tcu_fail(msg, msg_cap, TC_ERR_NOMEM, "out of memory");
    int32_t *seq = ints, *pos = ints + n_rows, *tiles = ints + 2 * n_rows;
    for (int i = 0; i < n_rows; i++) seq[i] = 0, pos[i] = n_pos - n_rows + i;
    const int n_tiles = tcu_attn_tiles(tiles, pos, seq, n_rows);
    tcu_scratch sc = {};
    void *dq, *dk, *dv, *dtab, *dints, *dout;
    cudaError_t e = cudaStreamCreate(&sc.s);
    if (e == cudaSuccess) e = up(sc, &dq, q, q_bytes);
    if (e == cudaSuccess) e = up(sc, &dk, k, cache);
    if (e == cudaSuccess) e = up(sc, &dv, v, cache);
    if (e == cudaSuccess) e = up(sc, &dtab, blocks, sizeof(int32_t) * (size_t)n_tab);
    if (e == cudaSuccess) e = up(sc, &dints, ints, sizeof(int32_t) * 3 * (size_t)n_rows);
    if (e == cudaSuccess) e = up(sc, &dout, NULL, q_bytes);
    free(ints);
    TCU_TRY(e, "upload");
    const int32_t *di = (const int32_t *)dints;
    tcu_attention(sc.s, (float *)dout, (const float *)dq, (const __half *)dk, (const __half *)dv, (const int32_t *)dtab,
                  n_tab, di, di + n_rows, di + 2 * n_rows, n_tiles, n_heads, n_kv, head_dim, block_size, scale, window);
    TCU_TRY(cudaGetLastError(), "attention launch");
    TCU_TRY(cudaStreamSynchronize(sc.s), "attention");
    TCU_TRY(cudaMemcpy(out, dout, q_bytes, cudaMemcpyDeviceToHost), "download");
    return 0;
}
