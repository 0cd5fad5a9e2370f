/* ext/collective.h — the "llmrt.collective" backend extension: the communicator of a tensor-
 * parallel group and the collectives a sharded model runs.
 *
 * Why an extension: tensor parallelism runs one backend instance per rank (one GPU, or one
 * thread on the CPU) and a model shard on each; only the ops that join the shards need the
 * other ranks. A backend offers them here (CPU: an in-process barrier and sum over the ranks'
 * buffers; CUDA: NCCL), so the vtable stays the single-device set and a backend without the
 * table simply cannot run runtime.tensor_parallel > 1. Conventions (f32 activations, device
 * pointers, the backend's stream, capturable) are backend.h's. */
#ifndef LLMRT_EXT_COLLECTIVE_H
#define LLMRT_EXT_COLLECTIVE_H

#include "../backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LLMRT_EXT_COLLECTIVE "llmrt.collective"
#define LLMRT_EXT_COLLECTIVE_VERSION 1

typedef struct llmrt_collective_ops {
    uint32_t struct_size; /* (required) */

    /* (required) Join ranks[0..n) — n >= 2 distinct instances of this backend plugin, in rank
     * order (CUDA: each on its own device) — into one communicator: ranks[r] becomes rank r.
     * Called once, from one thread, before any model is created on them. A backend already in
     * a group, or n larger than the plugin can join (CUDA: distinct visible devices), is
     * LLMRT_ERR_INVALID_ARG / LLMRT_ERR_UNSUPPORTED with what would be right. */
    llmrt_status (*group_init)(llmrt_backend *const *ranks, int32_t n, llmrt_error *err);
    /* (required) Undo group_init for the same ranks (once, after the last collective, before
     * the backends are destroyed). */
    void (*group_free)(llmrt_backend *const *ranks, int32_t n);
    /* (required) This backend's rank and its group's size: 0 and 1 when it is in none. */
    void (*rank)(llmrt_backend *b, int32_t *rank, int32_t *size);
    /* (required) x [n] (device, f32) = the sum over the ranks of their x, in place, on every
     * rank. Every rank calls it with the same n, in the same order of collectives. The result
     * is the same on every rank (bit for bit) and does not depend on timing (the CPU sums in
     * rank order). Enqueued on the backend's stream, capturable in a graph. */
    llmrt_status (*all_reduce_sum)(llmrt_backend *b, float *x, int64_t n, llmrt_error *err);
    /* (required) buf [bytes] (device) of every rank = rank 0's buf (rank 0's is the source and
     * stays as it is). Same rules as all_reduce_sum. */
    llmrt_status (*broadcast)(llmrt_backend *b, void *buf, size_t bytes, llmrt_error *err);
    /* (required) Before a thread issues work for b (its rank's thread, or the loader before it
     * creates that rank's model): CUDA makes b's device the thread's current one; CPU: nothing. */
    llmrt_status (*attach_thread)(llmrt_backend *b, llmrt_error *err);
    /* (required) One line for `llmrt doctor` into buf [n]: how ranks of this backend would be
     * linked (CUDA: each pair of visible GPUs, peer access and its performance rank; CPU:
     * threads of one process). */
    void (*describe_links)(llmrt_backend *b, char *buf, size_t n);
} llmrt_collective_ops;

#ifdef __cplusplus
}
#endif
#endif
