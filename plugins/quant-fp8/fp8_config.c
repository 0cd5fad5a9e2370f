/* fp8_config.c — quantization_config of block-scaled FP8 checkpoints (see fp8_config.h).
 *
 * Why a decision of its own: probe, create and the synthetic writer must agree on what is
 * this format and what is refused. Defaults follow transformers' FineGrainedFP8Config (fmt
 * e4m3, activation_scheme dynamic, weight_block_size [128, 128]); what the plugin does not
 * run — e5m2 weights, static activation scales, per-tensor or other block sizes — is refused
 * with the field that decides it, instead of producing wrong numbers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "fp8_config.h"

/* A string field or `def` when absent or null; NULL when present but not a string. */
static const char *get_string(json_t *root, const char *key, const char *def)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v))
        return def;
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static llmrt_status parse_skip(json_t *root, fp8_params *p, llmrt_error *err)
{
    /* transformers spells it modules_to_not_convert, vLLM's Fp8Config ignored_layers */
    static const char *const keys[] = {"modules_to_not_convert", "ignored_layers"};
    for (size_t k = 0; k < 2; k++) {
        json_t *v = json_object_get(root, keys[k]);
        if (!v || json_is_null(v))
            continue;
        if (!json_is_array(v))
            return llmrt_fail(err, LLMRT_ERR_FORMAT,
                              "FP8 quantization_config: %s must be a list of module names",
                              keys[k]);
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            if (!json_is_string(e))
                return llmrt_fail(err, LLMRT_ERR_FORMAT,
                                  "FP8 quantization_config: %s[%zu] is not a string", keys[k], i);
            const char *s = json_string_value(e);
            if (p->n_skip == FP8_MAX_SKIP || strlen(s) >= sizeof p->skip[0])
                return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                                  "FP8 quantization_config: %s holds more than %d names or a "
                                  "name longer than %zu characters",
                                  keys[k], FP8_MAX_SKIP, sizeof p->skip[0] - 1);
            snprintf(p->skip[p->n_skip++], sizeof p->skip[0], "%s", s);
        }
    }
    return LLMRT_OK;
}

llmrt_status fp8_parse_config(const char *text, fp8_params *p, llmrt_error *err)
{
    memset(p, 0, sizeof *p);
    llmrt_status st = LLMRT_OK;
    json_error_t jerr;
    json_t *root = json_loads(text ? text : "", 0, &jerr);
    if (!root)
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "quant-fp8: quantization_config is not valid JSON (line %d, column %d: "
                          "%s)",
                          jerr.line, jerr.column, jerr.text);
    if (!json_is_object(root)) {
        st = llmrt_fail(err, LLMRT_ERR_NOT_FOUND, "quant-fp8: quantization_config is not an object");
        goto cleanup;
    }
    const char *m = get_string(root, "quant_method", "");
    if (!m || strcasecmp(m, "fp8") != 0) {
        st = llmrt_fail(err, LLMRT_ERR_NOT_FOUND, "quant-fp8: quant_method '%s' is not \"fp8\"",
                        m ? m : "(not a string)");
        goto cleanup;
    }
    const char *fmt = get_string(root, "fmt", "e4m3");
    if (!fmt) {
        st = llmrt_fail(err, LLMRT_ERR_FORMAT, "FP8 quantization_config: fmt must be a string");
        goto cleanup;
    }
    if (strcasecmp(fmt, "e4m3") != 0 && strcasecmp(fmt, "float8_e4m3fn") != 0) {
        st = llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                        "FP8 quantization_config: fmt = \"%s\" is not supported (quant-fp8 runs "
                        "e4m3 weights: fmt = \"e4m3\")",
                        fmt);
        goto cleanup;
    }
    const char *act = get_string(root, "activation_scheme", "dynamic");
    if (!act) {
        st = llmrt_fail(err, LLMRT_ERR_FORMAT,
                        "FP8 quantization_config: activation_scheme must be a string");
        goto cleanup;
    }
    if (strcasecmp(act, "dynamic") != 0) {
        st = llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                        "FP8 quantization_config: activation_scheme = \"%s\" is not supported "
                        "(quant-fp8 scales activations per token at run time: activation_scheme "
                        "= \"dynamic\"; static checkpoints carry input_scale tensors it does not "
                        "read)",
                        act);
        goto cleanup;
    }
    json_t *bs = json_object_get(root, "weight_block_size");
    if (!bs || json_is_null(bs)) {
        st = llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                        "FP8 quantization_config: weight_block_size is %s: per-tensor weight "
                        "scales are not supported (quant-fp8 reads 128x128 block scales: "
                        "weight_block_size = [128, 128])",
                        bs ? "null" : "absent");
        goto cleanup;
    }
    if (!json_is_array(bs) || json_array_size(bs) != 2 ||
        !json_is_integer(json_array_get(bs, 0)) || !json_is_integer(json_array_get(bs, 1))) {
        st = llmrt_fail(err, LLMRT_ERR_FORMAT,
                        "FP8 quantization_config: weight_block_size must be [rows, columns], "
                        "two integers");
        goto cleanup;
    }
    p->block_rows = (int64_t)json_integer_value(json_array_get(bs, 0));
    p->block_cols = (int64_t)json_integer_value(json_array_get(bs, 1));
    if (p->block_rows != FP8_BLOCK || p->block_cols != FP8_BLOCK) {
        st = llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                        "FP8 quantization_config: weight_block_size = [%lld, %lld] is not "
                        "supported (quant-fp8 reads 128x128 block scales: weight_block_size = "
                        "[128, 128])",
                        (long long)p->block_rows, (long long)p->block_cols);
        goto cleanup;
    }
    st = parse_skip(root, p, err);
cleanup:
    json_decref(root);
    return st;
}

int fp8_skipped(const fp8_params *p, const char *prefix)
{
    const size_t pl = strlen(prefix);
    for (int i = 0; i < p->n_skip; i++) {
        const char *e = p->skip[i];
        const size_t el = strlen(e);
        if (el == 0 || el > pl)
            continue;
        for (const char *at = prefix; (at = strstr(at, e)) != NULL; at++) {
            const int starts = at == prefix || at[-1] == '.';
            const int ends = at[el] == '\0' || at[el] == '.';
            if (starts && ends)
                return 1;
        }
    }
    return 0;
}
