// A model's layers bound to the paged KV storage (src/model/model_kv.c): with a separate local storage, the
// storage marks exactly the model's sliding-window layers and gives them its own blocks; the bytes per block
// of the two groups add up to the whole; without one, or for a model with no window, every layer is global.
// Gemma 3 (local layers, a global one every 6th) when present, and stories260K (no window).
#include <stdio.h>

#include "model/model.h"
#include "test_util.h"

static const char *const STORIES = "../shared/testdata/models/stories260K.gguf";
static const char *const GEMMA = "models/gemma-3-270m-q4_k_m.gguf";

static void check_model(const char *path) {
    model *m = NULL;
    tc_err err = {0};
    if (model_load(path, &m, &err)) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        CHECK(0);
        return;
    }
    const model_hparams *hp = model_get_hparams(m);
    const int swa = hp->swa_window > 0, bs = 16;
    int n_local = 0;
    for (int l = 0; l < hp->n_layers; l++) n_local += model_layer_is_swa(hp, l);
    printf("%s: %d layers, %d local\n", path, hp->n_layers, n_local);
    size_t all = model_kv_block_bytes(m, bs, TT_F16, TT_F16);
    CHECK(all > 0);
    CHECK_EQ_INT((int)(model_kv_group_block_bytes(m, 0, bs, TT_F16, TT_F16) +
                       model_kv_group_block_bytes(m, 1, bs, TT_F16, TT_F16)),
                 (int)all);
    kv_store *kv = NULL;
    if (swa) {
        CHECK(n_local > 0 && n_local < hp->n_layers);
        CHECK_EQ_INT(model_kv_new_swa(m, 8, 3, bs, TT_F16, TT_F16, &kv, &err), 0);
        if (kv) {
            CHECK_EQ_INT(kv->n_blocks_swa, 3);
            CHECK(kv->k_swa != NULL);
            for (int l = 0; l < hp->n_layers; l++)
                CHECK_MSG(kv_store_layer_is_swa(kv, l) == model_layer_is_swa(hp, l), "layer %d: local %d, stored %d",
                          l, model_layer_is_swa(hp, l), kv_store_layer_is_swa(kv, l));
            kv_store_free(kv);
            kv = NULL;
        }
    } else {
        CHECK_EQ_INT(n_local, 0);
        CHECK_EQ_INT(model_kv_new_swa(m, 8, 3, bs, TT_F16, TT_F16, &kv, &err), TC_ERR_INVALID);
        CHECK(kv == NULL);
    }
    CHECK_EQ_INT(model_kv_new(m, 8, bs, TT_F16, TT_F16, &kv, &err), 0); // one storage: every layer global
    if (kv) {
        CHECK(kv->k_swa == NULL);
        for (int l = 0; l < hp->n_layers; l++) CHECK_EQ_INT(kv_store_layer_is_swa(kv, l), 0);
        kv_store_free(kv);
    }
    model_free(m);
}

int main(void) {
    check_model(STORIES);
    FILE *g = fopen(GEMMA, "rb");
    if (g) {
        fclose(g);
        check_model(GEMMA);
    } else printf("%s not present: the sliding-window case is not checked\n", GEMMA);
    TEST_MAIN_END();
}
