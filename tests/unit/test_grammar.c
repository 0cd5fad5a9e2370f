/* test_grammar.c — structured outputs' grammars (core/grammar): the JSON-schema compiler
 * keyword by keyword (documents it must accept and must refuse), its refusals naming the
 * keyword, random documents walked out of each automaton validated by an independent
 * checker of the schema subset, bounded whitespace, regexes against PCRE2 (the automaton
 * accepts only what PCRE2 matches as a whole, and for patterns without \D \W \S exactly
 * that), choices, the wrapper (prefix, repeats, a leading reasoning block), the distance
 * to a complete document, and token masks against brute force on a small vocabulary. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "grammar.h"
#include "test_util.h"

/* ---- helpers ---- */

static llmrt_gram *compile_ok(const char *schema)
{
    llmrt_gram *g = NULL;
    llmrt_error err = {0};
    llmrt_status st = llmrt_gram_json_schema(schema, strlen(schema), &g, &err);
    ck_assert_msg(st == LLMRT_OK, "schema %s: %s", schema, err.msg);
    return g;
}

static llmrt_gram *compile_wrap(llmrt_gram_kind kind, const char *text, const llmrt_gram_wrap *w)
{
    llmrt_gram *g = NULL;
    llmrt_error err = {0};
    llmrt_status st = llmrt_gram_compile(kind, text, strlen(text), NULL, NULL, 0, w, &g, &err);
    ck_assert_msg(st == LLMRT_OK, "%s: %s", text, err.msg);
    return g;
}

static void expect_docs(const char *schema, const char *const *yes, const char *const *no)
{
    llmrt_gram *g = compile_ok(schema);
    for (int i = 0; yes && yes[i]; i++)
        ck_assert_msg(llmrt_gram_matches(g, yes[i], strlen(yes[i])),
                      "schema %s must accept %s", schema, yes[i]);
    for (int i = 0; no && no[i]; i++)
        ck_assert_msg(!llmrt_gram_matches(g, no[i], strlen(no[i])),
                      "schema %s must not accept %s", schema, no[i]);
    llmrt_gram_free(g);
}

#define DOCS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ---- an independent checker of the schema subset (the oracle for random documents) ---- */

static size_t cp_count(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static int re_search_n(const char *pattern, const char *s, size_t n, int whole)
{
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | (whole ? PCRE2_ANCHORED | PCRE2_ENDANCHORED : 0),
                                   &ec, &eo, NULL);
    ck_assert_msg(re != NULL, "pcre2 cannot compile %s", pattern);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int rc = pcre2_match(re, (PCRE2_SPTR)s, n, 0, 0, md, NULL);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return rc >= 0;
}

static int re_search(const char *pattern, const char *s, int whole)
{
    return re_search_n(pattern, s, strlen(s), whole);
}

static int valid(const json_t *root, const json_t *s, const json_t *v);

static int valid_type(const json_t *root, const json_t *s, const char *t, const json_t *v)
{
    if (strcmp(t, "null") == 0)
        return json_is_null(v);
    if (strcmp(t, "boolean") == 0)
        return json_is_boolean(v);
    if (strcmp(t, "integer") == 0 || strcmp(t, "number") == 0) {
        if (!json_is_number(v))
            return 0;
        double x = json_number_value(v);
        if (strcmp(t, "integer") == 0 && floor(x) != x)
            return 0;
        const json_t *m;
        if ((m = json_object_get(s, "minimum")) && x < json_number_value(m))
            return 0;
        if ((m = json_object_get(s, "maximum")) && x > json_number_value(m))
            return 0;
        if ((m = json_object_get(s, "exclusiveMinimum")) && x <= json_number_value(m))
            return 0;
        if ((m = json_object_get(s, "exclusiveMaximum")) && x >= json_number_value(m))
            return 0;
        return 1;
    }
    if (strcmp(t, "string") == 0) {
        if (!json_is_string(v))
            return 0;
        size_t n = cp_count(json_string_value(v));
        const json_t *m;
        if ((m = json_object_get(s, "minLength")) && n < (size_t)json_integer_value(m))
            return 0;
        if ((m = json_object_get(s, "maxLength")) && n > (size_t)json_integer_value(m))
            return 0;
        if ((m = json_object_get(s, "pattern")) &&
            !re_search(json_string_value(m), json_string_value(v), 0))
            return 0;
        return 1;
    }
    if (strcmp(t, "array") == 0) {
        if (!json_is_array(v))
            return 0;
        const json_t *m;
        if ((m = json_object_get(s, "minItems")) && json_array_size(v) < (size_t)json_integer_value(m))
            return 0;
        if ((m = json_object_get(s, "maxItems")) && json_array_size(v) > (size_t)json_integer_value(m))
            return 0;
        const json_t *items = json_object_get(s, "items");
        for (size_t i = 0; items && i < json_array_size(v); i++)
            if (!valid(root, items, json_array_get(v, i)))
                return 0;
        return 1;
    }
    if (strcmp(t, "object") == 0) {
        if (!json_is_object(v))
            return 0;
        const json_t *props = json_object_get(s, "properties");
        const json_t *req = json_object_get(s, "required");
        const json_t *add = json_object_get(s, "additionalProperties");
        for (size_t i = 0; req && i < json_array_size(req); i++)
            if (!json_object_get(v, json_string_value(json_array_get(req, i))))
                return 0;
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x) {
            const json_t *ps = props ? json_object_get(props, k) : NULL;
            if (ps) {
                if (!valid(root, ps, x))
                    return 0;
            } else if (add && json_is_false(add)) {
                return 0;
            } else if (add && json_is_object(add) && !valid(root, add, x)) {
                return 0;
            }
        }
        return 1;
    }
    return 0;
}

static int valid(const json_t *root, const json_t *s, const json_t *v)
{
    if (json_is_true(s))
        return 1;
    if (json_is_false(s))
        return 0;
    const json_t *ref = json_object_get(s, "$ref");
    if (ref) {
        const char *p = json_string_value(ref);
        if (strcmp(p, "#") == 0)
            return valid(root, root, v);
        ck_assert(strncmp(p, "#/$defs/", 8) == 0);
        return valid(root, json_object_get(json_object_get(root, "$defs"), p + 8), v);
    }
    const json_t *any = json_object_get(s, "anyOf");
    if (any) {
        for (size_t i = 0; i < json_array_size(any); i++)
            if (valid(root, json_array_get(any, i), v))
                return 1;
        return 0;
    }
    const json_t *c = json_object_get(s, "const");
    if (c)
        return json_equal(c, v);
    const json_t *en = json_object_get(s, "enum");
    if (en) {
        for (size_t i = 0; i < json_array_size(en); i++)
            if (json_equal(json_array_get(en, i), v))
                return 1;
        return 0;
    }
    const json_t *t = json_object_get(s, "type");
    if (!t)
        return 1;
    if (json_is_string(t))
        return valid_type(root, s, json_string_value(t), v);
    for (size_t i = 0; i < json_array_size(t); i++)
        if (valid_type(root, s, json_string_value(json_array_get(t, i)), v))
            return 1;
    return 0;
}

/* ---- random documents out of an automaton ---- */

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

/* A random complete document (NUL-terminated into out [cap]): random allowed bytes, then
 * when it grows long the bytes that bring it closest to the end. Returns its length. */
static size_t walk(const llmrt_gram *g, char *out, size_t cap, size_t soft)
{
    llmrt_gram_state s, t;
    llmrt_gram_state_init(&s);
    llmrt_gram_state_init(&t);
    ck_assert_int_eq(llmrt_gram_state_start(g, &s), 0);
    size_t n = 0;
    for (;;) {
        if (s.complete && (s.n == 0 || rnd() % 8 == 0))
            break;
        ck_assert_msg(n + 1 < cap, "walk ran past %zu bytes", cap);
        int allowed[256], na = 0, best = -1;
        int32_t bd = INT32_MAX;
        for (int c = 0; c < 256; c++) {
            int r = llmrt_gram_advance(g, &s, (uint8_t)c, &t);
            ck_assert_int_ge(r, 0);
            if (r) {
                allowed[na++] = c;
                int32_t d = llmrt_gram_dist(g, &t);
                if (d < bd)
                    bd = d, best = c;
            }
        }
        ck_assert_msg(na > 0, "dead state after \"%.*s\"", (int)n, out);
        int c = n > soft ? best : allowed[rnd() % (unsigned)na];
        out[n++] = (char)c;
        ck_assert_int_eq(llmrt_gram_advance(g, &s, (uint8_t)c, &t), 1);
        llmrt_gram_state x = s;
        s = t, t = x;
    }
    out[n] = 0;
    llmrt_gram_state_free(&s);
    llmrt_gram_state_free(&t);
    return n;
}

/* Every walked document is JSON and valid under the schema, and the automaton accepts it. */
static void random_docs(const char *schema, int count, int strict)
{
    json_error_t je;
    json_t *root = json_loads(schema, 0, &je);
    ck_assert_msg(root, "test schema %s: %s", schema, je.text);
    llmrt_gram_wrap w = {.strict = strict};
    llmrt_gram *g = compile_wrap(LLMRT_GRAM_JSON_SCHEMA, schema, &w);
    static char buf[1 << 16];
    for (int i = 0; i < count; i++) {
        size_t n = walk(g, buf, sizeof buf, 60 + rnd() % 200);
        json_t *v = json_loadb(buf, n, JSON_DECODE_ANY, &je);
        ck_assert_msg(v, "schema %s: walked document is not JSON (%s): %s", schema, je.text, buf);
        ck_assert_msg(valid(root, root, v), "schema %s: walked document does not validate: %s",
                      schema, buf);
        ck_assert(llmrt_gram_matches(g, buf, n));
        json_decref(v);
    }
    llmrt_gram_free(g);
    json_decref(root);
}

/* ---- keyword by keyword ---- */

START_TEST(test_types)
{
    expect_docs("{\"type\":\"null\"}", DOCS("null"), DOCS("nul", "null ", " null", "0"));
    expect_docs("{\"type\":\"boolean\"}", DOCS("true", "false"), DOCS("True", "1", "\"true\""));
    expect_docs("{\"type\":\"integer\"}", DOCS("0", "7", "-12", "999999999999999"),
                DOCS("01", "-0", "1.5", "1e3", "1000000000000000", "+1", ""));
    expect_docs("{\"type\":\"number\"}",
                DOCS("0", "-0.5", "3.25", "1e5", "2.5E-3", "-7e+12", "123456789012345.5"),
                DOCS("01", ".5", "1.", "1e", "1e123", "--1", "0x1"));
    expect_docs("{\"type\":\"string\"}",
                DOCS("\"\"", "\"abc\"", "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "\"\\u00e9\\u4E2d\"",
                     "\"caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80\""),
                DOCS("\"a", "abc", "\"\\x\"", "\"\\ud800\"", "\"\\u0000\"", "\"a\nb\"",
                     "\"\xc3\"", "\"\xed\xa0\x80\"", "\"\xc0\xaf\""));
    expect_docs("{\"type\":[\"string\",\"null\"]}", DOCS("null", "\"x\""), DOCS("1", "true"));
    expect_docs("true", DOCS("1", "{\"a\":[null]}", "\"s\""), DOCS("nul"));
    expect_docs("{}", DOCS("[]", "-1.5", "{}"), DOCS("[", "tru"));
}
END_TEST

START_TEST(test_objects)
{
    const char *s = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
                    "\"b\":{\"type\":\"string\"},\"c\":{\"type\":\"boolean\"}},"
                    "\"required\":[\"a\",\"c\"],\"additionalProperties\":false}";
    expect_docs(s,
                DOCS("{\"a\":1,\"c\":true}", "{\"a\": 1, \"b\": \"x\", \"c\": false}",
                     "{\n  \"a\": 1,\n  \"c\": true\n}"),
                DOCS("{\"a\":1}", "{\"c\":true}", "{\"c\":true,\"a\":1}", "{\"a\":1,\"c\":true,}",
                     "{\"a\":1,\"c\":true,\"d\":1}", "{\"a\":1,\"a\":2,\"c\":true}",
                     "{\"a\":1 ,, \"c\":true}", "{,\"a\":1,\"c\":true}"));
    /* additionalProperties true / absent: other keys (never a declared one) after them */
    const char *open = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},"
                       "\"required\":[\"a\"]}";
    expect_docs(open, DOCS("{\"a\":1}", "{\"a\":1,\"x\":[1,{}]}", "{\"a\":1,\"ab\":null,\"\":0}"),
                DOCS("{\"a\":1,\"a\":2}", "{\"x\":1}"));
    const char *open_t = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},"
                         "\"additionalProperties\":true}";
    expect_docs(open_t, DOCS("{}", "{\"b\":true}", "{\"a\":1,\"b\":\"x\"}"), DOCS("{\"a\":\"x\"}"));
    /* a schema for the others */
    expect_docs("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}",
                DOCS("{}", "{\"x\":1,\"y\":2}"), DOCS("{\"x\":\"1\"}"));
    /* strict: absent additionalProperties takes no other key */
    llmrt_gram_wrap w = {.strict = 1};
    llmrt_gram *g = compile_wrap(LLMRT_GRAM_JSON_SCHEMA, open, &w);
    ck_assert(llmrt_gram_matches(g, "{\"a\":1}", 7));
    ck_assert(!llmrt_gram_matches(g, "{\"a\":1,\"x\":1}", 13));
    llmrt_gram_free(g);
    /* required without properties: any value; empty object; nested objects */
    expect_docs("{\"type\":\"object\",\"required\":[\"k\"],\"additionalProperties\":false}",
                DOCS("{\"k\":[1]}", "{\"k\":null}"), DOCS("{}"));
    expect_docs("{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}",
                DOCS("{}", "{ }", "{\n}"), DOCS("{\"a\":1}", "{     }"));
    expect_docs("{\"properties\":{\"o\":{\"properties\":{\"p\":{\"type\":\"null\"}},"
                "\"required\":[\"p\"],\"additionalProperties\":false}},\"required\":[\"o\"],"
                "\"additionalProperties\":false}",
                DOCS("{\"o\":{\"p\":null}}"), DOCS("{\"o\":{}}", "{\"o\":null}"));
    /* keys that need escapes are written escaped */
    expect_docs("{\"type\":\"object\",\"properties\":{\"a\\\"b\":{\"type\":\"null\"}},"
                "\"required\":[\"a\\\"b\"],\"additionalProperties\":false}",
                DOCS("{\"a\\\"b\":null}"), DOCS("{\"ab\":null}"));
}
END_TEST

START_TEST(test_arrays)
{
    expect_docs("{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}",
                DOCS("[]", "[1]", "[1, 2,3]", "[\n1\n]"), DOCS("[1,]", "[,1]", "[\"a\"]", "[1 2]"));
    expect_docs("{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":2,\"maxItems\":3}",
                DOCS("[true,false]", "[true, true, false]"),
                DOCS("[]", "[true]", "[true,true,true,true]"));
    expect_docs("{\"type\":\"array\",\"minItems\":1}", DOCS("[1]", "[{},\"x\"]"), DOCS("[]"));
    expect_docs("{\"type\":\"array\",\"maxItems\":0}", DOCS("[]", "[ ]"), DOCS("[1]"));
    expect_docs("{\"type\":\"array\",\"items\":false}", DOCS("[]"), DOCS("[null]"));
    expect_docs("{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"uniqueItems\":false}",
                DOCS("[\"a\",\"a\"]"), NULL);
    expect_docs("{\"type\":\"array\",\"items\":{\"type\":\"array\",\"items\":{\"type\":\"null\"},"
                "\"maxItems\":1},\"minItems\":2}",
                DOCS("[[],[null]]", "[[],[],[]]"), DOCS("[[]]", "[[null,null],[]]"));
}
END_TEST

START_TEST(test_strings)
{
    expect_docs("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}",
                DOCS("\"ab\"", "\"abc\"", "\"\xc3\xa9\xc3\xa9\"", "\"\\n\\u00e9x\""),
                DOCS("\"a\"", "\"abcd\"", "\"\xc3\xa9\""));
    expect_docs("{\"type\":\"string\",\"maxLength\":0}", DOCS("\"\""), DOCS("\"a\""));
    expect_docs("{\"type\":\"string\",\"pattern\":\"^[a-z]+-[0-9]{2}$\"}",
                DOCS("\"ab-12\"", "\"z-00\""), DOCS("\"ab-1\"", "\"Ab-12\"", "\"xab-12 \""));
    /* unanchored: found anywhere */
    expect_docs("{\"type\":\"string\",\"pattern\":\"ab+c\"}",
                DOCS("\"abc\"", "\"xxabbbc yy\""), DOCS("\"ac\"", "\"\""));
    expect_docs("{\"type\":\"string\",\"format\":\"date\"}",
                DOCS("\"2024-01-31\"", "\"1999-02-28\"", "\"2023-04-30\""),
                DOCS("\"2024-13-01\"", "\"2024-04-31\"", "\"2024-02-30\"", "\"24-01-01\""));
    expect_docs("{\"type\":\"string\",\"format\":\"time\"}",
                DOCS("\"23:59:59Z\"", "\"00:00:00.5+02:00\""), DOCS("\"24:00:00Z\"", "\"12:00\""));
    expect_docs("{\"type\":\"string\",\"format\":\"date-time\"}", DOCS("\"2024-05-06T07:08:09Z\""),
                DOCS("\"2024-05-06 07:08:09Z\""));
    expect_docs("{\"type\":\"string\",\"format\":\"uuid\"}",
                DOCS("\"123e4567-e89b-12d3-a456-426614174000\""),
                DOCS("\"123e4567e89b12d3a456426614174000\""));
    expect_docs("{\"type\":\"string\",\"format\":\"email\"}", DOCS("\"a.b@c.de\""),
                DOCS("\"a@b\"", "\"@c.de\""));
    expect_docs("{\"type\":\"string\",\"format\":\"ipv4\"}", DOCS("\"10.0.255.1\""),
                DOCS("\"256.1.1.1\"", "\"1.2.3\""));
}
END_TEST

START_TEST(test_numbers)
{
    expect_docs("{\"type\":\"integer\",\"minimum\":5,\"maximum\":120}",
                DOCS("5", "9", "10", "99", "100", "120"), DOCS("4", "121", "-5", "05", "200"));
    expect_docs("{\"type\":\"integer\",\"minimum\":-50,\"maximum\":-3}", DOCS("-3", "-50", "-17"),
                DOCS("-2", "-51", "3", "-03"));
    expect_docs("{\"type\":\"integer\",\"minimum\":-2,\"maximum\":2}",
                DOCS("-2", "-1", "0", "1", "2"), DOCS("-0", "3", "-3"));
    expect_docs("{\"type\":\"integer\",\"exclusiveMinimum\":0,\"exclusiveMaximum\":10}",
                DOCS("1", "9"), DOCS("0", "10"));
    expect_docs("{\"type\":\"integer\",\"minimum\":1.5,\"maximum\":3.5}", DOCS("2", "3"),
                DOCS("1", "4"));
    expect_docs("{\"type\":\"integer\",\"minimum\":1000}", DOCS("1000", "5000000"),
                DOCS("999", "-1000"));
    expect_docs("{\"type\":\"number\",\"minimum\":0,\"maximum\":1}",
                DOCS("0", "0.5", "1", "1.0", "1.000", "0.999"), DOCS("1.01", "-0.1", "2", "1e0"));
    expect_docs("{\"type\":\"number\",\"minimum\":-1,\"maximum\":2}",
                DOCS("-1", "-1.0", "-0.5", "0", "1.5", "2.0"), DOCS("-1.5", "2.5", "-0"));
    expect_docs("{\"type\":\"number\",\"exclusiveMinimum\":0,\"exclusiveMaximum\":1}",
                DOCS("0.5", "0.001"), DOCS("0", "0.0", "1", "1.0"));
    expect_docs("{\"type\":\"number\",\"maximum\":-2}", DOCS("-2", "-2.0", "-3.5", "-100"),
                DOCS("-1.5", "0", "-2.1e0"));
    expect_docs("{\"type\":\"number\",\"exclusiveMaximum\":-2}", DOCS("-2.5", "-3"),
                DOCS("-2", "-2.0", "-1"));
    expect_docs("{\"type\":\"number\",\"minimum\":3}", DOCS("3", "3.5", "70"), DOCS("2.9", "-3"));
}
END_TEST

START_TEST(test_literals_and_combinators)
{
    expect_docs("{\"enum\":[\"red\",\"green\",7,null,{\"a\":[1]}]}",
                DOCS("\"red\"", "\"green\"", "7", "null", "{\"a\":[1]}"),
                DOCS("\"blue\"", "8", "{\"a\": [1]}"));
    expect_docs("{\"type\":\"string\",\"enum\":[\"x\",1]}", DOCS("\"x\""), DOCS("1"));
    expect_docs("{\"const\":\"fixed\"}", DOCS("\"fixed\""), DOCS("\"other\""));
    expect_docs("{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\",\"maxLength\":1}]}",
                DOCS("12", "\"a\""), DOCS("\"ab\"", "1.5"));
    expect_docs("{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"k\":{\"const\":1}},"
                "\"required\":[\"k\"],\"additionalProperties\":false},{\"type\":\"object\","
                "\"properties\":{\"k\":{\"const\":2},\"v\":{\"type\":\"null\"}},"
                "\"required\":[\"k\",\"v\"],\"additionalProperties\":false}]}",
                DOCS("{\"k\":1}", "{\"k\":2,\"v\":null}"), DOCS("{\"k\":1,\"v\":null}", "{\"k\":2}"));
    expect_docs("{\"allOf\":[{\"type\":\"boolean\"}],\"description\":\"d\"}", DOCS("true"),
                DOCS("1"));
    /* $ref into $defs and to the root, recursive */
    const char *tree = "{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
                       "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#\"},\"maxItems\":2}},"
                       "\"required\":[\"v\"],\"additionalProperties\":false}";
    expect_docs(tree, DOCS("{\"v\":1}", "{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[{\"v\":3}]}]}"),
                DOCS("{\"v\":1,\"kids\":[{}]}", "{\"kids\":[]}"));
    expect_docs("{\"$defs\":{\"p\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":"
                "\"number\"}},\"required\":[\"x\"],\"additionalProperties\":false}},"
                "\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/p\"}}",
                DOCS("[{\"x\":1},{\"x\":2.5}]"), DOCS("[{\"y\":1}]"));
    /* no type: the keywords pick it */
    expect_docs("{\"properties\":{\"a\":{\"type\":\"null\"}},\"additionalProperties\":false}",
                DOCS("{}", "{\"a\":null}"), DOCS("null", "[]"));
    expect_docs("{\"maxLength\":2}", DOCS("\"ab\""), DOCS("\"abc\"", "3"));
    expect_docs("{\"minimum\":0,\"maximum\":3}", DOCS("2", "2.5"), DOCS("\"2\"", "4"));
    /* annotations are ignored */
    expect_docs("{\"title\":\"T\",\"description\":\"D\",\"default\":1,\"examples\":[1],"
                "\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"x-extra\":1,"
                "\"type\":\"integer\"}",
                DOCS("1"), DOCS("\"1\""));
}
END_TEST

/* Whitespace: at most LLMRT_GRAM_JSON_WS_MAX bytes between tokens, none before or after. */
START_TEST(test_whitespace_bound)
{
    llmrt_gram *g = compile_ok("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\"}},"
                               "\"required\":[\"a\"],\"additionalProperties\":false}");
    char doc[256];
    for (int k = 0; k <= LLMRT_GRAM_JSON_WS_MAX + 2; k++) {
        char ws[16];
        memset(ws, ' ', (size_t)k);
        ws[k] = 0;
        snprintf(doc, sizeof doc, "{%s\"a\"%s:%s[%s1%s]%s}", ws, ws, ws, ws, ws, ws);
        ck_assert_msg(llmrt_gram_matches(g, doc, strlen(doc)) == (k <= LLMRT_GRAM_JSON_WS_MAX),
                      "%d blanks: %s", k, doc);
    }
    const char *pretty = "{\n\t\"a\": [\n  1\n]\n}";
    ck_assert(llmrt_gram_matches(g, pretty, strlen(pretty)));
    ck_assert(!llmrt_gram_matches(g, " {\"a\":[]}", 9));
    ck_assert(!llmrt_gram_matches(g, "{\"a\":[]} ", 9));
    ck_assert(!llmrt_gram_matches(g, "{\"a\":[]\r}", 9)); /* \r is not among the blanks */
    /* so a reply cannot run on blanks: from any state a blank-only run stops soon */
    llmrt_gram_state s, t;
    llmrt_gram_state_init(&s);
    llmrt_gram_state_init(&t);
    llmrt_gram_state_start(g, &s);
    ck_assert_int_eq(llmrt_gram_advance_bytes(g, &s, (const uint8_t *)"{", 1, &t), 1);
    int run = 0;
    while (llmrt_gram_advance_bytes(g, &s, (const uint8_t *)" ", 1, &t) == 1)
        run++;
    ck_assert_int_eq(run, LLMRT_GRAM_JSON_WS_MAX);
    llmrt_gram_state_free(&s);
    llmrt_gram_state_free(&t);
    llmrt_gram_free(g);
}
END_TEST

/* ---- refusals ---- */

static void refused(const char *schema, llmrt_status code, const char *needle)
{
    llmrt_gram *g = NULL;
    llmrt_error err = {0};
    llmrt_status st = llmrt_gram_json_schema(schema, strlen(schema), &g, &err);
    ck_assert_msg(st == code, "schema %s: status %d (%s), expected %d", schema, st, err.msg, code);
    ck_assert_msg(g == NULL, "schema %s: a grammar despite the failure", schema);
    ck_assert_msg(strstr(err.msg, needle), "schema %s: message \"%s\" does not name \"%s\"",
                  schema, err.msg, needle);
}

START_TEST(test_refusals)
{
    const llmrt_status U = LLMRT_ERR_UNSUPPORTED, I = LLMRT_ERR_INVALID_ARG;
    refused("{\"type\":\"integer\",\"multipleOf\":3}", U, "'multipleOf'");
    refused("{\"oneOf\":[{\"type\":\"null\"}]}", U, "'oneOf'");
    refused("{\"not\":{\"type\":\"null\"}}", U, "'not'");
    refused("{\"if\":{},\"then\":{}}", U, "'if'");
    refused("{\"type\":\"object\",\"patternProperties\":{\"a\":{}}}", U, "'patternProperties'");
    refused("{\"type\":\"object\",\"propertyNames\":{}}", U, "'propertyNames'");
    refused("{\"type\":\"object\",\"minProperties\":1}", U, "'minProperties'");
    refused("{\"type\":\"object\",\"dependentRequired\":{}}", U, "'dependentRequired'");
    refused("{\"type\":\"array\",\"prefixItems\":[]}", U, "'prefixItems'");
    refused("{\"type\":\"array\",\"contains\":{}}", U, "'contains'");
    refused("{\"type\":\"array\",\"uniqueItems\":true}", U, "'uniqueItems'");
    refused("{\"type\":\"array\",\"items\":[{},{}]}", U, "'items'");
    refused("{\"allOf\":[{},{}]}", U, "'allOf'");
    refused("{\"$ref\":\"https://example.com/s.json\"}", U, "'$ref'");
    refused("{\"$ref\":\"#/$defs/x\",\"type\":\"object\"}", U, "'type'");
    refused("{\"anyOf\":[{}],\"type\":\"string\"}", U, "'type'");
    refused("{\"type\":\"string\",\"format\":\"uri\"}", U, "\"uri\"");
    refused("{\"type\":\"number\",\"minimum\":0.5}", U, "'minimum'");
    refused("{\"type\":\"number\",\"exclusiveMaximum\":2.25}", U, "'exclusiveMaximum'");
    refused("{\"type\":\"string\",\"pattern\":\"a\",\"maxLength\":3}", U, "'pattern'");
    refused("{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", U, "back-references");
    refused("{\"type\":\"string\",\"maxLength\":100000}", U, "'maxLength'");
    refused("{\"type\":\"string\",\"maxLength\":1001}", U, "above the supported 1000");
    /* an exponential DFA is refused (bounded time and memory), a large linear one is not */
    refused("{\"type\":\"string\",\"pattern\":\"^(a|b)*a(a|b){25}$\"}", LLMRT_ERR_LIMIT,
            "too large as an automaton");
    llmrt_gram_free(compile_ok("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\","
                               "\"maxLength\":1000},\"b\":{\"type\":\"string\",\"minLength\":900,"
                               "\"maxLength\":1000}}}"));
    refused("{\"type\":\"object\",\"properties\":{\"deep\":{\"type\":\"integer\","
            "\"multipleOf\":2}}}",
            U, "/properties/deep");
    refused("{\"type\":5}", I, "'type'");
    refused("{\"type\":\"float\"}", I, "\"float\"");
    refused("{\"type\":\"object\",\"required\":\"a\"}", I, "'required'");
    refused("{\"type\":\"string\",\"minLength\":3,\"maxLength\":2}", I, "maxLength");
    refused("{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", I, "no integer");
    refused("{\"enum\":[]}", I, "'enum'");
    refused("{\"type\":", I, "not valid JSON");
    refused("42", I, "a schema must be");
}
END_TEST

/* ---- random documents from the automaton validate ---- */

START_TEST(test_random_documents)
{
    static const char *schemas[] = {
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},"
        "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":130},\"tags\":{\"type\":"
        "\"array\",\"items\":{\"enum\":[\"a\",\"b\",\"c\"]},\"maxItems\":4},\"ok\":{\"type\":"
        "\"boolean\"}},\"required\":[\"name\",\"age\"],\"additionalProperties\":false}",
        "{\"type\":\"object\"}",
        "{\"type\":\"array\",\"items\":{\"type\":\"number\",\"minimum\":-3,\"maximum\":3},"
        "\"minItems\":1,\"maxItems\":5}",
        "{\"anyOf\":[{\"type\":\"string\",\"pattern\":\"^[A-Z][a-z]{1,5}$\"},{\"type\":\"null\"},"
        "{\"type\":\"integer\",\"exclusiveMinimum\":10}]}",
        "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\",\"format\":\"uuid\"},"
        "\"when\":{\"type\":\"string\",\"format\":\"date-time\"},\"meta\":{\"type\":\"object\","
        "\"additionalProperties\":{\"type\":\"integer\"}}},\"required\":[\"id\",\"meta\"]}",
        "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
        "\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},"
        "\"required\":[\"v\",\"next\"],\"additionalProperties\":false}},\"$ref\":\"#/$defs/node\"}",
        "{\"type\":\"string\",\"minLength\":3,\"maxLength\":6}",
        "{\"type\":\"number\",\"exclusiveMinimum\":-1,\"maximum\":0}",
    };
    for (size_t i = 0; i < sizeof schemas / sizeof *schemas; i++)
        random_docs(schemas[i], 40, 0);
    random_docs("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}}}", 40, 1);
}
END_TEST

/* ---- regexes against PCRE2 ---- */

static void regex_vs_pcre(const char *pattern, const char *alphabet, int exact)
{
    llmrt_gram *g = NULL;
    llmrt_error err = {0};
    ck_assert_msg(llmrt_gram_regex(pattern, strlen(pattern), &g, &err) == LLMRT_OK, "%s: %s",
                  pattern, err.msg);
    size_t na = strlen(alphabet);
    char buf[4096];
    int agree_yes = 0;
    for (int i = 0; i < 400; i++) {
        size_t n = rnd() % 9;
        for (size_t k = 0; k < n; k++)
            buf[k] = alphabet[rnd() % na];
        buf[n] = 0;
        int mine = llmrt_gram_matches(g, buf, n), theirs = re_search(pattern, buf, 1);
        if (mine)
            ck_assert_msg(theirs, "%s: the automaton accepts \"%s\", PCRE2 does not", pattern, buf);
        if (exact)
            ck_assert_msg(mine == theirs, "%s: \"%s\": automaton %d, PCRE2 %d", pattern, buf,
                          mine, theirs);
        agree_yes += mine;
    }
    for (int i = 0; i < 100; i++) { /* strings out of the automaton itself */
        size_t n = walk(g, buf, sizeof buf, 30);
        ck_assert_msg(re_search_n(pattern, buf, n, 1), "%s: walked \"%s\" does not match in PCRE2",
                      pattern, buf);
    }
    (void)agree_yes;
    llmrt_gram_free(g);
}

START_TEST(test_regex)
{
    regex_vs_pcre("ab*c|d+", "abcdx", 1);
    regex_vs_pcre("(?:a|bc){2,3}x?", "abcx", 1);
    regex_vs_pcre("[a-c]{1,3}[^a-c]", "abcdz-", 1);
    regex_vs_pcre("\\d{3}-\\d{2}", "0123-a", 1);
    regex_vs_pcre("(?P<y>\\d{4})-(?<m>0[1-9]|1[0-2])", "0123456789-", 1);
    regex_vs_pcre("\\w+@\\w+\\.com", "ab_@.com1", 1);
    regex_vs_pcre("[\\s,]+x", " \t,x", 1);
    regex_vs_pcre("a.c", "abc\n\xc3\xa9", 1);
    regex_vs_pcre("^(yes|no)$", "yesno", 1);
    regex_vs_pcre("x*?y+?z??", "xyz", 1);
    regex_vs_pcre("[\\]\\-a]+", "]-ab", 1);
    regex_vs_pcre("caf\xc3\xa9|\xe4\xb8\xad+", "cafe\xc3\xa9\xe4\xb8\xad", 0);
    regex_vs_pcre("[^x]\\D\\W", "x1a-.", 0); /* \D \W: ASCII only here, so a subset */
    regex_vs_pcre("a{2}b{0,}c{1,2}", "abc", 1);
    { /* {,n} as Python reads it ({0,n}; PCRE2 before 10.43 takes it literally) */
        llmrt_gram *g = compile_wrap(LLMRT_GRAM_REGEX, "ac{,2}", NULL);
        ck_assert(llmrt_gram_matches(g, "a", 1) && llmrt_gram_matches(g, "acc", 3));
        ck_assert(!llmrt_gram_matches(g, "accc", 4));
        llmrt_gram_free(g);
    }
    regex_vs_pcre("\\x41\\x{42}\\.\\?", "AB.?", 1);
    {
        llmrt_gram *g = compile_wrap(LLMRT_GRAM_REGEX, "\\u00e9\\U0001F600", NULL);
        ck_assert(llmrt_gram_matches(g, "\xc3\xa9\xf0\x9f\x98\x80", 6));
        llmrt_gram_free(g);
    }
    /* refusals name the construct */
    static const struct {
        const char *p, *needle;
        llmrt_status code;
    } bad[] = {
        {"(a)\\1", "back-references", LLMRT_ERR_UNSUPPORTED},
        {"a(?=b)", "look-ahead", LLMRT_ERR_UNSUPPORTED},
        {"(?<=a)b", "look-behind", LLMRT_ERR_UNSUPPORTED},
        {"\\bword", "word boundaries", LLMRT_ERR_UNSUPPORTED},
        {"(?i)abc", "inline flags", LLMRT_ERR_UNSUPPORTED},
        {"a++", "possessive", LLMRT_ERR_UNSUPPORTED},
        {"(?>a)", "atomic", LLMRT_ERR_UNSUPPORTED},
        {"a|^b", "anchors", LLMRT_ERR_UNSUPPORTED},
        {"\\p{L}", "Unicode properties", LLMRT_ERR_UNSUPPORTED},
        {"a{2000}", "above 1000", LLMRT_ERR_UNSUPPORTED},
        {"(ab", "not closed", LLMRT_ERR_INVALID_ARG},
        {"ab)", "unmatched", LLMRT_ERR_INVALID_ARG},
        {"[a-", "not closed", LLMRT_ERR_INVALID_ARG},
        {"[z-a]", "reversed", LLMRT_ERR_INVALID_ARG},
        {"*a", "follows nothing", LLMRT_ERR_INVALID_ARG},
        {"a{3,1}", "n < m", LLMRT_ERR_INVALID_ARG},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        llmrt_gram *g = NULL;
        llmrt_error err = {0};
        llmrt_status st = llmrt_gram_regex(bad[i].p, strlen(bad[i].p), &g, &err);
        ck_assert_msg(st == bad[i].code && strstr(err.msg, bad[i].needle),
                      "regex %s: status %d, \"%s\"", bad[i].p, st, err.msg);
    }
}
END_TEST

START_TEST(test_choice_and_wrap)
{
    const char *ch[] = {"yes", "no", "maybe so"};
    llmrt_gram *g = NULL;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_gram_choice(ch, NULL, 3, &g, &err), LLMRT_OK);
    ck_assert(llmrt_gram_matches(g, "yes", 3) && llmrt_gram_matches(g, "maybe so", 8));
    ck_assert(!llmrt_gram_matches(g, "ye", 2) && !llmrt_gram_matches(g, "yesno", 5));
    llmrt_gram_free(g);
    ck_assert_int_eq(llmrt_gram_choice(ch, NULL, 0, &g, &err), LLMRT_ERR_INVALID_ARG);

    /* a tool call: prefix, document, suffix, one to two of them, a reasoning block first */
    llmrt_gram_wrap w = {.prefix = "<tool_call>\n", .suffix = "\n</tool_call>",
                         .separator = "\n", .min_count = 1, .max_count = 2,
                         .lead_open = "<think>", .lead_close = "</think>"};
    g = compile_wrap(LLMRT_GRAM_JSON_SCHEMA,
                     "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"f\"}},"
                     "\"required\":[\"name\"],\"additionalProperties\":false}",
                     &w);
    const char *one = "<tool_call>\n{\"name\": \"f\"}\n</tool_call>";
    const char *two = "<tool_call>\n{\"name\":\"f\"}\n</tool_call>\n<tool_call>\n{\"name\":\"f\"}"
                      "\n</tool_call>";
    const char *think = "<think>\nI think <the> </thin k> tool.\n</think>\n\n<tool_call>\n"
                        "{\"name\":\"f\"}\n</tool_call>";
    ck_assert(llmrt_gram_matches(g, one, strlen(one)));
    ck_assert(llmrt_gram_matches(g, two, strlen(two)));
    ck_assert(llmrt_gram_matches(g, think, strlen(think)));
    const char *three = "<tool_call>\n{\"name\":\"f\"}\n</tool_call>\n<tool_call>\n{\"name\":"
                        "\"f\"}\n</tool_call>\n<tool_call>\n{\"name\":\"f\"}\n</tool_call>";
    ck_assert(!llmrt_gram_matches(g, three, strlen(three)));
    ck_assert(!llmrt_gram_matches(g, "<think></think>", 15));
    ck_assert(!llmrt_gram_matches(g, "{\"name\":\"f\"}", 12));
    const char *inner = "<think>a</think>b</think><tool_call>\n{\"name\":\"f\"}\n</tool_call>";
    ck_assert(!llmrt_gram_matches(g, inner, strlen(inner)));
    llmrt_gram_free(g);
}
END_TEST

/* The fewest bytes to the end: 0 when complete, and one byte closer along the best path. */
START_TEST(test_dist)
{
    llmrt_gram *g = compile_ok("{\"type\":\"object\",\"properties\":{\"ab\":{\"type\":\"string\","
                               "\"minLength\":3}},\"required\":[\"ab\"],"
                               "\"additionalProperties\":false}");
    llmrt_gram_state s, t;
    llmrt_gram_state_init(&s);
    llmrt_gram_state_init(&t);
    llmrt_gram_state_start(g, &s);
    /* {"ab":"xxx"} is 12 bytes */
    ck_assert_int_eq(llmrt_gram_dist(g, &s), 12);
    const char *doc = "{\"ab\":\"xxx\"}";
    for (int i = 0; doc[i]; i++) {
        ck_assert_int_eq(llmrt_gram_advance_bytes(g, &s, (const uint8_t *)doc + i, 1, &t), 1);
        ck_assert_int_eq(llmrt_gram_dist(g, &s), 11 - i);
    }
    ck_assert(s.complete && s.n == 0);
    llmrt_gram_state_free(&s);
    llmrt_gram_state_free(&t);
    llmrt_gram_free(g);
}
END_TEST

/* ---- masks against brute force ---- */

/* A small vocabulary: every byte alone, JSON-ish pieces, and random strings of them. */
static llmrt_gram_vocab *small_vocab(int32_t *n_out, char ***toks_out)
{
    static const char *pieces[] = {
        "{", "}", "[", "]", "\"", ",", ":", " ", "\n", "  ", "{\"", "\":", "\",", "\"}", "\"]",
        "\": \"", "\", \"", "},", "],", "true", "false", "null", "nu", "ll", "tr", "ue", "0",
        "12", "-", ".", "5", "e", "E+", "name", "age", "tags", "ok", "id", "\\", "\\n",
        "\\u", "00", "e9", "\xc3", "\xa9", "\xc3\xa9", "\xe4\xb8\xad", "ab", "xyz", "<tool",
        "_call", ">", "\n<", "/", "think", "</", "ame\":", "\":\"", "\":1", "\"age\": ",
    };
    const int np = (int)(sizeof pieces / sizeof *pieces);
    const int n = 256 + np + 600;
    char **toks = calloc((size_t)n, sizeof *toks);
    const uint8_t **b = calloc((size_t)n, sizeof *b);
    uint32_t *l = calloc((size_t)n, sizeof *l);
    for (int i = 0; i < 256; i++) {
        toks[i] = malloc(2);
        toks[i][0] = (char)i, toks[i][1] = 0;
        b[i] = (const uint8_t *)toks[i], l[i] = 1;
    }
    for (int i = 0; i < np; i++) {
        toks[256 + i] = strdup(pieces[i]);
        b[256 + i] = (const uint8_t *)toks[256 + i], l[256 + i] = (uint32_t)strlen(pieces[i]);
    }
    for (int i = 256 + np; i < n; i++) {
        char t[64] = {0};
        int k = 1 + (int)(rnd() % 3);
        for (int j = 0; j < k; j++)
            strcat(t, pieces[rnd() % (unsigned)np]);
        toks[i] = strdup(t);
        b[i] = (const uint8_t *)toks[i], l[i] = (uint32_t)strlen(t);
    }
    l[0] = 0; /* a hole: never allowed */
    llmrt_gram_vocab *v = NULL;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_gram_vocab_new(b, l, n, n + 37, &v, &err), LLMRT_OK);
    free(b);
    free(l);
    *n_out = n;
    *toks_out = toks;
    return v;
}

/* Does text + token stay a prefix of some document? From the start every time: independent
 * of the mask code's states. */
static int brute_ok(const llmrt_gram *g, const char *text, size_t n, const char *tok, size_t tl)
{
    llmrt_gram_state s, t;
    llmrt_gram_state_init(&s);
    llmrt_gram_state_init(&t);
    llmrt_gram_state_start(g, &s);
    int ok = llmrt_gram_advance_bytes(g, &s, (const uint8_t *)text, n, &t) == 1 &&
             llmrt_gram_advance_bytes(g, &s, (const uint8_t *)tok, tl, &t) == 1;
    llmrt_gram_state_free(&s);
    llmrt_gram_state_free(&t);
    return ok;
}

static void masks_vs_brute(llmrt_gram *g, const char *what)
{
    int32_t n;
    char **toks;
    llmrt_gram_vocab *v = small_vocab(&n, &toks);
    llmrt_gram_masker *m = NULL;
    llmrt_error err = {0};
    /* a tiny cache, so it is cleared and refilled along the way */
    ck_assert_int_eq(llmrt_gram_masker_new(g, v, 64 * 1024, &m, &err), LLMRT_OK);
    const int32_t W = llmrt_gram_vocab_words(v);
    ck_assert_int_eq(W, (n + 37 + 31) / 32);
    uint32_t *w = calloc((size_t)W, 4);
    for (int walk_no = 0; walk_no < 6; walk_no++) {
        llmrt_gram_state s, t;
        llmrt_gram_state_init(&s);
        llmrt_gram_state_init(&t);
        llmrt_gram_state_start(g, &s);
        char text[8192];
        size_t tn = 0;
        for (int step = 0; step < 60; step++) {
            int32_t cnt = llmrt_gram_mask(m, &s, w);
            ck_assert_int_ge(cnt, 0);
            int32_t c2 = 0;
            for (int32_t id = 0; id < n + 37; id++) {
                int want = id < n && id != 0 &&
                           brute_ok(g, text, tn, toks[id], strlen(toks[id]));
                ck_assert_msg(llmrt_gram_bit(w, id) == want,
                              "%s, after \"%.*s\": token %d \"%s\" mask %d, brute force %d", what,
                              (int)tn, text, id, id < n ? toks[id] : "(none)",
                              llmrt_gram_bit(w, id), want);
                c2 += want;
            }
            ck_assert_int_eq(cnt, c2);
            if (cnt == 0)
                break;
            /* next: a random allowed token, or one toward the end once long */
            int32_t pick = -1, k = (int32_t)(rnd() % (unsigned)cnt);
            if (tn > 120) {
                int32_t bd = INT32_MAX;
                for (int32_t id = 0; id < n; id++)
                    if (llmrt_gram_bit(w, id)) {
                        llmrt_gram_state c;
                        llmrt_gram_state_init(&c);
                        llmrt_gram_state_copy(&c, &s);
                        llmrt_gram_advance_bytes(g, &c, (const uint8_t *)toks[id],
                                                 strlen(toks[id]), &t);
                        int32_t d = llmrt_gram_dist(g, &c);
                        if (d < bd)
                            bd = d, pick = id;
                        llmrt_gram_state_free(&c);
                    }
            } else {
                for (int32_t id = 0; id < n && pick < 0; id++)
                    if (llmrt_gram_bit(w, id) && k-- == 0)
                        pick = id;
            }
            size_t pl = strlen(toks[pick]);
            ck_assert(tn + pl < sizeof text);
            memcpy(text + tn, toks[pick], pl);
            tn += pl;
            ck_assert_int_eq(llmrt_gram_advance_bytes(g, &s, (const uint8_t *)toks[pick], pl, &t), 1);
            if (s.complete && s.n == 0)
                break;
        }
        llmrt_gram_state_free(&s);
        llmrt_gram_state_free(&t);
    }
    llmrt_gram_mask_stats st;
    llmrt_gram_masker_stats(m, &st);
    ck_assert_msg(st.tops_cached > 0 && st.tops_computed > 0, "%s: cache unused", what);
    free(w);
    llmrt_gram_masker_free(m);
    llmrt_gram_vocab_free(v);
    for (int i = 0; i < n; i++)
        free(toks[i]);
    free(toks);
}

START_TEST(test_masks_brute_force)
{
    static const char *schemas[] = {
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":5},"
        "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},\"tags\":{\"type\":\"array\","
        "\"items\":{\"type\":\"string\"},\"maxItems\":3}},\"required\":[\"name\",\"age\"]}",
        "{\"type\":\"object\"}",
        "{\"anyOf\":[{\"type\":\"array\",\"items\":{\"type\":\"number\"}},{\"type\":\"object\","
        "\"properties\":{\"ok\":{\"type\":\"boolean\"}},\"additionalProperties\":false}]}",
        "{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},"
        "\"tags\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/n\"}}},\"required\":[\"id\"],"
        "\"additionalProperties\":false}},\"$ref\":\"#/$defs/n\"}",
    };
    for (size_t i = 0; i < sizeof schemas / sizeof *schemas; i++) {
        llmrt_gram *g = compile_ok(schemas[i]);
        masks_vs_brute(g, schemas[i]);
        llmrt_gram_free(g);
    }
    llmrt_gram_wrap w = {.prefix = "<tool_call>\n", .suffix = "\n</tool_call>",
                         .lead_open = "<think>", .lead_close = "</think>"};
    llmrt_gram *g = compile_wrap(LLMRT_GRAM_JSON_SCHEMA,
                                 "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":"
                                 "\"ab\"},\"arguments\":{\"type\":\"object\"}},\"required\":"
                                 "[\"name\",\"arguments\"],\"additionalProperties\":false}",
                                 &w);
    masks_vs_brute(g, "tool call");
    llmrt_gram_free(g);
    g = compile_wrap(LLMRT_GRAM_REGEX, "(ab|xyz)+[0-9]{2,4}e9?", NULL);
    masks_vs_brute(g, "regex");
    llmrt_gram_free(g);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("grammar");
    TCase *t = tcase_create("grammar");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, test_types);
    tcase_add_test(t, test_objects);
    tcase_add_test(t, test_arrays);
    tcase_add_test(t, test_strings);
    tcase_add_test(t, test_numbers);
    tcase_add_test(t, test_literals_and_combinators);
    tcase_add_test(t, test_whitespace_bound);
    tcase_add_test(t, test_refusals);
    tcase_add_test(t, test_random_documents);
    tcase_add_test(t, test_regex);
    tcase_add_test(t, test_choice_and_wrap);
    tcase_add_test(t, test_dist);
    tcase_add_test(t, test_masks_brute_force);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tu_run_suite(suite()); }
