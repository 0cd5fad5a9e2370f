/* qwen3_config_common.c — the config.json keys every Qwen3 decoder reads, with jansson.
 *
 * Why in the plugins and not the core's hf_config: plugins never link libllmrt, and a model
 * plugin knows best which keys its architecture needs. Both spellings in the wild are
 * accepted: rope_theta (released Qwen3 checkpoints) and rope_parameters.rope_theta
 * (transformers 5). Variants the plugins do not implement (attention biases, sliding windows,
 * RoPE scaling, other activations) are rejected by name instead of silently computing
 * something else. Absent keys take transformers' Qwen3Config defaults. */
#include <math.h>
#include <string.h>

#include "qwen3_common.h"

int qwen3_config_lists_arch(const char *config_json, const char *arch, int *is_json)
{
    json_error_t jerr;
    json_t *root = json_loads(config_json ? config_json : "", 0, &jerr);
    *is_json = root != NULL && json_is_object(root);
    int found = 0;
    json_t *archs = root ? json_object_get(root, "architectures") : NULL;
    size_t i;
    json_t *a;
    if (json_is_array(archs)) {
        json_array_foreach(archs, i, a) {
            if (json_is_string(a) && strcmp(json_string_value(a), arch) == 0)
                found = 1;
        }
    }
    json_decref(root);
    return found;
}

llmrt_status qwen3_config_load(const char *config_json, json_t **root, llmrt_error *err)
{
    json_error_t jerr;
    *root = json_loads(config_json ? config_json : "", 0, &jerr);
    if (*root && json_is_object(*root))
        return LLMRT_OK;
    llmrt_status st = llmrt_fail(err, LLMRT_ERR_FORMAT, "config.json: %s (line %d)",
                                 *root ? "not a JSON object" : jerr.text, jerr.line);
    json_decref(*root);
    *root = NULL;
    return st;
}

llmrt_status qwen3_json_posint(json_t *root, const char *key, int64_t def, int32_t *out,
                               llmrt_error *err)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        if (def < 0)
            return llmrt_fail(err, LLMRT_ERR_FORMAT,
                              "config.json: required key \"%s\" is missing (a positive integer)",
                              key);
        *out = (int32_t)def;
        return LLMRT_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > INT32_MAX)
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "config.json: \"%s\" must be a positive integer below 2^31", key);
    *out = (int32_t)json_integer_value(v);
    return LLMRT_OK;
}

static llmrt_status get_real(json_t *obj, const char *key, double def, double *out,
                             const char *where, llmrt_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return LLMRT_OK;
    }
    if (!json_is_number(v) || !(json_number_value(v) > 0) || !isfinite(json_number_value(v)))
        return llmrt_fail(err, LLMRT_ERR_FORMAT, "config.json: \"%s%s\" must be a positive number",
                          where, key);
    *out = json_number_value(v);
    return LLMRT_OK;
}

/* Reject a RoPE variant other than plain ("default") RoPE. */
static llmrt_status check_rope_type(json_t *obj, const char *key, const char *plugin,
                                    llmrt_error *err)
{
    if (!obj || json_is_null(obj))
        return LLMRT_OK;
    if (!json_is_object(obj))
        return llmrt_fail(err, LLMRT_ERR_FORMAT, "config.json: \"%s\" must be an object or null",
                          key);
    json_t *t = json_object_get(obj, "rope_type");
    if (!t)
        t = json_object_get(obj, "type");
    if (t && !(json_is_string(t) && strcmp(json_string_value(t), "default") == 0))
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "config.json: %s.rope_type = %s is not supported by the %s plugin "
                          "(only \"default\" RoPE)",
                          key, json_is_string(t) ? json_string_value(t) : "(not a string)",
                          plugin);
    return LLMRT_OK;
}

llmrt_status qwen3_config_read(json_t *root, const qwen3_config_spec *spec, qwen3_config *out,
                               llmrt_error *err)
{
    llmrt_status st;
    const char *plugin = spec->plugin;
    memset(out, 0, sizeof *out);
    if ((st = qwen3_json_posint(root, "vocab_size", -1, &out->vocab, err)) ||
        (st = qwen3_json_posint(root, "hidden_size", -1, &out->hidden, err)) ||
        (st = qwen3_json_posint(root, "intermediate_size", spec->intermediate_default,
                                &out->intermediate, err)) ||
        (st = qwen3_json_posint(root, "num_hidden_layers", -1, &out->n_layers, err)) ||
        (st = qwen3_json_posint(root, "num_attention_heads", -1, &out->n_heads, err)) ||
        (st = qwen3_json_posint(root, "num_key_value_heads", out->n_heads, &out->n_kv_heads,
                                err)) ||
        (st = qwen3_json_posint(root, "max_position_embeddings", 32768, &out->max_position, err)))
        return st;
    if ((st = qwen3_json_posint(root, "head_dim",
                                out->hidden / out->n_heads > 0 ? out->hidden / out->n_heads : 1,
                                &out->head_dim, err)))
        return st;
    if (out->n_heads % out->n_kv_heads != 0)
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "config.json: num_attention_heads (%d) must be a multiple of "
                          "num_key_value_heads (%d)",
                          out->n_heads, out->n_kv_heads);
    if (out->head_dim % 2 != 0)
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "config.json: head_dim (%d) must be even (RoPE rotates pairs)",
                          out->head_dim);
    if ((st = get_real(root, "rms_norm_eps", 1e-6, &out->eps, "", err)))
        return st;

    /* RoPE: transformers 5 writes rope_parameters {rope_type, rope_theta}; released
     * checkpoints write rope_theta (+ rope_scaling). Qwen3's default theta is 10000. */
    json_t *rp = json_object_get(root, "rope_parameters");
    if ((st = check_rope_type(rp, "rope_parameters", plugin, err)) ||
        (st = check_rope_type(json_object_get(root, "rope_scaling"), "rope_scaling", plugin, err)))
        return st;
    if ((st = get_real(root, "rope_theta", 10000.0, &out->rope_theta, "", err)))
        return st;
    if (json_is_object(rp) && json_object_get(rp, "rope_theta") &&
        (st = get_real(rp, "rope_theta", out->rope_theta, &out->rope_theta, "rope_parameters.",
                       err)))
        return st;

    json_t *tie = json_object_get(root, "tie_word_embeddings");
    if (tie && !json_is_boolean(tie) && !json_is_null(tie))
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "config.json: \"tie_word_embeddings\" must be true or false");
    out->tie = json_is_true(tie); /* Qwen3Config defaults to false */

    if (json_is_true(json_object_get(root, "attention_bias")))
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "config.json: attention_bias = true is not supported by the %s plugin "
                          "(Qwen3 projections have no bias)",
                          plugin);
    if (json_is_true(json_object_get(root, "use_sliding_window")))
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "config.json: use_sliding_window = true is not supported by the %s "
                          "plugin (full causal attention only)",
                          plugin);
    json_t *act = json_object_get(root, "hidden_act");
    if (act && !(json_is_string(act) && strcmp(json_string_value(act), "silu") == 0))
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "config.json: hidden_act = %s is not supported by the %s plugin (silu "
                          "only)",
                          json_is_string(act) ? json_string_value(act) : "(not a string)", plugin);
    return LLMRT_OK;
}
