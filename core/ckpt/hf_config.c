/* hf_config.c — parse a Hugging Face config.json (+ generation_config.json) into
 * llmrt_hf_config (see hf_config.h).
 *
 * Defaults follow transformers' Qwen3Config where a key may be absent, so a config that
 * transformers accepts means the same thing here:
 *   num_key_value_heads      = num_attention_heads
 *   head_dim                 = hidden_size / num_attention_heads (the generic rule; every
 *                              released Qwen3 config states head_dim, and it must be read
 *                              from there: Qwen3-0.6B has 16 heads x 128 != 1024)
 *   max_position_embeddings  = 32768
 *   rms_norm_eps             = 1e-6
 *   rope_theta               = rope_theta, else rope_parameters.rope_theta (transformers 5),
 *                              else 10000 (transformers' default base)
 *   tie_word_embeddings      = false (Qwen3Config's default)
 * Everything else is required, and a missing key or a value of the wrong type is an error
 * naming the file, the key and what was expected. */
#include "hf_config.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "error.h"
#include "fileutil.h"
#include "jsonutil.h"

#define DEFAULT_MAX_POSITION 32768
#define DEFAULT_RMS_NORM_EPS 1e-6
#define DEFAULT_ROPE_THETA 10000.0

/* An int32 key in [min, INT32_MAX]. Absent or null: *out = dflt when !required. */
static llmrt_status get_int(json_t *root, const char *key, int required, int32_t dflt,
                            int32_t min, int32_t *out, const char *where, llmrt_error *err)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        if (required)
            return llmrt_fail(err, LLMRT_ERR_FORMAT,
                              "%s: missing key '%s' (an integer >= %d)", where, key, (int)min);
        *out = dflt;
        return LLMRT_OK;
    }
    if (!json_is_integer(v))
        return llmrt_fail(err, LLMRT_ERR_FORMAT, "%s: key '%s' is %s, expected an integer >= %d",
                          where, key, llmrt_json_type_name(v), (int)min);
    json_int_t x = json_integer_value(v);
    if (x < min || x > INT32_MAX)
        return llmrt_fail(err, LLMRT_ERR_FORMAT, "%s: key '%s' is %lld, expected %d..%d", where,
                          key, (long long)x, (int)min, INT32_MAX);
    *out = (int32_t)x;
    return LLMRT_OK;
}

/* A positive number (integer or real) or the default when absent/null. */
static llmrt_status get_pos_number(json_t *obj, const char *key, const char *shown_key,
                                   double dflt, double *out, int *found, const char *where,
                                   llmrt_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (found)
        *found = 0;
    if (!v || json_is_null(v)) {
        *out = dflt;
        return LLMRT_OK;
    }
    if (!json_is_number(v))
        return llmrt_fail(err, LLMRT_ERR_FORMAT, "%s: key '%s' is %s, expected a positive number",
                          where, shown_key, llmrt_json_type_name(v));
    double x = json_number_value(v);
    if (!(x > 0))
        return llmrt_fail(err, LLMRT_ERR_FORMAT, "%s: key '%s' is %g, expected a positive number",
                          where, shown_key, x);
    *out = x;
    if (found)
        *found = 1;
    return LLMRT_OK;
}

static llmrt_status copy_string(json_t *v, const char *key, char *dst, size_t cap,
                                const char *where, llmrt_error *err)
{
    if (!v)
        return llmrt_fail(err, LLMRT_ERR_FORMAT, "%s: missing key '%s' (a string)", where, key);
    if (!json_is_string(v))
        return llmrt_fail(err, LLMRT_ERR_FORMAT, "%s: key '%s' is %s, expected a string", where,
                          key, llmrt_json_type_name(v));
    const char *s = json_string_value(v);
    if (strlen(s) >= cap)
        return llmrt_fail(err, LLMRT_ERR_FORMAT, "%s: key '%s' is longer than %zu characters",
                          where, key, cap - 1);
    memcpy(dst, s, strlen(s) + 1);
    return LLMRT_OK;
}

static llmrt_status parse_dtype(const char *s, const char *key, llmrt_dtype *out,
                                const char *where, llmrt_error *err)
{
    if (strncmp(s, "torch.", 6) == 0)
        s += 6;
    if (strcmp(s, "bfloat16") == 0)
        *out = LLMRT_DTYPE_BF16;
    else if (strcmp(s, "float16") == 0)
        *out = LLMRT_DTYPE_F16;
    else if (strcmp(s, "float32") == 0)
        *out = LLMRT_DTYPE_F32;
    else
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "%s: %s '%s' is not supported (expected bfloat16, float16 or float32)",
                          where, key, s);
    return LLMRT_OK;
}

/* eos_token_id: an integer, a list of integers, or null. Appends ids not yet present. */
static llmrt_status add_eos(llmrt_hf_config *c, json_t *v, const char *where, llmrt_error *err)
{
    if (!v || json_is_null(v))
        return LLMRT_OK;
    size_t n = json_is_array(v) ? json_array_size(v) : 1;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_integer(e) || json_integer_value(e) < 0 ||
            json_integer_value(e) > INT32_MAX)
            return llmrt_fail(err, LLMRT_ERR_FORMAT,
                              "%s: key 'eos_token_id' must be a non-negative integer or a list of "
                              "them (found %s)",
                              where, llmrt_json_type_name(e));
        int32_t id = (int32_t)json_integer_value(e);
        int seen = 0;
        for (int32_t k = 0; k < c->n_eos; k++)
            seen |= c->eos_ids[k] == id;
        if (seen)
            continue;
        if (c->n_eos >= LLMRT_MAX_EOS)
            return llmrt_fail(err, LLMRT_ERR_LIMIT, "%s: more than %d distinct eos_token_id values",
                              where, LLMRT_MAX_EOS);
        c->eos_ids[c->n_eos++] = id;
    }
    return LLMRT_OK;
}

static llmrt_status get_bos(json_t *root, int32_t *out, const char *where, llmrt_error *err)
{
    json_t *v = json_object_get(root, "bos_token_id");
    if (!v || json_is_null(v))
        return LLMRT_OK;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "%s: key 'bos_token_id' is %s, expected a non-negative integer or null",
                          where, llmrt_json_type_name(v));
    *out = (int32_t)json_integer_value(v);
    return LLMRT_OK;
}

static llmrt_status parse_root(json_t *root, const char *where, llmrt_hf_config *c,
                               llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    if (!json_is_object(root))
        FAIL(err, LLMRT_ERR_FORMAT, "%s: the top level is %s, expected a JSON object", where,
             llmrt_json_type_name(root));

    json_t *arch = json_object_get(root, "architectures");
    if (!arch)
        FAIL(err, LLMRT_ERR_FORMAT,
             "%s: missing key 'architectures' (a list such as [\"Qwen3ForCausalLM\"])", where);
    if (!json_is_array(arch) || json_array_size(arch) == 0)
        FAIL(err, LLMRT_ERR_FORMAT,
             "%s: key 'architectures' is %s, expected a non-empty list of strings", where,
             json_is_array(arch) ? "an empty list" : llmrt_json_type_name(arch));
    TRY(copy_string(json_array_get(arch, 0), "architectures[0]", c->architecture,
                    sizeof c->architecture, where, err));
    TRY(copy_string(json_object_get(root, "model_type"), "model_type", c->model_type,
                    sizeof c->model_type, where, err));

    TRY(get_int(root, "vocab_size", 1, 0, 1, &c->vocab_size, where, err));
    TRY(get_int(root, "hidden_size", 1, 0, 1, &c->hidden_size, where, err));
    TRY(get_int(root, "intermediate_size", 1, 0, 1, &c->intermediate_size, where, err));
    TRY(get_int(root, "num_hidden_layers", 1, 0, 1, &c->num_hidden_layers, where, err));
    TRY(get_int(root, "num_attention_heads", 1, 0, 1, &c->num_attention_heads, where, err));
    TRY(get_int(root, "num_key_value_heads", 0, c->num_attention_heads, 1,
                &c->num_key_value_heads, where, err));
    TRY(get_int(root, "head_dim", 0, 0, 1, &c->head_dim, where, err));
    if (c->head_dim == 0) {
        if (c->hidden_size % c->num_attention_heads != 0)
            FAIL(err, LLMRT_ERR_FORMAT,
                 "%s: key 'head_dim' is absent and hidden_size %d is not divisible by "
                 "num_attention_heads %d; add \"head_dim\"",
                 where, (int)c->hidden_size, (int)c->num_attention_heads);
        c->head_dim = c->hidden_size / c->num_attention_heads;
    }
    TRY(get_int(root, "max_position_embeddings", 0, DEFAULT_MAX_POSITION, 1,
                &c->max_position_embeddings, where, err));
    TRY(get_pos_number(root, "rms_norm_eps", "rms_norm_eps", DEFAULT_RMS_NORM_EPS,
                       &c->rms_norm_eps, NULL, where, err));

    int found = 0;
    TRY(get_pos_number(root, "rope_theta", "rope_theta", DEFAULT_ROPE_THETA, &c->rope_theta,
                       &found, where, err));
    json_t *rp = json_object_get(root, "rope_parameters");
    if (!found && rp && !json_is_null(rp)) {
        if (!json_is_object(rp))
            FAIL(err, LLMRT_ERR_FORMAT, "%s: key 'rope_parameters' is %s, expected an object",
                 where, llmrt_json_type_name(rp));
        TRY(get_pos_number(rp, "rope_theta", "rope_parameters.rope_theta", DEFAULT_ROPE_THETA,
                           &c->rope_theta, NULL, where, err));
    }

    json_t *tie = json_object_get(root, "tie_word_embeddings");
    if (tie && !json_is_null(tie)) {
        if (!json_is_boolean(tie))
            FAIL(err, LLMRT_ERR_FORMAT,
                 "%s: key 'tie_word_embeddings' is %s, expected true or false", where,
                 llmrt_json_type_name(tie));
        c->tie_word_embeddings = json_is_true(tie);
    }

    /* transformers 5 writes "dtype"; released checkpoints "torch_dtype". */
    const char *dkeys[2] = {"dtype", "torch_dtype"};
    for (int k = 0; k < 2 && c->dtype == LLMRT_DTYPE_INVALID; k++) {
        json_t *d = json_object_get(root, dkeys[k]);
        if (!d || json_is_null(d))
            continue;
        if (!json_is_string(d))
            FAIL(err, LLMRT_ERR_FORMAT, "%s: key '%s' is %s, expected a string such as \"bfloat16\"",
                 where, dkeys[k], llmrt_json_type_name(d));
        TRY(parse_dtype(json_string_value(d), dkeys[k], &c->dtype, where, err));
    }

    TRY(add_eos(c, json_object_get(root, "eos_token_id"), where, err));
    TRY(get_bos(root, &c->bos_id, where, err));

    json_t *q = json_object_get(root, "quantization_config");
    if (q && !json_is_null(q)) {
        if (!json_is_object(q))
            FAIL(err, LLMRT_ERR_FORMAT,
                 "%s: key 'quantization_config' is %s, expected an object", where, llmrt_json_type_name(q));
        c->quant_json = json_dumps(q, JSON_COMPACT);
        TRY_ALLOC(err, c->quant_json, "quantization_config text");
    }
cleanup:
    return st;
}

llmrt_status llmrt_hf_config_parse(const char *json_text, const char *where,
                                   llmrt_hf_config *out, llmrt_error *err)
{
    llmrt_status st;
    json_error_t jerr;
    memset(out, 0, sizeof *out);
    out->bos_id = -1;
    json_t *root = json_loads(json_text, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return llmrt_fail(err, LLMRT_ERR_FORMAT, "%s: bad JSON at line %d column %d: %s", where,
                          jerr.line, jerr.column, jerr.text);
    st = parse_root(root, where, out, err);
    json_decref(root);
    if (st != LLMRT_OK) {
        llmrt_hf_config_free(out);
        memset(out, 0, sizeof *out);
        out->bos_id = -1;
    }
    return st;
}

llmrt_status llmrt_hf_config_parse_file(const char *path, llmrt_hf_config *out, llmrt_error *err)
{
    char *text = NULL;
    memset(out, 0, sizeof *out);
    out->bos_id = -1;
    llmrt_status st = llmrt_read_file(path, &text, NULL, err);
    if (st == LLMRT_OK)
        st = llmrt_hf_config_parse(text, path, out, err);
    free(text);
    return st;
}

llmrt_status llmrt_hf_config_load(const char *dir, llmrt_hf_config *out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    char path[4096], gpath[4096];
    json_t *gen = NULL;
    memset(out, 0, sizeof *out);
    out->bos_id = -1;

    snprintf(path, sizeof path, "%s/config.json", dir);
    snprintf(gpath, sizeof gpath, "%s/generation_config.json", dir);
    TRY(llmrt_hf_config_parse_file(path, out, err));

    struct stat sb;
    if (stat(gpath, &sb) == 0) {
        json_error_t jerr;
        gen = json_load_file(gpath, JSON_REJECT_DUPLICATES, &jerr);
        if (!gen)
            FAIL(err, LLMRT_ERR_FORMAT, "%s: bad JSON at line %d column %d: %s", gpath,
                 jerr.line, jerr.column, jerr.text);
        if (!json_is_object(gen))
            FAIL(err, LLMRT_ERR_FORMAT, "%s: the top level is %s, expected a JSON object", gpath,
                 llmrt_json_type_name(gen));
        TRY(add_eos(out, json_object_get(gen, "eos_token_id"), gpath, err));
        if (out->bos_id < 0)
            TRY(get_bos(gen, &out->bos_id, gpath, err));
    }
cleanup:
    if (st != LLMRT_OK) {
        llmrt_hf_config_free(out);
        memset(out, 0, sizeof *out);
        out->bos_id = -1;
    }
    json_decref(gen);
    return st;
}

void llmrt_hf_config_free(llmrt_hf_config *c)
{
    if (!c)
        return;
    free(c->quant_json); /* jansson's json_dumps allocates with malloc by default */
    c->quant_json = NULL;
}
