// The grammar of a forced tool call (see tool_fmt.h): the output is exactly one call (one or more with
// parallel) of the allowed functions in the format's framing, each call's arguments following the
// function's JSON schema ({} when it has none), then the end.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strbuf.h"
#include "grammar/gram_schema.h"
#include "server/tool_fmt.h"

// Appends " <literal of s>" to b (nothing for an empty s: GBNF has no empty literal to spell).
static void lit(tc_strbuf *b, const char *s) {
    size_t n = strlen(s);
    if (!n) return;
    char small[512];
    size_t need = gram_literal(s, n, small, sizeof small);
    char *buf = need < sizeof small ? small : malloc(need + 1);
    if (!buf) {
        b->oom = 1;
        return;
    }
    if (buf != small) gram_literal(s, n, buf, need + 1);
    tc_strbuf_str(b, " ");
    tc_strbuf_str(b, buf);
    if (buf != small) free(buf);
}

static int is_required(const json_t *params, const char *key) {
    size_t i;
    const json_t *r;
    json_array_foreach(json_object_get(params, "required"), i,
                       r) if (json_is_string(r) && !strcmp(json_string_value(r), key)) return 1;
    return 0;
}

// XML shapes: one kv_open key kv_mid value kv_close (Qwen3-Coder: <parameter=key>\nvalue\n</parameter>\n) per
// property, in the schema's order, the optional ones may be left out; string values are raw text (no '<'),
// others JSON per their schema.
static int xml_params(gram_schema *g, const tool_xml *x, const tool_gram_fn *fn, tc_strbuf *b, tc_err *err) {
    const char *key;
    const json_t *prop;
    json_object_foreach((json_t *)json_object_get(fn->params, "properties"), key, prop) {
        char value[48] = "xml-text", line[320];
        const char *type = json_string_value(json_object_get(prop, "type"));
        const json_t *mn = json_object_get(prop, "minLength"), *mx = json_object_get(prop, "maxLength");
        if (type && !strcmp(type, "string") && json_is_integer(mx)) // the length bounds, in bytes
            snprintf(value, sizeof value, "[^<]{%lld,%lld}",
                     json_is_integer(mn) ? (long long)json_integer_value(mn) : 0LL,
                     (long long)json_integer_value(mx));
        else if (!type || strcmp(type, "string")) {
            int rc = gram_schema_add(g, prop, fn->params, value, sizeof value, err);
            if (rc) return rc;
        }
        int req = is_required(fn->params, key);
        if (!req) tc_strbuf_str(b, " (");
        snprintf(line, sizeof line, "%s%s%s", x->kv_open, key, x->kv_mid);
        lit(b, line);
        tc_strbuf_str(b, " ");
        tc_strbuf_str(b, value);
        lit(b, x->kv_close);
        if (!req) tc_strbuf_str(b, " )?");
    }
    return 0;
}

// LFM2: name(key=value, …) with JSON values (Python reads them alike, true/false/null aside, which the
// parser takes too): the required properties in the schema's order, then each optional one or not; without
// required properties, any of them, comma-separated.
static int py_params(gram_schema *g, const tool_gram_fn *fn, tc_strbuf *b, tc_err *err) {
    const json_t *props = json_object_get(fn->params, "properties"), *prop;
    const char *key;
    int n_req = 0, any = 0;
    json_object_foreach((json_t *)props, key, prop) n_req += is_required(fn->params, key);
    tc_strbuf alt = {0};
    json_object_foreach((json_t *)props, key, prop) {
        char value[48], kv[300];
        int rc = gram_schema_add(g, prop, fn->params, value, sizeof value, err);
        if (rc) {
            free(alt.p);
            return rc;
        }
        int req = is_required(fn->params, key);
        snprintf(kv, sizeof kv, "%s=", key);
        if (!n_req) { // (k1=v | k2=v …), joined below
            if (alt.n) tc_strbuf_str(&alt, " |");
            lit(&alt, kv);
            tc_strbuf_str(&alt, " ");
            tc_strbuf_str(&alt, value);
            continue;
        }
        if (!req) tc_strbuf_str(b, " (");
        if (any || !req) lit(b, ", ");
        lit(b, kv);
        tc_strbuf_str(b, " ");
        tc_strbuf_str(b, value);
        if (!req) tc_strbuf_str(b, " )?");
        any |= req;
    }
    if (alt.p) {
        tc_strbuf_str(b, " ( (");
        tc_strbuf_str(b, alt.p);
        tc_strbuf_str(b, " ) (");
        lit(b, ", ");
        tc_strbuf_str(b, " (");
        tc_strbuf_str(b, alt.p);
        tc_strbuf_str(b, " ) )* )?");
    }
    int oom = alt.oom;
    free(alt.p);
    return oom ? TC_ERR_NOMEM : 0;
}

// One call of fn (the rule body), without call_open when the prompt writes it (first call, prompt_opens).
static int call_body(gram_schema *g, const tool_fmt_row *row, const tool_gram_fn *fn, tc_strbuf *b,
                     tc_err *err) {
    char args[32] = "empty-args", head[256];
    if (row->shape != TOOL_SHAPE_XML && row->shape != TOOL_SHAPE_PYTHONIC && fn->params) {
        int rc = gram_schema_add(g, fn->params, NULL, args, sizeof args, err);
        if (rc) return rc;
    }
    switch (row->shape) {
    case TOOL_SHAPE_JSON_TAGGED:
    case TOOL_SHAPE_JSON_LIST:
    case TOOL_SHAPE_JSON_BARE:
        lit(b, row->call_open);
        snprintf(head, sizeof head, "{\"%s\": \"%s\", \"%s\": ", row->name_key, fn->name, row->args_key);
        lit(b, head);
        tc_strbuf_str(b, " ");
        tc_strbuf_str(b, args);
        lit(b, "}");
        lit(b, row->call_close);
        return 0;
    case TOOL_SHAPE_XML:
        snprintf(head, sizeof head, "%s%s%s", row->call_open, fn->name, row->call_mid);
        lit(b, head);
        if (fn->params) {
            int rc = xml_params(g, row->xml, fn, b, err);
            if (rc) return rc;
        }
        lit(b, row->call_close);
        return 0;
    case TOOL_SHAPE_PYTHONIC:
        snprintf(head, sizeof head, "%s%s", fn->name, row->call_mid);
        lit(b, head);
        if (fn->params) {
            int rc = py_params(g, fn, b, err);
            if (rc) return rc;
        }
        lit(b, row->call_close);
        return 0;
    case TOOL_SHAPE_NAMED:
    case TOOL_SHAPE_HARMONY:
        snprintf(head, sizeof head, "%s%s", row->prompt_opens ? "" : row->call_open, fn->name);
        lit(b, head);
        if (row->numbered) tc_strbuf_str(b, " \":\" [0-9]{1,4}"); // Kimi's functions.NAME:INDEX
        lit(b, row->call_mid);
        tc_strbuf_str(b, " ");
        tc_strbuf_str(b, args);
        lit(b, row->call_close);
        return 0;
    }
    return 0;
}

// root: open, the first call, (sep call)* with parallel, close. A list shape puts the calls in one array.
static void root_body(const tool_fmt_row *row, int parallel, tc_strbuf *b) {
    int list = row->shape == TOOL_SHAPE_JSON_LIST;
    if (row->shape != TOOL_SHAPE_JSON_BARE) lit(b, row->open); // Llama 3's <|python_tag|> is optional
    if (list) lit(b, "[");
    tc_strbuf_str(b, " tool-call");
    if (parallel) {
        char sep[96];
        snprintf(sep, sizeof sep, "%s%s", row->sep, row->prompt_opens ? row->call_open : "");
        tc_strbuf_str(b, " (");
        lit(b, sep);
        tc_strbuf_str(b, " tool-call)*");
    }
    if (list) lit(b, "]");
    lit(b, row->close);
}

int tool_fmt_grammar(tool_fmt f, const tool_gram_fn *fns, int n, int parallel, char **gbnf, tc_err *err) {
    *gbnf = NULL;
    const tool_fmt_row *row = tool_fmt_get(f);
    gram_schema *g = gram_schema_new(0);
    tc_strbuf alts = {0}, body = {0};
    int rc = g ? gram_schema_add_rule(g, "empty-args", "\"{\" space \"}\" space") : TC_ERR_NOMEM;
    if (!rc) rc = gram_schema_add_rule(g, "xml-text", "[^<]*");
    for (int i = 0; i < n && !rc; i++) {
        char name[32];
        snprintf(name, sizeof name, "call%d", i);
        body.n = 0;
        if (body.p) body.p[0] = 0;
        rc = call_body(g, row, &fns[i], &body, err);
        if (!rc && (body.oom || !body.p)) rc = TC_ERR_NOMEM;
        if (!rc) rc = gram_schema_add_rule(g, name, body.p);
        if (alts.n) tc_strbuf_str(&alts, " | ");
        tc_strbuf_str(&alts, name);
    }
    if (!rc && !alts.oom && alts.p) rc = gram_schema_add_rule(g, "tool-call", alts.p);
    tc_strbuf root = {0};
    root_body(row, parallel, &root);
    if (!rc && (root.oom || alts.oom || !alts.p)) rc = TC_ERR_NOMEM;
    if (!rc) rc = gram_schema_add_rule(g, "root", root.p);
    const char *text = rc ? NULL : gram_schema_text(g);
    if (!rc && !(text && (*gbnf = strdup(text)))) rc = TC_ERR_NOMEM;
    if (rc == TC_ERR_NOMEM) tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    free(alts.p), free(body.p), free(root.p);
    gram_schema_free(g);
    return rc;
}
