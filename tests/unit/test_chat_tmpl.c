// chat_tmpl (a model's Jinja chat template) through its public interface: the rendering and the ranges of it
// that are message text (plain for the tokenizer), on SmolLM2's own template; parse and render errors.
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "tokenizer/chat_tmpl.h"

static const char k_smol[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

static void test_smol_ranges(void) {
    chat_tmpl *t = NULL;
    tc_err err = {0};
    CHECK(chat_tmpl_new(k_smol, strlen(k_smol), NULL, &t, &err) == 0);
    if (!t) return;
    json_t *msgs = json_loads("[{\"role\": \"user\", \"content\": \"hi<|im_end|>\"}]", 0, NULL);
    char *out = NULL;
    size_t n = 0;
    tok_range *pl = NULL;
    int npl = 0;
    CHECK(chat_tmpl_render(t, msgs, NULL, NULL, 1, &out, &n, &pl, &npl, &err) == 0);
    const char *want = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                       "<|im_end|>\n<|im_start|>user\nhi<|im_end|><|im_end|>\n<|im_start|>assistant\n";
    CHECK_MSG(out && !strcmp(out, want) && n == strlen(want), "got [%s]", out ? out : "(null)");
    // the role and the content are message text; every marker is the template's
    const char *role = strstr(want, "user\n"), *content = strstr(want, "hi<|im_end|>");
    CHECK_MSG(npl == 2, "%d ranges", npl);
    if (npl == 2) {
        CHECK(pl[0].off == (size_t)(role - want) && pl[0].len == 4);
        CHECK(pl[1].off == (size_t)(content - want) && pl[1].len == strlen("hi<|im_end|>"));
    }
    free(out);
    free(pl);
    json_decref(msgs);
    chat_tmpl_free(t);
}

static void test_errors(void) {
    chat_tmpl *t = NULL;
    tc_err err = {0};
    const char *bad = "{% for m in messages %}";
    CHECK(chat_tmpl_new(bad, strlen(bad), NULL, &t, &err) != 0 && !t && strstr(err.msg, "endfor"));
    const char *raises = "{{ raise_exception('no ' + messages[0].role) }}";
    CHECK(chat_tmpl_new(raises, strlen(raises), NULL, &t, &err) == 0);
    json_t *msgs = json_loads("[{\"role\": \"user\", \"content\": \"x\"}]", 0, NULL);
    char *out = NULL;
    size_t n = 0;
    tok_range *pl = NULL;
    int npl = 0;
    CHECK(chat_tmpl_render(t, msgs, NULL, NULL, 1, &out, &n, &pl, &npl, &err) != 0 && !out && !pl);
    CHECK_MSG(strstr(err.msg, "no user") != NULL, "%s", err.msg);
    CHECK(!chat_tmpl_reads(t, "enable_thinking") && chat_tmpl_reads(t, "raise_exception"));
    json_decref(msgs);
    chat_tmpl_free(t);
    CHECK(chat_tmpl_load_file("/nonexistent/x.jinja", NULL, &t, &err) != 0 && strstr(err.msg, "x.jinja"));
}

int main(void) {
    test_smol_ranges();
    test_errors();
    TEST_MAIN_END();
}
