/* awq_synth.c — synthetic AutoAWQ "gemm" checkpoints (quant.h synth_config / synth_linear).
 *
 * Values, so a forward pass stays finite and dequantized weights look like the dense ones:
 *   qweight / qzeros  random 32-bit words: every 4-bit weight q and zero point z uniform in
 *                     0..15, so q - z has variance 2 * (16^2 - 1) / 12 = 42.5
 *   scales            0.02 / sqrt(42.5) * uniform(0.75, 1.25): (q - z) * s has std ~0.02
 * Group size: `group_size` when given (it must divide every linear's in_features), else the
 * largest of 128, 64, 32 that does — so small test shapes work without an option. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "awq_config.h"

#define AWQ_SCALE 0.0030678599553894816 /* 0.02 / sqrt(42.5) */

static int divides_all(int64_t g, const llmrt_synth_linear *l, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (l[i].in_features % g != 0)
            return 0;
    return 1;
}

llmrt_status awq_synth_config(const llmrt_section *opts, const llmrt_synth_linear *linears,
                              uint32_t n, llmrt_dtype *dtype, const llmrt_sink *out,
                              llmrt_error *err)
{
    int64_t group = 0;
    for (size_t i = 0; opts && i < opts->n; i++) {
        if (strcmp(opts->keys[i], "group_size") != 0)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "mkmodel: unknown AWQ option '%s' (AWQ takes group_size = 32, 64 or "
                              "128)",
                              opts->keys[i]);
        char *end;
        long long g = strtoll(opts->values[i], &end, 10);
        if (*end || end == opts->values[i] || (g != 32 && g != 64 && g != 128))
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "mkmodel: AWQ group_size '%s' is not supported (32, 64 or 128)",
                              opts->values[i]);
        group = g;
    }
    if (*dtype == LLMRT_DTYPE_INVALID)
        *dtype = LLMRT_DTYPE_F16;
    if (*dtype != LLMRT_DTYPE_F16)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "mkmodel: AWQ checkpoints are float16 (AutoAWQ's scales and dense "
                          "tensors are fp16); use dtype f16, not %s",
                          llmrt_dtype_name(*dtype));
    for (uint32_t i = 0; i < n; i++)
        if (linears[i].out_features % 8 != 0)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "mkmodel: %s's out_features %lld is not a multiple of 8 (AWQ packs "
                              "eight 4-bit values per int32)",
                              linears[i].prefix, (long long)linears[i].out_features);
    if (group) {
        for (uint32_t i = 0; i < n; i++)
            if (linears[i].in_features % group != 0)
                return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                                  "mkmodel: AWQ group size %lld does not divide %s's in_features "
                                  "%lld",
                                  (long long)group, linears[i].prefix,
                                  (long long)linears[i].in_features);
    } else {
        static const int64_t choices[] = {128, 64, 32};
        for (size_t c = 0; c < 3 && !group; c++)
            if (divides_all(choices[c], linears, n))
                group = choices[c];
        if (!group)
            for (uint32_t i = 0; i < n; i++)
                if (linears[i].in_features % 32 != 0)
                    return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                                      "mkmodel: %s's in_features %lld is not a multiple of 32, "
                                      "the smallest AWQ group size",
                                      linears[i].prefix, (long long)linears[i].in_features);
    }
    json_t *q = json_pack("{s:s, s:i, s:i, s:b, s:s, s:n}", "quant_method", "awq", "bits", 4,
                          "group_size", (int)group, "zero_point", 1, "version", "gemm",
                          "modules_to_not_convert");
    char *text = q ? json_dumps(q, JSON_COMPACT) : NULL;
    json_decref(q);
    if (!text)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
    llmrt_status st = out->write(out->ctx, text, strlen(text));
    free(text);
    return st;
}

llmrt_status awq_synth_linear(const char *quant_config_json, const llmrt_ckpt_writer *w,
                              const char *prefix, int64_t in, int64_t out, llmrt_error *err)
{
    awq_params p;
    llmrt_status st = awq_parse_config(quant_config_json, &p, err);
    if (st != LLMRT_OK)
        return st;
    if (in % p.group != 0 || out % 8 != 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "mkmodel: %s [%lld, %lld] does not fit AWQ group size %lld (in_features "
                          "a multiple of it, out_features of 8)",
                          prefix, (long long)out, (long long)in, (long long)p.group);
    char name[600];
    const llmrt_fill bits = {.kind = LLMRT_FILL_BITS};
    const llmrt_fill scales = {.kind = LLMRT_FILL_UNIFORM, .scale = AWQ_SCALE, .center = 1.0,
                               .half = 0.25};
    int64_t shape[2] = {in, out / 8};
    snprintf(name, sizeof name, "%s.qweight", prefix);
    if ((st = w->add_tensor(w->ctx, name, LLMRT_DTYPE_I32, 2, shape, &bits, err)))
        return st;
    shape[0] = in / p.group;
    snprintf(name, sizeof name, "%s.qzeros", prefix);
    if ((st = w->add_tensor(w->ctx, name, LLMRT_DTYPE_I32, 2, shape, &bits, err)))
        return st;
    shape[1] = out;
    snprintf(name, sizeof name, "%s.scales", prefix);
    return w->add_tensor(w->ctx, name, LLMRT_DTYPE_F16, 2, shape, &scales, err);
}
