// The tool-call formats that are not JSON-framed (see tool_fmt.h): parameters as XML elements (Qwen3-Coder,
// Seed-OSS, MiniMax M2, GLM 4.5, spelled by each row's tool_xml) and gpt-oss's harmony channels.
#include <stdlib.h>
#include <string.h>

#include "server/tool_parse_impl.h"

#define MARK_CAP 96

// --- XML parameters: Qwen3-Coder, Seed-OSS, MiniMax M2, GLM 4.5 ------------------------------------------

// Matches pat at p, where each whitespace run of pat stands for any whitespace of the text (none included)
// and the text may have whitespace before each piece; whitespace that ends pat is not consumed (it belongs
// to a value, which is trimmed). 1 with *next past the match, 0 when the text differs, -1 when the text
// ends inside the match (a cut).
static int seq(const char *p, const char *end, const char *pat, const char **next) {
    while (*pat) {
        while (tp_is_ws(*pat))
            pat++;
        if (!*pat) break;
        p = tp_skip_ws(p, end);
        size_t n = 0, r = (size_t)(end - p);
        while (pat[n] && !tp_is_ws(pat[n]))
            n++;
        if (r < n) return memcmp(p, pat, r) ? 0 : -1;
        if (memcmp(p, pat, n)) return 0;
        p += n, pat += n;
    }
    *next = p;
    return 1;
}

// The first non-blank byte of pat: where a name or key before it ends (0 when pat is blank: a name then
// ends at whitespace or '<').
static char stop_of(const char *pat) {
    while (tp_is_ws(*pat))
        pat++;
    return *pat;
}

static const char *until(const char *p, const char *end, char stop) {
    while (p < end && (stop ? *p != stop : !tp_is_ws(*p) && *p != '<'))
        p++;
    return p;
}

// A parameter value as the model wrote it (one newline trimmed at each end, as templates write them): a
// string where the tool's schema says string (or the text is not JSON), else the JSON value (vLLM's
// qwen3_coder parser converts by schema type likewise).
static json_t *xml_value(const tp_ctx *c, const char *fn, const char *key, const char *v, size_t n) {
    if (n && v[0] == '\n') v++, n--;
    if (n && v[n - 1] == '\n') n--;
    const json_t *sch = tp_param_schema(c, fn, key);
    const char *type = json_string_value(json_object_get(sch, "type"));
    if (!type || strcmp(type, "string")) {
        json_t *j = json_loadb(v, n, JSON_DECODE_ANY, NULL);
        if (j) return j;
    }
    return json_stringn(v, n);
}

// Whether the text at p starts with the first piece of close ("</function>" of "</function>\n</tool_call>"):
// the call is complete even if the output ends before the rest.
static int closed(const char *p, const char *end, const char *close) {
    p = tp_skip_ws(p, end);
    while (tp_is_ws(*close))
        close++;
    size_t n = 0;
    while (close[n] && !tp_is_ws(close[n]))
        n++;
    return n && (size_t)(end - p) >= n && !memcmp(p, close, n);
}

// call_open NAME call_mid (kv_open KEY kv_mid VALUE kv_close)* call_close at p: appends the call, *next past
// it. 1, 0 when no call starts at p, -1 when the text is cut inside the call or it is malformed.
static int xml_call(tp_ctx *c, const char *p, const char *end, const char **next) {
    const tool_fmt_row *row = c->row;
    const tool_xml *x = row->xml;
    char name[80], key[257], vb[MARK_CAP];
    int r = seq(p, end, row->call_open, &p);
    if (r <= 0) return r;
    const char *ne = until(p, end, stop_of(row->call_mid));
    if (ne >= end || (size_t)(ne - p) >= sizeof name) return -1;
    memcpy(name, p, (size_t)(ne - p));
    name[ne - p] = 0;
    if (seq(ne, end, row->call_mid, &p) != 1) return -1;
    const char *vmark = tp_trim_marker(x->kv_close, vb, sizeof vb); // "</parameter>": where a value ends
    json_t *args = json_object();
    for (;;) {
        if ((r = seq(p, end, row->call_close, next)) == 1) break;
        if (r < 0 && closed(p, end, row->call_close)) { // cut inside </tool_call> after </function>
            *next = end;
            break;
        }
        const char *ke, *ve;
        if (seq(p, end, x->kv_open, &p) != 1 || (ke = until(p, end, stop_of(x->kv_mid))) >= end ||
            (size_t)(ke - p) >= sizeof key || !(ve = tp_find(ke, end, vmark))) {
            json_decref(args);
            return -1;
        }
        memcpy(key, p, (size_t)(ke - p));
        key[ke - p] = 0;
        const char *v;
        json_t *val = seq(ke, end, x->kv_mid, &v) == 1 ? xml_value(c, name, key, v, (size_t)(ve - v)) : NULL;
        if (!val || json_object_set_new(args, key, val) || seq(ve, end, x->kv_close, &p) != 1) {
            json_decref(args);
            return -1;
        }
    }
    return tp_add_call(c, name, strlen(name), args) ? -1 : 1;
}

// [open] call… [close] blocks among text: a format with an open marker holds all the calls of a block
// (MiniMax), the others one call per call_open (its first piece, "<tool_call>", is what starts a block).
void tp_parse_xml(tp_ctx *c, const char *p, const char *end) {
    const tool_fmt_row *row = c->row;
    char mb[MARK_CAP];
    const char *block = *row->open ? row->open : row->call_open;
    size_t ml = 0;
    block = tp_trim_marker(block, mb, sizeof mb);
    while (block[ml] && !tp_is_ws(block[ml]))
        ml++;
    mb[ml] = 0; // the block's first piece
    while (p < end) {
        const char *o = tp_find(p, end, mb), *q;
        if (!o) break;
        tc_strbuf_add(&c->content, p, (size_t)(o - p));
        if (*row->open && seq(o, end, row->open, &o) != 1) return; // cut inside the marker
        int r, n = 0;
        while ((r = xml_call(c, o, end, &q)) == 1) {
            o = q, n++;
            if (!*row->open) break;
        }
        if (r < 0 || !n) return; // cut inside a call (or not a call): dropped
        if (*row->close && seq(o, end, row->close, &o) != 1) return;
        p = o;
    }
    if (p < end) tc_strbuf_add(&c->content, p, (size_t)(end - p));
}

// --- gpt-oss harmony -----------------------------------------------------------------------------------

// The end of a message body: the first <|end|>, <|call|>, <|return|> or <|start|>, or end.
static const char *body_end(const char *p, const char *end, const char **after) {
    static const char *const STOPS[] = {"<|end|>", "<|call|>", "<|return|>", "<|start|>"};
    const char *best = end;
    size_t bl = 0;
    for (size_t k = 0; k < sizeof STOPS / sizeof *STOPS; k++) {
        const char *f = tp_find(p, best, STOPS[k]);
        if (f && f < best) best = f, bl = strcmp(STOPS[k], "<|start|>") ? strlen(STOPS[k]) : 0;
    }
    *after = best + bl;
    return best;
}

// Messages: [<|start|>assistant][ to=functions.NAME]<|channel|>CHANNEL[ to=functions.NAME][
// <|constrain|>json]
// <|message|>BODY(<|end|>|<|call|>|<|return|>). analysis → reasoning, final and plain commentary → content,
// a recipient functions.NAME → a call with BODY as its arguments.
void tp_parse_harmony(tp_ctx *c, const char *p, const char *end) {
    static const char START[] = "<|start|>assistant", CH[] = "<|channel|>", MSG[] = "<|message|>",
                      TO[] = "to=functions.";
    while (p < end) {
        p = tp_skip_ws(p, end);
        if ((size_t)(end - p) >= sizeof START - 1 && !memcmp(p, START, sizeof START - 1))
            p += sizeof START - 1;
        const char *ch = tp_find(p, end, CH);
        if (!ch) {
            if (p < end && *p != '<') tc_strbuf_add(&c->content, p, (size_t)(end - p)); // not harmony: text
            return;
        }
        const char *msg = tp_find(ch, end, MSG);
        if (!msg) return; // cut inside the header: dropped
        const char *to = tp_find(p, msg, TO), *after;
        const char *body = msg + sizeof MSG - 1, *be = body_end(body, end, &after);
        if (to) {
            const char *n = to + sizeof TO - 1, *ne = n;
            while (ne < msg && *ne != ' ' && *ne != '<')
                ne++;
            json_t *args = json_loadb(body, (size_t)(be - body), 0, NULL);
            if (!args || tp_add_call(c, n, (size_t)(ne - n), args)) return; // cut or malformed: dropped
        } else {
            const char *cn = ch + sizeof CH - 1;
            int analysis = (size_t)(msg - cn) >= 8 && !memcmp(cn, "analysis", 8);
            tc_strbuf_add(analysis ? &c->reasoning : &c->content, body, (size_t)(be - body));
        }
        p = after;
    }
}
