// The backend boundary of the forward pass: a model's weights on one device, a paged KV pool in that device's
// memory, per-runner scratch, and the ragged-batch forward (model.h's contract: model_batch in, logits of the
// requested rows out). Inside a step, every backend runs the same layer sequence (model/fwd.h: the
// architecture's builder) with operations of its own: the CPU backend is src/model/ (model_ctx and
// model_forward, whose operations are forward.c's, over kv/kv_store.h's storage) behind this vtable; the CUDA
// backend (src/cuda/, built when nvcc is found) implements the same slots with the tcu_fwd_* operations.
// Callers (the engine, the CLI's generation session) hold backend handles and never see which device runs the
// step.
#ifndef TACHYON_BACKEND_BACKEND_H
#define TACHYON_BACKEND_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "model/model.h"
#include "tensor/ttype.h"

typedef enum backend_device { BACKEND_CPU = 0, BACKEND_CUDA = 1 } backend_device;

// "cpu" / "cuda" → device; TC_ERR_INVALID naming the choices otherwise.
int backend_device_parse(const char *s, backend_device *out, tc_err *err);
const char *backend_device_name(backend_device d);

// The slots one device implements. Handles are the implementation's own (void *); the wrappers below give
// them types. Slots marked (optional) may be NULL.
typedef struct backend_ops {
    const char *name; // "cpu", "cuda"
    // The model's weights on the device (an upload, or nothing for the CPU: the GGUF mapping is used as is).
    int (*weights_new)(model *m, void **w, tc_err *err);
    void (*weights_free)(void *w);
    // Bytes a KV pool may take when the user gave no --kv-mem: a quarter of the device's free memory.
    size_t (*kv_mem_default)(void *w);
    // A paged KV pool (model.h: model_kv_new_swa's arguments; kv/kv_store.h: the block layout).
    int (*kv_new)(void *w, int n_blocks, int n_blocks_swa, int block_size, tt_type k_type, tt_type v_type,
                  void **kv, tc_err *err);
    void (*kv_free)(void *kv);
    void (*kv_copy_block)(void *kv, int src, int dst); // (optional)
    // Hybrid models: a slot's recurrent state set to a kept row's (model_rs_restore). (optional)
    void (*kv_rs_restore)(void *kv, int slot, int row);
    // Hybrid models: a block's kept state into a slot (model_rs_load_block), and whether blocks' states are
    // kept (model_rs_has_blocks). (optional)
    int (*kv_rs_load_block)(void *kv, int slot, int block);
    int (*kv_rs_has_blocks)(void *kv);
    // Hybrid models with speculation: room for the verify rows' states (model_rs_reserve_ckpt). (optional)
    int (*kv_rs_reserve_ckpt)(void *kv, int n_slots, int n_rows, tc_err *err);
    // Scratch for batches of up to max_batch_tokens rows (and the CPU's thread pool, or the device's stream).
    int (*ctx_new)(void *w, int max_batch_tokens, int n_threads, void **ctx, tc_err *err);
    void (*ctx_free)(void *ctx);
    // The batch through the first n_layers layers, the final norm and the output head (model_forward_layers).
    int (*forward)(void *ctx, void *kv, const model_batch *b, int n_layers, float *logits, tc_err *err);
    // Logits of n final-normed rows (model_logits_rows). (optional)
    int (*logits_rows)(void *ctx, const float *normed, int n, float *logits, tc_err *err);
} backend_ops;

typedef struct backend backend;         // a model's weights on one device
typedef struct backend_kv backend_kv;   // a paged KV pool in that device's memory
typedef struct backend_ctx backend_ctx; // per-runner scratch (one thread pool / one stream)

// Opens device dev for model m (borrowed: must outlive the backend) and makes its weights available there.
// A device this binary was built without, or one the machine lacks, is TC_ERR_UNSUPPORTED with a message
// saying which. Owned by the caller: free with backend_free, after every kv and ctx made from it.
int backend_new(model *m, backend_device dev, backend **out, tc_err *err);
void backend_free(backend *be);
backend_device backend_get_device(const backend *be);
const model *backend_model(const backend *be); // borrowed
size_t backend_kv_mem_default(const backend *be);

int backend_kv_new(backend *be, int n_blocks, int n_blocks_swa, int block_size, tt_type k_type, tt_type v_type,
                   backend_kv **out, tc_err *err);
void backend_kv_free(backend_kv *kv);
// No-op where the device has no copy (never the case for cpu and cuda).
void backend_kv_copy_block(backend_kv *kv, int src, int dst);
// model_rs_restore on the device's KV; no-op where the device has none (it runs no hybrid model).
void backend_kv_rs_restore(backend_kv *kv, int slot, int row);
// model_rs_load_block / model_rs_has_blocks on the device's KV (TC_ERR_UNSUPPORTED / 0 where it has none).
int backend_kv_rs_load_block(backend_kv *kv, int slot, int block);
int backend_kv_rs_has_blocks(backend_kv *kv);
// model_rs_reserve_ckpt on the device's KV (TC_ERR_UNSUPPORTED where the device runs no hybrid model).
int backend_kv_rs_reserve_ckpt(backend_kv *kv, int n_slots, int n_rows, tc_err *err);

int backend_ctx_new(backend *be, int max_batch_tokens, int n_threads, backend_ctx **out, tc_err *err);
void backend_ctx_free(backend_ctx *c);

// Runs the batch (model.h's contract) with kv; fills logits (n_logits, n_vocab) row-major on the host.
int backend_forward(backend_ctx *c, backend_kv *kv, const model_batch *b, float *logits, tc_err *err);
// The same through the first n_layers layers (early exit).
int backend_forward_layers(backend_ctx *c, backend_kv *kv, const model_batch *b, int n_layers, float *logits,
                           tc_err *err);
// model_logits_rows through the backend; TC_ERR_UNSUPPORTED where the device lacks the slot.
int backend_logits_rows(backend_ctx *c, const float *normed, int n, float *logits, tc_err *err);

// The devices' tables (backend_cpu.c, backend_cuda.c). backend_cuda_ops exists in every build; without CUDA
// its weights_new says so.
extern const backend_ops backend_cpu_ops;
extern const backend_ops backend_cuda_ops;

#endif
