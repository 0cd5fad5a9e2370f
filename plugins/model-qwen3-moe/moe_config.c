/* moe_config.c — config.json → moe_config for Qwen3MoeForCausalLM (model_type qwen3_moe).
 *
 * Every field of the released configs (Qwen3-30B-A3B, Qwen3-235B-A22B), and what is done
 * with it. Absent keys take transformers' Qwen3MoeConfig defaults.
 *   read by qwen3-common (qwen3_config_read), as for dense Qwen3:
 *     vocab_size, hidden_size, intermediate_size (default 6144: the dense layers' MLP),
 *     num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim,
 *     max_position_embeddings, rms_norm_eps, rope_theta / rope_parameters,
 *     tie_word_embeddings; refused when they ask for what is not implemented:
 *     rope_scaling / rope_parameters with a rope_type other than "default" (YaRN),
 *     attention_bias = true, use_sliding_window = true, hidden_act other than silu
 *   read here:
 *     num_experts (default 128; 0: every layer dense), num_experts_per_tok (default 8;
 *     1..num_experts), moe_intermediate_size (default 768), decoder_sparse_step (default 1),
 *     norm_topk_prob (default false), mlp_only_layers (default []: layer indices below
 *     num_hidden_layers), layer_types (transformers 5; only "full_attention")
 *   checked for their type, no effect at inference:
 *     output_router_logits (training: the auxiliary loss), router_aux_loss_coef (its weight),
 *     sliding_window and max_window_layers (used only with use_sliding_window, refused above)
 *   not read: attention_dropout, initializer_range (training), bos_token_id, eos_token_id
 *     (the engine reads them with generation_config.json), model_type, torch_dtype / dtype
 *     (the tensors carry their dtype), transformers_version, use_cache, architectures (probe).
 */
#include <stdlib.h>
#include <string.h>

#include "moe.h"

int moe_config_matches(const char *config_json, int *is_json)
{
    return qwen3_config_lists_arch(config_json, MOE_ARCH, is_json);
}

void moe_config_free(moe_config *c)
{
    free(c->mlp_only);
    c->mlp_only = NULL;
    c->n_mlp_only = 0;
}

int moe_layer_is_sparse(const moe_config *c, int32_t l)
{
    for (int32_t i = 0; i < c->n_mlp_only; i++)
        if (c->mlp_only[i] == l)
            return 0;
    return c->n_experts > 0 && (l + 1) % c->sparse_step == 0;
}

/* A non-negative integer key (def when absent). */
static llmrt_status get_count(json_t *root, const char *key, int32_t def, int32_t *out,
                              llmrt_error *err)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return LLMRT_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "config.json: \"%s\" must be a non-negative integer below 2^31", key);
    *out = (int32_t)json_integer_value(v);
    return LLMRT_OK;
}

static llmrt_status get_bool(json_t *root, const char *key, int def, int32_t *out,
                             llmrt_error *err)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        if (out)
            *out = def;
        return LLMRT_OK;
    }
    if (!json_is_boolean(v))
        return llmrt_fail(err, LLMRT_ERR_FORMAT, "config.json: \"%s\" must be true or false", key);
    if (out)
        *out = json_is_true(v);
    return LLMRT_OK;
}

static int cmp_int32(const void *a, const void *b)
{
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

static llmrt_status get_mlp_only(json_t *root, moe_config *c, llmrt_error *err)
{
    json_t *v = json_object_get(root, "mlp_only_layers");
    if (!v || json_is_null(v))
        return LLMRT_OK;
    if (!json_is_array(v))
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "config.json: \"mlp_only_layers\" must be a list of layer indices");
    const size_t n = json_array_size(v);
    if (n == 0)
        return LLMRT_OK;
    if (n > (size_t)c->base.n_layers)
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "config.json: \"mlp_only_layers\" lists %zu layers, more than "
                          "num_hidden_layers (%d)",
                          n, c->base.n_layers);
    c->mlp_only = malloc(n * sizeof *c->mlp_only);
    if (!c->mlp_only)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "config.json: out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(v, i);
        if (!json_is_integer(e) || json_integer_value(e) < 0 ||
            json_integer_value(e) >= c->base.n_layers)
            return llmrt_fail(err, LLMRT_ERR_FORMAT,
                              "config.json: mlp_only_layers[%zu] must be a layer index in 0..%d "
                              "(num_hidden_layers is %d)",
                              i, c->base.n_layers - 1, c->base.n_layers);
        c->mlp_only[i] = (int32_t)json_integer_value(e);
    }
    qsort(c->mlp_only, n, sizeof *c->mlp_only, cmp_int32);
    size_t k = 0; /* distinct */
    for (size_t i = 0; i < n; i++)
        if (k == 0 || c->mlp_only[k - 1] != c->mlp_only[i])
            c->mlp_only[k++] = c->mlp_only[i];
    c->n_mlp_only = (int32_t)k;
    return LLMRT_OK;
}

/* Keys that matter only for training or for a refused variant: a wrong type is still a
 * malformed config. */
static llmrt_status check_inert(json_t *root, llmrt_error *err)
{
    llmrt_status st;
    if ((st = get_bool(root, "output_router_logits", 0, NULL, err)))
        return st;
    json_t *v = json_object_get(root, "router_aux_loss_coef");
    if (v && !json_is_null(v) && !json_is_number(v))
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "config.json: \"router_aux_loss_coef\" must be a number");
    const char *ints[] = {"sliding_window", "max_window_layers"};
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
        v = json_object_get(root, ints[i]);
        if (v && !json_is_null(v) && !json_is_integer(v))
            return llmrt_fail(err, LLMRT_ERR_FORMAT,
                              "config.json: \"%s\" must be an integer or null", ints[i]);
    }
    v = json_object_get(root, "layer_types");
    if (v && !json_is_null(v)) {
        if (!json_is_array(v))
            return llmrt_fail(err, LLMRT_ERR_FORMAT, "config.json: \"layer_types\" must be a list");
        size_t i;
        json_t *t;
        json_array_foreach(v, i, t) {
            if (!json_is_string(t) || strcmp(json_string_value(t), "full_attention") != 0)
                return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                                  "config.json: layer_types[%zu] = %s is not supported by the "
                                  MOE_PLUGIN " plugin (full_attention only)",
                                  i, json_is_string(t) ? json_string_value(t) : "(not a string)");
        }
    }
    return LLMRT_OK;
}

llmrt_status moe_config_parse(const char *config_json, moe_config *out, llmrt_error *err)
{
    static const qwen3_config_spec spec = {.plugin = MOE_PLUGIN, .intermediate_default = 6144};
    json_t *root = NULL;
    memset(out, 0, sizeof *out);
    llmrt_status st = qwen3_config_load(config_json, &root, err);
    if (st)
        return st;
    if ((st = qwen3_config_read(root, &spec, &out->base, err)) ||
        (st = get_count(root, "num_experts", 128, &out->n_experts, err)) ||
        (st = qwen3_json_posint(root, "moe_intermediate_size", 768, &out->moe_inter, err)) ||
        (st = qwen3_json_posint(root, "decoder_sparse_step", 1, &out->sparse_step, err)) ||
        (st = get_bool(root, "norm_topk_prob", 0, &out->norm_topk, err)) ||
        (st = get_mlp_only(root, out, err)) || (st = check_inert(root, err)))
        goto cleanup;
    if (out->n_experts > 0) {
        if ((st = qwen3_json_posint(root, "num_experts_per_tok", 8, &out->top_k, err)))
            goto cleanup;
        if (out->top_k > out->n_experts) {
            st = llmrt_fail(err, LLMRT_ERR_FORMAT,
                            "config.json: num_experts_per_tok (%d) must not exceed num_experts "
                            "(%d): each token takes its top num_experts_per_tok experts",
                            out->top_k, out->n_experts);
            goto cleanup;
        }
    }
cleanup:
    json_decref(root);
    if (st)
        moe_config_free(out);
    return st;
}
