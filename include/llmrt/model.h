/* model.h — model-architecture plugins (qwen3, ...).
 *
 * Why: an architecture is "which weights, wired how". The model plugin recognises its
 * config.json, loads weights through the checkpoint and quant plugins onto a backend,
 * reports its KV geometry so the engine can size the cache, and runs forward over a batch
 * the engine describes in fixed-address step buffers. It owns no KV cache and no sampling. */
#ifndef LLMRT_MODEL_H
#define LLMRT_MODEL_H

#include "backend.h"
#include "chat.h"
#include "checkpoint.h"
#include "memory.h"
#include "plugin.h"
#include "quant.h"
#include "synth.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct llmrt_model llmrt_model; /* a model-plugin instance, opaque */

typedef struct llmrt_model_info {
    char arch[64];            /* "Qwen3ForCausalLM" */
    int32_t n_layers;
    int32_t n_heads;
    int32_t n_kv_heads;
    int32_t head_dim;
    int32_t hidden;
    int32_t intermediate;
    int32_t vocab;
    int32_t max_position;     /* max_position_embeddings */
    llmrt_dtype weight_dtype; /* dtype of the dense weights (F32/F16/BF16) */
    uint64_t weight_bytes;    /* bytes of weights resident on the backend */
    /* (since 1.3) The ranks of the tensor-parallel group this instance is one shard of
     * (runtime.tensor_parallel; its backend's "llmrt.collective" rank says which): its heads,
     * KV heads and intermediate above are then this rank's, its forward joins the other ranks'
     * in all-reduces, and only rank 0's forward writes logits (the others accept NULL). 0 or 1:
     * the whole model (the host zeroes the struct before info(), so a plugin built before 1.3
     * reads as 0). */
    int32_t tp_size;
} llmrt_model_info;

typedef struct llmrt_model_params {
    int32_t max_tokens; /* most token rows in one forward (scheduler.max_num_batched_tokens) */
    int32_t max_seqs;   /* most sequences in one forward */
    /* (since 1.3) CPU weight offload (memory.h): NULL none. A model plugin that cannot offload
     * refuses a non-NULL one with LLMRT_ERR_UNSUPPORTED naming memory.cpu_offload_gb. */
    const struct llmrt_weight_offload *offload;
} llmrt_model_params;

/* The engine's paged KV cache, one K and one V array per layer. */
typedef struct llmrt_kv_cache {
    int32_t n_layers, n_blocks, block_size, n_kv_heads, head_dim;
    llmrt_dtype dtype;
    void *const *k; /* [n_layers] → [n_blocks, block_size, n_kv_heads, head_dim] */
    void *const *v; /* [n_layers] → same */
} llmrt_kv_cache;

/* One forward step. Array pointers are device-readable (step buffers); counts are host
 * values. Sequences are laid out one after another: sequence s owns token rows
 * [query_start[s], query_start[s+1]). */
typedef struct llmrt_batch {
    int32_t n_tokens;
    int32_t n_seqs;
    const int32_t *token_ids;    /* [n_tokens] */
    const int32_t *positions;    /* [n_tokens] */
    const int32_t *slot_mapping; /* [n_tokens] KV slot of each token, -1 = padding */
    const int32_t *query_start;  /* [n_seqs + 1] */
    const int32_t *seq_lens;     /* [n_seqs] context length after this step */
    const int32_t *block_tables; /* [n_seqs, max_blocks_per_seq] */
    const int32_t *logits_rows;  /* [n_seqs] token row whose hidden state gives the logits */
    int32_t max_blocks_per_seq;
    int32_t max_seq_len;         /* host upper bound of seq_lens */
    int32_t max_query_len;       /* host upper bound of query lengths */
    int32_t all_logits;          /* 1: logits for every token row (teacher forcing) */
} llmrt_batch;

typedef struct llmrt_model_vtable {
    uint32_t struct_size; /* (required) */
    /* (required) LLMRT_OK when config.json (its text) names an architecture this plugin runs;
     * LLMRT_ERR_NOT_FOUND otherwise. */
    llmrt_status (*probe)(const char *config_json, llmrt_error *err);
    /* (required) quant may be NULL (dense checkpoint). Weights are loaded during create. */
    llmrt_status (*create)(const llmrt_host *host, const llmrt_section *cfg,
                           const llmrt_checkpoint *ckpt, const llmrt_backend_ref *backend,
                           const llmrt_quant_ref *quant, const llmrt_model_params *params,
                           llmrt_model **out, llmrt_error *err);
    void (*destroy)(llmrt_model *m);                    /* (required) */
    void (*info)(llmrt_model *m, llmrt_model_info *out); /* (required) */
    /* (required) logits: device buffer [n_seqs, vocab] (or [n_tokens, vocab] with all_logits), f32. */
    llmrt_status (*forward)(llmrt_model *m, const llmrt_batch *batch, const llmrt_kv_cache *kv,
                            float *logits, llmrt_error *err);
    /* (optional, since 1.0) forward for a step whose every
     * row is decoded greedily — out[s] (device, [n_seqs]) = the argmax of sequence s's logits
     * row, lowest index on ties: the ids forward followed by the backend's argmax give. logits
     * is scratch of forward's size; the model may leave it unwritten. Not for all_logits. */
    llmrt_status (*forward_argmax)(llmrt_model *m, const llmrt_batch *batch,
                                   const llmrt_kv_cache *kv, float *logits, int32_t *out,
                                   llmrt_error *err);

    /* (optional, since 1.1) The family's chat format (chat.h): how messages become a prompt.
     * Used without a model instance (tokenize renders chats without loading weights). */
    const llmrt_chat_vtable *chat;

    /* ---- synthetic checkpoints (optional, since 1.1: both or neither; synth.h) ---- */
    /* The presets for index 0, 1, ... and NULL after the last. */
    const llmrt_synth_preset *(*synth_preset)(uint32_t index);
    /* Describe the checkpoint req asks for to the host's writer: every tensor (linears
     * through req->quant's synth_linear when a quant is given) and config.json /
     * generation_config.json. An unknown preset, option, or a shape the architecture (or the
     * quant) cannot take is an error naming it. No backend. */
    llmrt_status (*synthesize)(const llmrt_host *host, const llmrt_synth_request *req,
                               const llmrt_ckpt_writer *w, llmrt_error *err);
} llmrt_model_vtable;

#define LLMRT_MODEL_REQUIRED(X) X(probe) X(create) X(destroy) X(info) X(forward)

#ifdef __cplusplus
}
#endif
#endif
