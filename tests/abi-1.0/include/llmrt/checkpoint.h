/* checkpoint.h — read access to a model checkpoint, as the host hands it to plugins.
 *
 * Why: model and quant plugins need tensors by name ("model.layers.0.mlp.up_proj.weight")
 * without knowing about files, shards or mmap. The host's safetensors reader implements
 * this; the data pointers stay valid until the model is created (weights are copied to the
 * backend, or used in place on the CPU backend while the checkpoint stays open). */
#ifndef LLMRT_CHECKPOINT_H
#define LLMRT_CHECKPOINT_H

#include "plugin.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct llmrt_tensor_view {
    const char *name;
    llmrt_dtype dtype;
    int32_t ndim;
    int64_t shape[LLMRT_MAX_DIMS];
    const void *data; /* host address (mmap), little-endian */
    size_t bytes;
    const char *file; /* the shard it came from */
} llmrt_tensor_view;

typedef struct llmrt_checkpoint {
    void *ctx;
    const char *dir;         /* model directory */
    const char *config_json; /* config.json's text */
    /* Find a tensor. LLMRT_ERR_NOT_FOUND (message names the tensor and the checkpoint) when
     * absent. Each successful find counts toward the load progress display. */
    llmrt_status (*find)(void *ctx, const char *name, llmrt_tensor_view *out, llmrt_error *err);
    /* 1 when the tensor exists, without counting progress. */
    int (*has)(void *ctx, const char *name);
} llmrt_checkpoint;

#ifdef __cplusplus
}
#endif
#endif
