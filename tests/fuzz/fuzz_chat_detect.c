// libFuzzer target: chat template detection and the per-family details read from arbitrary template text
// (tokenizer.chat_template comes from the model file: untrusted). The input is the template text; it is
// detected, then a fixed conversation is rendered with every family using that text, which runs every
// marker scanner (default system prompt literal, knowledge/today dates, Mistral variants …) over it.
// Checks: rendering plain system/user/assistant messages never fails, the user's text is in the output,
// and a ChatML default system prompt taken from the text stays within its buffer (ASan) and is a C string.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/chat.h"

#define CHECK(c)                                                                                             \
    do {                                                                                                     \
        if (!(c)) __builtin_trap();                                                                          \
    } while (0)

static const chat_msg conv[2][3] = {
    {{"system", "  Be brief.\n"}, {"user", "What is 2+2?"}, {"assistant", "<think>x</think>4"}},
    {{"user", "hello"}, {"assistant", " hi "}, {"user", "What is 2+2?"}},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 65536) return 0;
    char *t = malloc(size + 1);
    if (!t) return 0;
    memcpy(t, data, size);
    t[size] = 0;
    chat_family d = chat_detect(t);
    CHECK(d >= CHAT_UNKNOWN && d < CHAT_COUNT);
    CHECK(d == CHAT_UNKNOWN || chat_family_from_name(chat_family_name(d)) == d);
    if (size < 64) (void)chat_family_from_name(t);
    for (int f = 1; f < CHAT_COUNT; f++) {
        for (int c = 0; c < 2; c++) {
            for (int gen = 0; gen < 2; gen++) {
                char *out = NULL;
                tc_err err = {0};
                int rc = chat_render((chat_family)f, t, conv[c], 3, gen, "<s>", &out, &err);
                CHECK(rc == 0 && out);
                CHECK(strstr(out, "What is 2+2?"));
                free(out);
            }
        }
    }
    free(t);
    return 0;
}
