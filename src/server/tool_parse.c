// Tool calls out of generated text (see tool_fmt.h): the entry point, the reasoning split, and the parsers
// of the JSON shapes (tagged objects, a list after a marker, bare objects, name-then-arguments markup).
// A call whose markup starts but does not finish (the output was cut) is dropped with the rest of the text,
// so call syntax never reaches content; complete calls before it are kept.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/reasoning.h"
#include "server/tool_parse_impl.h"

#define MARK_CAP 96

// A call object {name_key|"name": …, args_key|"arguments"|"parameters": {…}}; -1 when it is not one.
static int add_call_object(tp_ctx *c, const json_t *o) {
    const char *nk = c->row->name_key ? c->row->name_key : "name",
               *ak = c->row->args_key ? c->row->args_key : "arguments";
    const json_t *name = json_object_get(o, nk), *args = json_object_get(o, ak);
    if (!name) name = json_object_get(o, "name");
    if (!args) args = json_object_get(o, "arguments");
    if (!args) args = json_object_get(o, "parameters");
    if (!json_is_string(name) || !args) return -1;
    json_t *a =
        json_is_string(args) ? json_loads(json_string_value(args), 0, NULL) : json_incref((json_t *)args);
    if (!a) return -1;
    return tp_add_call(c, json_string_value(name), json_string_length(name), a);
}

// One JSON value at p (trailing text allowed); *next is set past it. NULL when it does not parse.
static json_t *json_at(const char *p, const char *end, const char **next) {
    json_error_t je;
    json_t *j = json_loadb(p, (size_t)(end - p), JSON_DISABLE_EOF_CHECK | JSON_DECODE_ANY, &je);
    if (j) *next = p + je.position;
    return j;
}

// --- the JSON shapes -----------------------------------------------------------------------------------

// Hermes: call_open {…} call_close, any number of times, text around them.
static void parse_tagged(tp_ctx *c, const char *p, const char *end) {
    char ob[MARK_CAP], cb[MARK_CAP];
    const char *open = tp_trim_marker(c->row->call_open, ob, sizeof ob),
               *close = tp_trim_marker(c->row->call_close, cb, sizeof cb);
    while (p < end) {
        const char *o = tp_find(p, end, open);
        if (!o) break;
        tc_strbuf_add(&c->content, p, (size_t)(o - p));
        const char *in = o + strlen(open), *cl = tp_find(in, end, close), *in_end = cl ? cl : end;
        json_t *j = json_loadb(in, (size_t)(in_end - in), JSON_DECODE_ANY, NULL);
        int ok = j && add_call_object(c, j) == 0;
        json_decref(j);
        if (!ok && !cl) return;                                       // cut inside the call: dropped
        if (!ok) tc_strbuf_add(&c->content, o, (size_t)(in_end - o)); // not a call after all: text
        p = cl ? cl + strlen(close) : end;
    }
    if (p < end) tc_strbuf_add(&c->content, p, (size_t)(end - p));
}

// Mistral, Granite, Command R: open [ {…}, {…} ] close. Elements are read one by one so the complete ones
// before a cut are kept.
static void parse_list(tp_ctx *c, const char *p, const char *end) {
    char ob[MARK_CAP], cb[MARK_CAP];
    const char *open = tp_trim_marker(c->row->open, ob, sizeof ob),
               *close = tp_trim_marker(c->row->close, cb, sizeof cb);
    // a list at the very start counts without its marker: a vocabulary whose marker is a control token may
    // leave it out of the detokenized text
    const char *s0 = tp_skip_ws(p, end);
    int bare = !tp_find(p, end, open) && end - s0 > 1 && s0[0] == '[' && tp_skip_ws(s0 + 1, end) < end &&
               *tp_skip_ws(s0 + 1, end) == '{';
    while (p < end) {
        const char *o = bare ? s0 : tp_find(p, end, open);
        if (!o) break;
        tc_strbuf_add(&c->content, p, (size_t)(o - p));
        p = tp_skip_ws(bare ? o : o + strlen(open), end);
        bare = 0;
        int list = p < end && *p == '[';
        if (list) p++;
        for (;;) {
            p = tp_skip_ws(p, end);
            const char *next;
            json_t *j = p < end ? json_at(p, end, &next) : NULL;
            if (!j) return; // cut (or not a call list): the rest is dropped
            int bad = add_call_object(c, j);
            json_decref(j);
            if (bad) return;
            p = tp_skip_ws(next, end);
            if (!list) break;
            if (p < end && *p == ',') {
                p++;
                continue;
            }
            if (p < end && *p == ']') p++;
            break;
        }
        p = tp_skip_ws(p, end);
        if (*close && (size_t)(end - p) >= strlen(close) && !memcmp(p, close, strlen(close)))
            p += strlen(close);
    }
    if (p < end) tc_strbuf_add(&c->content, p, (size_t)(end - p));
}

// Whether a bare call object starts at q: {"name" (a cut call is still call markup, not content).
static int looks_like_call(const char *q, const char *end) {
    q = tp_skip_ws(q, end);
    if (q >= end || *q != '{') return 0;
    q = tp_skip_ws(q + 1, end);
    size_t n = (size_t)(end - q);
    return !memcmp(q, "\"name\"", n < 6 ? n : 6); // also a cut inside {"name"
}

// Llama 3: [text <|python_tag|>] {…} [; {…}] …; output that does not start a call object is all content.
static void parse_bare(tp_ctx *c, const char *p, const char *end) {
    const char *tag = tp_find(p, end, c->row->open);
    const char *q = tag ? tag + strlen(c->row->open) : p, *next;
    if (!tag && !looks_like_call(q, end)) {
        tc_strbuf_add(&c->content, p, (size_t)(end - p));
        return;
    }
    if (tag) tc_strbuf_add(&c->content, p, (size_t)(tag - p));
    while (q < end) {
        q = tp_skip_ws(q, end);
        if (q < end && *q == ';') q = tp_skip_ws(q + 1, end);
        if (q >= end) break;
        json_t *j = json_at(q, end, &next);
        if (!j) return; // cut: dropped
        int bad = add_call_object(c, j);
        json_decref(j);
        if (bad) return;
        q = next;
    }
}

// Removes the whole-block markers (DeepSeek's <｜tool▁calls▁begin｜> …) from text going to content.
static void add_text(tp_ctx *c, const char *p, const char *end) {
    const char *mk[2] = {c->row->open, c->row->close};
    while (p < end) {
        const char *best = NULL;
        size_t bl = 0;
        for (int k = 0; k < 2; k++) {
            const char *f = *mk[k] ? tp_find(p, end, mk[k]) : NULL;
            if (f && (!best || f < best)) best = f, bl = strlen(mk[k]);
        }
        if (!best) break;
        tc_strbuf_add(&c->content, p, (size_t)(best - p));
        p = best + bl;
    }
    if (p < end) tc_strbuf_add(&c->content, p, (size_t)(end - p));
}

// Kimi's NAME:INDEX (and functions.NAME:INDEX where the output left call_open's "functions." to the name):
// the name alone.
static const char *index_cut(const char *name, const char *ne) {
    const char *colon = ne;
    while (colon > name && colon[-1] >= '0' && colon[-1] <= '9')
        colon--;
    return colon < ne && colon > name && colon[-1] == ':' ? colon - 1 : ne;
}

// DeepSeek, Functionary, Mistral [ARGS], Kimi: call_open name call_mid {…} call_close. Functionary v3.2's
// prompt ends with its call_open (so the text starts with a name), and its name "all" introduces text.
static void parse_named(tp_ctx *c, const char *p, const char *end) {
    char ob[MARK_CAP], mb[MARK_CAP], cb[MARK_CAP];
    const char *open = tp_trim_marker(c->row->call_open, ob, sizeof ob),
               *mid = tp_trim_marker(c->row->call_mid, mb, sizeof mb);
    const char *close = tp_trim_marker(c->row->call_close, cb, sizeof cb);
    int at_call = c->row->prompt_opens;
    while (p < end) {
        const char *o = at_call ? p : tp_find(p, end, open);
        if (!o) break;
        if (!at_call) add_text(c, p, o);
        const char *name = at_call ? p : o + strlen(open);
        int first = at_call;
        at_call = 0;
        const char *m = *mid ? tp_find(name, end, mid) : tp_find(name, end, "\n");
        const char *ne = m ? m : end;
        while (ne > name && tp_is_ws(ne[-1]))
            ne--;
        if (c->row->numbered) ne = index_cut(name, ne);
        name = tp_skip_ws(name, ne);
        if (first && !tp_valid_name(name, (size_t)(ne - name))) { // the prompt's marker, then plain text
            add_text(c, p, end);
            return;
        }
        if (!m) return; // cut inside the name: dropped
        const char *a = tp_skip_ws(m + (*mid ? strlen(mid) : 1), end);
        if (c->row->prompt_opens && ne - name == 3 && !memcmp(name, "all", 3)) { // Functionary's text
            const char *nx = tp_find(a, end, open);
            tc_strbuf_add(&c->content, a, (size_t)((nx ? nx : end) - a));
            p = nx ? nx : end;
            continue;
        }
        const char *next;
        json_t *j = a < end ? json_at(a, end, &next) : NULL;
        if (!j) return; // cut inside the arguments: dropped
        if (tp_add_call(c, name, (size_t)(ne - name), j)) {
            tc_strbuf_add(&c->content, o, (size_t)(next - o)); // not a call: text
            p = next;
            continue;
        }
        p = tp_skip_ws(next, end);
        if (*close && (size_t)(end - p) >= strlen(close) && !memcmp(p, close, strlen(close)))
            p += strlen(close);
    }
    if (p < end) add_text(c, p, end);
}

// --- the entry point -----------------------------------------------------------------------------------

// A cut inside a multi-byte character of a marker reaches the text as one or more U+FFFD (the decoder's
// stand-in for the unfinished bytes): the tail "<marker's first k bytes><U+FFFD...>" where the marker's byte
// k starts a multi-byte character is that marker cut short. Its length, or 0.
static size_t cut_marker_tail(const char *p, size_t n, const char *m, size_t ml) {
    static const char fffd[] = "\xEF\xBF\xBD";
    size_t end = n;
    while (end >= 3 && !memcmp(p + end - 3, fffd, 3) && n - end < 9)
        end -= 3;
    if (end == n) return 0;
    for (size_t k = ml ? ml - 1 : 0; k >= 1; k--)
        if (k <= end && ((unsigned char)m[k] & 0xC0) == 0xC0 && !memcmp(p + end - k, m, k))
            return n - end + k;
    return 0;
}

// Drops the start of a call marker that ends the text (the output was cut inside "<tool_ca"): two bytes at
// least, so text that merely ends with "<" or "[" stays, or the whole text.
static void drop_partial_marker(tp_ctx *c) {
    const char *mk[] = {c->row->open, c->row->call_open, c->row->call_close, c->row->close, c->row->sep};
    tc_strbuf *b = &c->content;
    for (size_t i = 0; i < sizeof mk / sizeof *mk && b->p; i++) {
        char buf[MARK_CAP];
        const char *m = tp_trim_marker(mk[i], buf, sizeof buf);
        size_t ml = strlen(m);
        size_t cut = cut_marker_tail(b->p, b->n, m, ml);
        if (cut) {
            b->n -= cut;
            b->p[b->n] = 0;
            continue;
        }
        size_t k = ml ? ml - 1 : 0;
        if (k > b->n) k = b->n;
        for (; k >= 1; k--)
            if ((k >= 2 || tp_skip_ws(b->p, b->p + b->n - k) == b->p + b->n - k) &&
                !memcmp(b->p + b->n - k, m, k)) {
                b->n -= k;
                b->p[b->n] = 0;
                break;
            }
    }
}

static char *trimmed(const tc_strbuf *b) {
    if (!b->p) return NULL;
    const char *p = tp_skip_ws(b->p, b->p + b->n), *e = b->p + b->n;
    while (e > p && tp_is_ws(e[-1]))
        e--;
    return e > p ? strndup(p, (size_t)(e - p)) : NULL;
}

int tool_fmt_parse(tool_fmt f, const char *text, size_t len, const tool_parse_opts *o, tool_parsed *out) {
    memset(out, 0, sizeof *out);
    tp_ctx c = {.row = tool_fmt_get(f), .o = o, .calls = json_array()};
    tc_strbuf body = {0};
    if (o->reasoning && c.row->shape != TOOL_SHAPE_HARMONY) {
        rsn_split rs;
        // an open <think> that never closes is not reasoning here: a forced call follows the prompt directly
        rsn_init(&rs, o->in_think && tp_find(text, text + len, "</think>"));
        rsn_feed(&rs, text, len, 1, &c.reasoning, &body);
        text = body.p ? body.p : "", len = body.n;
    }
    const char *p = text, *end = text + len;
    switch (c.row->shape) {
    case TOOL_SHAPE_JSON_TAGGED:
        parse_tagged(&c, p, end);
        break;
    case TOOL_SHAPE_JSON_LIST:
        parse_list(&c, p, end);
        break;
    case TOOL_SHAPE_JSON_BARE:
        parse_bare(&c, p, end);
        break;
    case TOOL_SHAPE_NAMED:
        parse_named(&c, p, end);
        break;
    case TOOL_SHAPE_XML:
        tp_parse_xml(&c, p, end);
        break;
    case TOOL_SHAPE_HARMONY:
        tp_parse_harmony(&c, p, end);
        break;
    case TOOL_SHAPE_PYTHONIC:
        tp_parse_pythonic(&c, p, end);
        break;
    }
    drop_partial_marker(&c);
    int oom = c.oom || !c.calls || c.content.oom || c.reasoning.oom || body.oom;
    if (!oom) {
        out->content = trimmed(&c.content);
        out->reasoning = trimmed(&c.reasoning);
        if (json_array_size(c.calls)) out->calls = json_incref(c.calls);
    }
    json_decref(c.calls);
    free(c.content.p), free(c.reasoning.p), free(body.p);
    return oom ? TC_ERR_NOMEM : 0;
}

void tool_parsed_free(tool_parsed *p) {
    json_decref(p->calls);
    free(p->content);
    free(p->reasoning);
    memset(p, 0, sizeof *p);
}
