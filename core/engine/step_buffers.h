/* step_buffers.h — the per-step inputs and outputs of a forward pass, in buffers the memory
 * plugin allocates once at fixed addresses (DESIGN.md §3).
 *
 * Why one input buffer: a step's inputs (token ids, positions, slot mapping, query starts,
 * sequence lengths, logits rows, sampling parameters, block tables) are packed back to back
 * for that step's shape, so moving them is one copy of exactly the bytes in use, and a
 * decode step of a given batch size always has the same layout — the fixed pointers a
 * captured CUDA graph needs. Outputs (sampled ids) are a second buffer; logits live in device
 * memory and reach the host only when host sampling or logprobs need them, through a third
 * (staging) buffer of a few rows, filled in chunks (not needed when device memory is host
 * memory). All three are allocated at init, so the memory path and its caps never change
 * while the engine runs. */
#ifndef LLMRT_CORE_STEP_BUFFERS_H
#define LLMRT_CORE_STEP_BUFFERS_H

#include <stddef.h>
#include <stdint.h>

#include <llmrt/backend.h>
#include <llmrt/memory.h>

#include "runtime.h"

/* Byte offsets of each array inside the input buffer for one step shape. */
typedef struct llmrt_step_layout {
    int32_t n_tokens, n_seqs, bt_width;
    size_t token_ids;     /* int32 [n_tokens] */
    size_t positions;     /* int32 [n_tokens] */
    size_t slot_mapping;  /* int32 [n_tokens] */
    size_t query_start;   /* int32 [n_seqs + 1] */
    size_t seq_lens;      /* int32 [n_seqs] */
    size_t logits_rows;   /* int32 [n_seqs] */
    size_t sample_params; /* llmrt_sample_params [n_seqs] */
    size_t block_tables;  /* int32 [n_seqs, bt_width] */
    size_t bytes;         /* total */
} llmrt_step_layout;

void llmrt_step_layout_make(llmrt_step_layout *l, int32_t n_tokens, int32_t n_seqs,
                            int32_t bt_width);

typedef struct llmrt_step_buffers {
    llmrt_backend_ref be;
    llmrt_memory_ref mem;      /* borrowed */
    uint32_t mem_caps;         /* after allocation (a fallback changes them) */
    int32_t max_tokens, max_seqs, max_bt_width, vocab;
    llmrt_mem_buffer in;       /* TO_DEVICE, the largest layout */
    llmrt_mem_buffer out;      /* TO_HOST, int32 [max_seqs] sampled ids */
    llmrt_mem_buffer staging;  /* TO_HOST, f32 [staging_rows, vocab] logits; unallocated
                                  (bytes 0) when the backend's memory is host memory */
    int32_t staging_rows;
    float *logits;             /* device, f32 [max_seqs, vocab], written by the model */
} llmrt_step_buffers;

llmrt_status llmrt_step_buffers_init(llmrt_step_buffers *sb, const llmrt_backend_ref *be,
                                     const llmrt_memory_ref *mem, int32_t max_tokens,
                                     int32_t max_seqs, int32_t max_bt_width, int32_t vocab,
                                     llmrt_error *err);
void llmrt_step_buffers_free(llmrt_step_buffers *sb);

/* Typed views of half h of the input buffer for layout l. */
static inline int32_t *llmrt_step_host_i32(llmrt_step_buffers *sb, int h, size_t off)
{
    return (int32_t *)((char *)sb->in.host[h] + off);
}
static inline void *llmrt_step_dev(llmrt_step_buffers *sb, int h, size_t off)
{
    return (char *)sb->in.device[h] + off;
}

#endif
