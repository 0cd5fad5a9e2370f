/* hf_config.c — the model-agnostic parts of a Hugging Face config.json (+
 * generation_config.json): see hf_config.h. Sizes, RoPE, norms and every other
 * architecture-specific key are the model plugin's to read (it gets config.json's text). */
#include "hf_config.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "fileutil.h"
#include "jsonutil.h"

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

/* One number of generation_config.json in [lo, hi] (lo excluded when lo_open); absent or null
 * leaves it unset. */
static llmrt_status gen_number(json_t *gen, const char *key, double lo, int lo_open, double hi,
                               uint32_t bit, float *out, llmrt_hf_sampling *g, const char *where,
                               llmrt_error *err)
{
    json_t *v = json_object_get(gen, key);
    if (!v || json_is_null(v))
        return LLMRT_OK;
    char range[64];
    snprintf(range, sizeof range, "%s%g, %g%s", lo_open ? "(" : "[", lo, hi, isinf(hi) ? ")" : "]");
    if (!json_is_number(v))
        return llmrt_fail(err, LLMRT_ERR_FORMAT, "%s: key '%s' is %s, expected a number in %s",
                          where, key, llmrt_json_type_name(v), range);
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || (lo_open && x == lo) || x > hi)
        return llmrt_fail(err, LLMRT_ERR_FORMAT, "%s: key '%s' is %g, expected a number in %s",
                          where, key, x, range);
    *out = (float)x;
    g->set |= bit;
    return LLMRT_OK;
}

/* temperature, top_p, top_k, min_p, repetition_penalty (do_sample is not read: vLLM applies
 * the values whatever it says). */
static llmrt_status parse_sampling(json_t *gen, const char *where, llmrt_hf_sampling *g,
                                   llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    TRY(gen_number(gen, "temperature", 0, 0, INFINITY, LLMRT_SAMPLING_TEMPERATURE,
                   &g->temperature, g, where, err));
    TRY(gen_number(gen, "top_p", 0, 1, 1, LLMRT_SAMPLING_TOP_P, &g->top_p, g, where, err));
    TRY(gen_number(gen, "min_p", 0, 0, 1, LLMRT_SAMPLING_MIN_P, &g->min_p, g, where, err));
    TRY(gen_number(gen, "repetition_penalty", 0, 1, INFINITY, LLMRT_SAMPLING_REPETITION_PENALTY,
                   &g->repetition_penalty, g, where, err));
    json_t *k = json_object_get(gen, "top_k");
    if (k && !json_is_null(k)) {
        if (!json_is_integer(k) || json_integer_value(k) < -1 ||
            json_integer_value(k) > INT32_MAX)
            FAIL(err, LLMRT_ERR_FORMAT,
                 "%s: key 'top_k' is %s, expected an integer >= -1 (0 or -1: no limit)", where,
                 json_is_integer(k) ? "out of range" : llmrt_json_type_name(k));
        g->top_k = (int32_t)json_integer_value(k);
        g->set |= LLMRT_SAMPLING_TOP_K;
    }
cleanup:
    return st;
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
             "%s: missing key 'architectures' (a list of architecture names, as transformers "
             "writes it)", where);
    if (!json_is_array(arch) || json_array_size(arch) == 0)
        FAIL(err, LLMRT_ERR_FORMAT,
             "%s: key 'architectures' is %s, expected a non-empty list of strings", where,
             json_is_array(arch) ? "an empty list" : llmrt_json_type_name(arch));
    TRY(copy_string(json_array_get(arch, 0), "architectures[0]", c->architecture,
                    sizeof c->architecture, where, err));
    TRY(copy_string(json_object_get(root, "model_type"), "model_type", c->model_type,
                    sizeof c->model_type, where, err));

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
    if (st == LLMRT_OK) {
        out->config_json = strdup(json_text);
        if (!out->config_json)
            st = llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory keeping %s", where);
    }
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
    llmrt_status st =
        llmrt_read_file_bounded(path, LLMRT_MAX_CONFIG_BYTES, "config.json", &text, NULL, err);
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
    char *gtext = NULL;
    size_t glen = 0;
    memset(out, 0, sizeof *out);
    out->bos_id = -1;

    snprintf(path, sizeof path, "%s/config.json", dir);
    snprintf(gpath, sizeof gpath, "%s/generation_config.json", dir);
    TRY(llmrt_hf_config_parse_file(path, out, err));

    if (llmrt_path_exists(gpath)) {
        json_error_t jerr;
        TRY(llmrt_read_file_bounded(gpath, LLMRT_MAX_CONFIG_BYTES, "generation_config.json",
                                    &gtext, &glen, err));
        gen = json_loadb(gtext, glen, JSON_REJECT_DUPLICATES, &jerr);
        if (!gen)
            FAIL(err, LLMRT_ERR_FORMAT, "%s: bad JSON at line %d column %d: %s", gpath,
                 jerr.line, jerr.column, jerr.text);
        if (!json_is_object(gen))
            FAIL(err, LLMRT_ERR_FORMAT, "%s: the top level is %s, expected a JSON object", gpath,
                 llmrt_json_type_name(gen));
        TRY(add_eos(out, json_object_get(gen, "eos_token_id"), gpath, err));
        if (out->bos_id < 0)
            TRY(get_bos(gen, &out->bos_id, gpath, err));
        TRY(parse_sampling(gen, gpath, &out->gen, err));
    }
cleanup:
    if (st != LLMRT_OK) {
        llmrt_hf_config_free(out);
        memset(out, 0, sizeof *out);
        out->bos_id = -1;
    }
    json_decref(gen);
    free(gtext);
    return st;
}

void llmrt_hf_config_free(llmrt_hf_config *c)
{
    if (!c)
        return;
    free(c->quant_json); /* jansson's json_dumps allocates with malloc by default */
    c->quant_json = NULL;
    free(c->config_json);
    c->config_json = NULL;
}
