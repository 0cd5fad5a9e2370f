/* tp_model.h — runtime.tensor_parallel: N model shards, one per rank (a backend instance
 * each, joined through the backend's "llmrt.collective" extension), presented to the engine
 * as one model.
 *
 * Why a model: the engine, scheduler, server and bench stay as they are. The engine's KV
 * cache and step buffers belong to rank 0 (the model's info reports this rank's KV heads, so
 * the cache is sized per rank); each forward runs every rank in lockstep — rank 0 on the
 * calling thread, the others on a thread each — after broadcasting the step's index arrays
 * from rank 0's buffers into each rank's own, and each rank keeps a KV cache of rank 0's
 * geometry. Only rank 0 computes logits, so sampling is unchanged. */
#ifndef LLMRT_CORE_TP_MODEL_H
#define LLMRT_CORE_TP_MODEL_H

#include <llmrt/model.h>

#include "registry.h"
#include "runtime.h"

/* Create the n >= 2 ranks of the model plugin `me` (quant plugin `qe`, or NULL) from ck:
 * rank 0 on be0 with quant q0 (both stay the caller's), ranks 1..n-1 on backends opened here
 * (llmrt_runtime_backend_open_rank) with quants created here. *vt_out / *out: the group as a
 * model (destroy() ends everything but be0 and q0). Refusals name runtime.tensor_parallel. */
llmrt_status llmrt_tp_model_create(llmrt_runtime *rt, int32_t n, const llmrt_checkpoint *ck,
                                   const llmrt_plugin_entry *me, const llmrt_plugin_entry *qe,
                                   const char *quant_json, const llmrt_backend_ref *be0,
                                   const llmrt_quant_ref *q0, const llmrt_model_params *params,
                                   const llmrt_model_vtable **vt_out, llmrt_model **out,
                                   llmrt_error *err);

#endif
