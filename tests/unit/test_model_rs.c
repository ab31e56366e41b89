// The recurrent state of hybrid models beside the paged KV (model.h: model_rs_*): which layers are DeltaNet
// layers, the floats of one sequence's slot, a verify row's kept state restored into its slot, and a block's
// kept state loaded into a slot (prefix-cache hits), with out-of-range requests refused and nothing else touched.
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "test_util.h"

static void test_layout(void) {
    // qwen35-tiny: 4 layers, attention every 4th; 2 key heads, 4 value heads of 32, conv of 4 taps
    model_hparams hp = {.n_layers = 4, .full_attn_interval = 4, .ssm_state = 32, .ssm_groups = 2, .ssm_vheads = 4,
                        .ssm_conv = 4};
    const int rec[4] = {1, 1, 1, 0};
    for (int l = 0; l < 4; l++) CHECK_EQ_INT(model_layer_is_recurrent(&hp, l), rec[l]);
    // per DeltaNet layer: conv channels (2·64 + 128) × 3 kept inputs, and 4 matrices of 32²
    CHECK_EQ_INT((int)model_rs_slot_floats(&hp), 3 * (256 * 3 + 4 * 32 * 32));
    hp.full_attn_interval = 0; // not hybrid
    CHECK_EQ_INT(model_layer_is_recurrent(&hp, 0), 0);
    CHECK_EQ_INT((int)model_rs_slot_floats(&hp), 0);
}

static void test_restore_and_load(void) {
    enum { SLOTS = 3, CK = 4, FL = 5, BLOCKS = 6 };
    kv_store kv = {.n_blocks = BLOCKS, .rs_slots = SLOTS, .rs_floats = FL};
    kv.rs = calloc(SLOTS * FL, sizeof(float));
    model_rs_restore(&kv, 1, 2); // no checkpoints reserved: nothing
    for (int i = 0; i < SLOTS * FL; i++) CHECK(kv.rs[i] == 0.0f);
    tc_err err = {0};
    CHECK_EQ_INT(model_rs_reserve_ckpt(&kv, SLOTS + 1, CK, &err), TC_ERR_INVALID); // more slots than the storage
    CHECK_EQ_INT(model_rs_reserve_ckpt(&kv, SLOTS, MODEL_RS_CKPT + 1, &err), TC_ERR_INVALID);
    CHECK(kv.rs_ckpt == NULL);
    CHECK_EQ_INT(model_rs_reserve_ckpt(&kv, SLOTS, CK, &err), 0);
    CHECK(kv.rs_ckpt != NULL && kv.rs_ckpt_slots == SLOTS && kv.rs_ckpt_n == CK);
    for (int i = 0; i < SLOTS * CK * FL; i++) kv.rs_ckpt[i] = (float)(i + 1);
    model_rs_restore(&kv, 1, 2); // slot 1 ← its row 2
    for (int i = 0; i < FL; i++) CHECK(kv.rs[FL + i] == (float)((1 * CK + 2) * FL + i + 1));
    for (int i = 0; i < FL; i++) CHECK(kv.rs[i] == 0.0f && kv.rs[2 * FL + i] == 0.0f); // the others untouched
    model_rs_restore(&kv, 0, CK); // a row out of range: nothing
    model_rs_restore(&kv, SLOTS, 0);
    for (int i = 0; i < FL; i++) CHECK(kv.rs[i] == 0.0f);
    CHECK(!model_rs_has_blocks(&kv));
    CHECK_EQ_INT(model_rs_load_block(&kv, 0, 0), TC_ERR_UNSUPPORTED); // no block states kept
    kv.rs_blk = calloc(BLOCKS * FL, sizeof(float));
    for (int i = 0; i < BLOCKS * FL; i++) kv.rs_blk[i] = (float)(-i - 1);
    CHECK(model_rs_has_blocks(&kv));
    CHECK_EQ_INT(model_rs_load_block(&kv, 2, 4), 0);
    for (int i = 0; i < FL; i++) CHECK(kv.rs[2 * FL + i] == (float)(-(4 * FL + i) - 1));
    CHECK_EQ_INT(model_rs_load_block(&kv, 2, BLOCKS), TC_ERR_UNSUPPORTED);
    CHECK_EQ_INT(model_rs_load_block(&kv, -1, 0), TC_ERR_UNSUPPORTED);
    free(kv.rs), free(kv.rs_ckpt), free(kv.rs_blk);
}

// Checkpoints that could not fit in memory are refused with a message, not left to fail a later allocation.
static void test_ckpt_too_large(void) {
    kv_store kv = {.rs_slots = MODEL_RS_SLOTS, .rs_floats = (size_t)1 << 40};
    kv.rs = calloc(1, sizeof(float)); // stands for a state; never indexed here
    tc_err err = {0};
    CHECK_EQ_INT(model_rs_reserve_ckpt(&kv, 8, 5, &err), TC_ERR_NOMEM);
    CHECK(strstr(err.msg, "--max-seqs") != NULL);
    CHECK(kv.rs_ckpt == NULL);
    free(kv.rs);
}

int main(void) {
    test_layout();
    test_restore_and_load();
    test_ckpt_too_large();
    TEST_MAIN_END();
}
