/* test_qwen3_config.c — the qwen3 plugin's reading of config.json (qwen3_config.c): both
 * spellings in the wild (rope_theta / torch_dtype of released Qwen3 checkpoints,
 * rope_parameters / dtype of transformers 5), head_dim from the config (not hidden/heads)
 * and transformers' Qwen3Config defaults for absent keys, tied embeddings, the variants it
 * refuses by name, and errors that name the key. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qwen3.h"

/* The released Qwen3-0.6B config.json (transformers 4.51 spelling). */
static const char qwen3_06b[] =
    "{\n"
    "  \"architectures\": [\"Qwen3ForCausalLM\"],\n"
    "  \"attention_bias\": false,\n"
    "  \"attention_dropout\": 0.0,\n"
    "  \"bos_token_id\": 151643,\n"
    "  \"eos_token_id\": 151645,\n"
    "  \"head_dim\": 128,\n"
    "  \"hidden_act\": \"silu\",\n"
    "  \"hidden_size\": 1024,\n"
    "  \"initializer_range\": 0.02,\n"
    "  \"intermediate_size\": 3072,\n"
    "  \"max_position_embeddings\": 40960,\n"
    "  \"max_window_layers\": 28,\n"
    "  \"model_type\": \"qwen3\",\n"
    "  \"num_attention_heads\": 16,\n"
    "  \"num_hidden_layers\": 28,\n"
    "  \"num_key_value_heads\": 8,\n"
    "  \"rms_norm_eps\": 1e-06,\n"
    "  \"rope_scaling\": null,\n"
    "  \"rope_theta\": 1000000,\n"
    "  \"sliding_window\": null,\n"
    "  \"tie_word_embeddings\": true,\n"
    "  \"torch_dtype\": \"bfloat16\",\n"
    "  \"transformers_version\": \"4.51.0\",\n"
    "  \"use_cache\": true,\n"
    "  \"use_sliding_window\": false,\n"
    "  \"vocab_size\": 151936\n"
    "}\n";

/* A minimal transformers 5 style config: dtype, rope_parameters, eos list. */
static const char tf5[] =
    "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"vocab_size\": 512,"
    " \"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 2,"
    " \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 32,"
    " \"dtype\": \"float16\", \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 5000.0},"
    " \"eos_token_id\": [7, 9, 7], \"bos_token_id\": null}";

/* The extent [*start, *end) of member "key": value in `base` (value nesting respected). */
static void member(const char *base, const char *key, const char **start, const char **vstart,
                   const char **end)
{
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(base, pat);
    ck_assert_msg(p != NULL, "no key %s", key);
    const char *e = p + strlen(pat);
    *vstart = e;
    int depth = 0;
    while (*e && (depth || (*e != ',' && *e != '}'))) {
        depth += (*e == '{' || *e == '[') - (*e == '}' || *e == ']');
        e++;
    }
    *start = p;
    *end = e;
}

/* `base` with the value of `key` replaced by `value` (which may add members after it). */
static char *with(const char *base, const char *key, const char *value)
{
    const char *p, *v, *e;
    member(base, key, &p, &v, &e);
    char *out = malloc(strlen(base) + strlen(value) + 1);
    sprintf(out, "%.*s%s%s", (int)(v - base), base, value, e);
    return out;
}

/* `base` without member `key` and one of the commas around it. */
static char *without(const char *base, const char *key)
{
    const char *p, *v, *e;
    member(base, key, &p, &v, &e);
    if (*e == ',') {
        e++;
        while (*e == ' ' || *e == '\n')
            e++;
    } else {
        while (p > base && (p[-1] == ' ' || p[-1] == '\n'))
            p--;
        if (p > base && p[-1] == ',')
            p--;
    }
    char *out = malloc(strlen(base) + 1);
    sprintf(out, "%.*s%s", (int)(p - base), base, e);
    return out;
}

static void expect_error(const char *json, const char *a, const char *b)
{
    qwen3_config c;
    llmrt_error err = {0};
    ck_assert_msg(qwen3_config_parse(json, &c, &err) != LLMRT_OK, "accepted: %s", json);
    ck_assert_msg(strstr(err.msg, "config.json") && strstr(err.msg, a) && (!b || strstr(err.msg, b)),
                  "message '%s' lacks '%s' / '%s'", err.msg, a, b ? b : "");
}

START_TEST(test_released_qwen3_config)
{
    qwen3_config c;
    llmrt_error err = {0};
    ck_assert_msg(qwen3_config_parse(qwen3_06b, &c, &err) == LLMRT_OK, "%s", err.msg);
    ck_assert_int_eq(c.vocab, 151936);
    ck_assert_int_eq(c.hidden, 1024);
    ck_assert_int_eq(c.intermediate, 3072);
    ck_assert_int_eq(c.n_layers, 28);
    ck_assert_int_eq(c.n_heads, 16);
    ck_assert_int_eq(c.n_kv_heads, 8);
    ck_assert_int_eq(c.head_dim, 128); /* not 1024 / 16 */
    ck_assert_int_eq(c.max_position, 40960);
    ck_assert_double_eq(c.eps, 1e-6);
    ck_assert_double_eq(c.rope_theta, 1000000.0);
    ck_assert_int_eq(c.tie, 1);
    ck_assert_int_eq(qwen3_config_matches(qwen3_06b, &(int){0}), 1);
}
END_TEST

START_TEST(test_transformers5_spelling_and_defaults)
{
    qwen3_config c;
    llmrt_error err = {0};
    ck_assert_msg(qwen3_config_parse(tf5, &c, &err) == LLMRT_OK, "%s", err.msg);
    ck_assert_double_eq(c.rope_theta, 5000.0);
    ck_assert_int_eq(c.head_dim, 32);
    /* absent keys take transformers' Qwen3Config defaults */
    ck_assert_int_eq(c.tie, 0);
    ck_assert_int_eq(c.max_position, 32768);
    ck_assert_double_eq(c.eps, 1e-6);
    /* top-level rope_theta and rope_parameters: rope_parameters (transformers 5) wins; neither:
     * 10000 */
    char *s = with(tf5, "head_dim", "32, \"rope_theta\": 250000");
    ck_assert_int_eq(qwen3_config_parse(s, &c, &err), LLMRT_OK);
    ck_assert_double_eq(c.rope_theta, 5000.0);
    free(s);
    s = without(tf5, "rope_parameters");
    ck_assert_int_eq(qwen3_config_parse(s, &c, &err), LLMRT_OK);
    ck_assert_double_eq(c.rope_theta, 10000.0);
    char *t = with(s, "head_dim", "32, \"rope_theta\": 250000");
    ck_assert_int_eq(qwen3_config_parse(t, &c, &err), LLMRT_OK);
    ck_assert_double_eq(c.rope_theta, 250000.0);
    free(t);
    free(s);
    /* head_dim absent: hidden / heads; num_key_value_heads absent: = heads */
    char *a = without(tf5, "head_dim");
    ck_assert_int_eq(qwen3_config_parse(a, &c, &err), LLMRT_OK);
    ck_assert_int_eq(c.head_dim, 16);
    char *b = without(a, "num_key_value_heads");
    ck_assert_int_eq(qwen3_config_parse(b, &c, &err), LLMRT_OK);
    ck_assert_int_eq(c.n_kv_heads, 4);
    free(a);
    free(b);
}
END_TEST

START_TEST(test_errors_name_the_key)
{
    char *s;
#define EXPECT_WITHOUT(key, a, b)                                                            \
    s = without(tf5, key);                                                                    \
    expect_error(s, a, b);                                                                    \
    free(s)
#define EXPECT_WITH(key, val, a, b)                                                          \
    s = with(tf5, key, val);                                                                  \
    expect_error(s, a, b);                                                                    \
    free(s)
    expect_error("{\"architectures\": [", "line 1", NULL);
    EXPECT_WITHOUT("vocab_size", "\"vocab_size\" is missing", NULL);
    EXPECT_WITHOUT("hidden_size", "\"hidden_size\" is missing", NULL);
    EXPECT_WITHOUT("intermediate_size", "\"intermediate_size\" is missing", NULL);
    EXPECT_WITHOUT("num_hidden_layers", "\"num_hidden_layers\" is missing", NULL);
    EXPECT_WITHOUT("num_attention_heads", "\"num_attention_heads\" is missing", NULL);
    EXPECT_WITH("hidden_size", "\"64\"", "\"hidden_size\" must be a positive integer", NULL);
    EXPECT_WITH("hidden_size", "0", "\"hidden_size\" must be a positive integer", NULL);
    EXPECT_WITH("vocab_size", "4294967296", "\"vocab_size\" must be a positive integer below 2^31", NULL);
    EXPECT_WITH("num_key_value_heads", "3", "num_attention_heads (4) must be a multiple of num_key_value_heads (3)", NULL);
    EXPECT_WITH("head_dim", "31", "head_dim (31) must be even", NULL);
    EXPECT_WITH("rope_parameters", "{\"rope_type\": \"yarn\", \"rope_theta\": 5000.0}", "rope_parameters.rope_type = yarn", NULL);
    EXPECT_WITH("head_dim", "32, \"rms_norm_eps\": -1", "\"rms_norm_eps\" must be a positive number", NULL);
    EXPECT_WITH("head_dim", "32, \"tie_word_embeddings\": 1", "\"tie_word_embeddings\" must be true or false", NULL);
    EXPECT_WITH("head_dim", "32, \"attention_bias\": true", "attention_bias = true is not supported", NULL);
    EXPECT_WITH("head_dim", "32, \"use_sliding_window\": true", "use_sliding_window = true is not supported", NULL);
    EXPECT_WITH("head_dim", "32, \"hidden_act\": \"gelu\"", "hidden_act = gelu is not supported", NULL);
#undef EXPECT_WITH
#undef EXPECT_WITHOUT
}
END_TEST

int main(void)
{
    Suite *s = suite_create("qwen3_config");
    TCase *tc = tcase_create("qwen3_config");
    tcase_add_test(tc, test_released_qwen3_config);
    tcase_add_test(tc, test_transformers5_spelling_and_defaults);
    tcase_add_test(tc, test_errors_name_the_key);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
