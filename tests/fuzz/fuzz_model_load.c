// libFuzzer target: model_load's metadata and tensor-shape validation. The input is a whole GGUF file
// (seeds: tiny valid llama/qwen2/qwen3 models, tests/fuzz/make_gguf_seeds.py), loaded from a heap copy with
// model_load_memory (same validation as model_load on a file; on the heap, ASan sees every read past the
// end of the image, which it cannot in an mmap'd file). model_load must either fail
// with a message or return a model the rest of the engine can trust: so an accepted model also gets its
// tokenizer loaded and chat template detected (what the server does next), and runs one forward step of
// two tokens through a KV cache; any shape the validation let through that the forward pass cannot handle
// shows up here as an ASan/UBSan report.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"
#include "tensor/ttype.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

#define CHECK(c)                                                                                             \
    do {                                                                                                     \
        if (!(c)) __builtin_trap();                                                                          \
    } while (0)

// Oracle for what the forward pass will read: a bound weight is (rows, cols) of its type, so the GGUF tensor
// it points into must have at least that many bytes. A shape check missing from model_load would let the
// forward pass read past the tensor, which ASan sees only at the end of the image; this sees it anywhere.
static void check_weight(const model *m, const model_weight *w) {
    if (!w->data) return; // optional role, absent
    const tt_traits *tr = tt_get(w->type);
    CHECK(tr && w->rows > 0 && w->cols > 0 && w->cols % tr->block_size == 0);
    // tensors may overlap (two infos with one offset: legal, if odd), so any tensor of the weight's type that
    // starts there and is large enough will do
    for (int64_t i = 0; i < gguf_n_tensors(m->g); i++) {
        const gguf_tensor *t = gguf_tensor_at(m->g, i);
        if (t->data == w->data && t->type == w->type && t->size >= (uint64_t)w->rows * tt_row_size(w->type, w->cols))
            return;
    }
    CHECK(0); // no tensor of that type and size starts at the weight's data
}

static void check_weights(const model *m) {
    const model_hparams *hp = &m->hp;
    check_weight(m, &m->tok_embd);
    check_weight(m, &m->output);
    check_weight(m, &m->output_norm);
    CHECK(m->tok_embd.rows == hp->n_vocab && m->tok_embd.cols == hp->dim && m->output_norm.cols == hp->dim);
    for (int l = 0; l < hp->n_layers; l++)
        for (int r = 0; r < ROLE_COUNT; r++) check_weight(m, model_layer_w(m, l, (arch_role)r));
    if (m->rope_freqs) {
        const gguf_tensor *t = gguf_find_tensor(m->g, "rope_freqs.weight");
        CHECK(t && t->data == (const void *)m->rope_freqs && t->size >= (uint64_t)hp->rope_dim / 2 * sizeof(float));
    }
}

static void after_load(model *m) {
    check_weights(m);
    const model_hparams *hp = model_get_hparams(m);
    CHECK(hp->n_vocab > 0 && hp->dim > 0 && hp->n_layers > 0 && hp->n_heads > 0 && hp->n_kv_heads > 0);
    CHECK(hp->n_heads % hp->n_kv_heads == 0 && hp->head_dim > 0 && hp->rope_dim > 0 && hp->rope_dim <= hp->head_dim);
    tc_err err = {0};
    tok_vocab *v = NULL;
    if (tok_load(model_gguf(m), &v, &err) == 0) tok_free(v);
    else CHECK(err.msg[0]);
    gguf_str s;
    if (gguf_get_str(model_gguf(m), "tokenizer.chat_template", &s) == 0 && s.len < 65536) {
        char *t = strndup(s.ptr, s.len);
        if (t) (void)chat_detect(t);
        free(t);
    }
    // one step: tokens 0 and n_vocab-1 at positions 0 and 1 of sequence 0, logits for the last one
    model_ctx *ctx = NULL;
    kv_store *kv = NULL;
    float *logits = NULL;
    memset(&err, 0, sizeof err);
    if (model_ctx_new(m, 2, 1, &ctx, &err)) {
        CHECK(err.msg[0]);
        return;
    }
    if (model_kv_new(m, 1, 16, TT_F16, TT_F16, &kv, &err)) {
        CHECK(err.msg[0]);
        goto out;
    }
    logits = malloc((size_t)hp->n_vocab * sizeof *logits);
    if (!logits) goto out;
    int32_t tokens[2] = {0, hp->n_vocab - 1}, pos[2] = {0, 1}, seq[2] = {0, 0}, block0[1] = {0}, rows[1] = {1};
    const int32_t *tables[1] = {block0};
    model_batch b = {.n_tokens = 2, .tokens = tokens, .pos = pos, .seq = seq, .n_seqs = 1, .block_tables = tables,
                     .n_logits = 1, .logits_rows = rows};
    if (model_forward(ctx, kv, &b, logits, &err)) CHECK(err.msg[0]);
out:
    free(logits);
    kv_store_free(kv);
    model_ctx_free(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    // A copy aligned as a mapped file is (tensor data is aligned relative to the file start), exactly size
    // bytes long so that ASan flags any read past the end of the file.
    void *buf = NULL;
    if (posix_memalign(&buf, 64, size ? size : 1)) return 0;
    memcpy(buf, data, size);
    model *m = NULL;
    tc_err err = {0};
    int rc = model_load_memory(buf, size, &m, &err);
    if (rc) {
        CHECK(rc < 0 && !m && err.msg[0]); // an error code with a message, nothing to free
    } else {
        CHECK(m);
        after_load(m);
        model_free(m);
    }
    free(buf);
    return 0;
}
