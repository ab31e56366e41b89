// libFuzzer target: the Jinja interpreter on hostile templates (chat templates come from files users
// download). Input: the template text, rendered with a small fixed conversation and tools under tight limits.
// Checks: parsing and rendering never crash, hang or exhaust memory (every limit fails cleanly), a failure
// always carries a message and no output, and a success stays within the output limit.
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jinja/jinja.h"

#define CHECK(c)                                                                                             \
    do {                                                                                                     \
        if (!(c)) __builtin_trap();                                                                          \
    } while (0)

static json_t *vars;

static const char *const VARS_JSON =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"Hi {{ x }} \\u00e9\"},"
    " {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"a1b2c3d4e\", \"type\": \"function\","
    "   \"function\": {\"name\": \"f\", \"arguments\": {\"a\": [1, 2.5, true, null]}}}]},"
    " {\"role\": \"tool\", \"content\": \"42\", \"tool_call_id\": \"a1b2c3d4e\"},"
    " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"parts\"}]}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\"}}}],"
    " \"documents\": null, \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!vars) vars = json_loads(VARS_JSON, 0, NULL);
    CHECK(vars);
    jinja_limits lim = {.max_template = 65536, .max_output = 1 << 20, .max_memory = 64 << 20,
                        .max_steps = 200000, .max_depth = 64};
    jinja_template *t = NULL;
    tc_err err = {0};
    if (jinja_parse((const char *)data, size, &lim, &t, &err)) {
        CHECK(!t && err.msg[0]);
        return 0;
    }
    CHECK(t);
    char *out = NULL;
    size_t n = 0;
    memset(&err, 0, sizeof err);
    if (jinja_render(t, vars, &lim, 1735732800, &out, &n, &err)) {
        CHECK(!out && err.msg[0]);
    } else {
        CHECK(out && n <= lim.max_output && out[n] == 0);
        free(out);
    }
    jinja_free(t);
    return 0;
}
