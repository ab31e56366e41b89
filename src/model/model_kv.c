// The model's layers bound to the paged KV storage (kv/kv_store.h): the shape of one position from the
// hyper-parameters, and which layers are sliding-window layers. It stays with the model because only the
// model knows its layers; the storage knows shapes only.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kv/kv_store.h"
#include "model/model_internal.h"

size_t model_kv_block_bytes(const model *m, int block_size, tt_type k_type, tt_type v_type) {
    const model_hparams *hp = &m->hp;
    return kv_block_bytes(hp->n_layers, hp->n_kv_heads, hp->head_dim, block_size, k_type, v_type);
}

size_t model_rs_slot_floats(const model_hparams *hp) {
    size_t n = 0;
    const size_t conv_dim = (size_t)hp->ssm_state * (2 * (size_t)hp->ssm_groups + (size_t)hp->ssm_vheads);
    for (int l = 0; l < hp->n_layers; l++)
        if (model_layer_is_recurrent(hp, l))
            n += conv_dim * (size_t)(hp->ssm_conv - 1) + (size_t)hp->ssm_vheads * hp->ssm_state * hp->ssm_state;
    return n;
}

static int count_swa_layers(const model_hparams *hp) {
    int n = 0;
    for (int l = 0; l < hp->n_layers; l++) n += model_layer_is_swa(hp, l);
    return n;
}

size_t model_kv_group_block_bytes(const model *m, int swa, int block_size, tt_type k_type, tt_type v_type) {
    const model_hparams *hp = &m->hp;
    int n_local = count_swa_layers(hp), n = swa ? n_local : hp->n_layers - n_local;
    return kv_block_bytes(n, hp->n_kv_heads, hp->head_dim, block_size, k_type, v_type);
}

int model_kv_new(const model *m, int n_blocks, int block_size, tt_type k_type, tt_type v_type, kv_store **out,
                 tc_err *err) {
    return model_kv_new_swa(m, n_blocks, 0, block_size, k_type, v_type, out, err);
}

int model_kv_new_swa(const model *m, int n_blocks, int n_blocks_swa, int block_size, tt_type k_type, tt_type v_type,
                     kv_store **out, tc_err *err) {
    *out = NULL;
    if (n_blocks_swa > 0 && m->hp.swa_window <= 0)
        return tc_err_set(err, TC_ERR_INVALID, "a separate sliding-window KV storage needs a sliding-window model");
    const model_hparams *hp = &m->hp;
    uint8_t *local = calloc((size_t)hp->n_layers + 1, 1);
    if (!local) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    for (int l = 0; l < hp->n_layers; l++) local[l] = (uint8_t)model_layer_is_swa(hp, l);
    kv_shape s = {.n_layers = hp->n_layers, .n_kv_heads = hp->n_kv_heads, .head_dim = hp->head_dim, .local = local};
    int rc = kv_store_new(&s, n_blocks, n_blocks_swa, block_size, k_type, v_type, out, err);
    free(local);
    const size_t rs = model_rs_slot_floats(hp);
    if (rc || !rs) return rc;
    // calloc of this size maps zero pages: a slot costs memory once a sequence writes it
    (*out)->rs = calloc((size_t)MODEL_RS_SLOTS * rs, sizeof(float));
    if (!(*out)->rs) {
        kv_store_free(*out);
        *out = NULL;
        return tc_err_set(err, TC_ERR_NOMEM, "out of memory for the recurrent state (%d slots of %zu floats)",
                          MODEL_RS_SLOTS, rs);
    }
    (*out)->rs_slots = MODEL_RS_SLOTS, (*out)->rs_floats = rs;
    if ((unsigned long long)n_blocks * rs * sizeof(float) <= MODEL_RS_BLK_MAX) // else prefix-cache hits are off
        (*out)->rs_blk = calloc((size_t)n_blocks * rs, sizeof(float));
    return 0;
}

int model_rs_has_blocks(const kv_store *kv) { return kv->rs_blk != NULL; }

int model_rs_load_block(kv_store *kv, int slot, int block) {
    if (!kv->rs_blk || slot < 0 || slot >= kv->rs_slots || block < 0 || block >= kv->n_blocks)
        return TC_ERR_UNSUPPORTED;
    memcpy(kv->rs + (size_t)slot * kv->rs_floats, kv->rs_blk + (size_t)block * kv->rs_floats,
           kv->rs_floats * sizeof(float));
    return 0;
}

int model_rs_reserve_ckpt(kv_store *kv, int n_slots, int n_rows, tc_err *err) {
    if (!kv->rs) return 0; // no recurrent layers: nothing to keep
    if (n_slots < 1 || n_slots > kv->rs_slots || n_rows < 1 || n_rows > MODEL_RS_CKPT)
        return tc_err_set(err, TC_ERR_INVALID, "recurrent-state checkpoints: %d slots of %d rows (1..%d, 1..%d)",
                          n_slots, n_rows, kv->rs_slots, MODEL_RS_CKPT);
    const unsigned long long bytes = (unsigned long long)n_slots * n_rows * kv->rs_floats * sizeof(float);
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    const unsigned long long phys = pages > 0 && page > 0 ? (unsigned long long)pages * (unsigned long long)page : 0;
    float *c = phys && bytes > phys / 2 ? NULL : calloc((size_t)n_slots * n_rows * kv->rs_floats, sizeof(float));
    if (!c)
        return tc_err_set(err, TC_ERR_NOMEM, "speculation keeps the recurrent state after every verify row: %d "
                          "sequences x %d rows x %.1f MiB = %.1f GiB, more than half this machine's memory; lower "
                          "--max-seqs or --spec-k, or use --spec off", n_slots, n_rows,
                          kv->rs_floats * sizeof(float) / 1048576.0, bytes / 1073741824.0);
    free(kv->rs_ckpt);
    kv->rs_ckpt = c, kv->rs_ckpt_slots = n_slots, kv->rs_ckpt_n = n_rows;
    return 0;
}

void model_rs_restore(kv_store *kv, int slot, int row) {
    if (!kv->rs_ckpt || slot < 0 || slot >= kv->rs_ckpt_slots || row < 0 || row >= kv->rs_ckpt_n) return;
    memcpy(kv->rs + (size_t)slot * kv->rs_floats,
           kv->rs_ckpt + ((size_t)slot * kv->rs_ckpt_n + row) * kv->rs_floats, kv->rs_floats * sizeof(float));
}
