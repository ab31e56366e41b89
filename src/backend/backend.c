// The typed wrappers over a device's vtable (backend.h). Each handle remembers the ops it came from.
#include "backend/backend.h"

#include <stdlib.h>
#include <string.h>

struct backend {
    const backend_ops *ops;
    backend_device dev;
    model *m;   // borrowed
    void *w;    // owned by ops->weights_free
};

struct backend_kv {
    const backend_ops *ops;
    void *impl; // owned by ops->kv_free
};

struct backend_ctx {
    const backend_ops *ops;
    int n_layers; // the model's, for backend_forward
    void *impl;   // owned by ops->ctx_free
};

int backend_device_parse(const char *s, backend_device *out, tc_err *err) {
    if (s && !strcmp(s, "cpu")) return *out = BACKEND_CPU, 0;
    if (s && !strcmp(s, "cuda")) return *out = BACKEND_CUDA, 0;
    return tc_err_set(err, TC_ERR_INVALID, "unknown device '%s' (choices: cpu, cuda)", s ? s : "");
}

const char *backend_device_name(backend_device d) { return d == BACKEND_CUDA ? "cuda" : "cpu"; }

int backend_new(model *m, backend_device dev, backend **out, tc_err *err) {
    *out = NULL;
    const backend_ops *ops = dev == BACKEND_CUDA ? &backend_cuda_ops : dev == BACKEND_CPU ? &backend_cpu_ops : NULL;
    if (!ops) return tc_err_set(err, TC_ERR_INVALID, "unknown device %d", (int)dev);
    backend *be = calloc(1, sizeof *be);
    if (!be) return tc_err_set(err, TC_ERR_NOMEM, "backend: out of memory");
    be->ops = ops, be->dev = dev, be->m = m;
    int rc = ops->weights_new(m, &be->w, err);
    if (rc) {
        free(be);
        return rc;
    }
    *out = be;
    return 0;
}

void backend_free(backend *be) {
    if (!be) return;
    be->ops->weights_free(be->w);
    free(be);
}

backend_device backend_get_device(const backend *be) { return be->dev; }
const model *backend_model(const backend *be) { return be->m; }
size_t backend_kv_mem_default(const backend *be) { return be->ops->kv_mem_default(be->w); }

int backend_kv_new(backend *be, int n_blocks, int n_blocks_swa, int block_size, tt_type k_type, tt_type v_type,
                   backend_kv **out, tc_err *err) {
    *out = NULL;
    backend_kv *kv = calloc(1, sizeof *kv);
    if (!kv) return tc_err_set(err, TC_ERR_NOMEM, "backend: out of memory");
    kv->ops = be->ops;
    int rc = be->ops->kv_new(be->w, n_blocks, n_blocks_swa, block_size, k_type, v_type, &kv->impl, err);
    if (rc) {
        free(kv);
        return rc;
    }
    *out = kv;
    return 0;
}

void backend_kv_free(backend_kv *kv) {
    if (!kv) return;
    kv->ops->kv_free(kv->impl);
    free(kv);
}

void backend_kv_copy_block(backend_kv *kv, int src, int dst) {
    if (kv->ops->kv_copy_block) kv->ops->kv_copy_block(kv->impl, src, dst);
}

void backend_kv_rs_restore(backend_kv *kv, int slot, int row) {
    if (kv->ops->kv_rs_restore) kv->ops->kv_rs_restore(kv->impl, slot, row);
}

int backend_kv_rs_load_block(backend_kv *kv, int slot, int block) {
    return kv->ops->kv_rs_load_block ? kv->ops->kv_rs_load_block(kv->impl, slot, block) : TC_ERR_UNSUPPORTED;
}

int backend_kv_rs_reserve_ckpt(backend_kv *kv, int n_slots, int n_rows, tc_err *err) {
    if (!kv->ops->kv_rs_reserve_ckpt)
        return tc_err_set(err, TC_ERR_UNSUPPORTED, "this device keeps no recurrent state");
    return kv->ops->kv_rs_reserve_ckpt(kv->impl, n_slots, n_rows, err);
}

int backend_kv_rs_has_blocks(backend_kv *kv) {
    return kv->ops->kv_rs_has_blocks ? kv->ops->kv_rs_has_blocks(kv->impl) : 0;
}

int backend_ctx_new(backend *be, int max_batch_tokens, int n_threads, backend_ctx **out, tc_err *err) {
    *out = NULL;
    backend_ctx *c = calloc(1, sizeof *c);
    if (!c) return tc_err_set(err, TC_ERR_NOMEM, "backend: out of memory");
    c->ops = be->ops;
    c->n_layers = model_get_hparams(be->m)->n_layers;
    int rc = be->ops->ctx_new(be->w, max_batch_tokens, n_threads, &c->impl, err);
    if (rc) {
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void backend_ctx_free(backend_ctx *c) {
    if (!c) return;
    c->ops->ctx_free(c->impl);
    free(c);
}

int backend_forward(backend_ctx *c, backend_kv *kv, const model_batch *b, float *logits, tc_err *err) {
    return c->ops->forward(c->impl, kv->impl, b, c->n_layers, logits, err);
}

int backend_forward_layers(backend_ctx *c, backend_kv *kv, const model_batch *b, int n_layers, float *logits,
                           tc_err *err) {
    return c->ops->forward(c->impl, kv->impl, b, n_layers, logits, err);
}

int backend_logits_rows(backend_ctx *c, const float *normed, int n, float *logits, tc_err *err) {
    if (!c->ops->logits_rows)
        return tc_err_set(err, TC_ERR_UNSUPPORTED, "the %s backend cannot score given rows", c->ops->name);
    return c->ops->logits_rows(c->impl, normed, n, logits, err);
}
