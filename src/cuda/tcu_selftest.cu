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
                                  const int32_t *blocks, int n_pos, int n_heads, int n_kv, int head_dim,
                                  int block_size, float scale, int window, float *out, char *msg, size_t msg_cap) {
    int rc = tcu_device_check(msg, msg_cap);
    if (rc) return rc;
    if (head_dim > 256 || n_kv <= 0 || n_heads % n_kv || n_pos <= 0)
        return tcu_fail(msg, msg_cap, TC_ERR_INVALID, "tcu_test_attention: bad geometry");
    const size_t cache = (size_t)n_blocks * n_kv * block_size * head_dim * sizeof(uint16_t);
    const int n_tab = (n_pos + block_size - 1) / block_size;
    const int32_t seq0 = 0, pos = n_pos - 1;
    tcu_scratch sc = {};
    void *dq, *dk, *dv, *dtab, *dseq, *dpos, *dout;
    TCU_TRY(cudaStreamCreate(&sc.s), "stream");
    TCU_TRY(up(sc, &dq, q, sizeof(float) * (size_t)n_heads * head_dim), "q");
    TCU_TRY(up(sc, &dk, k, cache), "k");
    TCU_TRY(up(sc, &dv, v, cache), "v");
    TCU_TRY(up(sc, &dtab, blocks, sizeof(int32_t) * (size_t)n_tab), "table");
    TCU_TRY(up(sc, &dseq, &seq0, sizeof seq0), "seq");
    TCU_TRY(up(sc, &dpos, &pos, sizeof pos), "pos");
    TCU_TRY(up(sc, &dout, NULL, sizeof(float) * (size_t)n_heads * head_dim), "out");
    tcu_attention(sc.s, (float *)dout, (const float *)dq, (const __half *)dk, (const __half *)dv, (const int32_t *)dtab,
                  n_tab, (const int32_t *)dseq, (const int32_t *)dpos, 1, n_heads, n_kv, head_dim, block_size, scale,
                  window);
    TCU_TRY(cudaGetLastError(), "attention launch");
    TCU_TRY(cudaStreamSynchronize(sc.s), "attention");
    TCU_TRY(cudaMemcpy(out, dout, sizeof(float) * (size_t)n_heads * head_dim, cudaMemcpyDeviceToHost), "download");
    return 0;
}
