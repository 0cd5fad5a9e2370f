/* awq_config.h — internal to quant-awq: quantization_config as the plugin reads it, and the
 * synthetic-checkpoint entries (awq_synth.c) that write it. */
#ifndef LLMRT_QUANT_AWQ_CONFIG_H
#define LLMRT_QUANT_AWQ_CONFIG_H

#include <stdint.h>

#include <llmrt/quant.h>

typedef struct awq_params {
    int64_t bits, group;
} awq_params;

/* Parse and check quantization_config's JSON text: LLMRT_ERR_NOT_FOUND when it is not AWQ,
 * UNSUPPORTED for an AWQ variant this plugin does not run (the message names the field). */
llmrt_status awq_parse_config(const char *text, awq_params *p, llmrt_error *err);

/* quant.h synth_config / synth_linear. */
llmrt_status awq_synth_config(const llmrt_section *opts, const llmrt_synth_linear *linears,
                              uint32_t n, llmrt_dtype *dtype, const llmrt_sink *out,
                              llmrt_error *err);
llmrt_status awq_synth_linear(const char *quant_config_json, const llmrt_ckpt_writer *w,
                              const char *prefix, int64_t in_features, int64_t out_features,
                              llmrt_error *err);

#endif
