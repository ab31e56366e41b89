#include "loadgen/lg_sse.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

void lg_sse_init(lg_sse *p, lg_sse_cb cb, void *ud) {
    memset(p, 0, sizeof *p);
    p->cb = cb;
    p->ud = ud;
    p->max_len = 16u << 20;
}

void lg_sse_free(lg_sse *p) {
    free(p->line);
    free(p->data);
    p->line = p->data = NULL;
    p->line_len = p->line_cap = p->data_len = p->data_cap = 0;
}

static int grow(char **buf, size_t *cap, size_t need, size_t max, tc_err *err) {
    if (need > max) return tc_err_set(err, TC_ERR_FORMAT, "malformed SSE: line or event longer than %zu bytes", max);
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    char *b = realloc(*buf, c);
    if (!b) return tc_err_set(err, TC_ERR_NOMEM, "SSE parser: out of memory");
    *buf = b;
    *cap = c;
    return 0;
}

static int dispatch(lg_sse *p, tc_err *err) {
    if (!p->has_data) return 0;
    int rc = grow(&p->data, &p->data_cap, p->data_len + 1, p->max_len + 1, err);
    if (rc) return rc;
    p->data[p->data_len] = 0;
    size_t len = p->data_len;
    p->data_len = 0;
    p->has_data = 0;
    return p->cb(p->ud, p->data, len);
}

// One complete line (without its terminator). Fields other than data are ignored; ':' lines are comments.
static int on_line(lg_sse *p, const char *l, size_t n, tc_err *err) {
    if (n == 0) return dispatch(p, err);
    if (l[0] == ':') return 0;
    size_t flen = 0;
    while (flen < n && l[flen] != ':') flen++;
    if (flen != 4 || memcmp(l, "data", 4)) return 0;
    const char *v = flen < n ? l + flen + 1 : l + n;
    size_t vlen = (size_t)(l + n - v);
    if (vlen && v[0] == ' ') v++, vlen--;
    size_t need = p->data_len + (p->has_data ? 1 : 0) + vlen;
    int rc = grow(&p->data, &p->data_cap, need, p->max_len, err);
    if (rc) return rc;
    if (p->has_data) p->data[p->data_len++] = '\n';
    if (vlen) memcpy(p->data + p->data_len, v, vlen); // p->data is still NULL for a first, empty "data" line
    p->data_len += vlen;
    p->has_data = 1;
    return 0;
}

int lg_sse_feed(lg_sse *p, const char *buf, size_t n, tc_err *err) {
    size_t i = 0;
    while (i < n) {
        if (p->skip_lf) {
            p->skip_lf = 0;
            if (buf[i] == '\n') {
                i++;
                continue;
            }
        }
        // Find the end of the line in this buffer.
        size_t j = i;
        while (j < n && buf[j] != '\n' && buf[j] != '\r') j++;
        if (j == n) { // partial line: keep it
            int rc = grow(&p->line, &p->line_cap, p->line_len + (n - i), p->max_len, err);
            if (rc) return rc;
            memcpy(p->line + p->line_len, buf + i, n - i);
            p->line_len += n - i;
            return 0;
        }
        int rc;
        if (p->line_len) { // join with the kept prefix
            rc = grow(&p->line, &p->line_cap, p->line_len + (j - i), p->max_len, err);
            if (rc) return rc;
            memcpy(p->line + p->line_len, buf + i, j - i);
            size_t len = p->line_len + (j - i);
            p->line_len = 0;
            rc = on_line(p, p->line, len, err);
        } else {
            rc = on_line(p, buf + i, j - i, err);
        }
        if (rc) return rc;
        if (buf[j] == '\r') p->skip_lf = 1;
        i = j + 1;
    }
    return 0;
}

int lg_sse_finish(lg_sse *p, tc_err *err) {
    if (p->line_len) {
        size_t len = p->line_len;
        p->line_len = 0;
        int rc = on_line(p, p->line, len, err);
        if (rc) return rc;
    }
    return dispatch(p, err);
}

// --- chunk JSON

void lg_chunk_clear(lg_chunk *c) {
    if (c->json_) json_decref((json_t *)c->json_);
    memset(c, 0, sizeof *c);
}

// A count from the server: an integer, or a real within int64's range (converting one outside it, e.g.
// 1e300, is undefined behaviour); anything else reads as 0.
static int64_t get_int(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    if (json_is_integer(v)) return (int64_t)json_integer_value(v);
    double d = json_is_real(v) ? json_real_value(v) : 0;
    return d > -9.2e18 && d < 9.2e18 ? (int64_t)d : 0;
}

int lg_chunk_parse(lg_chunk *out, const char *data, size_t len, int chat, tc_err *err) {
    memset(out, 0, sizeof *out);
    while (len && (data[len - 1] == ' ' || data[len - 1] == '\n')) len--;
    if (len == 6 && !memcmp(data, "[DONE]", 6)) {
        out->done = 1;
        return 0;
    }
    json_error_t je;
    json_t *root = json_loadb(data, len, 0, &je);
    if (!root) return tc_err_set(err, TC_ERR_FORMAT, "malformed SSE data: %s: '%.80s'", je.text, data);
    out->json_ = root;
    if (!json_is_object(root)) {
        lg_chunk_clear(out);
        return tc_err_set(err, TC_ERR_FORMAT, "malformed SSE data: not a JSON object: '%.80s'", data);
    }
    json_t *e = json_object_get(root, "error");
    if (e && !json_is_null(e)) {
        json_t *m = json_is_object(e) ? json_object_get(e, "message") : e;
        tc_err_set(err, TC_ERR_FORMAT, "server error in stream: %s", json_is_string(m) ? json_string_value(m) : "(no message)");
        lg_chunk_clear(out);
        return TC_ERR_FORMAT;
    }
    json_t *id = json_object_get(root, "id");
    if (json_is_string(id)) out->id = json_string_value(id);
    json_t *model = json_object_get(root, "model");
    if (json_is_string(model)) out->model = json_string_value(model);
    json_t *ch = json_object_get(root, "choices");
    json_t *c0 = json_is_array(ch) ? json_array_get(ch, 0) : NULL;
    if (json_is_object(c0)) {
        json_t *s = NULL;
        if (chat) {
            json_t *d = json_object_get(c0, "delta");
            if (json_is_object(d)) {
                s = json_object_get(d, "content");
                if (!json_is_string(s) || json_string_length(s) == 0) s = json_object_get(d, "reasoning_content");
            }
        } else {
            s = json_object_get(c0, "text");
        }
        if (json_is_string(s) && json_string_length(s) > 0) {
            out->content = json_string_value(s);
            out->content_len = json_string_length(s);
        }
    }
    json_t *u = json_object_get(root, "usage");
    if (json_is_object(u)) {
        out->has_usage = 1;
        out->prompt_tokens = get_int(u, "prompt_tokens");
        out->completion_tokens = get_int(u, "completion_tokens");
        json_t *d = json_object_get(u, "completion_tokens_details");
        json_t *a = json_object_get(d, "accepted_prediction_tokens"), *rj = json_object_get(d, "rejected_prediction_tokens");
        if (json_is_integer(a) && json_is_integer(rj)) {
            out->has_pred = 1;
            out->accepted_pred = json_integer_value(a), out->rejected_pred = json_integer_value(rj);
        }
    }
    return 0;
}
