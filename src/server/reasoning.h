// Reasoning split: the text a reasoning model generates, "<think>…</think>answer", separated into
// reasoning_content and content as vLLM and DeepSeek's API return them. Works on a stream: bytes arrive in
// arbitrary pieces (a tag may be split across tokens or chunks), so a piece that could be the start of a
// tag is held back until the next piece decides it. The non-streamed response uses the same splitter fed
// once, so both give the same split.
// Rules: the output is reasoning when it starts with "<think>" (or from the first byte when the prompt
// already opened the think block, as DeepSeek R1's template does) until "</think>"; newlines right after
// either tag are dropped. Output that does not start with "<think>" is all content. Tags are removed.
#ifndef TACHYON_SERVER_REASONING_H
#define TACHYON_SERVER_REASONING_H

#include <stddef.h>

#include "common/strbuf.h"

typedef enum { RSN_START = 0, RSN_THINK, RSN_CONTENT } rsn_state;

typedef struct rsn_split {
    rsn_state state;
    int skip_nl;   // drop newlines at the start of the next bytes (right after a tag)
    char hold[16]; // (n_hold) bytes that may begin a tag
    int n_hold;
} rsn_split;

// in_think: the prompt ended inside an open <think> (chat_family_opens_think).
void rsn_init(rsn_split *s, int in_think);
// Feeds n bytes; appends what is decided to *reasoning and *content. final: the output ended, release
// held bytes as what they are.
void rsn_feed(rsn_split *s, const char *p, size_t n, int final, tc_strbuf *reasoning, tc_strbuf *content);

#endif
