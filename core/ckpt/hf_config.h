/* hf_config.h — the parts of a Hugging Face model folder's config.json (and
 * generation_config.json) that the core needs: architecture, sizes, dtype, RoPE, tied
 * embeddings, eos ids, and the quantization_config object as JSON text for quant plugins.
 *
 * Both spellings seen in the wild are accepted: rope_theta / torch_dtype (released Qwen3
 * checkpoints) and rope_parameters.rope_theta / dtype (transformers 5). */
#ifndef LLMRT_CORE_HF_CONFIG_H
#define LLMRT_CORE_HF_CONFIG_H

#include <stdint.h>

#include <llmrt/plugin.h>
#include <llmrt/tensor.h>

#define LLMRT_MAX_EOS 8

typedef struct llmrt_hf_config {
    char architecture[64];   /* architectures[0] */
    char model_type[64];
    int32_t vocab_size;
    int32_t hidden_size;
    int32_t intermediate_size;
    int32_t num_hidden_layers;
    int32_t num_attention_heads;
    int32_t num_key_value_heads;
    int32_t head_dim;        /* from config; hidden/heads only when absent */
    int32_t max_position_embeddings;
    double rms_norm_eps;
    double rope_theta;
    int32_t tie_word_embeddings;
    llmrt_dtype dtype;       /* torch_dtype / dtype; INVALID when absent */
    int32_t eos_ids[LLMRT_MAX_EOS];
    int32_t n_eos;           /* config.json's eos_token_id(s), plus generation_config.json's */
    int32_t bos_id;          /* -1 when absent */
    char *quant_json;        /* quantization_config as JSON text, NULL when absent */
} llmrt_hf_config;

/* Parse config.json text. `where` names the file in messages. */
llmrt_status llmrt_hf_config_parse(const char *json_text, const char *where,
                                   llmrt_hf_config *out, llmrt_error *err);
/* Read and parse one config.json file (no generation_config.json). */
llmrt_status llmrt_hf_config_parse_file(const char *path, llmrt_hf_config *out, llmrt_error *err);
/* Read <dir>/config.json and, when present, <dir>/generation_config.json (eos ids). */
llmrt_status llmrt_hf_config_load(const char *dir, llmrt_hf_config *out, llmrt_error *err);
void llmrt_hf_config_free(llmrt_hf_config *c);

#endif
