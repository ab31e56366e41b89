// tachyon synth: writes a synthetic GGUF of a real model shape (Llama sizes, and a tiny correctness shape of
// every supported architecture, `<arch>-tiny`, with the metadata and tensors llama.cpp's converter writes for it;
// random weights ~ N(0, 0.02), norms 1.0, a valid SPM-style vocabulary) so benchmarks and tests can use it
// without downloading a model. Tensors are generated
// and quantized while the file is written (gguf writer fill callback), split over threads by rows; the random
// stream of every row is seeded from (seed, tensor, row), so the output does not depend on the thread count.
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/synth_blocks.h"
#include "cli/synth_shapes.h"
#include "gguf/gguf.h"
#include "tensor/ttype.h"


#define SYNTH_SD 0.02f

// llama.cpp file types (general.file_type)
enum { FTYPE_F32 = 0, FTYPE_F16 = 1, FTYPE_Q4_0 = 2, FTYPE_Q8_0 = 7, FTYPE_Q4_K_M = 15, FTYPE_MXFP4_MOE = 38 };

typedef struct {
    const char *name;
    int ftype;
} synth_qtype;

static const synth_qtype qtypes[] = {
    {"q8_0", FTYPE_Q8_0}, {"q4_k_m", FTYPE_Q4_K_M}, {"q4_0", FTYPE_Q4_0}, {"f16", FTYPE_F16}, {"f32", FTYPE_F32},
    {"mxfp4", FTYPE_MXFP4_MOE}};

// --- tensor types (approximating llama.cpp's llama_tensor_get_type)

// llama.cpp's use_more_bits: the first and last eighth of the layers and every third one in between.
static int more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// K-quants need rows that are a multiple of 256; llama.cpp then falls back like this.
static uint32_t k_fallback(uint32_t t, int64_t ne0) {
    if (ne0 % QK_K == 0) return t;
    if (t == TT_Q4_K) return TT_Q5_0;
    if (t == TT_Q6_K) return TT_Q8_0;
    return t;
}

// ROLE_ROUTER: an MoE router, which llama.cpp keeps in F32; ROLE_VEC: a random F32 vector (a bias, the shared
// expert's gate)
// ROLE_NEG: a negative F32 vector (SYNTH_FILL_NEG)
typedef enum {
    ROLE_EMBD, ROLE_OUTPUT, ROLE_NORM, ROLE_ATTN_V, ROLE_FFN_DOWN, ROLE_OTHER, ROLE_ROUTER, ROLE_VEC, ROLE_NEG
} synth_role;

static uint32_t pick_type(int ftype, synth_role role, int layer, int n_layers, int64_t ne0) {
    if (role == ROLE_NORM || role == ROLE_ROUTER || role == ROLE_VEC || role == ROLE_NEG || ftype == FTYPE_F32)
        return TT_F32;
    switch (ftype) {
    case FTYPE_F16: return TT_F16;
    case FTYPE_Q8_0:
    case FTYPE_MXFP4_MOE: return TT_Q8_0; // (MXFP4_MOE: the experts are MXFP4, add3)
    case FTYPE_Q4_0: return role == ROLE_OUTPUT ? k_fallback(TT_Q6_K, ne0) : TT_Q4_0;
    default: // Q4_K_M
        if (role == ROLE_OUTPUT) return k_fallback(TT_Q6_K, ne0);
        if ((role == ROLE_ATTN_V || role == ROLE_FFN_DOWN) && more_bits(layer, n_layers))
            return k_fallback(TT_Q6_K, ne0);
        return k_fallback(TT_Q4_K, ne0);
    }
}

// --- random numbers

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// n values ~ N(0, sd) (Box-Muller), stream seeded by s.
static void gauss(float *dst, int64_t n, uint64_t s, float sd) {
    for (int64_t i = 0; i < n; i += 2) {
        uint64_t r = splitmix(&s);
        double u1 = ((double)(r >> 40) + 1.0) / 16777217.0, u2 = (double)(r & 0xffffff) / 16777216.0;
        double m = sqrt(-2.0 * log(u1)) * sd;
        dst[i] = (float)(m * cos(6.283185307179586 * u2));
        if (i + 1 < n) dst[i + 1] = (float)(m * sin(6.283185307179586 * u2));
    }
}

// --- tensor production (the writer's fill callback)

typedef struct {
    uint32_t type;
    int64_t ne0, rows; // row length (elements) and row count (over all experts of a 3-D tensor)
    int is_norm;       // SYNTH_FILL_*
    float sd;          // of the random values
    float norm_w;      // the value of a norm's elements (SYNTH_FILL_ONES: ones scaled)
    int fast;          // random quantized blocks (synth_blocks.h) where the type allows
} synth_tinfo;

// What a tensor holds: N(0, sd) values, ones (a norm), or -(|N(0, sd)| + 0.1) (a decay rate that must be
// negative: Qwen3.5's ssm_a, -exp(A_log))
enum { SYNTH_FILL_GAUSS = 0, SYNTH_FILL_ONES = 1, SYNTH_FILL_NEG = 2 };

typedef struct {
    const synth_tinfo *ti; // (n_tensors,) in the order the tensors were added
    uint64_t seed;
    int n_threads;
    int64_t n_tensors, done;
    double t0;
} synth_ctx;

typedef struct {
    uint32_t type;
    int64_t ne0, row0, row1, index;
    int is_norm;
    float sd, norm_w;
    int fast;
    uint64_t seed;
    size_t row_bytes;
    uint8_t *dst; // rows [row0, row1) of the tensor
    int rc;
} synth_job;

#define SYNTH_CHUNK_ROWS 16

static void *synth_rows(void *arg) {
    synth_job *j = arg;
    const tt_traits *tr = tt_get(j->type);
    if (j->fast && j->is_norm == SYNTH_FILL_GAUSS && synth_blocks_supported(j->type)) {
        j->rc = synth_random_blocks(j->type, j->dst, j->ne0, j->row1 - j->row0,
                                    j->seed ^ ((uint64_t)j->index << 40) ^ (uint64_t)j->row0 * 0x9e3779b97f4a7c15ull);
        return NULL;
    }
    float *buf = malloc((size_t)j->ne0 * SYNTH_CHUNK_ROWS * sizeof *buf); // (chunk rows, ne0)
    if (!buf) {
        j->rc = TC_ERR_NOMEM;
        return NULL;
    }
    for (int64_t r = j->row0; r < j->row1; r += SYNTH_CHUNK_ROWS) {
        int64_t nr = j->row1 - r < SYNTH_CHUNK_ROWS ? j->row1 - r : SYNTH_CHUNK_ROWS;
        for (int64_t k = 0; k < nr; k++) {
            float *row = buf + k * j->ne0;
            if (j->is_norm == SYNTH_FILL_ONES)
                for (int64_t c = 0; c < j->ne0; c++) row[c] = j->norm_w;
            else gauss(row, j->ne0, j->seed ^ ((uint64_t)j->index << 40) ^ (uint64_t)(r + k) * 0x2545f4914f6cdd1dull,
                       j->sd);
            if (j->is_norm == SYNTH_FILL_NEG)
                for (int64_t c = 0; c < j->ne0; c++) row[c] = -(fabsf(row[c]) + 0.1f);
        }
        tr->from_float(buf, j->dst + (size_t)(r - j->row0) * j->row_bytes, nr * j->ne0);
    }
    free(buf);
    j->rc = 0;
    return NULL;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int synth_fill(void *user, int64_t index, const char *name, void *dst, uint64_t size) {
    synth_ctx *sc = user;
    const synth_tinfo *ti = &sc->ti[index];
    size_t row_bytes = tt_row_size(ti->type, ti->ne0);
    if ((uint64_t)row_bytes * (uint64_t)ti->rows != size) return TC_ERR_INVALID;
    int nt = sc->n_threads;
    if (ti->rows < nt * SYNTH_CHUNK_ROWS) nt = 1;
    synth_job jobs[16];
    pthread_t th[16];
    int started[16] = {0};
    for (int t = 0; t < nt; t++) {
        int64_t r0 = ti->rows * t / nt, r1 = ti->rows * (t + 1) / nt;
        jobs[t] = (synth_job){ti->type, ti->ne0, r0, r1, index, ti->is_norm, ti->sd, ti->norm_w, ti->fast, sc->seed, row_bytes,
                              (uint8_t *)dst + (size_t)r0 * row_bytes, TC_ERR};
        if (t > 0) started[t] = pthread_create(&th[t], NULL, synth_rows, &jobs[t]) == 0;
    }
    synth_rows(&jobs[0]);
    int rc = jobs[0].rc;
    for (int t = 1; t < nt; t++) {
        if (started[t]) pthread_join(th[t], NULL);
        else synth_rows(&jobs[t]);
        if (jobs[t].rc) rc = jobs[t].rc;
    }
    sc->done++;
    if (sc->done == sc->n_tensors || sc->done % 20 == 0)
        // a carriage return redraws the line on a terminal; a pipe or log file gets one line per update
        fprintf(stderr, "%ssynth: %lld/%lld tensors (%s), %.1f s%s", isatty(2) ? "\r" : "", (long long)sc->done,
                (long long)sc->n_tensors, name, now_s() - sc->t0, isatty(2) ? "" : "\n");
    return rc;
}

// --- vocabulary: <unk>, <s>, </s>, 256 byte tokens, then unique filler pieces "▁a", "▁b", … "▁aa", …

// extra (may be NULL): a control token that ends the vocabulary, one its architecture's loaders look up by name
// (Phi-3's <|endoftext|>: llama.cpp sets its attributes for a model named phi3 and fails without it).
static char **make_vocab(int n, float *scores, int32_t *types, const char *extra) {
    char **tok = calloc((size_t)n, sizeof *tok);
    if (!tok) return NULL;
    for (int i = 0; i < n; i++) {
        char s[32];
        if (i == 0) snprintf(s, sizeof s, "<unk>"), types[i] = 2;
        else if (i == 1) snprintf(s, sizeof s, "<s>"), types[i] = 3;
        else if (i == 2) snprintf(s, sizeof s, "</s>"), types[i] = 3;
        else if (i < 259) snprintf(s, sizeof s, "<0x%02X>", i - 3), types[i] = 6;
        else if (extra && i == n - 1) snprintf(s, sizeof s, "%s", extra), types[i] = 3;
        else {
            // bijective base-26 numbering of k = i - 259: a..z, aa..zz, aaa…
            char letters[16];
            int len = 0;
            for (long k = i - 259 + 1; k > 0 && len < 15; k = (k - 1) / 26) letters[len++] = (char)('a' + (k - 1) % 26);
            int o = snprintf(s, sizeof s, "\xe2\x96\x81");
            for (int c = len - 1; c >= 0; c--) s[o++] = letters[c];
            s[o] = 0;
            types[i] = 1;
        }
        scores[i] = i < 259 ? 0.0f : -(float)(i - 259);
        if (!(tok[i] = strdup(s))) {
            for (int k = 0; k < i; k++) free(tok[k]);
            free(tok);
            return NULL;
        }
    }
    return tok;
}

// The vocabulary of a shape: make_vocab's, with <|endoftext|> for Phi-3.
static char **shape_vocab(const synth_shape *sh, float *scores, int32_t *types) {
    int phi3 = sh->arch && !strcmp(sh->arch, "phi3");
    return make_vocab(sh->vocab, scores, types, phi3 ? "<|endoftext|>" : NULL);
}

// --- command

static void usage(void) {
    fprintf(stderr, "usage: tachyon synth -o OUT.gguf [--shape S] [--type q8_0|q4_k_m|q4_0|f16|f32|mxfp4] [--seed S] "
                    "[--threads N]\n  shapes:");
    synth_shape_list(stderr, 0);
    fprintf(stderr, "\n  full-size shapes (random quantized blocks, for speed):");
    synth_shape_list(stderr, 1);
    fprintf(stderr, "\n");
}

typedef struct {
    gguf_writer *w;
    synth_tinfo *ti; // (cap)
    int64_t n, cap;
    int ftype, n_layers, rc;
    float sd;     // of the next tensor added
    float norm_w; // of the next norm added (0: 1.0)
    int fast;     // the shape's fast flag
} tensor_list;

// A tensor of ne0 x ne1 (x ne2 experts when ne2 > 1).
static void add3(tensor_list *l, const char *name, synth_role role, int layer, int64_t ne0, int64_t ne1, int64_t ne2) {
    if (l->rc) return;
    if (l->n == l->cap) {
        l->rc = TC_ERR_INVALID;
        fprintf(stderr, "synth: more than %lld tensors\n", (long long)l->cap);
        return;
    }
    uint32_t type = pick_type(l->ftype, role, layer, l->n_layers, ne0);
    if (l->ftype == FTYPE_MXFP4_MOE && ne2 > 1) type = TT_MXFP4; // llama.cpp's MXFP4_MOE: expert matrices
    int64_t ne[3] = {ne0, ne1, ne2};
    uint32_t n_dims = ne2 > 1 ? 3 : ne1 > 1 || (role != ROLE_NORM && role != ROLE_VEC && role != ROLE_NEG) ? 2 : 1;
    int fill = role == ROLE_NORM ? SYNTH_FILL_ONES : role == ROLE_NEG ? SYNTH_FILL_NEG : SYNTH_FILL_GAUSS;
    l->ti[l->n] = (synth_tinfo){type, ne0, ne1 * ne2, fill, l->sd > 0 ? l->sd : SYNTH_SD,
                                l->norm_w > 0 ? l->norm_w : 1.0f, l->fast};
    l->rc = gguf_writer_add_tensor(l->w, name, type, n_dims, ne, NULL, tt_row_size(type, ne0) * (uint64_t)(ne1 * ne2));
    if (l->rc) fprintf(stderr, "synth: cannot add tensor %s (type %s, ne %lld x %lld)\n", name, tt_name(type),
                       (long long)ne0, (long long)ne1);
    l->n++;
}

static void add(tensor_list *l, const char *name, synth_role role, int layer, int64_t ne0, int64_t ne1) {
    add3(l, name, role, layer, ne0, ne1, 1);
}

// The layer tensors of a mixture-of-experts shape beyond the attention ones: q/k norms, the router, the
// experts' 3-D tensors.
// q and k norms of q_len and k_len weights (a head's, or all heads' for OLMo 2)
static void add_qk_norms(tensor_list *l, int i, int q_len, int k_len) {
    char name[96];
    static const char *const norms[] = {"blk.%d.attn_q_norm.weight", "blk.%d.attn_k_norm.weight"};
    for (int k = 0; k < 2; k++) snprintf(name, sizeof name, norms[k], i), add(l, name, ROLE_NORM, i, k ? k_len : q_len, 1);
}

static void add_moe_layer(tensor_list *l, const synth_shape *sh, int i, int head_dim) {
    char name[96];
    if (sh->qk_norm) add_qk_norms(l, i, head_dim, head_dim);
    snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.weight", i);
    add(l, name, ROLE_ROUTER, i, sh->dim, sh->n_expert);
    snprintf(name, sizeof name, "blk.%d.ffn_gate_exps.weight", i);
    add3(l, name, ROLE_OTHER, i, sh->dim, sh->expert_ffn, sh->n_expert);
    snprintf(name, sizeof name, "blk.%d.ffn_down_exps.weight", i);
    add3(l, name, ROLE_FFN_DOWN, i, sh->expert_ffn, sh->dim, sh->n_expert);
    snprintf(name, sizeof name, "blk.%d.ffn_up_exps.weight", i);
    add3(l, name, ROLE_OTHER, i, sh->dim, sh->expert_ffn, sh->n_expert);
}

// gpt-oss's layer (llama.cpp's tensor names and shapes): q/k/v/o with biases, a sink logit per query head, the
// pre-FFN norm under the name post_attention_norm, the router and the experts' 3-D tensors, each with a bias.
static void add_gptoss_layer(tensor_list *l, const synth_shape *sh, int i, int head_dim) {
    const int64_t d = sh->dim, q = (int64_t)sh->n_heads * head_dim, kv = (int64_t)sh->n_kv_heads * head_dim;
    const int64_t ne = sh->n_expert, ff = sh->expert_ffn;
    const struct {
        const char *fmt;
        synth_role role;
        int64_t ne0, ne1, ne2;
        float sd; // 0: SYNTH_SD
    } t[] = {
        {"blk.%d.attn_norm.weight", ROLE_NORM, d, 1, 1, 0},
        {"blk.%d.post_attention_norm.weight", ROLE_NORM, d, 1, 1, 0},
        {"blk.%d.attn_q.weight", ROLE_OTHER, d, q, 1, 0},
        {"blk.%d.attn_k.weight", ROLE_OTHER, d, kv, 1, 0},
        {"blk.%d.attn_v.weight", ROLE_ATTN_V, d, kv, 1, 0},
        {"blk.%d.attn_output.weight", ROLE_OTHER, q, d, 1, 0},
        {"blk.%d.attn_q.bias", ROLE_VEC, q, 1, 1, 0},
        {"blk.%d.attn_k.bias", ROLE_VEC, kv, 1, 1, 0},
        {"blk.%d.attn_v.bias", ROLE_VEC, kv, 1, 1, 0},
        {"blk.%d.attn_output.bias", ROLE_VEC, d, 1, 1, 0},
        {"blk.%d.attn_sinks.weight", ROLE_VEC, sh->n_heads, 1, 1, 1.0f}, // logits of the scores' size
        {"blk.%d.ffn_gate_inp.weight", ROLE_ROUTER, d, ne, 1, 0},
        {"blk.%d.ffn_gate_inp.bias", ROLE_VEC, ne, 1, 1, 0},
        {"blk.%d.ffn_gate_exps.weight", ROLE_OTHER, d, ff, ne, 0},
        {"blk.%d.ffn_gate_exps.bias", ROLE_VEC, ff, ne, 1, 0},
        {"blk.%d.ffn_down_exps.weight", ROLE_FFN_DOWN, ff, d, ne, 0},
        {"blk.%d.ffn_down_exps.bias", ROLE_VEC, d, ne, 1, 0},
        {"blk.%d.ffn_up_exps.weight", ROLE_OTHER, d, ff, ne, 0},
        {"blk.%d.ffn_up_exps.bias", ROLE_VEC, ff, ne, 1, 0},
    };
    char name[96];
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        snprintf(name, sizeof name, t[k].fmt, i);
        l->sd = t[k].sd;
        add3(l, name, t[k].role, i, t[k].ne0, t[k].ne1, t[k].ne2);
    }
    l->sd = 0.0f;
}

// Qwen3.5's layer (llama.cpp's names and shapes): attn_norm, post_attention_norm (the pre-FFN norm) and the FFN
// on every layer; a recurrent layer has the qkv projection (q and k of ssm_groups heads, v of ssm_vheads heads),
// the output gate z, the causal conv1d (F32, (conv, channels)), dt bias, the decay ssm_a (negative), the beta and
// alpha projections, the gated RMSNorm of a head and the output projection; an attention layer has q with its
// per-head gate ((q, gate) per head: 2·q_dim rows), k, v, the output and per-head q/k norms. Qwen3-Next has beta
// and alpha in one ssm_ba matrix and, with sh->ssm_in (older converters), q, k, v and z in one ssm_in matrix.
static void add_qwen35_layer(tensor_list *l, const synth_shape *sh, int i, int head_dim) {
    const int64_t d = sh->dim, q = (int64_t)sh->n_heads * head_dim, kv = (int64_t)sh->n_kv_heads * head_dim;
    const int64_t kd = (int64_t)sh->ssm_state * sh->ssm_groups, vd = (int64_t)sh->ssm_state * sh->ssm_vheads;
    const int64_t hv = sh->ssm_vheads;
    const int rec = (i + 1) % sh->full_attn != 0, att = !rec, next = !strcmp(sh->arch, "qwen3next");
    const struct {
        const char *fmt;
        synth_role role;
        int64_t ne0, ne1;
        float sd; // 0: SYNTH_SD
        int on;   // the layer has it
    } t[] = {
        {"blk.%d.attn_norm.weight", ROLE_NORM, d, 1, 0, 1},
        {"blk.%d.post_attention_norm.weight", ROLE_NORM, d, 1, 0, 1},
        {"blk.%d.attn_qkv.weight", ROLE_OTHER, d, 2 * kd + vd, 0, rec && !sh->ssm_in},
        {"blk.%d.attn_gate.weight", ROLE_OTHER, d, vd, 0, rec && !sh->ssm_in},
        {"blk.%d.ssm_in.weight", ROLE_OTHER, d, 2 * kd + 2 * vd, 0, rec && sh->ssm_in}, // [q, k, v × r, z × r] ...
        {"blk.%d.ssm_conv1d.weight", ROLE_VEC, sh->ssm_conv, 2 * kd + vd, 0.5f, rec}, // outputs of ~x's size
        {"blk.%d.ssm_dt.bias", ROLE_VEC, hv, 1, 1.0f, rec},
        {"blk.%d.ssm_a", ROLE_NEG, hv, 1, 1.0f, rec},
        {"blk.%d.ssm_beta.weight", ROLE_OTHER, d, hv, 0.1f, rec && !next},
        {"blk.%d.ssm_alpha.weight", ROLE_OTHER, d, hv, 0.1f, rec && !next},
        {"blk.%d.ssm_ba.weight", ROLE_OTHER, d, 2 * hv, 0.1f, rec && next}, // [beta × r, alpha × r] ...
        {"blk.%d.ssm_norm.weight", ROLE_NORM, sh->ssm_state, 1, 0, rec},
        {"blk.%d.ssm_out.weight", ROLE_OTHER, vd, d, 0, rec},
        {"blk.%d.attn_q.weight", ROLE_OTHER, d, 2 * q, 0, att},
        {"blk.%d.attn_k.weight", ROLE_OTHER, d, kv, 0, att},
        {"blk.%d.attn_v.weight", ROLE_ATTN_V, d, kv, 0, att},
        {"blk.%d.attn_output.weight", ROLE_OTHER, q, d, 0, att},
        {"blk.%d.attn_q_norm.weight", ROLE_NORM, head_dim, 1, 0, att},
        {"blk.%d.attn_k_norm.weight", ROLE_NORM, head_dim, 1, 0, att},
        // (Qwen3.5 MoE, Qwen3-Next: the experts instead, add_moe_layer)
        {"blk.%d.ffn_gate.weight", ROLE_OTHER, d, sh->ffn, 0, !sh->n_expert},
        {"blk.%d.ffn_down.weight", ROLE_FFN_DOWN, sh->ffn, d, 0, !sh->n_expert},
        {"blk.%d.ffn_up.weight", ROLE_OTHER, d, sh->ffn, 0, !sh->n_expert},
    };
    char name[96];
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        if (!t[k].on) continue;
        snprintf(name, sizeof name, t[k].fmt, i);
        l->sd = t[k].sd;
        add(l, name, t[k].role, i, t[k].ne0, t[k].ne1);
    }
    l->sd = 0.0f;
}

// The layers written whole by their own function (Qwen3.5, gpt-oss) and the MoE tensors (none for the others).
static void add_own_layer(tensor_list *l, const synth_shape *sh, int i, int head_dim, int gptoss) {
    if (sh->ssm_state) {
        add_qwen35_layer(l, sh, i, head_dim);
        if (sh->n_expert) add_moe_layer(l, sh, i, head_dim); // (its shared expert: add_extra_layer)
    } else if (gptoss) add_gptoss_layer(l, sh, i, head_dim);
    else if (sh->n_expert) add_moe_layer(l, sh, i, head_dim);
}

// The architecture's tensors beyond llama's block: q/k/v biases, q/k norms of dense shapes, Gemma's post norms,
// Qwen2-MoE's shared expert.
static void add_extra_layer(tensor_list *l, const synth_shape *sh, int i, int head_dim) {
    char name[96];
    int kv_dim = head_dim * sh->n_kv_heads;
    if (sh->qkv_bias) {
        static const char *const b[] = {"blk.%d.attn_q.bias", "blk.%d.attn_k.bias", "blk.%d.attn_v.bias"};
        for (int k = 0; k < 3; k++)
            snprintf(name, sizeof name, b[k], i), add(l, name, ROLE_VEC, i, k ? kv_dim : sh->dim, 1);
    }
    if (sh->qk_norm && !sh->n_expert) // OLMo 2: over all heads
        add_qk_norms(l, i, sh->post_only ? head_dim * sh->n_heads : head_dim, sh->post_only ? kv_dim : head_dim);
    if (sh->post_norms) {
        l->norm_w = sh->post_norm_w;
        snprintf(name, sizeof name, "blk.%d.post_attention_norm.weight", i), add(l, name, ROLE_NORM, i, sh->dim, 1);
        snprintf(name, sizeof name, "blk.%d.post_ffw_norm.weight", i), add(l, name, ROLE_NORM, i, sh->dim, 1);
        l->norm_w = 0.0f;
    }
    if (sh->shexp_ffn) {
        snprintf(name, sizeof name, "blk.%d.ffn_gate_inp_shexp.weight", i), add(l, name, ROLE_VEC, i, sh->dim, 1);
        snprintf(name, sizeof name, "blk.%d.ffn_gate_shexp.weight", i);
        add(l, name, ROLE_OTHER, i, sh->dim, sh->shexp_ffn);
        snprintf(name, sizeof name, "blk.%d.ffn_down_shexp.weight", i);
        add(l, name, ROLE_FFN_DOWN, i, sh->shexp_ffn, sh->dim);
        snprintf(name, sizeof name, "blk.%d.ffn_up_shexp.weight", i);
        add(l, name, ROLE_OTHER, i, sh->dim, sh->shexp_ffn);
    }
}

// The architecture's hyper-parameters, "<arch>.*", under the names llama.cpp's converter writes.
static int set_arch_meta(gguf_writer *w, const synth_shape *sh, const char *arch) {
    char key[96];
    int e = 0, head_dim = synth_shape_head_dim(sh);
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, arch), key)
    e |= gguf_writer_set_u32(w, KEY("context_length"), (uint32_t)sh->ctx);
    e |= gguf_writer_set_u32(w, KEY("embedding_length"), (uint32_t)sh->dim);
    e |= gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)sh->n_layers);
    e |= gguf_writer_set_u32(w, KEY("feed_forward_length"), (uint32_t)sh->ffn);
    e |= gguf_writer_set_u32(w, KEY("rope.dimension_count"), (uint32_t)(sh->rope_dim ? sh->rope_dim : head_dim));
    e |= gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)sh->n_heads);
    e |= gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)sh->n_kv_heads);
    e |= gguf_writer_set_u32(w, KEY("vocab_size"), (uint32_t)sh->vocab);
    if (sh->head_dim) {
        e |= gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)head_dim);
        e |= gguf_writer_set_u32(w, KEY("attention.value_length"), (uint32_t)head_dim);
    }
    if (sh->n_expert) {
        e |= gguf_writer_set_u32(w, KEY("expert_count"), (uint32_t)sh->n_expert);
        e |= gguf_writer_set_u32(w, KEY("expert_used_count"), (uint32_t)sh->n_used);
        e |= gguf_writer_set_u32(w, KEY("expert_feed_forward_length"), (uint32_t)sh->expert_ffn);
    }
    e |= gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), sh->eps);
    e |= gguf_writer_set_f32(w, KEY("rope.freq_base"), sh->rope_base);
    if (sh->swa) e |= gguf_writer_set_u32(w, KEY("attention.sliding_window"), (uint32_t)sh->swa);
    if (sh->rope_base_swa > 0) e |= gguf_writer_set_f32(w, KEY("rope.freq_base_swa"), sh->rope_base_swa);
    if (sh->attn_softcap > 0) e |= gguf_writer_set_f32(w, KEY("attn_logit_softcapping"), sh->attn_softcap);
    if (sh->final_softcap > 0) e |= gguf_writer_set_f32(w, KEY("final_logit_softcapping"), sh->final_softcap);
    if (sh->shexp_ffn) e |= gguf_writer_set_u32(w, KEY("expert_shared_feed_forward_length"), (uint32_t)sh->shexp_ffn);
    if (sh->embedding_scale > 0) e |= gguf_writer_set_f32(w, KEY("embedding_scale"), sh->embedding_scale);
    if (sh->attention_scale > 0) e |= gguf_writer_set_f32(w, KEY("attention.scale"), sh->attention_scale);
    if (sh->residual_scale > 0) e |= gguf_writer_set_f32(w, KEY("residual_scale"), sh->residual_scale);
    if (sh->logit_scale > 0) e |= gguf_writer_set_f32(w, KEY("logit_scale"), sh->logit_scale);
    if (sh->yarn_factor > 0) {
        e |= gguf_writer_set_str(w, KEY("rope.scaling.type"), "yarn");
        e |= gguf_writer_set_f32(w, KEY("rope.scaling.factor"), sh->yarn_factor);
        e |= gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), (uint32_t)sh->yarn_ctx);
    }
    if (sh->ssm_state) {
        // IMRoPE's sections (pairs per t/h/w/e): t, h and w share the text position, so they cover every rotated
        // pair and the model rotates like NeoX over rope_dim dims (Qwen3-Next: NeoX, no sections)
        const int pairs = (sh->rope_dim ? sh->rope_dim : head_dim) / 2;
        const int32_t sections[4] = {(pairs + 2) / 3, (pairs + 1) / 3, pairs / 3, 0};
        e |= gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)head_dim);
        e |= gguf_writer_set_u32(w, KEY("attention.value_length"), (uint32_t)head_dim);
        if (strcmp(arch, "qwen3next"))
            e |= gguf_writer_set_arr(w, KEY("rope.dimension_sections"), GGUF_TYPE_INT32, sections, 4);
        e |= gguf_writer_set_u32(w, KEY("ssm.conv_kernel"), (uint32_t)sh->ssm_conv);
        e |= gguf_writer_set_u32(w, KEY("ssm.state_size"), (uint32_t)sh->ssm_state);
        e |= gguf_writer_set_u32(w, KEY("ssm.group_count"), (uint32_t)sh->ssm_groups);
        e |= gguf_writer_set_u32(w, KEY("ssm.time_step_rank"), (uint32_t)sh->ssm_vheads);
        e |= gguf_writer_set_u32(w, KEY("ssm.inner_size"), (uint32_t)(sh->ssm_state * sh->ssm_vheads));
        e |= gguf_writer_set_u32(w, KEY("full_attention_interval"), (uint32_t)sh->full_attn);
        if (!strcmp(arch, "qwen3next")) { // and the layer list, as recent converters write it from layer_types
            uint8_t rec[256] = {0};
            for (int i = 0; i < sh->n_layers && i < 256; i++) rec[i] = (i + 1) % sh->full_attn != 0;
            e |= gguf_writer_set_arr(w, KEY("attention.recurrent_layers"), GGUF_TYPE_BOOL, rec,
                                     (uint64_t)(sh->n_layers < 256 ? sh->n_layers : 256));
        }
    }
#undef KEY
    return e;
}

// The synthetic SPM vocabulary's metadata (tokens, scores and types of shape_vocab; <s>, </s>, <unk>).
static int set_vocab_meta(gguf_writer *w, const synth_shape *sh, char **vocab, const float *scores,
                          const int32_t *types) {
    int e = 0;
    e |= gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    e |= gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)vocab, (uint64_t)sh->vocab);
    e |= gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, (uint64_t)sh->vocab);
    e |= gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, (uint64_t)sh->vocab);
    e |= gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    e |= gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    e |= gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    e |= gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", 1);
    e |= gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", 0);
    return e;
}

static double file_mib(const char *path) {
    FILE *f = fopen(path, "rb");
    long size = -1;
    if (f) fseek(f, 0, SEEK_END), size = ftell(f), fclose(f);
    return size / 1048576.0;
}

int cli_synth(int argc, char **argv) {
    const char *out = NULL, *shape_name = "tinyllama", *type_name = "q8_0";
    uint64_t seed = 42;
    int n_threads = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && v) out = v, i++;
        else if (!strcmp(a, "--shape") && v) shape_name = v, i++;
        else if (!strcmp(a, "--type") && v) type_name = v, i++;
        else if (!strcmp(a, "--seed") && v) seed = strtoull(v, NULL, 0), i++;
        else if (!strcmp(a, "--threads") && v) n_threads = atoi(v), i++;
        else {
            usage();
            return !strcmp(a, "-h") || !strcmp(a, "--help") ? 0 : 2;
        }
    }
    const synth_shape *sh = NULL;
    const synth_qtype *qt = NULL;
    sh = synth_shape_find(shape_name);
    for (size_t i = 0; i < sizeof qtypes / sizeof qtypes[0]; i++)
        if (!strcmp(qtypes[i].name, type_name)) qt = &qtypes[i];
    if (!out || !sh || !qt || n_threads < 1 || n_threads > 16) {
        if (out && !sh) fprintf(stderr, "synth: unknown shape '%s'\n", shape_name);
        if (out && !qt) fprintf(stderr, "synth: unknown type '%s'\n", type_name);
        usage();
        return 2;
    }

    int rc = 1;
    gguf_writer *w = gguf_writer_new();
    float *scores = malloc((size_t)sh->vocab * sizeof *scores);
    int32_t *types = malloc((size_t)sh->vocab * sizeof *types);
    char **vocab = scores && types ? shape_vocab(sh, scores, types) : NULL;
    // a layer: at most 6 attention, 3 biases, 2 q/k norms, 2 post norms, 4 FFN, 4 shared-expert tensors
    int64_t max_tensors = 3 + 21 * (int64_t)sh->n_layers;
    tensor_list l = {w, calloc((size_t)max_tensors, sizeof(synth_tinfo)), 0, max_tensors, qt->ftype, sh->n_layers,
                     0, 0.0f, 0.0f, sh->fast};
    const char *arch = sh->arch ? sh->arch : "llama";
    const int gptoss = !strcmp(arch, "gpt-oss");
    if (!w || !vocab || !l.ti) {
        fprintf(stderr, "synth: out of memory\n");
        goto done;
    }
    char name[96];
    int head_dim = synth_shape_head_dim(sh), kv_dim = head_dim * sh->n_kv_heads, q_dim = head_dim * sh->n_heads;
    snprintf(name, sizeof name, "synthetic-%s-%s", sh->name, qt->name);
    int e = 0;
    e |= gguf_writer_set_str(w, "general.architecture", arch);
    e |= gguf_writer_set_str(w, "general.name", name);
    e |= gguf_writer_set_u32(w, "general.file_type", (uint32_t)qt->ftype);
    e |= gguf_writer_set_u32(w, "general.quantization_version", 2);
    e |= set_arch_meta(w, sh, arch);
    e |= set_vocab_meta(w, sh, vocab, scores, types);
    if (e) {
        fprintf(stderr, "synth: cannot set metadata (out of memory)\n");
        goto done;
    }

    l.sd = sh->tied ? sh->out_sd / 3 : 0.0f; // a tied output head is the embedding: peaked through it
    add(&l, "token_embd.weight", ROLE_EMBD, 0, sh->dim, sh->vocab);
    l.sd = 0.0f;
    for (int i = 0; i < sh->n_layers; i++) {
        static const struct {
            const char *fmt;
            synth_role role;
            int rows; // 0 q_dim, 1 kv_dim, 2 ffn, 3 one (norm), 4 ffn_down (ne0 = ffn, rows = dim),
                      // 5 attn_output (ne0 = q_dim, rows = dim)
        } lt[] = {
            {"blk.%d.attn_norm.weight", ROLE_NORM, 3},      {"blk.%d.attn_q.weight", ROLE_OTHER, 0},
            {"blk.%d.attn_k.weight", ROLE_OTHER, 1},        {"blk.%d.attn_v.weight", ROLE_ATTN_V, 1},
            {"blk.%d.attn_output.weight", ROLE_OTHER, 5},   {"blk.%d.ffn_norm.weight", ROLE_NORM, 3},
            {"blk.%d.ffn_gate.weight", ROLE_OTHER, 2},      {"blk.%d.ffn_down.weight", ROLE_FFN_DOWN, 4},
            {"blk.%d.ffn_up.weight", ROLE_OTHER, 2},
        };
        const size_t n_lt = gptoss || sh->ssm_state ? 0 : sh->n_expert ? 6 : sizeof lt / sizeof lt[0]; // MoE: experts
        add_own_layer(&l, sh, i, head_dim, gptoss);
        for (size_t k = 0; k < n_lt; k++) {
            // fused (Phi-3): attn_qkv instead of q, k, v; ffn_up of gate and up instead of gate, up
            if (sh->fused && (k == 2 || k == 3 || k == 6)) continue;
            if (sh->post_only && (k == 0 || k == 5)) continue; // (OLMo 2: no attn_norm, ffn_norm)
            snprintf(name, sizeof name, lt[k].fmt, i);
            int64_t ne0 = lt[k].rows == 4 ? sh->ffn : lt[k].rows == 5 ? q_dim : sh->dim;
            int64_t ne1 = (int64_t[]){q_dim, kv_dim, sh->ffn, 1, sh->dim, sh->dim}[lt[k].rows];
            if (sh->fused && k == 1) snprintf(name, sizeof name, "blk.%d.attn_qkv.weight", i), ne1 += 2 * kv_dim;
            if (sh->fused && k == 8) ne1 *= 2;
            l.norm_w = k == 0 ? sh->attn_norm_w : 0.0f;
            add(&l, name, lt[k].role, i, ne0, ne1);
            l.norm_w = 0.0f;
        }
        add_extra_layer(&l, sh, i, head_dim);
    }
    l.norm_w = sh->out_norm_w;
    add(&l, "output_norm.weight", ROLE_NORM, 0, sh->dim, 1);
    l.norm_w = 0.0f;
    l.sd = sh->out_sd;
    if (!sh->tied) add(&l, "output.weight", ROLE_OUTPUT, 0, sh->dim, sh->vocab);
    if (l.rc) goto done;

    synth_ctx sc = {l.ti, seed, n_threads, l.n, 0, now_s()};
    gguf_writer_set_fill(w, synth_fill, &sc);
    tc_err err = {0};
    if (gguf_writer_write_file(w, out, &err)) {
        fprintf(stderr, "%ssynth: %s\n", isatty(2) ? "\n" : "", err.msg);
        goto done;
    }
    fprintf(stderr, "%ssynth: wrote %s: %s shape, %s, %lld tensors, %.1f MiB in %.1f s\n", isatty(2) ? "\n" : "",
            out, sh->name, qt->name, (long long)l.n, file_mib(out), now_s() - sc.t0);
    rc = 0;
done:
    for (int i = 0; vocab && i < sh->vocab; i++) free(vocab[i]);
    free(vocab);
    free(scores);
    free(types);
    free(l.ti);
    gguf_writer_free(w);
    return rc;
}
