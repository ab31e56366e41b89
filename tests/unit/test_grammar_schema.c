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

#define L(...) ((const char *const[]){__VA_ARGS__, NULL})

// minimum / maximum / exclusive bounds: integers by digit patterns, numbers by their integer part.
static void check_bounds(void) {
    check_schema("{\"type\":\"integer\",\"minimum\":0,\"maximum\":120}", L("0", "7", "99", "100", "120"),
                 L("-1", "121", "130", "200", "1000", "00", "1.5"));
    check_schema("{\"type\":\"integer\",\"exclusiveMinimum\":-15,\"exclusiveMaximum\":1234}",
                 L("-14", "-9", "0", "5", "1233", "999", "1099"), L("-15", "-20", "1234", "1300", "2000", "10000"));
    check_schema("{\"type\":\"integer\",\"minimum\":37}", L("37", "40", "99", "100", "123456789"),
                 L("36", "5", "0", "-1"));
    check_schema("{\"type\":\"integer\",\"maximum\":-3}", L("-3", "-4", "-10", "-1000"), L("-2", "0", "5"));
    check_schema("{\"type\":\"number\",\"minimum\":0,\"maximum\":1}", L("0", "0.5", "1", "1.0", "0.999"),
                 L("-0.5", "1.5", "1.01", "2", "1e2"));
    check_schema("{\"type\":\"number\",\"exclusiveMinimum\":0}", L("0.1", "0.001", "3", "42.5"),
                 L("0", "0.0", "-1", "-0.5"));
    check_schema("{\"type\":\"number\",\"minimum\":-2.5,\"maximum\":3.5}", L("-2", "-1.75", "0", "3", "2.9"),
                 L("-3", "4", "-3.5"));
}

// patterns, formats and long strings.
static void check_strings(void) {
    check_schema("{\"type\":\"string\",\"pattern\":\"^[A-Z]{3}[0-9]{2}$\"}", L("\"ABC12\"", "\"XYZ00\""),
                 L("\"ABc12\"", "\"ABC1\"", "\"ABC123\"", "\"\""));
    check_schema("{\"type\":\"string\",\"pattern\":\"^(cat|dog)s?\\\\.$\"}", L("\"cat.\"", "\"dogs.\""),
                 L("\"cats\"", "\"cow.\""));
    check_schema("{\"type\":\"string\",\"pattern\":\"\\\\d+\"}", L("\"a1b\"", "\"42\""), L("\"ab\""));
    check_schema("{\"type\":\"string\",\"pattern\":\"^[^a-c]+$\"}", L("\"xyz\"", "\"d e\""),
                 L("\"abc\"", "\"x\\\"y\""));
    check_schema("{\"type\":\"string\",\"format\":\"email\"}", L("\"ann@example.com\"", "\"a.b+c@x.co.uk\""),
                 L("\"ann\"", "\"ann@\"", "\"@x.com\""));
    check_schema("{\"type\":\"string\",\"format\":\"uri\",\"minLength\":1,\"maxLength\":2083}",
                 L("\"https://example.com/a?b=c\"", "\"http://x.org\""), L("\"example\"", "\"://x\"", "\"\"", "\"mailto:ann@x.org\""));
    check_schema("{\"type\":\"string\",\"maxLength\":2083}", L("\"\"", "\"a long enough string\""), L("1"));
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
    check_bounds();
    check_strings();
    check_refused("{\"type\":\"string\",\"pattern\":\"^(?=a)b$\"}", 0, "'pattern': lookarounds");
    check_refused("{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", 0, "'pattern': backreferences");
    check_refused("{\"type\":\"integer\",\"multipleOf\":3}", 1, "unsupported keyword 'multipleOf'");
    check_refused("{\"type\":\"integer\",\"minimum\":3.5,\"exclusiveMaximum\":4}", 1, "no integer lies within");
    check_refused("{\"type\":\"string\",\"maxLength\":10001}", 1, "'maxLength' must be an integer from 0 to 10000");
    check_refused("{\"type\":\"object\",\"properties\":{\"x\":{\"allOf\":[]}}}", 1, "at /properties/x: unsupported keyword 'allOf'");
    check_refused("{\"type\":\"sometimes\"}", 1, "unknown type 'sometimes'");
    check_refused("{\"$ref\":\"#/$defs/missing\"}", 1, "points nowhere");
    check_refused("{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"b\"]}", 1, "'b' is not in 'properties'");
    // not strict: unknown keywords ignored
    json_t *s = json_loads("{\"type\":\"integer\",\"multipleOf\":3}", 0, NULL);
    char *g = NULL;
    CHECK(gram_schema_gbnf(s, 0, &g, &err) == 0);
    free(g);
    json_decref(s);
    TEST_MAIN_END();
}
