/* mkmodel.h — write a synthetic Qwen3 checkpoint in exactly the Hugging Face layout:
 * config.json, generation_config.json, model.safetensors (or model-0000i-of-0000n.safetensors
 * shards + model.safetensors.index.json), dense or AutoAWQ "gemm" int4.
 *
 * Why: benchmarks and tests need checkpoints of real shapes (Qwen3-8B AWQ is ~6 GB) without
 * downloading any. Weights are deterministic random numbers from a seed, chosen so a forward
 * pass stays finite (norm weights near 1, dense weights with std 0.02, AWQ weights that
 * dequantize to std 0.02). Element i of a tensor is a pure function of (seed, tensor name,
 * i) — a counter-based generator — so the file's bytes do not depend on how many threads
 * filled it. The model is streamed through two fill buffers; it is never held in memory. */
#ifndef LLMRT_CORE_MKMODEL_H
#define LLMRT_CORE_MKMODEL_H

#include <stdint.h>

#include <llmrt/plugin.h>

#include "hf_config.h"

#define LLMRT_MKMODEL_DEFAULT_SHARD_BYTES 2000000000ull /* 2 GB, decimal */

typedef struct llmrt_mkmodel_opts {
    llmrt_hf_config cfg;  /* sizes, eps, rope_theta, tie_word_embeddings, bos/eos; the
                             architecture is always written as Qwen3ForCausalLM / qwen3 */
    llmrt_dtype dtype;    /* dense tensors: F16, BF16 or F32 (AWQ: F16, as AutoAWQ writes) */
    int awq;              /* 1: decoder linears in AutoAWQ gemm int4 layout */
    int32_t group_size;   /* AWQ quantization group (along in_features) */
    uint64_t seed;
    uint64_t shard_bytes; /* max bytes of tensor data per shard; 0: the 2 GB default */
    int threads;          /* fill threads; 0: one per online CPU */
    int show_progress;    /* 1: progress display on stderr */
    int tied_lm_head;     /* tied model: still write lm_head.weight, equal to embed_tokens
                             (some released tied checkpoints carry it) */
} llmrt_mkmodel_opts;

typedef struct llmrt_mkmodel_result {
    uint64_t bytes;      /* tensor data written, all shards */
    uint32_t n_tensors;
    uint32_t n_shards;   /* 1 = a single model.safetensors */
    double seconds;
} llmrt_mkmodel_result;

/* Names of the presets, for usage text: "tiny, qwen3-0.6b, qwen3-8b". */
const char *llmrt_mkmodel_preset_names(void);
/* Fill *out with a preset's config (dtype BF16). NOT_FOUND lists the presets. */
llmrt_status llmrt_mkmodel_preset(const char *name, llmrt_hf_config *out, llmrt_error *err);
/* Defaults for everything but cfg: BF16, dense, group 128, seed 0, 2 GB shards. */
void llmrt_mkmodel_opts_init(llmrt_mkmodel_opts *o);

/* Write the checkpoint into `dir` (created when missing; its parent must exist). Files a
 * previous mkmodel run may have left there (config.json, generation_config.json,
 * model.safetensors, model-*-of-*.safetensors, the index) are replaced; config.json is
 * written last, so a folder with a config.json holds a complete checkpoint. */
llmrt_status llmrt_mkmodel_write(const char *dir, const llmrt_mkmodel_opts *o,
                                 llmrt_mkmodel_result *res, llmrt_error *err);

#endif
