/* model_loader.h — turn runtime.ini's [model] section into a loaded model on a backend.
 *
 * Why: logits, generate, bench and serve all load a model the same way: open the folder
 * (model.path), read config.json, pick the model plugin from `architectures` and the quant
 * plugin from `quantization_config` (or what runtime.ini forces), open the backend, create
 * quant + model (weights are copied to the backend), close the checkpoint, report load time
 * and weight bytes. One function does it, so every command picks plugins identically and
 * every "nothing supports this checkpoint" error reads the same. */
#ifndef LLMRT_CORE_MODEL_LOADER_H
#define LLMRT_CORE_MODEL_LOADER_H

#include <stdint.h>

#include <llmrt/backend.h>
#include <llmrt/memory.h>
#include <llmrt/model.h>
#include <llmrt/quant.h>

#include "hf_config.h"
#include "registry.h"
#include "runtime.h"

typedef struct llmrt_model_load_opts {
    int32_t max_tokens;  /* most token rows per forward; 0: scheduler.max_num_batched_tokens */
    int32_t max_seqs;    /* most sequences per forward; 0: scheduler.max_num_seqs */
    int32_t quiet;       /* 1: no progress display and no "loaded ..." log line */
} llmrt_model_load_opts;

/* Everything a command needs from a loaded model. The checkpoint is already closed: all
 * weights live in backend memory. */
typedef struct llmrt_loaded_model {
    llmrt_backend_ref backend;         /* opened from runtime.backend; owned */
    llmrt_quant_ref quant;             /* quant.vt == NULL for a dense checkpoint; owned */
    const llmrt_model_vtable *model_vt;
    llmrt_model *model;                /* owned */
    const char *model_plugin;          /* the model plugin's descriptor name */
    llmrt_model_info info;             /* geometry + weight bytes, from the plugin */
    llmrt_hf_config hf;                /* config.json (+ generation_config.json eos ids) */
    char *dir;                         /* the model folder, as given */
    llmrt_model_params params;         /* what the model was created for */
    double load_seconds;               /* wall time of open + create, checkpoint close included */
    uint64_t device_free_before;       /* device memory free just before the weights loaded
                                          (backend mem_info; 0: unknown) */
    llmrt_memory_ref memory;           /* memory.plugin on backend, opened before the model
                                          (it holds offloaded weights); owned */
    llmrt_weight_offload offload;      /* memory.cpu_offload_gb as handed to the model
                                          (bytes 0: none) */
} llmrt_loaded_model;

/* Load the model named by rt's config (model.path, model.plugin, model.quant, runtime.backend,
 * scheduler.*). opts may be NULL (defaults). On failure nothing is left open and err says
 * what was wrong; the message starts with the model folder when one is involved. */
llmrt_status llmrt_model_load(llmrt_runtime *rt, const llmrt_model_load_opts *opts,
                              llmrt_loaded_model **out, llmrt_error *err);
/* Destroy model, quant, memory and backend (in that order) and free the struct. NULL is fine. */
void llmrt_model_unload(llmrt_loaded_model *m);

/* The plugin choice alone (no files beyond config.json text, no backend), for tests and
 * `llmrt doctor`: model_name / quant_name are the [model] keys ("auto", a plugin name, and
 * for quant also "none"); quant_json is config.json's quantization_config (NULL: none).
 * *model_out is never NULL on success; *quant_out is NULL for a dense checkpoint. */
llmrt_status llmrt_model_select(const llmrt_registry *reg, const char *config_json,
                                const char *quant_json, const char *model_name,
                                const char *quant_name, const llmrt_plugin_entry **model_out,
                                const llmrt_plugin_entry **quant_out, llmrt_error *err);

#endif
