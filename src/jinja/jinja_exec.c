// Jinja statements and the two entry points: jinja_parse (source to tree, once) and jinja_render (tree to
// text, any number of times). Scopes follow jinja2: a for loop's body gets a fresh scope on every iteration,
// a macro call its own scope over the one it was defined in, if/set/filter blocks none.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "jinja/jinja_int.h"

struct jinja_template {
    jinja_arena ar; // owns the tree and the normalised source
    jinja_fault fault;
    jnode *root;
};

static void exec_body(jinja_ctx *c, jinja_frame *f, const jnode *body) {
    for (int i = 0; i < body->nv && !c->brk; i++) jinja_exec(c, f, body->v[i]);
}

// Renders body into a fresh buffer and returns the text.
static jv capture(jinja_ctx *c, jinja_frame *f, const jnode *body) {
    jinja_buf b = {0}, *saved = c->out;
    c->out = &b;
    exec_body(c, f, body);
    c->out = saved;
    return jinja_buf_take(&b);
}

// Applies a filter chain whose innermost input is the placeholder, standing for value.
static jv apply_chain(jinja_ctx *c, jinja_frame *f, const jnode *chain, jv value) {
    jinja_frame *ph = jinja_frame_new(c, f);
    jinja_frame_set(c, ph, "\x01", 1, value);
    return jinja_eval(c, ph, chain);
}

static void assign(jinja_ctx *c, jinja_frame *f, const jnode *target, jv v) {
    if (target->kind == JN_NAME) {
        jinja_frame_set(c, f, target->s, target->n, v);
    } else if (target->kind == JN_ATTR) {
        jv ns = jinja_lookup(c, f, target->a->s, target->a->n);
        if (ns.t != JV_NS) jinja_err(c, "cannot assign attribute on non-namespace object");
        jinja_dict_set(c, ns.u.d, jinja_str(target->s, target->n), v);
    } else { // tuple of targets: unpack
        if (v.t != JV_LIST && v.t != JV_TUPLE && v.t != JV_STR)
            jinja_err(c, "cannot unpack non-iterable %s object", jinja_type_name(v));
        jinja_list *l = jinja_iter_list(c, v);
        if ((int)l->n != target->nv)
            jinja_err(c, "cannot unpack %u values into %d names", (unsigned)l->n, target->nv);
        for (int i = 0; i < target->nv; i++) assign(c, f, target->v[i], l->v[i]);
    }
}

static void exec_for(jinja_ctx *c, jinja_frame *f, const jnode *n) {
    jinja_list *items = jinja_iter_list(c, jinja_eval(c, f, n->b));
    if (n->c) { // the loop filter runs first: loop.length counts what it keeps
        jinja_list *kept = jinja_list_new(c, 0);
        jinja_frame *it = jinja_frame_new(c, f);
        for (uint32_t i = 0; i < items->n; i++) {
            jinja_step(c);
            it->n = 0;
            assign(c, it, n->a, items->v[i]);
            if (jinja_truthy(jinja_eval(c, it, n->c))) jinja_list_push(c, kept, items->v[i]);
        }
        items = kept;
    }
    jinja_loop *lp = jinja_alloc(&c->ar, sizeof *lp);
    lp->length = items->n;
    jinja_frame *it = jinja_frame_new(c, f); // emptied each iteration: its names start over, as in jinja2
    for (uint32_t i = 0; i < items->n; i++) {
        jinja_step(c);
        lp->index0 = i;
        lp->has_prev = i > 0, lp->has_next = i + 1 < items->n;
        if (lp->has_prev) lp->prev = items->v[i - 1];
        if (lp->has_next) lp->next = items->v[i + 1];
        it->n = 0;
        jinja_frame_set(c, it, "loop", 4, (jv){.t = JV_LOOP, .u.lp = lp});
        assign(c, it, n->a, items->v[i]);
        exec_body(c, it, n->d);
        int b = c->brk;
        c->brk = 0;
        if (b == 1) break;
    }
    if (!items->n && n->e) exec_body(c, f, n->e);
}

// Runs a macro's body in a fresh scope over the one it was defined in; evaluation calls it through c->hooks.
static jv call_macro(jinja_ctx *c, jinja_macro *m, int npos, const jv *pos, int nkw, const jv *kwnames,
                     const jv *kwvals) {
    const jnode *def = m->def;
    jinja_frame *fr = jinja_frame_new(c, m->scope);
    jinja_list *varargs = jinja_list_new(c, 0);
    jinja_dict *kwargs = jinja_dict_new(c, 0);
    for (int i = 0; i < npos; i++) {
        if (i < def->nv) jinja_frame_set(c, fr, def->v[i]->s, def->v[i]->n, pos[i]);
        else jinja_list_push(c, varargs, pos[i]);
    }
    for (int k = 0; k < nkw; k++) {
        int found = jinja_eq(kwnames[k].u.s, kwnames[k].n, "caller");
        for (int i = 0; i < def->nv && !found; i++)
            if (def->v[i]->n == kwnames[k].n && !memcmp(def->v[i]->s, kwnames[k].u.s, kwnames[k].n)) {
                if (i < npos) jinja_err(c, "macro got multiple values for argument '%.*s'", (int)kwnames[k].n, kwnames[k].u.s);
                found = 1;
            }
        if (found) jinja_frame_set(c, fr, kwnames[k].u.s, kwnames[k].n, kwvals[k]);
        else jinja_dict_set(c, kwargs, kwnames[k], kwvals[k]);
    }
    for (int i = npos; i < def->nv; i++) {
        const jnode *p = def->v[i];
        int given = 0;
        for (uint32_t k = 0; k < fr->n && !given; k++) given = fr->vars[k].n == p->n && !memcmp(fr->vars[k].name, p->s, p->n);
        if (!given)
            jinja_frame_set(c, fr, p->s, p->n, p->a ? jinja_eval(c, fr, p->a) : (jv){.t = JV_UNDEF, .n = (uint32_t)p->n, .u.s = p->s});
    }
    jinja_frame_set(c, fr, "varargs", 7, (jv){.t = JV_LIST, .u.l = varargs});
    jinja_frame_set(c, fr, "kwargs", 6, (jv){.t = JV_DICT, .u.d = kwargs});
    if (++c->depth > c->max_depth) jinja_fail(&c->fault, TC_ERR_INVALID, "template recursion too deep");
    int brk = c->brk;
    jv out = capture(c, fr, def->d);
    c->brk = brk;
    c->depth--;
    return out;
}

void jinja_exec(jinja_ctx *c, jinja_frame *f, const jnode *n) {
    jinja_step(c);
    if (++c->depth > c->max_depth) jinja_fail(&c->fault, TC_ERR_INVALID, "template recursion too deep");
    switch (n->kind) {
    case JN_BODY: exec_body(c, f, n); break;
    case JN_DATA: jinja_buf_add(c, c->out, n->s, n->n); break;
    case JN_OUTPUT: jinja_buf_str(c, c->out, jinja_eval(c, f, n->a)); break;
    case JN_IF:
        if (jinja_truthy(jinja_eval(c, f, n->a))) exec_body(c, f, n->b);
        else if (n->c) jinja_exec(c, f, n->c);
        break;
    case JN_FOR: exec_for(c, f, n); break;
    case JN_SET:
        if (n->b) assign(c, f, n->a, jinja_eval(c, f, n->b));
        else {
            jv v = capture(c, f, n->d);
            assign(c, f, n->a, n->c ? apply_chain(c, f, n->c, v) : v);
        }
        break;
    case JN_MACRO: {
        jinja_macro *m = jinja_alloc(&c->ar, sizeof *m);
        m->def = n, m->scope = f;
        jinja_frame_set(c, f, n->s, n->n, (jv){.t = JV_MACRO, .u.m = m});
        break;
    }
    case JN_CALLBLOCK: {
        jinja_macro *caller = jinja_alloc(&c->ar, sizeof *caller);
        caller->def = n, caller->scope = f;
        jv fn = jinja_eval(c, f, n->a->a);
        jv pos[16], kwn[17], kwv[17];
        int np = 0, nk = 0;
        for (int i = 0; i < n->a->nv; i++) {
            const jnode *x = n->a->v[i];
            if (x->kind == JN_KWARG && nk < 16) kwn[nk] = jinja_str(x->s, x->n), kwv[nk++] = jinja_eval(c, f, x->a);
            else if (x->kind != JN_KWARG && np < 16) pos[np++] = jinja_eval(c, f, x);
            else jinja_err(c, "too many arguments");
        }
        kwn[nk] = jinja_str("caller", 6), kwv[nk++] = (jv){.t = JV_MACRO, .u.m = caller};
        jinja_buf_str(c, c->out, jinja_call_value(c, fn, np, pos, nk, kwn, kwv));
        break;
    }
    case JN_FILTERBLOCK: jinja_buf_str(c, c->out, apply_chain(c, f, n->a, capture(c, f, n->d))); break;
    case JN_BREAK: c->brk = 1; break;
    case JN_CONTINUE: c->brk = 2; break;
    default: jinja_err(c, "internal error: node %d is not a statement", n->kind);
    }
    c->depth--;
}

// --- entry points

static const jinja_hooks exec_hooks = {.run_macro = call_macro};

static void fill_limits(const jinja_limits *in, jinja_limits *out) {
    *out = in ? *in : (jinja_limits){0};
    if (!out->max_template) out->max_template = 1u << 20;
    if (!out->max_output) out->max_output = 8u << 20;
    if (!out->max_memory) out->max_memory = 256u << 20;
    if (!out->max_steps) out->max_steps = 20000000;
    if (!out->max_depth) out->max_depth = 200;
}

int jinja_parse(const char *src, size_t n, const jinja_limits *lim, jinja_template **out, tc_err *err) {
    jinja_limits L;
    fill_limits(lim, &L);
    *out = NULL;
    if (n > L.max_template)
        return tc_err_set(err, TC_ERR_INVALID, "template is %zu bytes, more than the limit of %zu", n, L.max_template);
    jinja_template *t = calloc(1, sizeof *t);
    if (!t) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    jinja_arena_init(&t->ar, 64 * n + (1u << 20), &t->fault);
    if (setjmp(t->fault.jb)) {
        int code = tc_err_set(err, t->fault.code ? t->fault.code : TC_ERR_FORMAT, "%s", t->fault.msg);
        jinja_free(t);
        return code;
    }
    int ntok;
    jtok *toks = jinja_lex(&t->ar, src, n, &ntok);
    t->root = jinja_parse_tokens(&t->ar, toks, ntok, L.max_depth);
    *out = t;
    return 0;
}

void jinja_free(jinja_template *t) {
    if (!t) return;
    jinja_arena_free(&t->ar);
    free(t);
}

static void set_globals(jinja_ctx *c, const json_t *vars, int user) {
    if (!vars || !json_is_object(vars)) return;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)vars, k, v) {
        size_t kn = strlen(k);
        char *name = jinja_strndup(&c->ar, k, kn);
        jinja_frame_set(c, c->globals, name, kn, jinja_from_json(c, v, user));
    }
}

int jinja_render(const jinja_template *t, const json_t *vars, const jinja_limits *lim, int64_t now, char **out,
                 size_t *out_n, tc_err *err) {
    return jinja_render_user(t, vars, NULL, lim, now, out, out_n, NULL, NULL, err);
}

int jinja_render_user(const jinja_template *t, const json_t *vars, const json_t *user, const jinja_limits *lim,
                      int64_t now, char **out, size_t *out_n, jinja_span **spans, int *n_spans, tc_err *err) {
    jinja_limits L;
    fill_limits(lim, &L);
    *out = NULL;
    if (out_n) *out_n = 0;
    if (spans) *spans = NULL;
    if (n_spans) *n_spans = 0;
    jinja_ctx *c = calloc(1, sizeof *c);
    if (!c) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    jinja_arena_init(&c->ar, L.max_memory, &c->fault);
    c->hooks = &exec_hooks;
    c->max_output = L.max_output, c->max_steps = L.max_steps, c->max_depth = L.max_depth;
    c->now = now >= 0 ? now : (int64_t)time(NULL);
    if (setjmp(c->fault.jb)) {
        int code = tc_err_set(err, c->fault.code ? c->fault.code : TC_ERR, "%s", c->fault.msg);
        jinja_arena_free(&c->ar);
        free(c);
        return code;
    }
    jinja_buf b = {0};
    c->out = &b;
    c->globals = jinja_frame_new(c, NULL);
    set_globals(c, vars, 0);
    set_globals(c, user, 1);
    exec_body(c, jinja_frame_new(c, c->globals), t->root);
    uint32_t nr = b.pv ? b.pv->n : 0;
    jinja_span *sp = NULL;
    if (spans && nr) {
        sp = malloc(nr * sizeof *sp);
        if (!sp) jinja_fail(&c->fault, TC_ERR_NOMEM, "out of memory");
        for (uint32_t i = 0; i < nr; i++) sp[i] = (jinja_span){b.pv->r[2 * i], b.pv->r[2 * i + 1]};
    }
    char *res = malloc(b.n + 1);
    if (!res) {
        free(sp);
        jinja_fail(&c->fault, TC_ERR_NOMEM, "out of memory");
    }
    if (b.n) memcpy(res, b.p, b.n);
    res[b.n] = 0;
    *out = res;
    if (out_n) *out_n = b.n;
    if (spans) *spans = sp, *n_spans = (int)nr;
    jinja_arena_free(&c->ar);
    free(c);
    return 0;
}
