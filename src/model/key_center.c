// K centering for a quantized K cache (see key_center.h).
#include "model/key_center.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/key_center_cache.h"
#include "model/model_internal.h"
#include "tokenizer/tokenizer.h"

// Everyday English of several registers (story, encyclopedic, recipe, letter, dialogue, a little code),
// written for this purpose. Its keys' mean is what matters, not its content.
static const char CALIB_TEXT[] =
    "The quick brown fox jumps over the lazy dog. In the morning the market opened early, and traders watched "
    "the prices of wheat, copper and oil move slowly upward. A short story: once there was a small robot who "
    "wanted to learn how to paint. Every day it mixed colours and tried again, and every evening it showed its "
    "work to the old gardener, who smiled and said it was getting better.\n"
    "Question: what is the capital of France? Answer: Paris is the capital and largest city of France.\n"
    "def add(a, b):\n    return a + b\nfor i in range(10):\n    print(i, add(i, 2))\n"
    "User: Can you summarise the main points of the report?\n"
    "Assistant: Sure. The report makes three points: costs rose by 4% last year, demand stayed flat, and the new "
    "plant will open in 2027.\n"
    "Chapter One. The rain had not stopped for three days when Maria finally decided to leave the village. She "
    "packed a small bag with bread, cheese, a knife and the letter her brother had sent from the city, and walked "
    "down the muddy road towards the river. Nobody saw her go except the baker's dog, which followed her as far "
    "as the bridge and then sat down, as if it knew that this was where the old life ended.\n"
    "In computing, a cache is a hardware or software component that stores data so that future requests for that "
    "data can be served faster. A cache hit occurs when the requested data can be found in the cache, while a "
    "cache miss occurs when it cannot. Caches have proven themselves in many areas of computing, because typical "
    "applications access data with a high degree of locality of reference.\n"
    "Ingredients: two cups of flour, one teaspoon of salt, three eggs, a cup of milk and a little butter. Mix the "
    "flour and salt, add the eggs one at a time, then pour in the milk slowly while stirring until the batter is "
    "smooth. Let it rest for half an hour before cooking.\n"
    "Dear Mr. Thompson, thank you for your letter of the 12th of March. I am pleased to confirm that your order "
    "has been shipped and should arrive within five working days. If you have any questions, please do not "
    "hesitate to contact our customer service team.\n"
    "The results, shown in Table 2, suggest that the effect is small but significant (p < 0.01). However, "
    "further work with a larger sample is needed before any firm conclusions can be drawn.\n";

#define CALIB_SKIP 4    // leading positions left out of the mean (attention sinks)
#define CALIB_BATCH 128 // rows per calibration forward
#define CALIB_BLOCK 16

// The balance exponent: keys scaled per channel by (rms query / rms centered key)^alpha, queries by the
// inverse. TACHYON_KV_BALANCE overrides it (0: off).
#define BALANCE_ALPHA 0.3
static double balance_alpha(void) {
    const char *e = getenv("TACHYON_KV_BALANCE");
    return e ? atof(e) : BALANCE_ALPHA;
}

// Floats of the result: [-mean key (nt) | k_scale (nt) | q_scale (nq)], nt = n_layers * kv_dim,
// nq = n_layers * q_dim; the scales only when balanced.
static size_t result_floats(const model_hparams *hp, int balanced) {
    size_t nt = (size_t)hp->n_layers * hp->n_kv_heads * hp->head_dim;
    return balanced ? 2 * nt + (size_t)hp->n_layers * hp->n_heads * hp->head_dim : nt;
}

// Installs a result (owned by the model from here on, freed with it).
static void install(model *m, float *neg, int balanced) {
    size_t nt = result_floats(&m->hp, 0);
    m->k_center_neg = neg;
    if (balanced) m->k_scale = neg + nt, m->q_scale = neg + 2 * nt;
}

// The result from the on-disk cache (key_center_cache.h): 0 when installed, -1 on a miss.
static int from_cache(model *m, const char *path, int balanced) {
    float *neg = malloc(sizeof(float) * result_floats(&m->hp, 1));
    if (!neg || kcc_load(path, neg, result_floats(&m->hp, balanced))) {
        free(neg);
        return -1;
    }
    install(m, neg, balanced);
    return 0;
}

static int calibrate(model *m, const int32_t *ids, int n, int n_threads, double alpha, tc_err *err) {
    const model_hparams *hp = &m->hp;
    const size_t kv_dim = (size_t)hp->n_kv_heads * hp->head_dim;
    if (n <= CALIB_SKIP + 16) return tc_err_set(err, TC_ERR_INVALID, "calibration text too short (%d tokens)", n);
    int n_blocks = (n + CALIB_BLOCK - 1) / CALIB_BLOCK;
    model_ctx *c = NULL;
    kv_store *kv = NULL;
    const size_t nt = (size_t)hp->n_layers * kv_dim, q_dim = (size_t)hp->n_heads * hp->head_dim;
    const size_t nq = (size_t)hp->n_layers * q_dim;
    double *sum = calloc(2 * nt + nq, sizeof(double)); // [keys | squared keys | squared queries]
    int32_t *table = malloc(sizeof(int32_t) * (size_t)n_blocks), *pos = malloc(sizeof(int32_t) * CALIB_BATCH);
    int32_t *seq = calloc(CALIB_BATCH, sizeof(int32_t));
    float *neg = malloc(sizeof(float) * (2 * nt + nq)); // [-mean key | k_scale | q_scale]
    long count = 0;
    int rc = 0;
    if (!sum || !table || !pos || !seq || !neg) {
        rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((rc = model_ctx_new(m, CALIB_BATCH, n_threads, &c, err)) ||
        (rc = model_kv_new(m, n_blocks, CALIB_BLOCK, TT_F16, TT_F16, &kv, err)))
        goto out;
    for (int i = 0; i < n_blocks; i++) table[i] = i;
    // The local layers' keys are captured like the global ones: one table serves both (no separate storage).
    const int32_t *tables[1] = {table};
    model_ctx_capture_k(c, sum, sum + nt, sum + 2 * nt, &count, CALIB_SKIP);
    for (int done = 0; done < n && !rc; done += CALIB_BATCH) {
        int chunk = n - done < CALIB_BATCH ? n - done : CALIB_BATCH;
        for (int i = 0; i < chunk; i++) pos[i] = done + i;
        model_batch b = {.n_tokens = chunk, .tokens = ids + done, .pos = pos, .seq = seq, .n_seqs = 1,
                         .block_tables = tables, .block_tables_swa = m->hp.swa_window > 0 ? tables : NULL};
        rc = model_forward(c, kv, &b, NULL, err);
    }
    if (!rc) {
        for (size_t i = 0; i < nt; i++) neg[i] = (float)(-sum[i] / (double)count);
        if (alpha > 0) {
            const int hd = hp->head_dim, rep = hp->n_heads / hp->n_kv_heads;
            float *ks = neg + nt, *qs = neg + 2 * nt;
            for (int l = 0; l < hp->n_layers; l++)
                for (int g = 0; g < hp->n_kv_heads; g++)
                    for (int i = 0; i < hd; i++) {
                        size_t ki = (size_t)l * kv_dim + (size_t)g * hd + i;
                        double mean = sum[ki] / (double)count;
                        double kvar = sum[nt + ki] / (double)count - mean * mean, qsq = 0;
                        for (int r = 0; r < rep; r++)
                            qsq += sum[2 * nt + (size_t)l * q_dim + (size_t)(g * rep + r) * hd + i];
                        qsq /= (double)count * rep;
                        double s = kvar > 1e-12 && qsq > 1e-12 ? pow(sqrt(qsq) / sqrt(kvar), alpha) : 1.0;
                        if (s < 1e-3) s = 1e-3;
                        if (s > 1e3) s = 1e3;
                        ks[ki] = (float)s;
                        for (int r = 0; r < rep; r++)
                            qs[(size_t)l * q_dim + (size_t)(g * rep + r) * hd + i] = (float)(1.0 / s);
                    }
        }
        install(m, neg, alpha > 0);
        neg = NULL;
    }
out:
    model_ctx_free(c);
    kv_store_free(kv);
    free(sum), free(table), free(pos), free(seq), free(neg);
    return rc;
}

int model_kv_center_init(model *m, tt_type k_type, int n_threads, tc_err *err) {
    if (m->k_center_tried || k_type == TT_F16 || k_type == TT_F32) return 0;
    m->k_center_tried = 1;
    const char *env = getenv("TACHYON_KV_CENTER");
    if (env && (!strcmp(env, "0") || !strcmp(env, "off"))) return 0;
    tok_vocab *v = NULL;
    int32_t *ids = NULL;
    int n = 0;
    int rc = tok_load(model_gguf(m), &v, err);
    if (!rc) {
        int bos = tok_add_bos(v) && tok_bos(v) >= 0;
        rc = tok_encode(v, CALIB_TEXT, strlen(CALIB_TEXT), bos ? TOK_ENC_ADD_BOS : 0, &ids, &n, err);
    }
    if (!rc) {
        const int ctx = m->hp.ctx_train;
        if (n > ctx && ctx > 0) n = ctx;
        double alpha = balance_alpha();
        char path[4096];
        int cached = kcc_path(model_gguf(m), ids, n, n_threads, alpha, path, sizeof path);
        if (!cached || from_cache(m, path, alpha > 0)) {
            rc = calibrate(m, ids, n, n_threads, alpha, err);
            if (!rc && cached) kcc_store(path, m->k_center_neg, result_floats(&m->hp, alpha > 0));
        }
    }
    free(ids);
    tok_free(v);
    return rc;
}
