/* test_hf_config.c — the host's part of config.json: architectures and model_type, eos lists
 * merged with generation_config.json, bos, quantization_config handed on as JSON, the text
 * kept for the model plugin, and errors that name the file and the key. (The architecture's
 * own keys — sizes, RoPE, norms and their defaults — are the model plugin's: see
 * plugins/model-qwen3/tests/test_qwen3_config.c.) */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_config.h"
#include "test_util.h"

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

static void expect_error(const char *json, const char *a, const char *b)
{
    llmrt_hf_config c;
    llmrt_error err = {0};
    ck_assert_msg(llmrt_hf_config_parse(json, "cfg/config.json", &c, &err) != LLMRT_OK,
                  "accepted: %s", json);
    ck_assert_msg(strstr(err.msg, "cfg/config.json") && strstr(err.msg, a) &&
                      (!b || strstr(err.msg, b)),
                  "message '%s' lacks '%s' / '%s'", err.msg, a, b ? b : "");
    ck_assert_ptr_null(c.quant_json);
}

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

START_TEST(test_released_qwen3_config)
{
    llmrt_hf_config c;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_hf_config_parse(qwen3_06b, "config.json", &c, &err), LLMRT_OK);
    ck_assert_str_eq(c.architecture, "Qwen3ForCausalLM");
    ck_assert_str_eq(c.model_type, "qwen3");
    ck_assert_int_eq(c.n_eos, 1);
    ck_assert_int_eq(c.eos_ids[0], 151645);
    ck_assert_int_eq(c.bos_id, 151643);
    ck_assert_ptr_null(c.quant_json);
    ck_assert_str_eq(c.config_json, qwen3_06b); /* the text, for the model plugin */
    llmrt_hf_config_free(&c);
}
END_TEST

START_TEST(test_transformers5_spelling)
{
    llmrt_hf_config c;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_hf_config_parse(tf5, "config.json", &c, &err), LLMRT_OK);
    ck_assert_int_eq(c.n_eos, 2); /* [7, 9, 7] without the duplicate */
    ck_assert_int_eq(c.eos_ids[0], 7);
    ck_assert_int_eq(c.eos_ids[1], 9);
    ck_assert_int_eq(c.bos_id, -1);
    llmrt_hf_config_free(&c);
}
END_TEST

START_TEST(test_tied_and_quant)
{
    llmrt_hf_config c;
    llmrt_error err = {0};
    char *s = with(tf5, "dtype",
                   "\"float16\", \"tie_word_embeddings\": true, \"quantization_config\": "
                   "{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 128, "
                   "\"zero_point\": true, \"version\": \"gemm\", \"modules_to_not_convert\": null}");
    ck_assert_int_eq(llmrt_hf_config_parse(s, "config.json", &c, &err), LLMRT_OK);
    ck_assert_ptr_nonnull(c.quant_json);
    ck_assert_str_eq(c.quant_json, "{\"quant_method\":\"awq\",\"bits\":4,\"group_size\":128,"
                                   "\"zero_point\":true,\"version\":\"gemm\","
                                   "\"modules_to_not_convert\":null}");
    llmrt_hf_config_free(&c);
    ck_assert_ptr_null(c.quant_json);
    free(s);
    s = with(tf5, "dtype", "\"float16\", \"tie_word_embeddings\": false, \"quantization_config\": null");
    ck_assert_int_eq(llmrt_hf_config_parse(s, "config.json", &c, &err), LLMRT_OK);
    ck_assert_ptr_null(c.quant_json);
    llmrt_hf_config_free(&c);
    free(s);
}
END_TEST

START_TEST(test_errors_name_file_and_key)
{
    expect_error("{\"architectures\": [", "bad JSON", "line 1");
    expect_error("[1]", "top level is an array", NULL);
    char *s;
#define EXPECT_WITHOUT(key, a, b)                                                            \
    s = without(tf5, key);                                                                    \
    expect_error(s, a, b);                                                                    \
    free(s)
#define EXPECT_WITH(key, val, a, b)                                                          \
    s = with(tf5, key, val);                                                                  \
    expect_error(s, a, b);                                                                    \
    free(s)
    EXPECT_WITHOUT("architectures", "missing key 'architectures'", "architecture names");
    EXPECT_WITHOUT("model_type", "missing key 'model_type'", NULL);
    EXPECT_WITH("architectures", "[]", "'architectures' is an empty list", NULL);
    EXPECT_WITH("architectures", "\"Qwen3ForCausalLM\"", "'architectures' is a string",
                "non-empty list");
    EXPECT_WITH("architectures", "[3]", "'architectures[0]' is an integer", "expected a string");
    EXPECT_WITH("head_dim", "32, \"quantization_config\": \"awq\"", "'quantization_config' is a string",
                NULL);
    EXPECT_WITH("eos_token_id", "\"</s>\"", "'eos_token_id'", "integer");
    EXPECT_WITH("eos_token_id", "[1, 2, 3, 4, 5, 6, 7, 8, 9]", "more than 8", NULL);
    EXPECT_WITH("bos_token_id", "[1]", "'bos_token_id' is an array", NULL);
#undef EXPECT_WITH
#undef EXPECT_WITHOUT
}
END_TEST

START_TEST(test_load_merges_generation_config)
{
    char *d = tu_mkdtemp();
    free(tu_write_file(d, "config.json", qwen3_06b));
    llmrt_hf_config c;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_hf_config_load(d, &c, &err), LLMRT_OK);
    ck_assert_int_eq(c.n_eos, 1);
    llmrt_hf_config_free(&c);
    free(tu_write_file(d, "generation_config.json",
                       "{\"bos_token_id\": 151643, \"do_sample\": true,"
                       " \"eos_token_id\": [151645, 151643], \"temperature\": 0.6}"));
    ck_assert_int_eq(llmrt_hf_config_load(d, &c, &err), LLMRT_OK);
    ck_assert_int_eq(c.n_eos, 2);
    ck_assert_int_eq(c.eos_ids[0], 151645);
    ck_assert_int_eq(c.eos_ids[1], 151643);
    llmrt_hf_config_free(&c);

    /* generation_config supplies bos when config.json has none */
    char *s = without(tf5, "bos_token_id");
    free(tu_write_file(d, "config.json", s));
    free(s);
    free(tu_write_file(d, "generation_config.json", "{\"bos_token_id\": 3, \"eos_token_id\": 9}"));
    ck_assert_int_eq(llmrt_hf_config_load(d, &c, &err), LLMRT_OK);
    ck_assert_int_eq(c.bos_id, 3);
    ck_assert_int_eq(c.n_eos, 2); /* 7, 9 from config; 9 again not added */
    llmrt_hf_config_free(&c);

    free(tu_write_file(d, "generation_config.json", "{\"eos_token_id\": [1,"));
    ck_assert_int_eq(llmrt_hf_config_load(d, &c, &err), LLMRT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "generation_config.json: bad JSON"), "%s", err.msg);
    free(tu_write_file(d, "generation_config.json", "{\"eos_token_id\": \"x\"}"));
    ck_assert_int_eq(llmrt_hf_config_load(d, &c, &err), LLMRT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "generation_config.json: key 'eos_token_id'"), "%s", err.msg);

    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", d);
    remove(path);
    ck_assert_int_eq(llmrt_hf_config_load(d, &c, &err), LLMRT_ERR_IO);
    ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, "cannot open"), "%s", err.msg);
    tu_rmtree(d);
    free(d);
}
END_TEST

/* generation_config.json's sampling settings (the model's defaults for requests that leave
 * them out): present keys are marked set, null ones are not, bad values name file and key. */
START_TEST(test_generation_sampling)
{
    char *d = tu_mkdtemp();
    free(tu_write_file(d, "config.json", qwen3_06b));
    llmrt_hf_config c;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_hf_config_load(d, &c, &err), LLMRT_OK);
    ck_assert_uint_eq(c.gen.set, 0); /* no generation_config.json */
    llmrt_hf_config_free(&c);
    /* Qwen3's released generation_config.json */
    free(tu_write_file(d, "generation_config.json",
                       "{\"bos_token_id\": 151643, \"do_sample\": true, \"eos_token_id\": [151645, "
                       "151643], \"pad_token_id\": 151643, \"temperature\": 0.6, \"top_k\": 20, "
                       "\"top_p\": 0.95, \"transformers_version\": \"4.51.0\"}"));
    ck_assert_int_eq(llmrt_hf_config_load(d, &c, &err), LLMRT_OK);
    ck_assert_uint_eq(c.gen.set, LLMRT_SAMPLING_TEMPERATURE | LLMRT_SAMPLING_TOP_K | LLMRT_SAMPLING_TOP_P);
    ck_assert_float_eq_tol(c.gen.temperature, 0.6, 1e-6);
    ck_assert_int_eq(c.gen.top_k, 20);
    ck_assert_float_eq_tol(c.gen.top_p, 0.95, 1e-6);
    llmrt_hf_config_free(&c);
    free(tu_write_file(d, "generation_config.json",
                       "{\"temperature\": 0, \"min_p\": 0.05, \"repetition_penalty\": 1.1, "
                       "\"top_k\": null, \"top_p\": null, \"do_sample\": false}"));
    ck_assert_int_eq(llmrt_hf_config_load(d, &c, &err), LLMRT_OK);
    ck_assert_uint_eq(c.gen.set, LLMRT_SAMPLING_TEMPERATURE | LLMRT_SAMPLING_MIN_P |
                                     LLMRT_SAMPLING_REPETITION_PENALTY);
    ck_assert_float_eq(c.gen.temperature, 0);
    llmrt_hf_config_free(&c);
    static const struct {
        const char *json, *msg;
    } bad[] = {
        {"{\"temperature\": -0.5}", "key 'temperature' is -0.5, expected a number in [0, inf)"},
        {"{\"temperature\": \"hot\"}", "key 'temperature' is a string"},
        {"{\"top_p\": 0}", "key 'top_p' is 0, expected a number in (0, 1]"},
        {"{\"top_p\": 1.5}", "key 'top_p' is 1.5"},
        {"{\"min_p\": 2}", "key 'min_p' is 2, expected a number in [0, 1]"},
        {"{\"repetition_penalty\": 0}", "key 'repetition_penalty' is 0, expected a number in (0, inf)"},
        {"{\"top_k\": -2}", "key 'top_k' is out of range, expected an integer >= -1"},
        {"{\"top_k\": 2.5}", "key 'top_k' is a real"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        free(tu_write_file(d, "generation_config.json", bad[i].json));
        ck_assert_int_eq(llmrt_hf_config_load(d, &c, &err), LLMRT_ERR_FORMAT);
        ck_assert_msg(strstr(err.msg, "generation_config.json: ") && strstr(err.msg, bad[i].msg),
                      "%s: %s", bad[i].json, err.msg);
    }
    tu_rmtree(d);
    free(d);
}
END_TEST

/* config.json and generation_config.json are read as regular files within 16 MiB: a FIFO
 * never blocks (tu_guard fails the test if it does), /dev/zero is refused by kind. */
START_TEST(test_files_bounded)
{
    char *d = tu_mkdtemp();
    free(tu_write_file(d, "config.json", qwen3_06b));
    llmrt_hf_config c;
    llmrt_error err = {0};
    char *g = tu_mkfifo(d, "generation_config.json");
    tu_guard(20);
    ck_assert_int_eq(llmrt_hf_config_load(d, &c, &err), LLMRT_ERR_IO);
    tu_guard(0);
    ck_assert_msg(strstr(err.msg, "generation_config.json: not a regular file (a FIFO)"), "%s",
                  err.msg);
    remove(g);
    free(g);
    g = tu_symlink(d, "generation_config.json", "/dev/zero");
    ck_assert_int_eq(llmrt_hf_config_load(d, &c, &err), LLMRT_ERR_IO);
    ck_assert_msg(strstr(err.msg, "generation_config.json: not a regular file (a character device)"),
                  "%s", err.msg);
    remove(g);
    free(g);
    free(tu_sized_file(d, "generation_config.json", (16ll << 20) + 1));
    ck_assert_int_eq(llmrt_hf_config_load(d, &c, &err), LLMRT_ERR_LIMIT);
    ck_assert_msg(strstr(err.msg, "generation_config.json: 16777217 bytes is larger than the 16 MiB a "
                                  "generation_config.json may be"),
                  "%s", err.msg);

    char *z = tu_symlink(d, "zero.json", "/dev/zero");
    ck_assert_int_eq(llmrt_hf_config_parse_file(z, &c, &err), LLMRT_ERR_IO);
    ck_assert_msg(strstr(err.msg, z) && strstr(err.msg, "not a regular file (a character device)"),
                  "%s", err.msg);
    free(z);
    char *big = tu_sized_file(d, "config.json", 17ll << 20);
    ck_assert_int_eq(llmrt_hf_config_load(d, &c, &err), LLMRT_ERR_LIMIT);
    ck_assert_msg(strstr(err.msg, big) &&
                      strstr(err.msg, "17.0 MiB is larger than the 16 MiB a config.json may be"),
                  "%s", err.msg);
    free(big);
    tu_rmtree(d);
    free(d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hf_config");
    TCase *tc = tcase_create("hf_config");
    tcase_add_test(tc, test_released_qwen3_config);
    tcase_add_test(tc, test_transformers5_spelling);
    tcase_add_test(tc, test_tied_and_quant);
    tcase_add_test(tc, test_errors_name_file_and_key);
    tcase_add_test(tc, test_load_merges_generation_config);
    tcase_add_test(tc, test_generation_sampling);
    tcase_add_test(tc, test_files_bounded);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
