// The CPU's paged KV storage (src/kv/kv_store.c) from a shape alone, no model: type names, row and block
// sizes, the layout of global and sliding-window layers, copy-on-write of a block, and the errors.
#include <string.h>

#include "kv/kv_store.h"
#include "test_util.h"

static void test_types(void) {
    tt_type t = TT_F32;
    tc_err err;
    CHECK_EQ_INT(kv_type_parse("q4_0", &t, &err), 0);
    CHECK_EQ_INT(t, TT_Q4_0);
    CHECK_EQ_INT(kv_type_parse("f16", &t, &err), 0);
    CHECK_EQ_INT(t, TT_F16);
    CHECK_EQ_INT(kv_type_parse("f32", &t, &err), TC_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "q8_0") != NULL, "message names the choices: %s", err.msg);
    CHECK_EQ_INT(kv_type_parse(NULL, &t, &err), TC_ERR_INVALID);
    CHECK_EQ_INT((int)kv_row_bytes(TT_F16, 64), 128);
    CHECK_EQ_INT((int)kv_row_bytes(TT_Q8_0, 64), 2 * 34);
    CHECK_EQ_INT((int)kv_row_bytes(TT_Q4_0, 64), 2 * 18);
    CHECK_EQ_INT((int)kv_row_bytes(TT_Q4_0, 48), 0); // not a multiple of 32
    CHECK_EQ_INT((int)kv_row_bytes(TT_F32, 64), 0);  // not a KV type
    // 3 layers x 2 heads x 4 positions x (f16 K row 128 + q8_0 V row 68)
    CHECK_EQ_INT((int)kv_block_bytes(3, 2, 64, 4, TT_F16, TT_Q8_0), 3 * 2 * 4 * (128 + 68));
    CHECK_EQ_INT((int)kv_block_bytes(3, 2, 48, 4, TT_F16, TT_Q4_0), 0);
}

// Layers 0 and 2 local (sliding window), 1 and 3 global: with a local storage, each group's layers sit one
// after the other in their own storage; without, every layer is global.
static void test_layout(void) {
    const uint8_t local[4] = {1, 0, 1, 0};
    kv_shape s = {.n_layers = 4, .n_kv_heads = 2, .head_dim = 32, .local = local};
    kv_store *kv = NULL;
    tc_err err;
    CHECK_EQ_INT(kv_store_new(&s, 6, 3, 4, TT_F16, TT_F16, &kv, &err), 0);
    if (!kv) return;
    CHECK_EQ_INT(kv_store_n_blocks(kv), 6);
    CHECK_EQ_INT(kv_store_block_size(kv), 4);
    const size_t row = 64, rows = 6 * 2 * 4, rows_swa = 3 * 2 * 4;
    CHECK_EQ_INT((int)kv->k_row, (int)row);
    for (int l = 0; l < 4; l++) CHECK_EQ_INT(kv_store_layer_is_swa(kv, l), local[l]);
    CHECK(kv->k_l[1] == kv->k && kv->k_l[3] == kv->k + rows * row);
    CHECK(kv->k_l[0] == kv->k_swa && kv->k_l[2] == kv->k_swa + rows_swa * row);
    CHECK(kv->v_l[3] == kv->v + rows * row);
    CHECK_EQ_INT((int)kv_store_offset(kv, row, 2, 1, 3), (int)(((2 * 2 + 1) * 4 + 3) * row));
    // copy-on-write of block 1 into block 5: the global layers' K and V, never the local storage
    for (int l = 0; l < 4; l++) {
        memset(kv->k_l[l] + kv_store_offset(kv, row, 1, 0, 0), 0x11 + l, 2 * 4 * row);
        memset(kv->v_l[l] + kv_store_offset(kv, row, 1, 0, 0), 0x21 + l, 2 * 4 * row);
    }
    kv_store_copy_block(kv, 1, 5);
    for (int l = 1; l < 4; l += 2) {
        const uint8_t *k = kv->k_l[l] + kv_store_offset(kv, row, 5, 0, 0);
        const uint8_t *v = kv->v_l[l] + kv_store_offset(kv, row, 5, 0, 0);
        int same = 1;
        for (size_t i = 0; i < 2 * 4 * row; i++) same &= k[i] == 0x11 + l && v[i] == 0x21 + l;
        CHECK_MSG(same, "global layer %d: block 5 is not a copy of block 1", l);
    }
    kv_store_free(kv);
    // no local storage asked for: every layer global, one after the other
    CHECK_EQ_INT(kv_store_new(&s, 6, 0, 4, TT_Q8_0, TT_Q4_0, &kv, &err), 0);
    if (!kv) return;
    CHECK(kv->k_swa == NULL && kv->v_swa == NULL);
    for (int l = 0; l < 4; l++) {
        CHECK_EQ_INT(kv_store_layer_is_swa(kv, l), 0);
        CHECK(kv->k_l[l] == kv->k + (size_t)l * rows * kv->k_row);
        CHECK(kv->v_l[l] == kv->v + (size_t)l * rows * kv->v_row);
    }
    kv_store_free(kv);
}

static void test_errors(void) {
    kv_shape s = {.n_layers = 2, .n_kv_heads = 1, .head_dim = 48, .local = NULL};
    static kv_store untouched;
    kv_store *kv = &untouched; // set to NULL on failure
    tc_err err;
    CHECK_EQ_INT(kv_store_new(&s, 0, 0, 4, TT_F16, TT_F16, &kv, &err), TC_ERR_INVALID);
    CHECK(kv == NULL);
    CHECK_EQ_INT(kv_store_new(&s, 4, 0, 65, TT_F16, TT_F16, &kv, &err), TC_ERR_INVALID);
    CHECK_EQ_INT(kv_store_new(&s, 4, -1, 4, TT_F16, TT_F16, &kv, &err), TC_ERR_INVALID);
    CHECK_EQ_INT(kv_store_new(&s, 4, 0, 4, TT_Q4_0, TT_F16, &kv, &err), TC_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "48") != NULL, "message names the head dim: %s", err.msg);
    CHECK_EQ_INT(kv_store_new(&s, 4, 0, 4, TT_F16, TT_F16, &kv, &err), 0);
    kv_store_free(kv);
    kv_store_free(NULL);
}

int main(void) {
    test_types();
    test_layout();
    test_errors();
    TEST_MAIN_END();
}
