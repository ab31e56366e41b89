// The two tool-call formats that are not JSON-framed (see tool_fmt.h): Qwen3-Coder's XML parameters and
// gpt-oss's harmony channels.
#include <stdlib.h>
#include <string.h>

#include "server/tool_parse_impl.h"

// --- Qwen3-Coder ---------------------------------------------------------------------------------------

// A parameter value as the model wrote it (one newline trimmed at each end, as the template writes them):
// a string where the tool's schema says string (or the text is not JSON), else the JSON value (vLLM's
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

// <function=name>\n(<parameter=key>\nvalue\n</parameter>\n)*</function>: the arguments object, *next past
// </function>; NULL when the text is cut before </function> or malformed.
static json_t *xml_function(const tp_ctx *c, const char *p, const char *end, char *name, size_t cap,
                            const char **next) {
    static const char FN[] = "<function=", PAR[] = "<parameter=", PEND[] = "</parameter>",
                      FEND[] = "</function>";
    p = tp_skip_ws(p, end);
    if ((size_t)(end - p) < sizeof FN - 1 || memcmp(p, FN, sizeof FN - 1)) return NULL;
    p += sizeof FN - 1;
    const char *gt = memchr(p, '>', (size_t)(end - p));
    if (!gt || (size_t)(gt - p) >= cap) return NULL;
    memcpy(name, p, (size_t)(gt - p));
    name[gt - p] = 0;
    json_t *args = json_object();
    for (p = gt + 1;;) {
        p = tp_skip_ws(p, end);
        if ((size_t)(end - p) >= sizeof FEND - 1 && !memcmp(p, FEND, sizeof FEND - 1)) {
            *next = p + sizeof FEND - 1;
            return args;
        }
        if ((size_t)(end - p) < sizeof PAR - 1 || memcmp(p, PAR, sizeof PAR - 1)) break;
        p += sizeof PAR - 1;
        const char *kgt = memchr(p, '>', (size_t)(end - p));
        const char *ve = kgt ? tp_find(kgt + 1, end, PEND) : NULL;
        if (!ve || kgt - p > 256) break;
        char key[257];
        memcpy(key, p, (size_t)(kgt - p));
        key[kgt - p] = 0;
        json_t *v = xml_value(c, name, key, kgt + 1, (size_t)(ve - kgt - 1));
        if (!v || json_object_set_new(args, key, v)) break;
        p = ve + sizeof PEND - 1;
    }
    json_decref(args);
    return NULL;
}

void tp_parse_xml(tp_ctx *c, const char *p, const char *end) {
    static const char OPEN[] = "<tool_call>", CLOSE[] = "</tool_call>";
    while (p < end) {
        const char *o = tp_find(p, end, OPEN);
        if (!o) break;
        tc_strbuf_add(&c->content, p, (size_t)(o - p));
        char name[80];
        const char *next;
        json_t *args = xml_function(c, o + sizeof OPEN - 1, end, name, sizeof name, &next);
        if (!args) return; // cut inside the call (or not a call): dropped
        if (tp_add_call(c, name, strlen(name), args)) return;
        p = tp_skip_ws(next, end);
        size_t r = (size_t)(end - p);
        if (r >= sizeof CLOSE - 1 && !memcmp(p, CLOSE, sizeof CLOSE - 1))
            p += sizeof CLOSE - 1;
        else if (!memcmp(p, CLOSE, r))
            p = end; // cut inside </tool_call>
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
