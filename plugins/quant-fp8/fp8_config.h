/* fp8_config.h — internal to quant-fp8: quantization_config as the plugin reads it, the
 * block geometry, one linear's source tensors as the kernels take them, and the synthetic
 * checkpoint entries (fp8_synth.c).
 *
 * The format (Qwen3-*-FP8, DeepSeek-V3, transformers' FineGrainedFP8Config):
 *   quantization_config {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
 *                        "weight_block_size": [128, 128], "modules_to_not_convert": [...]}
 *   prefix.weight           F8_E4M3 [out, in]
 *   prefix.weight_scale_inv F32 or BF16 [ceil(out / 128), ceil(in / 128)]
 *   W[o][i] = e4m3(weight[o][i]) * weight_scale_inv[o / 128][i / 128]
 * ("scale_inv" because the quantizer divided by it: q = W / s.) The last block of a row or
 * column may be partial. "dynamic" activations: each token's inputs, per group of 128, are
 * scaled by s = amax / 448 and rounded to e4m3 before the product (fp8_act.h). */
#ifndef LLMRT_QUANT_FP8_CONFIG_H
#define LLMRT_QUANT_FP8_CONFIG_H

#include <stdint.h>
#include <string.h>

#include <llmrt/quant.h>

#define FP8_BLOCK 128      /* rows and inputs per scale block (weight_block_size) */
#define FP8_MAX_PARTS 8    /* linears fused into one by linear_load_fused */
#define FP8_MAX_SKIP 64    /* entries of modules_to_not_convert kept */

/* Rows the CUDA GEMV serves by default (tune gemv_rows; its 4-n-tile shape streams at a
 * fraction of the 1- and 2-tile ones' rate), and so the default w8a8_min_rows: the FP8 GEMM
 * takes over from the next row. */
#define FP8_GEMV_ROWS 16
#define FP8_W8A8_MIN_ROWS 17 /* FP8_GEMV_ROWS + 1, as a literal for the key's default text */
#define FP8_STR_(x) #x
#define FP8_STR(x) FP8_STR_(x)
#ifdef __cplusplus
static_assert(FP8_W8A8_MIN_ROWS == FP8_GEMV_ROWS + 1, "auto's W8A8 starts where the GEMV ends");
#else
_Static_assert(FP8_W8A8_MIN_ROWS == FP8_GEMV_ROWS + 1, "auto's W8A8 starts where the GEMV ends");
#endif

typedef struct fp8_params {
    int64_t block_rows, block_cols; /* weight_block_size: 128, 128 */
    int n_skip;                     /* modules_to_not_convert / ignored_layers */
    char skip[FP8_MAX_SKIP][128];
} fp8_params;

/* Parse and check quantization_config's JSON text: LLMRT_ERR_NOT_FOUND when it is not this
 * format, UNSUPPORTED for a variant this plugin does not run (the message names the field),
 * FORMAT for a malformed field. */
llmrt_status fp8_parse_config(const char *text, fp8_params *p, llmrt_error *err);

/* 1 when modules_to_not_convert names the linear at `prefix` ("lm_head",
 * "model.layers.0.mlp.gate_proj", or a dotted tail such as "mlp.gate_proj"): an entry matches
 * when it equals the prefix or a run of its dot-separated components. */
int fp8_skipped(const fp8_params *p, const char *prefix);

/* How activations meet the weights ([quant.fp8] activations). */
typedef enum fp8_act {
    FP8_ACT_AUTO = 0,  /* W8A16 at decode and without FP8 matrix units, W8A8 on them above */
    FP8_ACT_W8A16 = 1, /* activations in f32 (CPU) or f16 (CUDA) against dequantized weights */
    FP8_ACT_W8A8 = 2   /* activations quantized per token per 128 inputs (fp8_act.h) */
} fp8_act;

/* One linear's tensors in the checkpoint, as checked by fp8.c (host memory, unaligned). */
typedef struct fp8_part {
    const char *name;        /* prefix.weight, for messages */
    const char *scale_name;  /* prefix.weight_scale_inv */
    const uint8_t *weight;   /* e4m3 [out, in] */
    const void *scale;       /* [ceil(out/128), ceil(in/128)] */
    llmrt_dtype scale_dtype; /* F32 or BF16 */
    int64_t out;
} fp8_part;

static inline int64_t fp8_blocks(int64_t n)
{
    return (n + FP8_BLOCK - 1) / FP8_BLOCK;
}

/* Scale element i of a part as f32 (F32 or BF16 storage; checkpoint data need not be
 * aligned, so through memcpy). */
static inline float fp8_part_scale(const fp8_part *p, int64_t i)
{
    if (p->scale_dtype == LLMRT_DTYPE_BF16) {
        uint16_t h;
        memcpy(&h, (const char *)p->scale + i * 2, 2);
        return llmrt_bf16_to_f32(h);
    }
    float f;
    memcpy(&f, (const char *)p->scale + i * 4, 4);
    return f;
}

/* quant.h synth_config / synth_linear. */
llmrt_status fp8_synth_config(const llmrt_section *opts, const llmrt_synth_linear *linears,
                              uint32_t n, llmrt_dtype *dtype, const llmrt_sink *out,
                              llmrt_error *err);
llmrt_status fp8_synth_linear(const char *quant_config_json, const llmrt_ckpt_writer *w,
                              const char *prefix, int64_t in_features, int64_t out_features,
                              llmrt_error *err);

#endif
