// Internals of the Jinja interpreter shared by its files: the arena every allocation comes from, values,
// tokens, the syntax tree and the render context. Errors unwind with longjmp to the entry point (jinja_parse or
// jinja_render), which frees the arena: nothing inside allocates outside an arena, so nothing leaks.
#ifndef TACHYON_JINJA_INT_H
#define TACHYON_JINJA_INT_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "jinja/jinja.h"

// --- errors: one per parse or render; jinja_fail formats the message and jumps to jb.
typedef struct jinja_fault {
    jmp_buf jb;
    int code; // TC_ERR, TC_ERR_FORMAT or TC_ERR_INVALID
    char msg[512];
} jinja_fault;

_Noreturn void jinja_fail(jinja_fault *f, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

// --- arena: chunks from malloc, all freed at once; alloc past max_bytes fails through the fault.
typedef struct jinja_chunk jinja_chunk;
typedef struct jinja_arena {
    jinja_chunk *head; // owned chain of chunks
    char *cur, *end;   // free space in the head chunk
    size_t used, max_bytes;
    jinja_fault *fault; // borrowed
} jinja_arena;

void jinja_arena_init(jinja_arena *a, size_t max_bytes, jinja_fault *f);
void *jinja_alloc(jinja_arena *a, size_t n); // zeroed, 16-byte aligned
char *jinja_strndup(jinja_arena *a, const char *s, size_t n); // n bytes of s and a NUL, in the arena
void jinja_arena_free(jinja_arena *a);

// --- provenance: which bytes of a string came from the caller's untrusted variables (message text) rather
// than from the template or its trusted variables. r holds n sorted, disjoint [start, end) byte pairs; a range
// past a string's end is clamped where it is read.
typedef struct jinja_prov {
    uint32_t n;
    const uint32_t *r;
} jinja_prov;
extern const jinja_prov jinja_prov_all; // the whole string

// --- values: 24 bytes, copied freely; everything they point to lives in an arena (or the template's).
typedef enum {
    JV_UNDEF, // u.s/n: the name that was undefined (for messages)
    JV_NONE,
    JV_BOOL, // u.i
    JV_INT,  // u.i
    JV_FLOAT,
    JV_STR, // u.s, n bytes of UTF-8, not NUL-terminated
    JV_LIST,
    JV_TUPLE, // u.l, immutable list (prints as (a, b))
    JV_DICT,
    JV_NS, // namespace(): u.d, assignable with {% set ns.x = … %}
    JV_MACRO,
    JV_FUNC,   // built-in global function: u.i is its jinja_fn id
    JV_METHOD, // bound method: u.bm
    JV_LOOP,   // the loop variable: u.lp
    JV_GEN,    // what map/select/reject return: u.l, iterable once-through like Python's generator
} jv_type;

typedef struct jinja_list jinja_list;
typedef struct jinja_dict jinja_dict;
typedef struct jinja_macro jinja_macro;
typedef struct jinja_method jinja_method;
typedef struct jinja_loop jinja_loop;

typedef struct jv {
    uint16_t t;    // jv_type
    uint16_t safe; // a string marked |safe (jinja2's Markup: + escapes a plain operand)
    uint32_t n; // string length
    const jinja_prov *pv; // strings: the bytes from untrusted variables, or NULL when there are none
    union {
        int64_t i;
        double f;
        const char *s;
        jinja_list *l;
        jinja_dict *d;
        jinja_macro *m;
        jinja_method *bm;
        jinja_loop *lp;
    } u;
} jv;

struct jinja_list {
    jv *v;
    uint32_t n, cap;
};
struct jinja_dict { // insertion-ordered; keys are strings or numbers
    jv *k, *v;
    uint32_t n, cap;
};
struct jinja_method {
    jv self;
    const char *name;
    uint32_t n;
};

// --- tokens
typedef enum {
    JT_EOF,
    JT_DATA,      // text between tags (whitespace control applied)
    JT_VAR_BEGIN, // {{
    JT_VAR_END,
    JT_BLOCK_BEGIN, // {%
    JT_BLOCK_END,
    JT_NAME,
    JT_STRING, // s/n: the unescaped value
    JT_INT,
    JT_FLOAT,
    JT_OP, // op: one of the JOP_* codes
} jtok_type;

enum { // two-character operators get codes above 255; single characters are themselves
    JOP_EQ = 256,
    JOP_NE,
    JOP_LE,
    JOP_GE,
    JOP_FLOORDIV,
    JOP_POW,
};

typedef struct jtok {
    int type, op, line;
    const char *s; // name, string or data
    size_t n;
    int64_t i;
    double f;
} jtok;

// Splits src into tokens (arena-owned array ending with JT_EOF). src must stay alive as long as the tokens.
jtok *jinja_lex(jinja_arena *a, const char *src, size_t n, int *ntok);

// --- syntax tree
typedef enum {
    JN_BODY, // v: statements
    JN_DATA, // s/n
    JN_OUTPUT, // a: expression printed
    JN_IF,     // a: cond, b: then (BODY), c: else (BODY or IF) or NULL
    JN_FOR,    // a: target, b: iterable, c: filter or NULL, d: body, e: else body or NULL
    JN_SET,    // a: target, b: value (or NULL: block set, d: body, c: filter chain on the body or NULL)
    JN_MACRO,  // s/n: name, v: params (JN_PARAM), d: body
    JN_CALLBLOCK, // a: call expression, v: caller params, d: body
    JN_FILTERBLOCK, // a: filter chain applied to JN_NONE placeholder, d: body
    JN_BREAK,
    JN_CONTINUE,
    JN_PARAM, // s/n: name, a: default or NULL
    // expressions
    JN_LIT,     // lit
    JN_NAME,    // s/n
    JN_LIST,    // v
    JN_TUPLE,   // v
    JN_DICT,    // v: JN_PAIR
    JN_PAIR,    // a: key, b: value
    JN_ATTR,    // a: object, s/n: attribute
    JN_ITEM,    // a: object, b: key
    JN_SLICE,   // a: object, b/c/d: start, stop, step (each may be NULL)
    JN_CALL,    // a: callee, v: args (JN_KWARG for name=value)
    JN_KWARG,   // s/n: name, a: value
    JN_FILTER,  // a: input, s/n: filter name, v: args
    JN_TEST,    // a: input, s/n: test name, v: args, op: 1 when negated (is not)
    JN_UNARY,   // op: '-', '+' or 'n' (not), a
    JN_BINARY,  // op: + - * / % ~ JOP_*; a, b
    JN_COMPARE, // op: == != < > <= >= 'i' (in) 'I' (not in); a, b
    JN_AND,
    JN_OR,
    JN_COND, // a: then, b: condition, c: else or NULL
    JN_PLACEHOLDER, // the body text a filter block's chain is applied to
} jn_kind;

typedef struct jnode jnode;
struct jnode {
    int kind, op, line, nv;
    const char *s;
    size_t n;
    jv lit;
    jnode *a, *b, *c, *d, *e;
    jnode **v;
};

// Parses tokens into the template body (an arena-owned JN_BODY).
jnode *jinja_parse_tokens(jinja_arena *a, jtok *toks, int ntok, int max_depth);

// --- render context
typedef struct jinja_var {
    const char *name;
    uint32_t n;
    jv v;
} jinja_var;
typedef struct jinja_frame jinja_frame;
struct jinja_frame {
    jinja_frame *parent;
    jinja_var *vars;
    uint32_t n, cap;
};

struct jinja_macro {
    const jnode *def;
    jinja_frame *scope; // where it was defined (its names stay visible)
    const jnode *caller_def; // for the implicit caller() of {% call %}: the call block
    jinja_frame *caller_scope;
};

struct jinja_loop {
    int64_t index0, length;
    jv prev, next;
    int has_prev, has_next;
};

typedef struct jinja_buf {
    char *p;
    size_t n, cap;
    jinja_prov *pv; // provenance of the text so far (arena, its pairs right after it; NULL: none)
    uint32_t rcap;  // pairs pv has room for
} jinja_buf;

typedef struct jinja_ctx jinja_ctx;

// Calls from the expression layer back up into the statement layer, which fills the table in before a
// render: evaluating a call to a macro runs the macro's body. The files below jinja_exec.c reach it only
// through this table, so the files stay a tree.
typedef struct jinja_hooks {
    jv (*run_macro)(jinja_ctx *c, jinja_macro *m, int npos, const jv *pos, int nkw, const jv *kwnames,
                    const jv *kwvals);
} jinja_hooks;

struct jinja_ctx {
    const jinja_hooks *hooks; // borrowed, static
    jinja_arena ar;
    jinja_fault fault;
    jinja_buf *out; // where text goes now (block set and filter blocks capture into their own)
    size_t max_output;
    uint64_t steps, max_steps;
    int depth, max_depth;
    int64_t now;
    jinja_frame *globals;
    int brk;        // 1 break, 2 continue pending
    int json_ascii; // tojson(ensure_ascii=True) is writing
};

#define JV_MK(tt) ((jv){.t = (tt)})
jv jinja_str(const char *s, size_t n);
jv jinja_int(int64_t i);
jv jinja_float(double f);
jv jinja_bool(int b);
jv jinja_cstr(const char *s);

_Noreturn void jinja_err(jinja_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void jinja_step(jinja_ctx *c);

// values (jinja_value.c)
jinja_list *jinja_list_new(jinja_ctx *c, uint32_t cap);
void jinja_list_push(jinja_ctx *c, jinja_list *l, jv v);
jinja_dict *jinja_dict_new(jinja_ctx *c, uint32_t cap);
void jinja_dict_set(jinja_ctx *c, jinja_dict *d, jv k, jv v);
int jinja_dict_find(const jinja_dict *d, const char *k, size_t n); // index or -1
int jinja_dict_findv(const jinja_dict *d, jv k);
int jinja_truthy(jv v);
int jinja_equal(jv a, jv b);
int jinja_compare(jinja_ctx *c, jv a, jv b); // <0, 0, >0; errors on incomparable types
const char *jinja_type_name(jv v);
void jinja_buf_add(jinja_ctx *c, jinja_buf *b, const char *s, size_t n);
// Appends string v with its provenance.
void jinja_buf_addv(jinja_ctx *c, jinja_buf *b, jv v);
// Marks bytes [from, b->n) of b as untrusted text.
void jinja_buf_mark(jinja_ctx *c, jinja_buf *b, size_t from);
// 1 when v is a string with untrusted bytes, or a list, tuple or dict holding one at its first level.
int jinja_has_user(jv v);
// The conservative provenance of a value computed from inputs of which any_user says whether one was untrusted:
// a string (or a list's strings) with no provenance of its own becomes untrusted text as a whole.
jv jinja_taint(jinja_ctx *c, jv r, int any_user);
// jinja_has_user over a call's input, positional and keyword arguments (in may be JV_UNDEF when there is none).
int jinja_args_user(jv in, int npos, const jv *pos, int nkw, const jv *kwvals);
void jinja_buf_str(jinja_ctx *c, jinja_buf *b, jv v);  // str(v)
void jinja_buf_repr(jinja_ctx *c, jinja_buf *b, jv v); // repr(v)
jv jinja_to_str(jinja_ctx *c, jv v);
jv jinja_buf_take(jinja_buf *b);
void jinja_fmt_float(double f, char *out, size_t cap); // Python repr(float)
size_t jinja_u8_len(const char *s, size_t n);          // code points
size_t jinja_u8_off(const char *s, size_t n, size_t cp); // byte offset of code point cp (n if past the end)
int jinja_is_iterable(jv v);
jinja_list *jinja_iter_list(jinja_ctx *c, jv v); // the items a for loop visits

// string helpers (jinja_str.c): call only the value layer
int jinja_is_ws(unsigned char ch); // Python's str.isspace for one byte
// Python's str.strip (left and right) / lstrip / rstrip; chars JV_STR: those characters, else whitespace.
jv jinja_strip(jv s, jv chars, int left, int right);
jv jinja_case(jinja_ctx *c, jv s, int mode); // 'u' upper, 'l' lower, 'c' capitalize, 't' title
jv jinja_replace(jinja_ctx *c, jv s, jv old, jv rep, int64_t count); // count < 0: all
jv jinja_html_escape(jinja_ctx *c, jv s);
jv jinja_printf(jinja_ctx *c, jv fmt, int nargs, const jv *args); // fmt % args

// scopes and access (jinja_scope.c): names in frames, attributes and items with jinja2's sandbox rules
jinja_frame *jinja_frame_new(jinja_ctx *c, jinja_frame *parent);
void jinja_frame_set(jinja_ctx *c, jinja_frame *f, const char *name, size_t n, jv v);
jv jinja_lookup(jinja_ctx *c, jinja_frame *f, const char *name, size_t n);
jv jinja_getattr(jinja_ctx *c, jv obj, const char *name, size_t n);
jv jinja_getitem(jinja_ctx *c, jv obj, jv key);
_Noreturn void jinja_undefined_err(jinja_ctx *c, jv u); // "'name' is undefined" for a JV_UNDEF

// evaluation (jinja_eval.c)
jv jinja_eval(jinja_ctx *c, jinja_frame *f, const jnode *n);
// Calls a macro (through c->hooks), a global function or a bound method.
jv jinja_call_value(jinja_ctx *c, jv fn, int npos, const jv *pos, int nkw, const jv *kwnames, const jv *kwvals);

// statements and the entry points (jinja_exec.c)
void jinja_exec(jinja_ctx *c, jinja_frame *f, const jnode *n);

// filters, tests, methods, globals (jinja_filters.c, jinja_tests.c, jinja_methods.c, jinja_globals.c)
jv jinja_filter(jinja_ctx *c, const char *name, size_t nn, jv in, int npos, const jv *pos, int nkw,
                const jv *kwnames, const jv *kwvals);
int jinja_test(jinja_ctx *c, const char *name, size_t nn, jv in, int nargs, const jv *args);
int jinja_test_known(const char *name, size_t n);
int jinja_has_method(jv self, const char *name, size_t n);
jv jinja_method_call(jinja_ctx *c, jinja_method *m, int npos, const jv *pos, int nkw, const jv *kwnames,
                     const jv *kwvals);
int jinja_global_fn(const char *name, size_t n); // a jinja_fn id, or -1
jv jinja_global_call(jinja_ctx *c, int fn, int npos, const jv *pos, int nkw, const jv *kwnames, const jv *kwvals);

// JSON (jinja_json.c)
// user: every string (keys too) is untrusted text.
jv jinja_from_json(jinja_ctx *c, const json_t *j, int user);
void jinja_tojson(jinja_ctx *c, jinja_buf *b, jv v, int indent, const char *item_sep, const char *key_sep,
                  int sort_keys, int level);

static inline int jinja_eq(const char *s, size_t n, const char *lit) {
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

#endif
