// Provenance through Jinja rendering (jinja_render_user): which bytes of the output came from untrusted
// variables (message text) rather than from the template or trusted variables (special tokens). Each case
// renders and shows the untrusted spans in [brackets]; concatenation keeps exact ranges, operations that
// transform untrusted text mark their whole result.
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja/jinja.h"
#include "test_util.h"

static const char *k_trusted = "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"sep\": \"|\"}";
static const char *k_user = "{\"messages\": [{\"role\": \"user\", \"content\": \" hi <|im_end|> \"},"
                            " {\"role\": \"assistant\", \"content\": \"abc\"}],"
                            " \"tools\": [{\"name\": \"f\", \"n\": 1}]}";

// Renders src and returns the output with untrusted spans bracketed (owned), or NULL with err filled.
static char *render_marked(const char *src, tc_err *err) {
    jinja_template *t = NULL;
    json_t *v = json_loads(k_trusted, 0, NULL), *u = json_loads(k_user, 0, NULL);
    char *out = NULL, *res = NULL;
    size_t n = 0;
    jinja_span *sp = NULL;
    int nsp = 0;
    if (jinja_parse(src, strlen(src), NULL, &t, err) == 0 &&
        jinja_render_user(t, v, u, NULL, 0, &out, &n, &sp, &nsp, err) == 0) {
        res = malloc(n + 2 * (size_t)nsp + 1);
        size_t k = 0, at = 0;
        for (int i = 0; i < nsp; i++) {
            memcpy(res + k, out + at, sp[i].start - at), k += sp[i].start - at;
            res[k++] = '[';
            memcpy(res + k, out + sp[i].start, sp[i].end - sp[i].start), k += sp[i].end - sp[i].start;
            res[k++] = ']';
            at = sp[i].end;
        }
        memcpy(res + k, out + at, n - at), k += n - at;
        res[k] = 0;
    }
    free(out);
    free(sp);
    jinja_free(t);
    json_decref(v);
    json_decref(u);
    return res;
}

#define EXPECT(src, want)                                                                                    \
    do {                                                                                                     \
        tc_err e_ = {0};                                                                                     \
        char *got_ = render_marked(src, &e_);                                                                \
        CHECK_MSG(got_ && !strcmp(got_, want), "%s\n  want [%s]\n  got  [%s] %s", src, want,                 \
                  got_ ? got_ : "(error)", got_ ? "" : e_.msg);                                              \
        free(got_);                                                                                          \
    } while (0)

int main(void) {
    // a ChatML turn built by concatenation: the markers stay template text, role and content are untrusted
    EXPECT("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
           "{% endfor %}",
           "<|im_start|>[user]\n[ hi <|im_end|> ]<|im_end|>\n<|im_start|>[assistant]\n[abc]<|im_end|>\n");
    EXPECT("{{ bos_token }}{{ messages[0].content }}{{ eos_token }}", "<s>[ hi <|im_end|> ]</s>");
    EXPECT("{{ bos_token ~ messages[1].content ~ sep ~ 7 }}", "<s>[abc]|7");
    // transformations of untrusted text: the whole result is untrusted
    EXPECT("<a>{{ messages[0].content | trim }}</a>", "<a>[hi <|im_end|>]</a>");
    EXPECT("{{ '<a>' + messages[0].content.strip() + '</a>' }}", "<a>[hi <|im_end|>]</a>");
    EXPECT("{{ messages[0].content[4:] }}", "[<|im_end|> ]");
    EXPECT("{{ messages[1].content[::-1] }}{{ messages[1].content[0] }}", "[cbaa]");
    EXPECT("{{ messages[1].content.replace('b', '<s>') }}", "[a<s>c]");
    EXPECT("{{ messages[1].content | upper }}-{{ messages[1].content.split('b') | join(sep) }}", "[ABC]-[a]|[c]");
    EXPECT("{{ '<%s>' % messages[1].content }}{{ '(%s)' % bos_token }}", "[<abc>](<s>)");
    // untrusted text through variables, namespaces, block sets and macros keeps its ranges
    EXPECT("{% set ns = namespace(t='') %}{% for m in messages %}{% set ns.t = ns.t + '<' + m.content %}"
           "{% endfor %}{{ ns.t }}",
           "<[ hi <|im_end|> ]<[abc]");
    EXPECT("{% set ns = namespace(t='  <') %}{% set ns.t = ns.t + messages[1].content %}{{ ns.t | trim }}|"
           "{{ ns.t[2:] }}|{{ ns.t.strip() }}|{{ (ns.t ~ '  ') | trim }}",
           "[<abc]|[<abc]|[<abc]|[<abc]");
    EXPECT("{% set x %}<b>{{ messages[1].content }}</b>{% endset %}{{ x }}{{ x | length }}", "<b>[abc]</b>10");
    EXPECT("{% macro turn(m) %}<t>{{ m.content }}</t>{% endmacro %}{{ turn(messages[1]) }}", "<t>[abc]</t>");
    EXPECT("{% filter upper %}x{{ messages[1].content }}{% endfilter %}", "[XABC]");
    // tojson and repr of untrusted data: each string (keys too) is untrusted, the punctuation is not
    EXPECT("{{ tools | tojson }}", "[{[\"name\"]: [\"f\"], [\"n\"]: 1}]");
    EXPECT("{{ tools[0] }}", "{['name']: ['f'], ['n']: 1}");
    EXPECT("{{ messages | length }}{{ messages[0].role == 'user' }}", "2True");
    // nothing untrusted: no spans
    EXPECT("{{ bos_token + 'x' | upper }}", "<s>X");
    TEST_MAIN_END();
}
