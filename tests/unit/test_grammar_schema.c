// JSON schema → grammar: for each schema, documents that must match and documents that must not, and the
// schemas or keywords that must be refused (with the keyword named in the message).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gram.h"
#include "grammar/gram_schema.h"
#include "test_util.h"

static int matches_gbnf(const char *gbnf, const char *doc) {
    gram *g = NULL;
    gram_matcher *m = NULL;
    tc_err err = {0};
    if (gram_parse(gbnf, strlen(gbnf), NULL, &g, &err)) {
        fprintf(stderr, "grammar does not parse: %s\n%s\n", err.msg, gbnf);
        return -1;
    }
    if (gram_matcher_new(g, NULL, &m, &err)) return -1;
    int ok = gram_matcher_accept_str(m, doc, strlen(doc)) == 0 && gram_matcher_can_end(m);
    gram_matcher_free(m);
    return ok;
}

static void check_schema(const char *schema, const char *const *good, const char *const *bad) {
    json_error_t je;
    json_t *s = json_loads(schema, 0, &je);
    CHECK_MSG(s != NULL, "bad test schema %s", schema);
    char *gbnf = NULL;
    tc_err err = {0};
    int rc = gram_schema_gbnf(s, 1, &gbnf, &err);
    CHECK_MSG(rc == 0, "schema %s: %s", schema, err.msg);
    for (int i = 0; !rc && good[i]; i++)
        CHECK_MSG(matches_gbnf(gbnf, good[i]) == 1, "schema %s should accept %s", schema, good[i]);
    for (int i = 0; !rc && bad[i]; i++)
        CHECK_MSG(matches_gbnf(gbnf, bad[i]) == 0, "schema %s should reject %s", schema, bad[i]);
    free(gbnf);
    json_decref(s);
}

static void check_refused(const char *schema, int strict, const char *needle) {
    json_t *s = json_loads(schema, 0, NULL);
    char *gbnf = NULL;
    tc_err err = {0};
    int rc = gram_schema_gbnf(s, strict, &gbnf, &err);
    CHECK_MSG(rc != 0 && strstr(err.msg, needle), "schema %s: rc %d, message \"%s\" (want \"%s\")", schema, rc,
              err.msg, needle);
    free(gbnf);
    json_decref(s);
}

int main(void) {
    check_schema("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"},"
                 "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":2}},"
                 "\"required\":[\"name\"],\"additionalProperties\":false}",
                 (const char *const[]){"{\"name\":\"Bo\"}", "{\"name\": \"Bo\", \"age\": 3}",
                                       "{\"name\":\"x\",\"tags\":[\"a\",\"b\"]}", "{\"name\":\"x\",\"age\":-1,\"tags\":[]}", NULL},
                 (const char *const[]){"{}", "{\"age\":3}", "{\"name\":\"Bo\",}", "{\"age\":3,\"name\":\"Bo\"}",
                                       "{\"name\":\"x\",\"tags\":[\"a\",\"b\",\"c\"]}", "{\"name\":1}",
                                       "{\"name\":\"x\",\"age\":1.5}", NULL});
    check_schema("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"},\"b\":{\"type\":\"null\"}}}",
                 (const char *const[]){"{}", "{\"a\":true}", "{\"b\":null}", "{\"a\":false,\"b\":null}", NULL},
                 (const char *const[]){"{,\"b\":null}", "{\"b\":null,\"a\":true}", NULL});
    check_schema("{\"enum\":[\"red\",\"green\",3,null]}", (const char *const[]){"\"red\"", "3", "null", NULL},
                 (const char *const[]){"\"blue\"", "4", NULL});
    check_schema("{\"anyOf\":[{\"type\":\"number\"},{\"const\":{\"k\":[1,\"x\"]}}]}",
                 (const char *const[]){"1.5e3", "-0.25", "{\"k\":[1,\"x\"]}", NULL},
                 (const char *const[]){"01", "{\"k\":[1]}", NULL});
    check_schema("{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"},\"minItems\":1,"
                 "\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"kids\":{\"type\":\"array\",\"items\":"
                 "{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"kids\"]}}}",
                 (const char *const[]){"[{\"kids\":[]}]", "[{\"kids\":[{\"kids\":[]}]},{\"kids\":[]}]", NULL},
                 (const char *const[]){"[]", "[{}]", NULL});
    check_schema("{\"type\":\"object\",\"properties\":{\"d\":{\"type\":\"string\",\"format\":\"date\"},"
                 "\"u\":{\"type\":\"string\",\"format\":\"uuid\"},\"s\":{\"type\":\"string\",\"minLength\":2,"
                 "\"maxLength\":3},\"t\":{\"type\":[\"string\",\"null\"]}},\"required\":[\"d\",\"u\",\"s\",\"t\"]}",
                 (const char *const[]){"{\"d\":\"2024-02-29\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\",\"s\":\"ab\",\"t\":null}",
                                       "{\"d\":\"1999-12-31\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\",\"s\":\"a\\\"c\",\"t\":\"x\"}", NULL},
                 (const char *const[]){"{\"d\":\"2024-13-01\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\",\"s\":\"ab\",\"t\":null}",
                                       "{\"d\":\"2024-02-29\",\"u\":\"123e4567\",\"s\":\"ab\",\"t\":null}",
                                       "{\"d\":\"2024-02-29\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\",\"s\":\"abcd\",\"t\":null}", NULL});
    check_schema("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}",
                 (const char *const[]){"{}", "{\"a\":1,\"b\":2}", NULL}, (const char *const[]){"{\"a\":\"x\"}", NULL});
    char *obj = NULL;
    tc_err err = {0};
    CHECK(gram_json_object_gbnf(&obj, &err) == 0);
    if (obj) {
        CHECK(matches_gbnf(obj, "{\"a\": [1, {\"b\": null}], \"c\": \"\\u00e9\\n\"}") == 1);
        CHECK(matches_gbnf(obj, "[1]") == 0);
        CHECK(matches_gbnf(obj, "{\"a\":}") == 0);
        free(obj);
    }
    check_refused("{\"type\":\"string\",\"pattern\":\"^a+$\"}", 0, "'pattern' is not supported");
    check_refused("{\"type\":\"integer\",\"minimum\":3}", 1, "unsupported keyword 'minimum'");
    check_refused("{\"type\":\"object\",\"properties\":{\"x\":{\"allOf\":[]}}}", 1, "at /properties/x: unsupported keyword 'allOf'");
    check_refused("{\"type\":\"sometimes\"}", 1, "unknown type 'sometimes'");
    check_refused("{\"$ref\":\"#/$defs/missing\"}", 1, "points nowhere");
    check_refused("{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"b\"]}", 1, "'b' is not in 'properties'");
    // not strict: unknown keywords ignored
    json_t *s = json_loads("{\"type\":\"integer\",\"minimum\":3}", 0, NULL);
    char *g = NULL;
    CHECK(gram_schema_gbnf(s, 0, &g, &err) == 0);
    free(g);
    json_decref(s);
    TEST_MAIN_END();
}
