/* mock_model.h — a model plugin and a backend wrapper for engine tests, no checkpoint needed.
 *
 * The mock model's logits are a pure function of a sequence's tokens (a hash of the whole
 * context), so any batching, chunking, preemption or caching mistake changes the greedy
 * output. Its forward really uses the paged KV cache: each token row writes its id and
 * position into K/V at its slot, and each sequence's logits are computed from the context
 * read back through its block table — after checking every batch invariant the engine owes
 * the model (positions, slots, query starts, logits rows, block tables). A violation is
 * LLMRT_ERR_INTERNAL with a message saying which.
 *
 * The "ops" backend wraps tests/support/mock_backend with what the engine needs beyond
 * memory: argmax and sample on the host, the logits_mask extension, events that measure host
 * time, and optional graph capture (ops recorded while capturing, replayed on launch — including the mock model's
 * forward), so the CUDA-graph code path of the engine runs here too. */
#ifndef LLMRT_TEST_MOCK_MODEL_H
#define LLMRT_TEST_MOCK_MODEL_H

#include <llmrt/backend.h>
#include <llmrt/model.h>

typedef struct mock_model_cfg {
    int32_t vocab;        /* <= 65536 */
    int32_t n_layers;
    int32_t n_kv_heads;
    int32_t head_dim;     /* >= 4 */
    int32_t max_position; /* max_position_embeddings */
    int32_t eos_id;       /* -1: none */
    int32_t eos_after;    /* > 0: eos is the clear favourite once the context has this many
                             tokens */
    llmrt_dtype weight_dtype;
} mock_model_cfg;

/* vocab 97, 2 layers, 2 kv heads, head dim 4, max position 4096, no eos. */
mock_model_cfg mock_model_default_cfg(void);

extern const llmrt_model_vtable mock_model_vtable;
/* A descriptor for built-in registration (kind model, name "mock"); its probe accepts a
 * config.json whose text contains "MockForCausalLM" and create reads vocab_size,
 * num_hidden_layers, num_key_value_heads, head_dim, max_position_embeddings, eos_token_id
 * and mock_eos_after from it. */
extern const llmrt_plugin_desc mock_model_desc;

llmrt_status mock_model_create(const mock_model_cfg *cfg, const llmrt_backend_ref *be,
                               const llmrt_model_params *params, llmrt_model **out,
                               llmrt_error *err);
void mock_model_destroy(llmrt_model *m);
/* Forward calls so far and the most token rows / sequences seen in one. */
void mock_model_counts(llmrt_model *m, int64_t *forwards, int32_t *max_rows, int32_t *max_seqs);
/* Of those forwards, how many came through forward_argmax (a greedy step's ids without
 * logits; the mock poisons its logits buffer with NaN afterwards). */
int64_t mock_model_argmax_forwards(llmrt_model *m);
/* Of those forwards, how many read their step inputs (positions, slot mapping, block tables,
 * ...) in host memory rather than device memory: with uva's gather, none. */
int64_t mock_model_host_input_forwards(llmrt_model *m);

/* The reference: logits [vocab] after the context tokens [n]. */
void mock_model_logits(const mock_model_cfg *cfg, const int32_t *tokens, int32_t n,
                       float *logits);
/* Greedy continuation of prompt [n] for up to max_new tokens, stopping after eos (included).
 * Returns the number written to out. */
int32_t mock_model_greedy(const mock_model_cfg *cfg, const int32_t *prompt, int32_t n,
                          int32_t max_new, int32_t *out);

/* ---- the ops backend ---- */
typedef struct mock_ops_opts {
    int argmax;         /* provide argmax */
    int sample;         /* provide sample (host implementation of the device contract) */
    int graphs;         /* CAP_GRAPHS with record / replay */
    int async;          /* report CAP_ASYNC (ops still run at once) */
    int host_is_device; /* report CAP_HOST_IS_DEVICE (mock device memory is host memory) */
    int graph_events;   /* with graphs: CAP_GRAPH_EVENTS, events recorded while capturing are
                           recorded again at each replay */
    int is_gpu;         /* device_info says GPU, with mem_total / mem_free below */
    int mask;           /* offer the "llmrt.logits_mask" extension (token masks) */
    uint64_t mem_total, mem_free;
} mock_ops_opts;

llmrt_backend_ref mock_ops_backend_new(const mock_ops_opts *o);
void mock_ops_backend_free(llmrt_backend_ref *ref);
typedef struct mock_ops_stats {
    int graphs_captured, graph_launches;
    int argmax_calls, sample_calls;
    int mask_calls, masked_rows; /* logits_mask apply calls, rows they masked */
    int d2d_copies;
    int live_dev;       /* device allocations not yet freed */
    int graph_event_records; /* events recorded by replayed graphs */
} mock_ops_stats;
mock_ops_stats mock_ops_get_stats(const llmrt_backend_ref *ref);


/* ---- an engine on the mock model, ops backend and a real memory plugin (.so) ---- */
#include "engine_parts.h"

typedef struct mock_rig_opts {
    const char *memory;          /* "pageable", "pinned", "uva": plugins/memory-<name>.so */
    mock_ops_opts ops;
    mock_model_cfg model;
    llmrt_engine_settings set;
    llmrt_tokenizer *tok;        /* borrowed; may be NULL */
    const int32_t *eos;          /* default: the model's eos_id when >= 0 */
    int32_t n_eos;
    llmrt_step_cb on_step;
    void *step_user;
    llmrt_hf_sampling sampling;  /* the model folder's sampling defaults (set 0: none) */
} mock_rig_opts;

typedef struct mock_rig {
    llmrt_backend_ref be;
    llmrt_memory_ref mem;
    llmrt_model *model;
    llmrt_engine *e;
    llmrt_host host;
    int32_t eos;
} mock_rig;

/* Defaults: pageable memory, argmax + sample on the device, mock model defaults, engine
 * defaults with kv_tokens 4096 and async scheduling off. */
mock_rig_opts mock_rig_default_opts(void);
llmrt_status mock_rig_open(mock_rig *r, const mock_rig_opts *o, llmrt_error *err);
void mock_rig_close(mock_rig *r);

#endif
