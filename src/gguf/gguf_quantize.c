// tachyon quantize: the per-tensor type plan (plain types and llama.cpp's Q4_K_M mix) and the streaming
// re-quantization through the GGUF writer (one tensor in memory at a time, one f32 row of scratch).
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf_quantize.h"
#include "tensor/ttype.h"

// --- targets

// general.file_type values are llama.cpp's LLAMA_FTYPE_MOSTLY_*; a plain k-quant is its "_S" flavour.
static const gq_target targets[] = {
    {GQ_PLAIN, TT_F32, 0, "F32"},    {GQ_PLAIN, TT_F16, 1, "F16"},     {GQ_PLAIN, TT_BF16, 32, "BF16"},
    {GQ_PLAIN, TT_Q8_0, 7, "Q8_0"},  {GQ_PLAIN, TT_Q4_0, 2, "Q4_0"},   {GQ_PLAIN, TT_Q4_1, 3, "Q4_1"},
    {GQ_PLAIN, TT_Q5_0, 8, "Q5_0"},  {GQ_PLAIN, TT_Q5_1, 9, "Q5_1"},   {GQ_PLAIN, TT_Q4_K, 14, "Q4_K"},
    {GQ_PLAIN, TT_Q5_K, 16, "Q5_K"}, {GQ_PLAIN, TT_Q6_K, 18, "Q6_K"},  {GQ_Q4_K_M, TT_Q4_K, 15, "Q4_K_M"},
    // every matrix MXFP4; 38 is llama.cpp's MXFP4_MOE, the file type of MXFP4 (gpt-oss) files
    {GQ_PLAIN, TT_MXFP4, 38, "MXFP4"},
};
#define N_TARGETS (sizeof targets / sizeof targets[0])

int gq_target_parse(const char *s, gq_target *out) {
    for (size_t i = 0; i < N_TARGETS; i++)
        if (!strcasecmp(s, targets[i].name)) {
            *out = targets[i];
            return 0;
        }
    return TC_ERR_INVALID;
}

const char *gq_target_names(void) { return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q4_K_M, MXFP4"; }

// --- the type plan

static int name_is(const gguf_str *s, const char *lit) { return s->len == strlen(lit) && !memcmp(s->ptr, lit, s->len); }

static int name_ends(const gguf_str *s, const char *suffix) {
    size_t n = strlen(suffix);
    return s->len >= n && !memcmp(s->ptr + s->len - n, suffix, n);
}

// Block index of a "blk.N.*" tensor, or -1.
static int layer_of(const gguf_str *s) {
    if (s->len < 5 || memcmp(s->ptr, "blk.", 4)) return -1;
    int n = 0;
    uint64_t i = 4;
    for (; i < s->len && s->ptr[i] >= '0' && s->ptr[i] <= '9' && n < 1000000; i++) n = n * 10 + (s->ptr[i] - '0');
    return i > 4 && i < s->len && s->ptr[i] == '.' ? n : -1;
}

// llama.cpp spends more bits on the first and last eighth of the layers and on every third layer between
// (its use_more_bits): those are where quantization error hurts perplexity most.
static int more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// Tensors that stay as they are even when 2-D: llama.cpp leaves the MoE router and position tables alone.
static int is_weight(const gguf_tensor *ti) {
    const gguf_str *s = &ti->name;
    if (ti->n_dims < 2 || !name_ends(s, "weight")) return 0;
    return !name_ends(s, "ffn_gate_inp.weight") && !name_is(s, "position_embd.weight") &&
           !name_is(s, "token_types.weight");
}

// The Q4_K_M rule (llama.cpp's llama_tensor_get_type for LLAMA_FTYPE_MOSTLY_Q4_K_M, restated): the output
// head (or the token embedding when the head is tied to it) is Q6_K; attn_v and ffn_down are Q6_K in the
// layers more_bits() picks; a fused attn_qkv is Q5_K; everything else is Q4_K.
static uint32_t q4_k_m_type(const gguf_ctx *src, const gguf_tensor *ti, int n_layer) {
    const gguf_str *s = &ti->name;
    int tied = gguf_find_tensor(src, "output.weight") == NULL;
    if (name_is(s, "output.weight") || (tied && name_is(s, "token_embd.weight"))) return TT_Q6_K;
    int il = layer_of(s);
    if (il >= 0 && (name_ends(s, ".attn_v.weight") || name_ends(s, ".ffn_down.weight")))
        return more_bits(il, n_layer) ? TT_Q6_K : TT_Q4_K;
    if (name_ends(s, ".attn_qkv.weight")) return TT_Q5_K;
    return TT_Q4_K;
}

uint32_t gq_tensor_type(const gq_target *t, const gguf_ctx *src, const gguf_tensor *ti, int n_layer) {
    if (!is_weight(ti)) return ti->type;
    uint32_t type = t->mix == GQ_Q4_K_M ? q4_k_m_type(src, ti, n_layer) : t->type;
    // A row length the block does not divide: the fallbacks llama.cpp uses (same bits per weight or more).
    if (ti->ne[0] % tt_get(type)->block_size) {
        switch (type) {
        case TT_Q4_K: type = TT_Q5_0; break;
        case TT_Q5_K: type = TT_Q5_1; break;
        case TT_Q6_K: type = TT_Q8_0; break;
        default: break;
        }
        if (ti->ne[0] % tt_get(type)->block_size) type = TT_F16;
    }
    return type;
}

// --- streaming conversion

typedef struct gq_job {
    const gguf_ctx *src;
    const gguf_tensor **tensors; // (n) borrowed from src, in output order
    uint32_t *types;             // (n) output type of each
    int64_t n;
    float *row;   // (max row length) scratch
    FILE *log;
} gq_job;

static int gq_fill(void *user, int64_t index, const char *name, void *dst, uint64_t size) {
    gq_job *j = user;
    const gguf_tensor *ti = j->tensors[index];
    uint32_t to = j->types[index];
    (void)name;
    if (j->log) fprintf(j->log, "[%4lld/%4lld] %-32.*s %-6s -> %-6s\n", (long long)index + 1, (long long)j->n,
                        (int)ti->name.len, ti->name.ptr, tt_name(ti->type), tt_name(to));
    if (to == ti->type) {
        if (size != ti->size) return TC_ERR_FORMAT;
        memcpy(dst, ti->data, (size_t)size);
        return 0;
    }
    const tt_traits *in = tt_get(ti->type), *out = tt_get(to);
    if (!in || !out || !in->to_float || !out->from_float) return TC_ERR_UNSUPPORTED;
    int64_t ne0 = ti->ne[0], rows = ti->ne[1] * ti->ne[2] * ti->ne[3];
    size_t in_row = tt_row_size(ti->type, ne0), out_row = tt_row_size(to, ne0);
    if ((uint64_t)rows * out_row != size) return TC_ERR_FORMAT;
    for (int64_t r = 0; r < rows; r++) {
        in->to_float((const uint8_t *)ti->data + (size_t)r * in_row, j->row, ne0);
        out->from_float(j->row, (uint8_t *)dst + (size_t)r * out_row, ne0);
    }
    return 0;
}

// Metadata: everything copied, then the keys this conversion changes.
static int gq_metadata(gguf_writer *w, const gguf_ctx *src, const gq_params *p, int n_layer, tc_err *err) {
    for (int64_t i = 0; i < gguf_n_kv(src); i++)
        if (gguf_writer_copy_kv(w, src, i))
            return tc_err_set(err, TC_ERR_FORMAT, "cannot copy metadata key %lld",
                              (long long)i);
    int rc = gguf_writer_set_u32(w, "general.file_type", p->target.file_type);
    if (!rc && p->target.type != TT_F32 && p->target.type != TT_F16 && p->target.type != TT_BF16)
        rc = gguf_writer_set_u32(w, "general.quantization_version", 2);
    if (!rc && p->keep_layers >= 0) {
        gguf_str arch;
        char key[160];
        if (gguf_get_str(src, "general.architecture", &arch) || arch.len > 100)
            return tc_err_set(err, TC_ERR_FORMAT, "--keep-layers needs general.architecture");
        snprintf(key, sizeof key, "%.*s.block_count", (int)arch.len, arch.ptr);
        rc = gguf_writer_set_u32(w, key, (uint32_t)n_layer);
    }
    return rc ? tc_err_set(err, rc, "out of memory for metadata") : 0;
}

int gq_quantize_file(const char *in_path, const char *out_path, const gq_params *p, tc_err *err) {
    struct stat st;
    if (!p->overwrite && stat(out_path, &st) == 0)
        return tc_err_set(err, TC_ERR_INVALID, "'%s' exists (use --force to replace it)", out_path);
    gguf_ctx *src = NULL;
    gguf_writer *w = NULL;
    gq_job j = {0};
    char *tmp = NULL;
    int rc = gguf_open(in_path, &src, err);
    if (rc) return rc;
    // Layers in the input: the architecture's block_count, else the highest blk.N + 1.
    int n_layer_in = 0;
    for (int64_t i = 0; i < gguf_n_tensors(src); i++) {
        int il = layer_of(&gguf_tensor_at(src, i)->name);
        if (il + 1 > n_layer_in) n_layer_in = il + 1;
    }
    if (p->keep_layers == 0 || p->keep_layers > n_layer_in) {
        rc = tc_err_set(err, TC_ERR_INVALID, "--keep-layers %d is not in [1, %d] (the model has %d layers)",
                        p->keep_layers, n_layer_in, n_layer_in);
        goto done;
    }
    int n_layer = p->keep_layers > 0 ? p->keep_layers : n_layer_in;
    j.src = src, j.log = p->log;
    j.tensors = calloc((size_t)gguf_n_tensors(src) + 1, sizeof *j.tensors);
    j.types = calloc((size_t)gguf_n_tensors(src) + 1, sizeof *j.types);
    w = gguf_writer_new();
    size_t tmp_len = strlen(out_path) + 32;
    tmp = malloc(tmp_len);
    if (!j.tensors || !j.types || !w || !tmp) {
        rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    snprintf(tmp, tmp_len, "%s.tmp.%ld", out_path, (long)getpid());
    int64_t max_row = 1;
    uint64_t bytes_in = 0, bytes_out = 0;
    for (int64_t i = 0; i < gguf_n_tensors(src); i++) {
        const gguf_tensor *ti = gguf_tensor_at(src, i);
        if (layer_of(&ti->name) >= n_layer) continue;
        uint32_t to = gq_tensor_type(&p->target, src, ti, n_layer);
        char name[256];
        if (ti->name.len >= sizeof name || memchr(ti->name.ptr, 0, ti->name.len)) {
            rc = tc_err_set(err, TC_ERR_FORMAT, "tensor %lld has an unusable name", (long long)i);
            goto done;
        }
        memcpy(name, ti->name.ptr, ti->name.len);
        name[ti->name.len] = 0;
        if (to != ti->type && !tt_get(ti->type)->to_float) {
            rc = tc_err_set(err, TC_ERR_UNSUPPORTED, "tensor '%s' has type %s, which cannot be dequantized",
                            name, tt_name(ti->type));
            goto done;
        }
        uint64_t size = (uint64_t)(ti->ne[1] * ti->ne[2] * ti->ne[3]) * tt_row_size(to, ti->ne[0]);
        if ((rc = gguf_writer_add_tensor(w, name, to, ti->n_dims, ti->ne, NULL, size))) {
            rc = tc_err_set(err, rc, "cannot add tensor '%s' (%s)", name, tt_name(to));
            goto done;
        }
        j.tensors[j.n] = ti, j.types[j.n++] = to;
        if (ti->ne[0] > max_row) max_row = ti->ne[0];
        bytes_in += ti->size, bytes_out += size;
    }
    if (!(j.row = malloc(sizeof(float) * (size_t)max_row))) {
        rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = gq_metadata(w, src, p, n_layer, err))) goto done;
    gguf_writer_set_fill(w, gq_fill, &j);
    if ((rc = gguf_writer_write_file(w, tmp, err))) goto done;
    if (rename(tmp, out_path)) {
        rc = tc_err_set(err, TC_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, out_path, strerror(errno));
        unlink(tmp);
        goto done;
    }
    if (p->log)
        fprintf(p->log, "quantize: %s -> %s (%s): %lld tensors, %d layers, %.2f MiB -> %.2f MiB\n", in_path,
                out_path, p->target.name, (long long)j.n, n_layer, bytes_in / 1048576.0, bytes_out / 1048576.0);
done:
    free(tmp);
    free(j.row);
    free(j.tensors);
    free(j.types);
    gguf_writer_free(w);
    gguf_close(src);
    return rc;
}
