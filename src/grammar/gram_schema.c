// JSON schema → GBNF rules. Each schema node becomes a rule named s<N>; every value rule ends with `space`
// so that callers can put punctuation right after it. $refs get their rule name before their body is built,
// which is what lets a recursive schema refer to itself.
#include "grammar/gram_schema.h"

#include "common/strbuf.h"
#include "grammar/gram_range.h"
#include "grammar/gram_regex.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GS_MAX_DEPTH 64
#define GS_MAX_ITEMS 1000   // minItems / maxItems above this are refused
#define GS_MAX_LENGTH 10000 // minLength / maxLength above this are refused (one rule per character)

static const char PRELUDE[] =
    "space ::= | \" \"\n"
    "char ::= [^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n"
    "string ::= \"\\\"\" char* \"\\\"\" space\n"
    "integral ::= \"0\" | [1-9] [0-9]{0,15}\n"
    "number ::= \"-\"? integral (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})? space\n"
    "integer ::= \"-\"? integral space\n"
    "boolean ::= (\"true\" | \"false\") space\n"
    "null ::= \"null\" space\n"
    "value ::= object | array | string | number | boolean | null\n"
    "object ::= \"{\" space (string \":\" space value (\",\" space string \":\" space value)*)? \"}\" space\n"
    "array ::= \"[\" space (value (\",\" space value)*)? \"]\" space\n"
    "date ::= [0-9]{4} \"-\" (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | [1-2] [0-9] | \"3\" [0-1])\n"
    "time ::= ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{3})? (\"Z\" | [+-] "
    "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])\n"
    "date-string ::= \"\\\"\" date \"\\\"\" space\n"
    "time-string ::= \"\\\"\" time \"\\\"\" space\n"
    "date-time-string ::= \"\\\"\" date \"T\" time \"\\\"\" space\n"
    "email-string ::= \"\\\"\" [a-zA-Z0-9._%+-]{1,64} \"@\" [a-zA-Z0-9-]{1,63} (\".\" [a-zA-Z0-9-]{1,63}){1,8} "
    "\"\\\"\" space\n"
    "uuid ::= \"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
    "[0-9a-fA-F]{12} \"\\\"\" space\n";

static void sb_fmt(tc_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_fmt(tc_strbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) tc_strbuf_add(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}
static void sb_lit(tc_strbuf *b, const char *s, size_t n) {
    char tmp[512];
    size_t need = gram_literal(s, n, tmp, sizeof tmp);
    if (need < sizeof tmp) {
        tc_strbuf_add(b, tmp, need);
        return;
    }
    char *big = malloc(need + 1);
    if (!big) {
        b->oom = 1;
        return;
    }
    gram_literal(s, n, big, need + 1);
    tc_strbuf_add(b, big, need);
    free(big);
}

typedef struct gs_ref {
    char *ref;
    char name[32];
} gs_ref;

struct gram_schema {
    tc_strbuf rules;
    int strict;
    int counter;
    gs_ref *refs;
    int n_refs, cap_refs;
    const json_t *doc;
    char path[256]; // where in the schema we are, for messages
};

gram_schema *gram_schema_new(int strict) {
    gram_schema *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->strict = strict;
    tc_strbuf_str(&b->rules, PRELUDE);
    if (b->rules.oom) {
        gram_schema_free(b);
        return NULL;
    }
    return b;
}

void gram_schema_free(gram_schema *b) {
    if (!b) return;
    free(b->rules.p);
    for (int i = 0; i < b->n_refs; i++) free(b->refs[i].ref);
    free(b->refs);
    free(b);
}

const char *gram_schema_text(gram_schema *b) { return b->rules.oom ? NULL : b->rules.p; }

int gram_schema_add_rule(gram_schema *b, const char *name, const char *body) {
    sb_fmt(&b->rules, "%s ::= ", name);
    tc_strbuf_str(&b->rules, body);
    tc_strbuf_str(&b->rules, "\n");
    return b->rules.oom ? TC_ERR_NOMEM : 0;
}

size_t gram_literal(const char *s, size_t n, char *out, size_t cap) {
    size_t k = 0;
#define PUT(c) ((k + 1 < cap ? (void)(out[k] = (char)(c)) : (void)0), k++)
    PUT('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') PUT('\\'), PUT((char)c);
        else if (c == '\n') PUT('\\'), PUT('n');
        else if (c == '\t') PUT('\\'), PUT('t');
        else if (c == '\r') PUT('\\'), PUT('r');
        else if (c < 0x20 || c == 0x7f) {
            static const char hx[] = "0123456789ABCDEF";
            PUT('\\'), PUT('x'), PUT(hx[c >> 4]), PUT(hx[c & 15]);
        } else PUT((char)c);
    }
    PUT('"');
    if (cap) out[k < cap ? k : cap - 1] = 0;
#undef PUT
    return k;
}

static int bad(gram_schema *b, tc_err *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(gram_schema *b, tc_err *err, const char *fmt, ...) {
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tc_err_set(err, TC_ERR_INVALID, "JSON schema%s%s: %s", b->path[0] ? " at " : "", b->path, msg);
}

static void new_name(gram_schema *b, char *name) { snprintf(name, 32, "s%d", ++b->counter); }

static int emit(gram_schema *b, const char *name, tc_strbuf *body) {
    if (body->oom) return TC_ERR_NOMEM;
    return gram_schema_add_rule(b, name, body->p ? body->p : "\"\"");
}

static int visit(gram_schema *b, const json_t *s, char *name, int depth, tc_err *err);

// Pushes a path segment for error messages; returns the old length to pop back to.
static size_t path_push(gram_schema *b, const char *fmt, const char *arg) {
    size_t old = strlen(b->path);
    snprintf(b->path + old, sizeof b->path - old, fmt, arg);
    return old;
}

static const char *const KNOWN[] = {
    "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "enum", "const",
    "anyOf", "oneOf", "$ref", "$defs", "definitions", "minLength", "maxLength", "format", "title", "description",
    "$schema", "$id", "default", "examples", "$comment", "nullable", "strict", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "pattern", NULL,
};

static int check_keywords(gram_schema *b, const json_t *s, tc_err *err) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)s, key, v) {
        (void)v;
        if (!strcmp(key, "patternProperties"))
            return bad(b, err, "'%s' is not supported (property names are not matched against patterns)", key);
        int known = 0;
        for (int i = 0; KNOWN[i] && !known; i++) known = !strcmp(KNOWN[i], key);
        if (!known && b->strict) return bad(b, err, "unsupported keyword '%s' (strict mode)", key);
    }
    return 0;
}

static int get_count(gram_schema *b, const json_t *s, const char *key, long long *out, tc_err *err) {
    json_t *v = json_object_get(s, key);
    int max = strstr(key, "Length") ? GS_MAX_LENGTH : GS_MAX_ITEMS;
    if (!v) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max)
        return bad(b, err, "'%s' must be an integer from 0 to %d", key, max);
    *out = json_integer_value(v);
    return 0;
}

// minimum / maximum / exclusiveMinimum / exclusiveMaximum of a number or integer: the digit pattern of
// gram_range.h in body (nothing when the schema has none).
static int num_bounds(gram_schema *b, const json_t *s, int integer, tc_strbuf *body, tc_err *err) {
    static const char *const keys[4] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    gram_bounds bd = {0};
    for (int i = 0; i < 4; i++) {
        json_t *v = json_object_get(s, keys[i]);
        if (!v || json_is_null(v)) continue;
        if (json_is_boolean(v)) return bad(b, err, "'%s' must be a number (the draft-4 boolean form is not read)", keys[i]);
        if (!json_is_number(v)) return bad(b, err, "'%s' must be a number", keys[i]);
        double x = json_number_value(v);
        int lo = i < 2, excl = i & 1;
        if (lo && (!bd.has_lo || x > bd.lo || (x == bd.lo && excl))) bd.has_lo = 1, bd.lo = x, bd.lo_excl = excl;
        if (!lo && (!bd.has_hi || x < bd.hi || (x == bd.hi && excl))) bd.has_hi = 1, bd.hi = x, bd.hi_excl = excl;
    }
    if (!bd.has_lo && !bd.has_hi) return 0;
    if (gram_range_expr(body, integer, &bd)) return bad(b, err, "no %s lies within its minimum and maximum", integer ? "integer" : "number");
    tc_strbuf_str(body, " space");
    return 0;
}

// A value as a literal (const / enum members): its compact JSON text.
static int literal_value(tc_strbuf *body, const json_t *v) {
    char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!t) return TC_ERR_NOMEM;
    sb_lit(body, t, strlen(t));
    free(t);
    return 0;
}

static int visit_object(gram_schema *b, const json_t *s, char *name, int depth, tc_err *err) {
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    json_t *addl = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props)) return bad(b, err, "'properties' must be an object");
    if (req && !json_is_array(req)) return bad(b, err, "'required' must be an array");
    tc_strbuf body = {0};
    if (!props || json_object_size(props) == 0) { // a map: values of additionalProperties (any by default)
        char vname[32] = "value";
        if (json_is_false(addl)) tc_strbuf_str(&body, "\"{\" space \"}\" space");
        else {
            if (json_is_object(addl)) {
                size_t old = path_push(b, "%s", "/additionalProperties");
                int rc = visit(b, addl, vname, depth + 1, err);
                b->path[old] = 0;
                if (rc) return rc;
            }
            sb_fmt(&body, "\"{\" space (string \":\" space %s (\",\" space string \":\" space %s)*)? \"}\" space",
                   vname, vname);
        }
        new_name(b, name);
        int rc = emit(b, name, &body);
        free(body.p);
        return rc;
    }
    // properties in order; rest(i, e) = what may follow after property i-1 (e: something already written)
    int n = (int)json_object_size(props);
    char (*kv)[32] = calloc((size_t)n, sizeof *kv);
    char (*rest)[2][32] = calloc((size_t)n + 1, sizeof *rest);
    uint8_t *required = calloc((size_t)n + 1, 1);
    int rc = kv && rest && required ? 0 : TC_ERR_NOMEM;
    const char *key;
    json_t *ps;
    int i = 0;
    for (size_t j = 0; !rc && req && j < json_array_size(req); j++) {
        json_t *r = json_array_get(req, j);
        if (!json_is_string(r)) rc = bad(b, err, "'required' must list property names");
        else if (!json_object_get(props, json_string_value(r)))
            rc = bad(b, err, "required property '%s' is not in 'properties'", json_string_value(r));
    }
    json_object_foreach(props, key, ps) {
        if (rc) break;
        for (size_t j = 0; req && j < json_array_size(req); j++)
            if (!strcmp(json_string_value(json_array_get(req, j)), key)) required[i] = 1;
        char vname[32];
        size_t old = path_push(b, "/properties/%s", key);
        rc = visit(b, ps, vname, depth + 1, err);
        b->path[old] = 0;
        if (rc) break;
        tc_strbuf kb = {0};
        json_t *ks = json_string(key);
        char *kt = ks ? json_dumps(ks, JSON_ENCODE_ANY) : NULL;
        json_decref(ks);
        if (!kt) rc = TC_ERR_NOMEM;
        else {
            sb_lit(&kb, kt, strlen(kt));
            free(kt);
            sb_fmt(&kb, " space \":\" space %s", vname);
            new_name(b, kv[i]);
            rc = emit(b, kv[i], &kb);
        }
        free(kb.p);
        i++;
    }
    // build rest rules from the end: rest[n][*] = ""
    for (int k = n; !rc && k >= 0; k--) {
        for (int e = 0; e < 2 && !rc; e++) {
            tc_strbuf rb = {0};
            if (k == n) tc_strbuf_str(&rb, "\"\"");
            else {
                const char *comma = e ? "\",\" space " : "";
                sb_fmt(&rb, "%s%s %s", comma, kv[k], rest[k + 1][1]);
                if (!required[k]) sb_fmt(&rb, " | %s", rest[k + 1][e]);
            }
            new_name(b, rest[k][e]);
            rc = emit(b, rest[k][e], &rb);
            free(rb.p);
        }
    }
    if (!rc) {
        sb_fmt(&body, "\"{\" space %s \"}\" space", rest[0][0]);
        new_name(b, name);
        rc = emit(b, name, &body);
    }
    free(body.p);
    free(kv);
    free(rest);
    free(required);
    return rc;
}

static int visit_typed(gram_schema *b, const json_t *s, const char *type, char *name, int depth, tc_err *err) {
    if (!strcmp(type, "object")) return visit_object(b, s, name, depth, err);
    tc_strbuf body = {0};
    int rc = 0;
    if (!strcmp(type, "array")) {
        json_t *items = json_object_get(s, "items");
        char iname[32] = "value";
        if (items && !json_is_true(items)) {
            size_t old = path_push(b, "%s", "/items");
            rc = visit(b, items, iname, depth + 1, err);
            b->path[old] = 0;
        }
        long long lo = 0, hi = -1;
        if (!rc) rc = get_count(b, s, "minItems", &lo, err);
        if (!rc) rc = get_count(b, s, "maxItems", &hi, err);
        if (!rc && hi >= 0 && hi < lo) rc = bad(b, err, "maxItems < minItems");
        if (rc) return rc;
        if (hi == 0) tc_strbuf_str(&body, "\"[\" space \"]\" space");
        else {
            tc_strbuf_str(&body, "\"[\" space ");
            if (lo == 0) tc_strbuf_str(&body, "(");
            sb_fmt(&body, "%s (\",\" space %s)", iname, iname);
            long long l1 = lo > 0 ? lo - 1 : 0;
            if (hi < 0) sb_fmt(&body, "{%lld,}", l1);
            else sb_fmt(&body, "{%lld,%lld}", l1, hi - 1);
            if (lo == 0) tc_strbuf_str(&body, ")?");
            tc_strbuf_str(&body, " \"]\" space");
        }
    } else if (!strcmp(type, "string")) {
        json_t *fmt = json_object_get(s, "format");
        long long lo = 0, hi = -1;
        if ((rc = get_count(b, s, "minLength", &lo, err)) || (rc = get_count(b, s, "maxLength", &hi, err))) return rc;
        if (hi >= 0 && hi < lo) return bad(b, err, "maxLength < minLength");
        if (fmt && json_is_string(fmt)) {
            const char *f = json_string_value(fmt);
            if (!strcmp(f, "date")) tc_strbuf_str(&body, "date-string");
            else if (!strcmp(f, "time")) tc_strbuf_str(&body, "time-string");
            else if (!strcmp(f, "date-time")) tc_strbuf_str(&body, "date-time-string");
            else if (!strcmp(f, "uuid")) tc_strbuf_str(&body, "uuid");
            else if (!strcmp(f, "email")) tc_strbuf_str(&body, "email-string");
            else if (!strcmp(f, "uri")) { // http(s) URLs: valid URIs, and what URL types (HttpUrl) accept
                if (hi >= 0 && hi < 12) return bad(b, err, "maxLength %lld is too short for a 'uri'", hi);
                long long host = hi < 0 || hi >= 74 ? 62 : hi - 12, tail = hi < 0 ? -1 : hi - 12 - host;
                sb_fmt(&body, "\"\\\"\" (\"https\" | \"http\") \"://\" [a-zA-Z0-9] [a-zA-Z0-9.-]{0,%lld}", host);
                if (tail != 0) {
                    tc_strbuf_str(&body, " ([/?#] [a-zA-Z0-9._~:/?#@!$&'()*+,;=%-]");
                    if (tail > 0) sb_fmt(&body, "{0,%lld})?", tail);
                    else tc_strbuf_str(&body, "*)?");
                }
                tc_strbuf_str(&body, " \"\\\"\" space");
            } else if (b->strict) return bad(b, err, "unsupported string format '%s' (strict mode)", f);
        }
        json_t *pat = json_object_get(s, "pattern");
        if (pat && !body.n) { // a pattern decides the whole string (length bounds are the pattern's own)
            if (!json_is_string(pat)) return bad(b, err, "'pattern' must be a string");
            tc_strbuf_str(&body, "\"\\\"\" ");
            tc_err perr = {0};
            if (gram_regex_expr(json_string_value(pat), &body, &perr)) {
                free(body.p);
                return bad(b, err, "%s", perr.msg);
            }
            tc_strbuf_str(&body, " \"\\\"\" space");
        }
        if (!body.n) {
            if (lo == 0 && hi < 0) tc_strbuf_str(&body, "string");
            else if (hi < 0) sb_fmt(&body, "\"\\\"\" char{%lld,} \"\\\"\" space", lo);
            else sb_fmt(&body, "\"\\\"\" char{%lld,%lld} \"\\\"\" space", lo, hi);
        }
    } else if (!strcmp(type, "number") || !strcmp(type, "integer")) {
        if ((rc = num_bounds(b, s, !strcmp(type, "integer"), &body, err))) return rc;
        if (!body.n) tc_strbuf_str(&body, type);
    } else if (!strcmp(type, "boolean") || !strcmp(type, "null"))
        tc_strbuf_str(&body, type);
    else return bad(b, err, "unknown type '%s'", type);
    new_name(b, name);
    rc = emit(b, name, &body);
    free(body.p);
    return rc;
}

static int resolve_ref(gram_schema *b, const char *ref, char *name, int depth, tc_err *err) {
    for (int i = 0; i < b->n_refs; i++)
        if (!strcmp(b->refs[i].ref, ref)) {
            snprintf(name, 32, "%s", b->refs[i].name);
            return 0;
        }
    const json_t *target = NULL;
    if (!strcmp(ref, "#")) target = b->doc;
    else if (!strncmp(ref, "#/$defs/", 8)) target = json_object_get(json_object_get(b->doc, "$defs"), ref + 8);
    else if (!strncmp(ref, "#/definitions/", 14))
        target = json_object_get(json_object_get(b->doc, "definitions"), ref + 14);
    else return bad(b, err, "unsupported $ref '%.100s' (only #, #/$defs/… and #/definitions/…)", ref);
    if (!target) return bad(b, err, "$ref '%.100s' points nowhere", ref);
    if (b->n_refs == b->cap_refs) {
        int cap = b->cap_refs ? b->cap_refs * 2 : 8;
        gs_ref *r = realloc(b->refs, (size_t)cap * sizeof *r);
        if (!r) return TC_ERR_NOMEM;
        b->refs = r, b->cap_refs = cap;
    }
    gs_ref *r = &b->refs[b->n_refs];
    r->ref = strdup(ref);
    if (!r->ref) return TC_ERR_NOMEM;
    new_name(b, r->name);
    b->n_refs++;
    snprintf(name, 32, "%s", r->name);
    char tname[32], rname[32];
    snprintf(rname, sizeof rname, "%s", name);
    int rc = visit(b, target, tname, depth + 1, err);
    if (rc) return rc;
    return gram_schema_add_rule(b, rname, tname);
}

static int visit(gram_schema *b, const json_t *s, char *name, int depth, tc_err *err) {
    if (depth > GS_MAX_DEPTH) return bad(b, err, "nested more than %d levels", GS_MAX_DEPTH);
    if (json_is_true(s)) {
        snprintf(name, 32, "value");
        return 0;
    }
    if (!json_is_object(s)) return bad(b, err, "a schema must be an object or true");
    int rc = check_keywords(b, s, err);
    if (rc) return rc;
    json_t *v;
    tc_strbuf body = {0};
    if ((v = json_object_get(s, "$ref"))) {
        if (!json_is_string(v)) return bad(b, err, "'$ref' must be a string");
        return resolve_ref(b, json_string_value(v), name, depth, err);
    }
    if ((v = json_object_get(s, "const"))) {
        if ((rc = literal_value(&body, v)) == 0) tc_strbuf_str(&body, " space");
    } else if ((v = json_object_get(s, "enum"))) {
        if (!json_is_array(v) || json_array_size(v) == 0) return bad(b, err, "'enum' must be a non-empty array");
        tc_strbuf_str(&body, "(");
        for (size_t i = 0; i < json_array_size(v) && !rc; i++) {
            if (i) tc_strbuf_str(&body, " | ");
            rc = literal_value(&body, json_array_get(v, i));
        }
        tc_strbuf_str(&body, ") space");
    } else if ((v = json_object_get(s, "anyOf")) || (v = json_object_get(s, "oneOf"))) {
        const char *kw = json_object_get(s, "anyOf") ? "anyOf" : "oneOf";
        if (!json_is_array(v) || json_array_size(v) == 0) return bad(b, err, "'%s' must be a non-empty array", kw);
        for (size_t i = 0; i < json_array_size(v) && !rc; i++) {
            char sub[32], seg[48];
            snprintf(seg, sizeof seg, "/%s/%zu", kw, i);
            size_t old = path_push(b, "%s", seg);
            rc = visit(b, json_array_get(v, i), sub, depth + 1, err);
            b->path[old] = 0;
            if (i) tc_strbuf_str(&body, " | ");
            tc_strbuf_str(&body, sub);
        }
    } else {
        json_t *t = json_object_get(s, "type");
        if (!t) {
            const char *guess = json_object_get(s, "properties") || json_object_get(s, "additionalProperties") ? "object"
                                : json_object_get(s, "items")                                                 ? "array"
                                                                                                              : NULL;
            if (!guess) {
                snprintf(name, 32, "value");
                return 0;
            }
            return visit_typed(b, s, guess, name, depth, err);
        }
        if (json_is_string(t)) return visit_typed(b, s, json_string_value(t), name, depth, err);
        if (!json_is_array(t) || json_array_size(t) == 0) return bad(b, err, "'type' must be a string or an array");
        for (size_t i = 0; i < json_array_size(t) && !rc; i++) {
            json_t *ti = json_array_get(t, i);
            if (!json_is_string(ti)) return bad(b, err, "'type' must list type names");
            char sub[32];
            rc = visit_typed(b, s, json_string_value(ti), sub, depth, err);
            if (i) tc_strbuf_str(&body, " | ");
            tc_strbuf_str(&body, sub);
        }
    }
    if (!rc) {
        new_name(b, name);
        rc = emit(b, name, &body);
    }
    free(body.p);
    return rc;
}

int gram_schema_add(gram_schema *b, const json_t *schema, const json_t *doc, char *name, size_t cap, tc_err *err) {
    if (cap < 32) return tc_err_set(err, TC_ERR_INVALID, "gram_schema_add: name buffer too small");
    const json_t *old = b->doc;
    b->doc = doc ? doc : schema;
    // $refs are per document: a second schema (another tool) must not reuse the first one's names
    for (int i = 0; i < b->n_refs; i++) free(b->refs[i].ref);
    b->n_refs = 0;
    b->path[0] = 0;
    int rc = visit(b, schema, name, 0, err);
    b->doc = old;
    if (rc == TC_ERR_NOMEM) tc_err_set(err, rc, "JSON schema: out of memory");
    if (!rc && b->rules.oom) rc = tc_err_set(err, TC_ERR_NOMEM, "JSON schema: out of memory");
    return rc;
}

static int finish(gram_schema *b, const char *root_body, char **out, tc_err *err) {
    int rc = gram_schema_add_rule(b, "root", root_body);
    const char *t = gram_schema_text(b);
    if (!rc && t) *out = strdup(t);
    if (rc || !t || !*out) rc = tc_err_set(err, TC_ERR_NOMEM, "JSON schema: out of memory");
    gram_schema_free(b);
    return rc;
}

int gram_json_object_gbnf(char **out, tc_err *err) {
    *out = NULL;
    gram_schema *b = gram_schema_new(0);
    if (!b) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    return finish(b, "object", out, err);
}

int gram_schema_gbnf(const json_t *schema, int strict, char **out, tc_err *err) {
    *out = NULL;
    gram_schema *b = gram_schema_new(strict);
    if (!b) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    char name[32];
    int rc = gram_schema_add(b, schema, NULL, name, sizeof name, err);
    if (rc) {
        gram_schema_free(b);
        return rc;
    }
    return finish(b, name, out, err);
}
