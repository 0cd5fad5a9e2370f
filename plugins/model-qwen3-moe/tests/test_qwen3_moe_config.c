/* test_qwen3_moe_config.c — the qwen3_moe plugin's reading of config.json (moe_config.c): the
 * released Qwen3-30B-A3B and Qwen3-235B-A22B configs read as they are, transformers'
 * Qwen3MoeConfig defaults for absent keys, which layers are sparse (mlp_only_layers,
 * decoder_sparse_step, num_experts 0), the variants refused by name, and malformed values
 * (top-k above the expert count, layer indices out of range, wrong types) failing with the
 * key named. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moe.h"

/* The released Qwen3-30B-A3B config.json (transformers 4.51 spelling). */
static const char a3b[] =
    "{\n"
    "  \"architectures\": [\"Qwen3MoeForCausalLM\"],\n"
    "  \"attention_bias\": false,\n"
    "  \"attention_dropout\": 0.0,\n"
    "  \"bos_token_id\": 151643,\n"
    "  \"decoder_sparse_step\": 1,\n"
    "  \"eos_token_id\": 151645,\n"
    "  \"head_dim\": 128,\n"
    "  \"hidden_act\": \"silu\",\n"
    "  \"hidden_size\": 2048,\n"
    "  \"initializer_range\": 0.02,\n"
    "  \"intermediate_size\": 6144,\n"
    "  \"max_position_embeddings\": 40960,\n"
    "  \"max_window_layers\": 48,\n"
    "  \"mlp_only_layers\": [],\n"
    "  \"model_type\": \"qwen3_moe\",\n"
    "  \"moe_intermediate_size\": 768,\n"
    "  \"norm_topk_prob\": true,\n"
    "  \"num_attention_heads\": 32,\n"
    "  \"num_experts\": 128,\n"
    "  \"num_experts_per_tok\": 8,\n"
    "  \"num_hidden_layers\": 48,\n"
    "  \"num_key_value_heads\": 4,\n"
    "  \"output_router_logits\": false,\n"
    "  \"rms_norm_eps\": 1e-06,\n"
    "  \"rope_scaling\": null,\n"
    "  \"rope_theta\": 1000000.0,\n"
    "  \"router_aux_loss_coef\": 0.001,\n"
    "  \"sliding_window\": null,\n"
    "  \"tie_word_embeddings\": false,\n"
    "  \"torch_dtype\": \"bfloat16\",\n"
    "  \"transformers_version\": \"4.51.0\",\n"
    "  \"use_cache\": true,\n"
    "  \"use_sliding_window\": false,\n"
    "  \"vocab_size\": 151936\n"
    "}\n";

/* The released Qwen3-235B-A22B config.json's shapes (same keys). */
static const char a22b[] =
    "{\"architectures\": [\"Qwen3MoeForCausalLM\"], \"attention_bias\": false, "
    "\"attention_dropout\": 0.0, \"bos_token_id\": 151643, \"decoder_sparse_step\": 1, "
    "\"eos_token_id\": 151645, \"head_dim\": 128, \"hidden_act\": \"silu\", \"hidden_size\": 4096, "
    "\"initializer_range\": 0.02, \"intermediate_size\": 12288, \"max_position_embeddings\": 40960, "
    "\"max_window_layers\": 94, \"mlp_only_layers\": [], \"model_type\": \"qwen3_moe\", "
    "\"moe_intermediate_size\": 1536, \"norm_topk_prob\": true, \"num_attention_heads\": 64, "
    "\"num_experts\": 128, \"num_experts_per_tok\": 8, \"num_hidden_layers\": 94, "
    "\"num_key_value_heads\": 4, \"output_router_logits\": false, \"rms_norm_eps\": 1e-06, "
    "\"rope_scaling\": null, \"rope_theta\": 1000000.0, \"router_aux_loss_coef\": 0.001, "
    "\"sliding_window\": null, \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\", "
    "\"transformers_version\": \"4.51.0\", \"use_cache\": true, \"use_sliding_window\": false, "
    "\"vocab_size\": 151936}";

/* A minimal config: only the required keys (everything else takes Qwen3MoeConfig's default). */
static const char minimal[] =
    "{\"architectures\": [\"Qwen3MoeForCausalLM\"], \"vocab_size\": 512, \"hidden_size\": 64, "
    "\"num_hidden_layers\": 6, \"num_attention_heads\": 4, \"head_dim\": 32}";

/* base with "key": value as its first member (an existing member of that key removed). */
static char *with(const char *base, const char *key, const char *value)
{
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    char *copy = strdup(base);
    char *p = strstr(copy, pat);
    if (p) { /* cut up to the next top-level comma or closing brace */
        char *e = p + strlen(pat);
        int depth = 0;
        for (; *e; e++) {
            if (*e == '[' || *e == '{')
                depth++;
            else if (*e == ']' || *e == '}') {
                if (depth == 0)
                    break;
                depth--;
            } else if (*e == ',' && depth == 0) {
                e++;
                break;
            }
        }
        memmove(p, e, strlen(e) + 1);
    }
    char *out = malloc(strlen(copy) + strlen(key) + strlen(value) + 16);
    char *brace = strchr(copy, '{');
    sprintf(out, "%.*s{\"%s\": %s, %s", (int)(brace - copy), copy, key, value, brace + 1);
    free(copy);
    return out;
}

static void expect_error(const char *json, llmrt_status code, const char *a, const char *b)
{
    moe_config c;
    llmrt_error err = {0};
    llmrt_status st = moe_config_parse(json, &c, &err);
    ck_assert_msg(st == code, "status %d (expected %d) for %s: %s", st, code, json, err.msg);
    ck_assert_msg(strstr(err.msg, "config.json") && strstr(err.msg, a) && (!b || strstr(err.msg, b)),
                  "message '%s' lacks '%s' / '%s'", err.msg, a, b ? b : "");
    printf("ok: %s\n", err.msg);
}

START_TEST(test_released_configs)
{
    moe_config c;
    llmrt_error err = {0};
    ck_assert_msg(moe_config_parse(a3b, &c, &err) == LLMRT_OK, "%s", err.msg);
    ck_assert_int_eq(c.base.vocab, 151936);
    ck_assert_int_eq(c.base.hidden, 2048);
    ck_assert_int_eq(c.base.intermediate, 6144);
    ck_assert_int_eq(c.base.n_layers, 48);
    ck_assert_int_eq(c.base.n_heads, 32);
    ck_assert_int_eq(c.base.n_kv_heads, 4);
    ck_assert_int_eq(c.base.head_dim, 128); /* not 2048 / 32 */
    ck_assert_int_eq(c.base.max_position, 40960);
    ck_assert_double_eq(c.base.rope_theta, 1000000.0);
    ck_assert_int_eq(c.base.tie, 0);
    ck_assert_int_eq(c.n_experts, 128);
    ck_assert_int_eq(c.top_k, 8);
    ck_assert_int_eq(c.moe_inter, 768);
    ck_assert_int_eq(c.sparse_step, 1);
    ck_assert_int_eq(c.norm_topk, 1);
    ck_assert_int_eq(c.n_mlp_only, 0);
    for (int l = 0; l < 48; l++)
        ck_assert(moe_layer_is_sparse(&c, l));
    ck_assert_int_eq(moe_config_matches(a3b, &(int){0}), 1);
    moe_config_free(&c);

    ck_assert_msg(moe_config_parse(a22b, &c, &err) == LLMRT_OK, "%s", err.msg);
    ck_assert_int_eq(c.base.hidden, 4096);
    ck_assert_int_eq(c.base.n_layers, 94);
    ck_assert_int_eq(c.base.n_heads, 64);
    ck_assert_int_eq(c.moe_inter, 1536);
    ck_assert_int_eq(c.n_experts, 128);
    moe_config_free(&c);

    /* the dense architecture is not this plugin's, nor this one the dense plugin's name */
    int is_json = 0;
    ck_assert_int_eq(moe_config_matches("{\"architectures\": [\"Qwen3ForCausalLM\"]}", &is_json), 0);
    ck_assert_int_eq(is_json, 1);
    ck_assert_int_eq(moe_config_matches("not json", &is_json), 0);
    ck_assert_int_eq(is_json, 0);
}
END_TEST

START_TEST(test_defaults_and_sparse_layers)
{
    moe_config c;
    llmrt_error err = {0};
    ck_assert_msg(moe_config_parse(minimal, &c, &err) == LLMRT_OK, "%s", err.msg);
    /* transformers' Qwen3MoeConfig defaults */
    ck_assert_int_eq(c.n_experts, 128);
    ck_assert_int_eq(c.top_k, 8);
    ck_assert_int_eq(c.moe_inter, 768);
    ck_assert_int_eq(c.base.intermediate, 6144);
    ck_assert_int_eq(c.sparse_step, 1);
    ck_assert_int_eq(c.norm_topk, 0);
    ck_assert_int_eq(c.base.n_kv_heads, 4);
    moe_config_free(&c);

    /* decoder_sparse_step 2: layers 1, 3, 5 sparse; mlp_only_layers removes 3 (duplicates and
     * order do not matter) */
    char *s1 = with(minimal, "decoder_sparse_step", "2");
    char *s2 = with(s1, "mlp_only_layers", "[3, 0, 3]");
    char *s3 = with(s2, "num_experts", "8");
    char *s4 = with(s3, "num_experts_per_tok", "2");
    ck_assert_msg(moe_config_parse(s4, &c, &err) == LLMRT_OK, "%s", err.msg);
    const int want[6] = {0, 1, 0, 0, 0, 1};
    for (int l = 0; l < 6; l++)
        ck_assert_msg(moe_layer_is_sparse(&c, l) == want[l], "layer %d", l);
    ck_assert_int_eq(c.n_mlp_only, 2);
    moe_config_free(&c);
    free(s1), free(s2), free(s3);

    /* num_experts 0: every layer dense, no top-k needed */
    s1 = with(s4, "num_experts", "0");
    ck_assert_msg(moe_config_parse(s1, &c, &err) == LLMRT_OK, "%s", err.msg);
    for (int l = 0; l < 6; l++)
        ck_assert(!moe_layer_is_sparse(&c, l));
    moe_config_free(&c);
    free(s1), free(s4);

    /* the transformers 5 spelling: rope_parameters, layer_types of full attention */
    s1 = with(minimal, "rope_parameters", "{\"rope_type\": \"default\", \"rope_theta\": 5000.0}");
    s2 = with(s1, "layer_types", "[\"full_attention\", \"full_attention\"]");
    ck_assert_msg(moe_config_parse(s2, &c, &err) == LLMRT_OK, "%s", err.msg);
    ck_assert_double_eq(c.base.rope_theta, 5000.0);
    moe_config_free(&c);
    free(s1), free(s2);

    /* transformers 5 writes num_experts as num_local_experts (a config it saved lost its
     * expert count to the default 128 before) */
    s1 = with(minimal, "num_local_experts", "4");
    s2 = with(s1, "num_experts_per_tok", "1");
    ck_assert_msg(moe_config_parse(s2, &c, &err) == LLMRT_OK, "%s", err.msg);
    ck_assert_int_eq(c.n_experts, 4);
    ck_assert_int_eq(c.top_k, 1);
    moe_config_free(&c);
    free(s1), free(s2);
}
END_TEST

START_TEST(test_errors_name_the_key)
{
    char *s;
#define EXPECT_WITH(key, val, code, a, b)                                                      \
    s = with(minimal, key, val);                                                              \
    expect_error(s, code, a, b);                                                              \
    free(s)
    expect_error("{\"architectures\": [", LLMRT_ERR_FORMAT, "line 1", NULL);
    EXPECT_WITH("num_experts_per_tok", "200", LLMRT_ERR_FORMAT,
                "num_experts_per_tok (200) must not exceed num_experts (128)", NULL);
    EXPECT_WITH("num_experts_per_tok", "0", LLMRT_ERR_FORMAT, "\"num_experts_per_tok\" must be a positive integer", NULL);
    EXPECT_WITH("num_experts", "-1", LLMRT_ERR_FORMAT, "\"num_experts\" must be a non-negative integer", NULL);
    char *local4 = with(minimal, "num_local_experts", "4");
    s = with(local4, "num_experts", "8");
    expect_error(s, LLMRT_ERR_FORMAT, "num_experts (8) and num_local_experts (4) disagree", NULL);
    free(s), free(local4);
    EXPECT_WITH("moe_intermediate_size", "0", LLMRT_ERR_FORMAT, "\"moe_intermediate_size\" must be a positive integer", NULL);
    EXPECT_WITH("decoder_sparse_step", "0", LLMRT_ERR_FORMAT, "\"decoder_sparse_step\" must be a positive integer", NULL);
    EXPECT_WITH("norm_topk_prob", "1", LLMRT_ERR_FORMAT, "\"norm_topk_prob\" must be true or false", NULL);
    EXPECT_WITH("mlp_only_layers", "[1, 6]", LLMRT_ERR_FORMAT, "mlp_only_layers[1] must be a layer index in 0..5", NULL);
    EXPECT_WITH("mlp_only_layers", "[-1]", LLMRT_ERR_FORMAT, "mlp_only_layers[0]", NULL);
    EXPECT_WITH("mlp_only_layers", "3", LLMRT_ERR_FORMAT, "\"mlp_only_layers\" must be a list", NULL);
    EXPECT_WITH("output_router_logits", "\"no\"", LLMRT_ERR_FORMAT, "\"output_router_logits\" must be true or false", NULL);
    EXPECT_WITH("router_aux_loss_coef", "\"x\"", LLMRT_ERR_FORMAT, "\"router_aux_loss_coef\" must be a number", NULL);
    EXPECT_WITH("sliding_window", "\"4096\"", LLMRT_ERR_FORMAT, "\"sliding_window\" must be an integer or null", NULL);
    EXPECT_WITH("layer_types", "[\"sliding_attention\"]", LLMRT_ERR_UNSUPPORTED,
                "layer_types[0] = sliding_attention is not supported by the qwen3_moe plugin", NULL);
    EXPECT_WITH("rope_scaling", "{\"rope_type\": \"yarn\", \"factor\": 4.0, \"original_max_position_embeddings\": 32768}",
                LLMRT_ERR_UNSUPPORTED, "rope_scaling.rope_type = yarn is not supported by the qwen3_moe plugin", NULL);
    EXPECT_WITH("use_sliding_window", "true", LLMRT_ERR_UNSUPPORTED, "use_sliding_window = true is not supported", NULL);
    EXPECT_WITH("attention_bias", "true", LLMRT_ERR_UNSUPPORTED, "attention_bias = true is not supported", NULL);
    EXPECT_WITH("hidden_act", "\"gelu\"", LLMRT_ERR_UNSUPPORTED, "hidden_act = gelu is not supported", NULL);
    EXPECT_WITH("vocab_size", "null", LLMRT_ERR_FORMAT, "\"vocab_size\" is missing", NULL);
#undef EXPECT_WITH
}
END_TEST

int main(void)
{
    Suite *s = suite_create("qwen3_moe_config");
    TCase *tc = tcase_create("qwen3_moe_config");
    tcase_add_test(tc, test_released_configs);
    tcase_add_test(tc, test_defaults_and_sparse_layers);
    tcase_add_test(tc, test_errors_name_the_key);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
