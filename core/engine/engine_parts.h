/* engine_parts.h — assembling an engine from parts that are already open: a backend, a
 * memory plugin instance, a created model, optionally a tokenizer, and the engine settings.
 *
 * Why: llmrt_engine_create (engine.h) opens these from runtime.ini through the model loader;
 * unit tests (mock model, mock backend) and tools that build engines another way use this
 * directly, so the whole step loop is exercised without a checkpoint. */
#ifndef LLMRT_CORE_ENGINE_PARTS_H
#define LLMRT_CORE_ENGINE_PARTS_H

#include <llmrt/engine.h>

#include "chat.h"
#include "config.h"
#include "hf_config.h"
#include "runtime.h"
#include "tokenizer.h"

/* The [cache] and [scheduler] keys of runtime.ini. */
typedef struct llmrt_engine_settings {
    int32_t block_size;            /* cache.block_size */
    int64_t kv_tokens;             /* cache.kv_tokens; 0 = automatic */
    double gpu_memory_utilization; /* cache.gpu_memory_utilization */
    int32_t max_model_len;         /* cache.max_model_len; 0 = from the model */
    llmrt_dtype kv_dtype;          /* cache.dtype; LLMRT_DTYPE_INVALID = auto */
    int32_t prefix_caching;        /* cache.prefix_caching */
    int32_t max_num_seqs;          /* scheduler.max_num_seqs; 0 = by backend */
    int32_t max_num_batched_tokens;/* scheduler.max_num_batched_tokens; 0 = by backend */
    int32_t async_scheduling;      /* scheduler.async_scheduling */
    int32_t cuda_graphs;           /* scheduler.cuda_graphs */
} llmrt_engine_settings;

/* Block 16, automatic capacity, prefix caching, async + graphs, and the CPU's limits (32
 * seqs, 2048 tokens: a model created from these settings has its sizes); runtime.ini's 0 = by
 * backend is resolved by create (llmrt_sched_default_limits). */
void llmrt_engine_settings_default(llmrt_engine_settings *s);
/* Read them from a config (values were validated when the config was built). */
void llmrt_engine_settings_from_config(const llmrt_config *cfg, llmrt_engine_settings *s);

typedef struct llmrt_engine_parts {
    llmrt_backend_ref backend;
    llmrt_memory_ref memory;        /* created on `backend` */
    const llmrt_model_vtable *model_vt;
    llmrt_model *model;             /* created on `backend` with max_tokens >=
                                       max_num_batched_tokens and max_seqs >= max_num_seqs */
    llmrt_tokenizer *tokenizer;     /* NULL: ids only */
    const llmrt_chat_ref *chat;     /* the chat format (vt NULL: none, why says why); may be NULL */
    const int32_t *eos_ids;         /* [n_eos] the model's stop ids (copied) */
    int32_t n_eos;
    const char *model_path;         /* for stats; may be NULL */
    const char *quant_name;         /* the quant plugin's name, NULL = none */
    double load_time_s;             /* time already spent loading (added to stats) */
    uint64_t device_free_before;    /* device memory free before the model's weights loaded
                                       (0: unknown): stats give this engine's own use */
    llmrt_hf_sampling sampling;     /* the model folder's sampling defaults (set 0: none) */
    /* Called by llmrt_engine_destroy after the engine let go of the parts (and by a failed
     * create): closes what the caller handed over. NULL: the caller keeps ownership. */
    void (*release)(void *ctx);
    void *release_ctx;
} llmrt_engine_parts;

llmrt_status llmrt_engine_create_from_parts(const llmrt_engine_parts *parts,
                                            const llmrt_engine_settings *settings,
                                            const llmrt_engine_options *opts,
                                            llmrt_engine **out, llmrt_error *err);

#endif
