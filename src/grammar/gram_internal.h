// Compiled grammar layout shared by the parser and the matcher. Each rule is a run of elements in one flat
// array: alternatives separated by GE_ALT, the rule closed by GE_END. A character set is a GE_CHAR /
// GE_CHAR_NOT element followed by GE_CHAR_RNG_UPPER (closing a range) and GE_CHAR_ALT (more members).
#ifndef TACHYON_GRAMMAR_INTERNAL_H
#define TACHYON_GRAMMAR_INTERNAL_H

#include <stdint.h>
#include <time.h>

#include "grammar/gram.h"

typedef enum {
    GE_END = 0,        // end of rule
    GE_ALT,            // start of another alternative
    GE_RULE_REF,       // value: rule id
    GE_CHAR,           // value: code point (first member of a set)
    GE_CHAR_NOT,       // value: code point (first member of a negated set; may be 0 with GE_CHAR_ANY)
    GE_CHAR_RNG_UPPER, // value: upper bound of the range started by the previous element
    GE_CHAR_ALT,       // value: another member of the set
    GE_CHAR_ANY,       // '.': any code point
} gram_etype;

typedef struct gram_el {
    uint32_t type;  // gram_etype
    uint32_t value; // code point or rule id
} gram_el;

struct gram {
    gram_el *el;       // (n_el) every rule's elements
    int n_el;
    int32_t *rule_off; // (n_rules) offset of each rule's first element in el
    int32_t *alt_end;  // (n_el) for each element, the GE_ALT / GE_END that ends its alternative
    int n_rules;
    int root;          // rule id
    _Atomic int refs;  // gram_ref / gram_free
};

// The compile-time clock: this thread's CPU seconds, so the limit measures the work done, not how busy the
// machine is.
static inline double gram_clock(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// The checks after parsing (gram_check.c), linear in g->n_el: the root can complete, no rule is left
// recursive, and every position's expansion stays within GRAM_MAX_FANOUT / GRAM_MAX_DEPTH. names (n_rules)
// are for messages; deadline: gram_clock() seconds past which compiling fails. TC_ERR_INVALID / TC_ERR_NOMEM.
int gram_check(const gram *g, const char *const *names, double deadline, tc_err *err);

// The vocabulary trie over bytes: node 0 is the root; a node's children are contiguous (child .. child +
// n_child), in byte order. Bytes rather than code points, so a token holding part of a character (a UTF-8
// fragment) has its place: the mask walk decodes as it descends (gram_utf8.h).
typedef struct gram_tnode {
    uint8_t byte;     // the byte on the edge into this node
    int32_t child, n_child;
    int32_t tok_off, n_tok; // tokens whose text ends here: toks[tok_off .. tok_off + n_tok)
} gram_tnode;

struct gram_vocab {
    int n_vocab;
    gram_tnode *nodes; // (n_nodes)
    int n_nodes;
    int32_t *toks;     // (n_vocab at most) token ids grouped by node
    uint8_t *bytes;    // every token's text
    int32_t *b_off, *b_len; // (n_vocab) each token's bytes in bytes; b_len < 0: never allowed
    uint8_t *is_eog;   // (n_vocab)
};
#endif
