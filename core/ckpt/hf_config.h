/* hf_config.h — what the host needs of a Hugging Face model folder's config.json (and
 * generation_config.json): the architecture and model type (to pick the model plugin),
 * quantization_config as JSON text (for the quant plugin), the eos / bos ids, the sampling
 * settings of generation_config.json, and the text of config.json itself (handed to the
 * model plugin, which parses its own keys).
 *
 * Why so little: everything else (sizes, RoPE, norms, defaults of absent keys) is
 * architecture-specific and read once, by the model plugin. */
#ifndef LLMRT_CORE_HF_CONFIG_H
#define LLMRT_CORE_HF_CONFIG_H

#include <stdint.h>

#include <llmrt/engine.h>
#include <llmrt/plugin.h>
#include <llmrt/tensor.h>

#define LLMRT_MAX_EOS 8

/* generation_config.json's sampling settings, which vLLM applies to requests that leave them
 * out (llmrt_engine_sampling_defaults). */
typedef struct llmrt_hf_sampling {
    uint32_t set;             /* LLMRT_SAMPLING_* (engine.h) bits of the keys the file gives */
    float temperature;        /* >= 0 */
    float top_p;              /* (0, 1] */
    int32_t top_k;            /* >= -1 (0, -1: off) */
    float min_p;              /* [0, 1] */
    float repetition_penalty; /* > 0 */
} llmrt_hf_sampling;

typedef struct llmrt_hf_config {
    char architecture[64];   /* architectures[0] */
    char model_type[64];
    int32_t eos_ids[LLMRT_MAX_EOS];
    int32_t n_eos;           /* config.json's eos_token_id(s), plus generation_config.json's */
    int32_t bos_id;          /* -1 when absent */
    char *quant_json;        /* quantization_config as JSON text, NULL when absent */
    char *config_json;       /* config.json's text */
    llmrt_hf_sampling gen;   /* generation_config.json's sampling settings (set 0: none) */
} llmrt_hf_config;

/* Parse config.json text. `where` names the file in messages. */
llmrt_status llmrt_hf_config_parse(const char *json_text, const char *where,
                                   llmrt_hf_config *out, llmrt_error *err);
/* Read and parse one config.json file (no generation_config.json). */
llmrt_status llmrt_hf_config_parse_file(const char *path, llmrt_hf_config *out, llmrt_error *err);
/* Read <dir>/config.json and, when present, <dir>/generation_config.json (eos ids, sampling
 * settings: a value out of range is an error naming the file and key). */
llmrt_status llmrt_hf_config_load(const char *dir, llmrt_hf_config *out, llmrt_error *err);
void llmrt_hf_config_free(llmrt_hf_config *c);

#endif
