// tok_encode: BOS, then the text split on special-token matches (leftmost, longest first), each raw-text
// fragment handed to the SPM or BPE encoder. Control and unknown tokens are matched only with
// TOK_ENC_PARSE_SPECIAL and never across a guarded (plain-text) range; user-defined tokens are always
// matched (as llama.cpp and HF tokenizers do).
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

// Special token starting at text[i], or -1. A control or unknown token must end by ctl_end (the start of
// the next guarded range; i itself is outside guarded ranges when ctl_end > i).
static int32_t match_special(const tok_vocab *v, const char *text, size_t len, size_t i, size_t ctl_end) {
    uint8_t b = (uint8_t)text[i];
    for (uint32_t k = v->special_start[b]; k < v->special_start[b + 1]; k++) {
        int32_t id = v->special_ids[k];
        uint8_t t = v->type[id];
        uint32_t n = v->text_len[id];
        if ((t == TOK_TYPE_CONTROL || t == TOK_TYPE_UNKNOWN) && (ctl_end <= i || n > ctl_end - i)) continue;
        if (n <= len - i && !memcmp(text + i, tok_text(v, id), n)) return id;
    }
    return -1;
}

static int encode_raw(const tok_vocab *v, const char *text, size_t len, int after_special, tok_out *o, tc_err *err) {
    if (v->kind == TOK_KIND_SPM) return tok_spm_encode(v, text, len, v->add_space_prefix && after_special, o, err);
    return tok_bpe_encode(v, text, len, o, err);
}

int tok_encode_guarded(const tok_vocab *v, const char *text, size_t len, int flags, const tok_range *plain,
                       int n_plain, int32_t **ids, int *n_ids, tc_err *err) {
    *ids = NULL, *n_ids = 0;
    if (!text && len) return tc_err_set(err, TC_ERR_INVALID, "NULL text");
    if (n_plain < 0 || (n_plain > 0 && !plain)) return tc_err_set(err, TC_ERR_INVALID, "bad plain-text ranges");
    for (int r = 0; r < n_plain; r++)
        if (plain[r].off > len || plain[r].len > len - plain[r].off ||
            (r > 0 && plain[r].off < plain[r - 1].off + plain[r - 1].len))
            return tc_err_set(err, TC_ERR_INVALID, "plain-text range %d out of order or out of bounds", r);
    if (len > (size_t)INT32_MAX / 4) return tc_err_set(err, TC_ERR_INVALID, "text too long (%zu bytes)", len);
    tok_out o = {0};
    int rc = 0;
    if ((flags & TOK_ENC_ADD_BOS) && v->bos >= 0) rc = tok_out_push(&o, v->bos);
    int parse = (flags & TOK_ENC_PARSE_SPECIAL) != 0;
    int r = 0; // the first guarded range that does not end at or before i
    int after_special = 1; // SPM: a fragment at the start or after a special token gets the space prefix
    size_t start = 0, i = 0;
    while (i < len && !rc) {
        if (v->special_start[(uint8_t)text[i]] == v->special_start[(uint8_t)text[i] + 1]) {
            i++;
            continue;
        }
        while (r < n_plain && plain[r].off + plain[r].len <= i) r++;
        // control tokens may end where the next guarded range starts (none inside one, none at all unparsed)
        size_t ctl_end = !parse ? 0 : r == n_plain ? len : plain[r].off <= i ? 0 : plain[r].off;
        int32_t id = match_special(v, text, len, i, ctl_end);
        if (id < 0) {
            i++;
            continue;
        }
        if (i > start) {
            rc = encode_raw(v, text + start, i - start, after_special, &o, err);
            if (rc) break;
        }
        rc = tok_out_push(&o, id);
        after_special = 1;
        i += v->text_len[id];
        start = i;
    }
    if (!rc && start < len) rc = encode_raw(v, text + start, len - start, after_special, &o, err);
    if (!rc && o.n > (size_t)INT32_MAX) rc = tc_err_set(err, TC_ERR_INVALID, "too many tokens");
    if (rc) {
        free(o.ids);
        if (rc == TC_ERR_NOMEM) tc_err_set(err, rc, "out of memory while tokenizing");
        return rc;
    }
    if (!o.ids) o.ids = malloc(sizeof *o.ids); // a valid pointer even for zero tokens
    if (!o.ids) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    *ids = o.ids;
    *n_ids = (int)o.n;
    return 0;
}

int tok_encode(const tok_vocab *v, const char *text, size_t len, int flags, int32_t **ids, int *n_ids, tc_err *err) {
    return tok_encode_guarded(v, text, len, flags, NULL, 0, ids, n_ids, err);
}
