/* fp8_synth.c — synthetic block-scaled FP8 checkpoints (quant.h synth_config / synth_linear),
 * in the layout Qwen ships (Qwen3-*-FP8): quantization_config {"activation_scheme": "dynamic",
 * "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}, dense tensors in
 * bf16 unless asked otherwise.
 *
 * Values, so a forward pass stays finite and dequantized weights look like the dense ones:
 *   weight            e4m3 codes of uniform(-448, 448) (the host rounds to e4m3): the whole
 *                     range, as a block quantizer that maps each block's amax to 448 uses it;
 *                     std 448 / sqrt(3)
 *   weight_scale_inv  f32, 0.02 / (448 / sqrt(3)) * uniform(0.9, 1.1) per 128x128 block:
 *                     e4m3 * scale has std ~0.02
 * Any shape works: the last block of a row or column is partial, as in the real files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fp8_config.h"

#define FP8_SYNTH_SCALE 7.7324975e-05 /* 0.02 / (448 / sqrt(3)) */

llmrt_status fp8_synth_config(const llmrt_section *opts, const llmrt_synth_linear *linears,
                              uint32_t n, llmrt_dtype *dtype, const llmrt_sink *out,
                              llmrt_error *err)
{
    if (opts && opts->n > 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "mkmodel: unknown FP8 option '%s' (FP8 takes no options: 128x128 "
                          "block scales, e4m3 weights)",
                          opts->keys[0]);
    if (*dtype == LLMRT_DTYPE_INVALID)
        *dtype = LLMRT_DTYPE_BF16;
    if (*dtype != LLMRT_DTYPE_BF16 && *dtype != LLMRT_DTYPE_F16 && *dtype != LLMRT_DTYPE_F32)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "mkmodel: FP8 checkpoints keep their dense tensors in bf16 (as Qwen "
                          "ships them), f16 or f32, not %s",
                          llmrt_dtype_name(*dtype));
    for (uint32_t i = 0; i < n; i++)
        if (linears[i].in_features <= 0 || linears[i].out_features <= 0)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "mkmodel: %s has shape [%lld, %lld]",
                              linears[i].prefix, (long long)linears[i].out_features,
                              (long long)linears[i].in_features);
    json_t *q = json_pack("{s:s, s:s, s:s, s:[i, i]}", "activation_scheme", "dynamic", "fmt",
                          "e4m3", "quant_method", "fp8", "weight_block_size", FP8_BLOCK,
                          FP8_BLOCK);
    char *text = q ? json_dumps(q, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(q);
    if (!text)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
    llmrt_status st = out->write(out->ctx, text, strlen(text));
    free(text);
    return st;
}

llmrt_status fp8_synth_linear(const char *quant_config_json, const llmrt_ckpt_writer *w,
                              const char *prefix, int64_t in, int64_t out, llmrt_error *err)
{
    fp8_params p;
    llmrt_status st = fp8_parse_config(quant_config_json, &p, err);
    if (st != LLMRT_OK)
        return st;
    if (fp8_skipped(&p, prefix))
        return llmrt_fail(err, LLMRT_ERR_NOT_FOUND,
                          "quant-fp8: %s is in modules_to_not_convert (dense)", prefix);
    if (in <= 0 || out <= 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "mkmodel: %s has shape [%lld, %lld]",
                          prefix, (long long)out, (long long)in);
    char name[600];
    const llmrt_fill codes = {.kind = LLMRT_FILL_UNIFORM, .scale = 1.0, .center = 0.0,
                              .half = 448.0};
    const llmrt_fill scales = {.kind = LLMRT_FILL_UNIFORM, .scale = FP8_SYNTH_SCALE,
                               .center = 1.0, .half = 0.1};
    int64_t shape[2] = {out, in};
    snprintf(name, sizeof name, "%s.weight", prefix);
    if ((st = w->add_tensor(w->ctx, name, LLMRT_DTYPE_F8_E4M3, 2, shape, &codes, err)))
        return st;
    shape[0] = fp8_blocks(out);
    shape[1] = fp8_blocks(in);
    snprintf(name, sizeof name, "%s.weight_scale_inv", prefix);
    return w->add_tensor(w->ctx, name, LLMRT_DTYPE_F32, 2, shape, &scales, err);
}
