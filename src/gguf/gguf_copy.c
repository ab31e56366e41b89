// Copying metadata from a parsed file into a writer verbatim (tachyon quantize keeps every key of its input:
// architecture, hyper-parameters, tokenizer, chat template). The reader has already validated every length,
// so the value's serialized bytes can be located from the parsed entry and copied in one piece.
#include <string.h>

#include "gguf/gguf_internal.h"

static const size_t scalar_size[GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

int gguf_writer_copy_kv(gguf_writer *w, const gguf_ctx *src, int64_t i) {
    if (i < 0 || i >= src->n_kv) return TC_ERR_INVALID;
    const gguf_kv *kv = &src->kv[i];
    char key[512];
    if (kv->key.len >= sizeof key || memchr(kv->key.ptr, 0, kv->key.len)) return TC_ERR_INVALID;
    memcpy(key, kv->key.ptr, kv->key.len);
    key[kv->key.len] = 0;
    if (!strcmp(key, "general.alignment")) return 0;
    switch (kv->type) {
    case GGUF_TYPE_STRING: {
        // The string's bytes follow its u64 length prefix in the file.
        const uint8_t *p = (const uint8_t *)kv->str.ptr - 8;
        return gguf_writer_set_raw(w, key, kv->type, p, 8 + (size_t)kv->str.len);
    }
    case GGUF_TYPE_ARRAY: {
        // arr_data points just past the 12-byte (element type, count) header; the elements are contiguous.
        const uint8_t *start = kv->arr_data - 12, *end;
        if (kv->arr_type == GGUF_TYPE_STRING) {
            if (kv->arr_n == 0) end = kv->arr_data;
            else {
                gguf_str last = gguf_arr_str(src, i, kv->arr_n - 1);
                end = (const uint8_t *)last.ptr + last.len;
            }
        } else {
            end = kv->arr_data + kv->arr_n * scalar_size[kv->arr_type];
        }
        return gguf_writer_set_raw(w, key, kv->type, start, (size_t)(end - start));
    }
    default: {
        // Scalars were widened into the union; narrow them back (little-endian: the low bytes come first).
        uint8_t b[8];
        if (kv->type == GGUF_TYPE_FLOAT32) {
            float f = (float)kv->v.f;
            memcpy(b, &f, 4);
        } else if (kv->type == GGUF_TYPE_FLOAT64) {
            memcpy(b, &kv->v.f, 8);
        } else if (kv->type == GGUF_TYPE_INT8 || kv->type == GGUF_TYPE_INT16 || kv->type == GGUF_TYPE_INT32 ||
                   kv->type == GGUF_TYPE_INT64) {
            memcpy(b, &kv->v.i, 8);
        } else {
            memcpy(b, &kv->v.u, 8);
        }
        return gguf_writer_set_raw(w, key, kv->type, b, scalar_size[kv->type]);
    }
    }
}
