// Chat templates: detection of every template in ../shared/testdata/chat-templates/ (expectations per file
// name) and of SmolLM2's template, name round trips, details read from template text, and errors.
// Byte-exact rendering against Jinja is in tests/ref/test_chat_ref.py.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "tokenizer/chat.h"

#define TDIR "../shared/testdata/chat-templates/"

static char *slurp(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, fp) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf) buf[n] = 0;
    fclose(fp);
    return buf;
}

// tokenizer.chat_template of models/SmolLM2-135M-Instruct.Q4_1.gguf (tests/ref reads it from the file).
static const char smollm2_tmpl[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n"
    "' + message['content'] + '<|im_end|>' + '\n"
    "'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n"
    "' }}{% endif %}";

static void test_detect_files(void) {
    static const struct { const char *file; chat_family want; } cases[] = {
        {"CohereForAI-c4ai-command-r-plus-tool_use.jinja", CHAT_UNKNOWN},
        {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", CHAT_UNKNOWN},
        {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", CHAT_CHATML},
        {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", CHAT_CHATML},
        {"Qwen-Qwen2.5-7B-Instruct.jinja", CHAT_CHATML},
        {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", CHAT_DEEPSEEK},
        {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", CHAT_DEEPSEEK},
        {"fireworks-ai-llama-3-firefunction-v2.jinja", CHAT_UNKNOWN},
        {"google-gemma-2-2b-it.jinja", CHAT_GEMMA},
        {"llama-cpp-deepseek-r1.jinja", CHAT_DEEPSEEK},
        {"meetkai-functionary-medium-v3.1.jinja", CHAT_UNKNOWN},
        {"meetkai-functionary-medium-v3.2.jinja", CHAT_UNKNOWN},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", CHAT_LLAMA3},
        {"meta-llama-Llama-3.2-3B-Instruct.jinja", CHAT_LLAMA3},
        {"meta-llama-Llama-3.3-70B-Instruct.jinja", CHAT_LLAMA3},
        {"microsoft-Phi-3.5-mini-instruct.jinja", CHAT_PHI3},
        {"mistralai-Mistral-Nemo-Instruct-2407.jinja", CHAT_MISTRAL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, TDIR "%s", cases[i].file);
        char *t = slurp(path);
        CHECK_MSG(t != NULL, "cannot read %s", path);
        if (!t) continue;
        chat_family got = chat_detect(t);
        CHECK_MSG(got == cases[i].want, "%s: detected %s, want %s", cases[i].file, chat_family_name(got),
                  chat_family_name(cases[i].want));
        free(t);
    }
    CHECK_EQ_INT(chat_detect(smollm2_tmpl), CHAT_CHATML);
    CHECK_EQ_INT(chat_detect(NULL), CHAT_UNKNOWN);
    CHECK_EQ_INT(chat_detect(""), CHAT_UNKNOWN);
    CHECK_EQ_INT(chat_detect("{{ messages }}"), CHAT_UNKNOWN);
    CHECK_EQ_INT(chat_detect("{{ '<<SYS>>' }}[INST]"), CHAT_LLAMA2);
    CHECK_EQ_INT(chat_detect("{{'<|user|>\n' + message['content'] + eos_token}}<|assistant|>"), CHAT_ZEPHYR);
    CHECK_EQ_INT(chat_detect("<start_of_turn>user"), CHAT_GEMMA);
}

static void test_names(void) {
    for (int f = 1; f < CHAT_COUNT; f++) {
        const char *n = chat_family_name((chat_family)f);
        CHECK_MSG(chat_family_from_name(n) == (chat_family)f, "name %s does not round-trip", n);
    }
    CHECK_EQ_INT(chat_family_from_name("no-such-family"), CHAT_UNKNOWN);
    CHECK_EQ_INT(chat_family_from_name(NULL), CHAT_UNKNOWN);
    CHECK(!strcmp(chat_family_name(CHAT_UNKNOWN), "unknown"));
}

static int render_eq(chat_family f, const char *tmpl, const chat_msg *m, int n, int gen, const char *bos,
                     const char *want) {
    char *out = NULL;
    tc_err err = {0};
    int rc = chat_render(f, tmpl, m, n, gen, bos, &out, &err);
    int ok = rc == 0 && out && !strcmp(out, want);
    if (!ok) fprintf(stderr, "render %s: rc %d (%s)\n  got  [%s]\n  want [%s]\n", chat_family_name(f), rc, err.msg,
                     out ? out : "(null)", want);
    free(out);
    return ok;
}

static void test_render_details(void) {
    const chat_msg user[] = {{"user", "Hi"}};
    // SmolLM2's default system prompt comes from the template text; with no template there is none.
    CHECK(render_eq(CHAT_CHATML, smollm2_tmpl, user, 1, 1, NULL,
                    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                    "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"));
    CHECK(render_eq(CHAT_CHATML, NULL, user, 1, 0, NULL, "<|im_start|>user\nHi<|im_end|>\n"));
    const chat_msg sys_user[] = {{"system", "S"}, {"user", "Hi"}};
    CHECK(render_eq(CHAT_CHATML, smollm2_tmpl, sys_user, 2, 0, NULL,
                    "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"));
    // Qwen2.5's default (escaped \n inside a Jinja literal; the first literal-looking match is a concatenation).
    char *qwen = slurp(TDIR "Qwen-Qwen2.5-7B-Instruct.jinja");
    CHECK(qwen != NULL);
    if (qwen)
        CHECK(render_eq(CHAT_CHATML, qwen, user, 1, 1, NULL,
                        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
                        "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"));
    free(qwen);
    // Llama 3.1 date preamble from the template literal; contents trimmed.
    const chat_msg ws[] = {{"system", " S \n"}, {"user", "\n Hi  "}};
    CHECK(render_eq(CHAT_LLAMA3, "Cutting Knowledge Date: March 2031\\n set date_string = \"01 Jan 2030\"", ws, 2, 1,
                    "<B>",
                    "<B><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: March 2031\n"
                    "Today Date: 01 Jan 2030\n\nS<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                    "<|start_header_id|>assistant<|end_header_id|>\n\n"));
    // Gemma: system merged into the first user turn, assistant is "model".
    const chat_msg g[] = {{"system", "S"}, {"user", "Q"}, {"assistant", "A"}};
    CHECK(render_eq(CHAT_GEMMA, NULL, g, 3, 1, "<bos>",
                    "<bos><start_of_turn>user\nS\n\nQ<end_of_turn>\n<start_of_turn>model\nA<end_of_turn>\n"
                    "<start_of_turn>model\n"));
    // Empty conversation: a valid (possibly empty) string.
    CHECK(render_eq(CHAT_CHATML, NULL, NULL, 0, 0, NULL, ""));
}

static void test_errors(void) {
    char *out = (char *)1;
    tc_err err = {0};
    const chat_msg tool[] = {{"tool", "x"}};
    CHECK_EQ_INT(chat_render(CHAT_LLAMA3, NULL, tool, 1, 1, NULL, &out, &err), TC_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "tool") != NULL, "message: %s", err.msg);
    CHECK(out == NULL);
    const chat_msg nul[] = {{"user", NULL}};
    CHECK_EQ_INT(chat_render(CHAT_CHATML, NULL, nul, 1, 1, NULL, &out, &err), TC_ERR_INVALID);
    CHECK_EQ_INT(chat_render(CHAT_UNKNOWN, NULL, tool, 1, 1, NULL, &out, &err), TC_ERR_INVALID);
    // ChatML accepts any role (tool results in Qwen/Hermes conversations).
    CHECK(render_eq(CHAT_CHATML, NULL, tool, 1, 0, NULL, "<|im_start|>tool\nx<|im_end|>\n"));
}

int main(void) {
    test_detect_files();
    test_names();
    test_render_details();
    test_errors();
    TEST_MAIN_END();
}
