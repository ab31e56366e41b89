// Digit patterns for numeric bounds: see gram_range.h.
#include "grammar/gram_range.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put(tc_strbuf *o, const char *s) { tc_strbuf_str(o, s); }

static void digits(tc_strbuf *o, char a, char b) { // one digit from a to b
    char t[8];
    if (a == b) snprintf(t, sizeof t, "\"%c\"", a);
    else snprintf(t, sizeof t, "[%c-%c]", a, b);
    put(o, t);
}

static void any_digits(tc_strbuf *o, size_t n) { // exactly n digits
    char t[32];
    if (n == 0) return;
    snprintf(t, sizeof t, n == 1 ? " [0-9]" : " [0-9]{%zu}", n);
    put(o, t);
}

static int all(const char *s, size_t n, char c) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != c) return 0;
    return 1;
}

// The n-digit strings from L to H (same length, L <= H), as one expression.
static void same_len(tc_strbuf *o, const char *L, const char *H, size_t n) {
    if (n == 1) {
        digits(o, L[0], H[0]);
        return;
    }
    if (L[0] == H[0]) {
        digits(o, L[0], L[0]);
        put(o, " ");
        same_len(o, L + 1, H + 1, n - 1);
        return;
    }
    char lo = L[0], hi = H[0], nines[24], zeros[24];
    memset(nines, '9', n - 1), memset(zeros, '0', n - 1);
    int first = 1;
    put(o, "(");
    if (!all(L + 1, n - 1, '0')) { // the leading digit of L with the tails from L's up
        digits(o, lo, lo);
        put(o, " (");
        same_len(o, L + 1, nines, n - 1);
        put(o, ")");
        lo++, first = 0;
    }
    char last = hi;
    if (!all(H + 1, n - 1, '9')) hi--;
    if (lo <= hi) {
        if (!first) put(o, " | ");
        digits(o, lo, hi);
        any_digits(o, n - 1);
        first = 0;
    }
    if (hi < last) { // the leading digit of H with the tails up to H's
        if (!first) put(o, " | ");
        digits(o, last, last);
        put(o, " (");
        same_len(o, zeros, H + 1, n - 1);
        put(o, ")");
    }
    put(o, ")");
}

// The decimal integers from a to b (0 <= a <= b <= GRAM_RANGE_MAX) without leading zeros: alternatives.
static void int_range(tc_strbuf *o, long long a, long long b) {
    long long p = 1; // 10^(d-1)
    int first = 1;
    put(o, "(");
    for (int d = 1; d <= 16; d++, p *= 10) {
        long long lo = d == 1 ? 0 : p, hi = p * 10 - 1;
        if (lo < a) lo = a;
        if (hi > b) hi = b;
        if (lo > hi) continue;
        char L[24], H[24];
        snprintf(L, sizeof L, "%lld", lo), snprintf(H, sizeof H, "%lld", hi);
        if (!first) put(o, " | ");
        same_len(o, L, H, strlen(L));
        first = 0;
    }
    put(o, ")");
}

#define FRAC " (\".\" [0-9]{1,16})?"
#define ZFRAC " (\".\" \"0\"{1,16})?"
#define NZFRAC " \".\" [0-9]{0,15} [1-9]"

static void lit(tc_strbuf *o, long long v, const char *tail) {
    char t[48];
    snprintf(t, sizeof t, "\"%lld\"%s", v, tail);
    put(o, t);
}

// Non-negative numbers with magnitude from a to b (b_open: no upper bound); a_in / b_in: the bound itself is
// included. Appends alternatives to o; returns 1 when it wrote any.
static int magnitudes(tc_strbuf *o, long long a, int a_in, long long b, int b_in, int b_open) {
    int any = 0;
#define SEP() (any ? put(o, " | ") : (void)0, any = 1)
    if (!b_open && a == b) {
        if (a_in && b_in) SEP(), lit(o, a, ZFRAC);
        return any;
    }
    SEP(), lit(o, a, a_in ? FRAC : NZFRAC);
    long long hi = b_open ? GRAM_RANGE_MAX : b - 1;
    if (a + 1 <= hi) {
        SEP(), int_range(o, a + 1, hi);
        put(o, FRAC);
    }
    if (!b_open && b_in) SEP(), lit(o, b, ZFRAC);
#undef SEP
    return any;
}

int gram_range_expr(tc_strbuf *o, int integer, const gram_bounds *bd) {
    const double M = (double)GRAM_RANGE_MAX;
    int has_lo = bd->has_lo && fabs(bd->lo) <= M, has_hi = bd->has_hi && fabs(bd->hi) <= M;
    // integer parts: A <= v <= B, tightened inward for bounds that are not integers
    long long A = has_lo ? (long long)ceil(bd->lo) : -GRAM_RANGE_MAX;
    long long B = has_hi ? (long long)floor(bd->hi) : GRAM_RANGE_MAX;
    int a_in = !(has_lo && bd->lo_excl && (double)A == bd->lo), b_in = !(has_hi && bd->hi_excl && (double)B == bd->hi);
    if (integer) {
        if (!a_in) A++, a_in = 1;
        if (!b_in) B--, b_in = 1;
    }
    if (A > B || (A == B && !(a_in && b_in))) return -1;
    tc_strbuf e = {0};
    put(&e, "(");
    int any = 0;
    if (integer) {
        if (B >= 0) int_range(&e, A > 0 ? A : 0, B), any = 1;
        if (A < 0) {
            if (any) put(&e, " | ");
            put(&e, "\"-\" ");
            int_range(&e, B < 0 ? -B : 1, -A);
        }
    } else {
        if (B >= 0) any = magnitudes(&e, A > 0 ? A : 0, A >= 0 ? a_in : 1, B, b_in, !has_hi);
        if (A < 0) { // v < 0: magnitudes from -B (or just above 0) to -A
            if (any) put(&e, " | ");
            put(&e, "\"-\" (");
            magnitudes(&e, B < 0 ? -B : 0, B < 0 ? b_in : 0, -A, a_in, !has_lo);
            put(&e, ")");
        }
    }
    put(&e, ")");
    if (e.oom) {
        free(e.p);
        o->oom = 1;
        return 0;
    }
    tc_strbuf_add(o, e.p, e.n);
    free(e.p);
    return 0;
}
