// libFuzzer target: chat rendering of arbitrary messages through every template family, with the
// family's default details and with details read from a real template text.
// Input: byte 0 = flags (bit 0: add_generation_prompt, bit 1: no BOS text, bits 2-3: which template text),
// then NUL-separated fields role0, content0, role1, content1, … (any bytes; roles need not be valid).
// Checks: rendering never crashes; a message list with a non-standard role is refused with a message (except by
// ChatML, which accepts any role); and every user message's content, trimmed as Python's str.strip() trims
// it (the families that trim), appears in the output.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/chat.h"

#define CHECK(c)                                                                                             \
    do {                                                                                                     \
        if (!(c)) __builtin_trap();                                                                          \
    } while (0)

#define MAX_MSGS 64

// Template texts that switch on the per-family details (default system prompt, Llama 3.1 date preamble,
// Mistral spacing variants, DeepSeek EOS after user turns, Phi-3 EOS).
static const char *const templates[4] = {
    NULL,
    "{{ bos_token }}<|im_start|>system\\nYou are a helpful AI assistant named SmolLM<|im_end|>\\n"
    "Cutting Knowledge Date: December 2023 date_string = \"26 Jul 2024\" eos_token .strip()",
    "{{ bos_token + '[INST] ' }}' [INST] '[SYSTEM_PROMPT]' [/INST]' '<\xef\xbd\x9cUser\xef\xbd\x9c>' + "
    "message['content'] + '<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>'",
    "\"[INST]\" + strftime_now <|im_start|>system\n<|im_end|>",
};

static int is_pyspace(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

static int is_std_role(const char *r) { return !strcmp(r, "system") || !strcmp(r, "user") || !strcmp(r, "assistant"); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 16384) return 0;
    int gen = data[0] & 1;
    const char *bos = (data[0] & 2) ? NULL : "<s>";
    const char *tmpl = templates[(data[0] >> 2) & 3];
    // one copy with a NUL after the last field, so every field is a C string
    char *buf = malloc(size);
    if (!buf) return 0;
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = 0;
    chat_msg msgs[MAX_MSGS];
    int n = 0, nonstd = 0, nonstd_llama3 = 0; // a role outside system/user/assistant (Llama 3: also ipython)
    const char *fields[2 * MAX_MSGS];
    int nf = 0;
    for (size_t i = 0; i < size - 1 && nf < 2 * MAX_MSGS; i += strlen(buf + i) + 1) fields[nf++] = buf + i;
    for (int i = 0; i + 1 < nf; i += 2) {
        msgs[n].role = fields[i];
        msgs[n].content = fields[i + 1];
        nonstd |= !is_std_role(fields[i]);
        nonstd_llama3 |= !is_std_role(fields[i]) && strcmp(fields[i], "ipython");
        n++;
    }
    for (int f = 1; f < CHAT_COUNT; f++) {
        int odd = f == CHAT_LLAMA3 ? nonstd_llama3 : nonstd; // roles this family does not know
        char *out = NULL;
        tc_err err = {0};
        int rc = chat_render((chat_family)f, tmpl, msgs, n, gen, bos, &out, &err);
        if (rc) {
            CHECK(!out && err.msg[0]);
            CHECK(odd); // only a role the family does not know (or an empty one) is a reason to refuse
            continue;
        }
        CHECK(out);
        CHECK(f == CHAT_CHATML || f == CHAT_QWEN3 || !odd); // qwen3 skips roles it does not know, as its template
        for (int i = 0; i < n; i++) {
            if (strcmp(msgs[i].role, "user")) continue;
            const char *c = msgs[i].content;
            size_t a = 0, b = strlen(c);
            while (a < b && is_pyspace((unsigned char)c[a])) a++;
            while (b > a && is_pyspace((unsigned char)c[b - 1])) b--;
            CHECK(memmem(out, strlen(out), c + a, b - a));
        }
        free(out);
    }
    free(buf);
    return 0;
}
