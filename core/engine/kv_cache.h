/* kv_cache.h — the paged KV cache: per-layer K and V arrays in backend memory, cut into
 * fixed-size blocks, a free list, and per-sequence block tables.
 *
 * Why paged: sequences grow one token at a time and finish in any order; fixed blocks let
 * any free block serve any sequence, so the capacity is used fully and never fragments.
 * Block 0 is reserved and zero-filled: padding rows of a batch (CUDA-graph buckets) point
 * at it, so they read finite values and never touch a live sequence's data. */
#ifndef LLMRT_CORE_KV_CACHE_H
#define LLMRT_CORE_KV_CACHE_H

#include <stdint.h>

#include <llmrt/backend.h>
#include <llmrt/model.h>

typedef struct llmrt_kv {
    llmrt_backend_ref be;
    int32_t n_layers, n_kv_heads, head_dim, block_size;
    int32_t n_blocks;      /* including the reserved block 0 */
    llmrt_dtype dtype;
    uint64_t block_bytes;  /* one block of K (or V) of one layer */
    uint64_t bytes;        /* K + V of every layer, all blocks */
    void *base;            /* one device allocation holding everything */
    void **k, **v;         /* [n_layers] → [n_blocks, block_size, n_kv_heads, head_dim] */
    int32_t *free_ids;     /* [n_blocks - 1] stack of free block ids; top = lowest id */
    int32_t n_free;
    llmrt_kv_cache view;   /* what the model's forward receives */
} llmrt_kv;

/* A sequence's blocks: token at position p lives in block ids[p / block_size]. */
typedef struct llmrt_block_table {
    int32_t *ids; /* [cap] */
    int32_t n, cap;
} llmrt_block_table;

/* Bytes of one token's K and V across all layers. */
uint64_t llmrt_kv_bytes_per_token(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim,
                                  llmrt_dtype dtype);

/* Allocate n_usable blocks (+ the reserved one) on the backend and zero block 0. */
llmrt_status llmrt_kv_init(llmrt_kv *kv, const llmrt_backend_ref *be, int32_t n_layers,
                           int32_t n_kv_heads, int32_t head_dim, int32_t block_size,
                           int32_t n_usable, llmrt_dtype dtype, llmrt_error *err);
void llmrt_kv_free(llmrt_kv *kv);

int32_t llmrt_kv_usable_blocks(const llmrt_kv *kv);
int32_t llmrt_kv_used_blocks(const llmrt_kv *kv);

/* Blocks that hold n_tokens tokens. */
static inline int32_t llmrt_kv_blocks_for(const llmrt_kv *kv, int32_t n_tokens)
{
    return (n_tokens + kv->block_size - 1) / kv->block_size;
}
/* Blocks a table must gain to hold n_tokens tokens (0 when it already does). */
int32_t llmrt_kv_blocks_needed(const llmrt_kv *kv, const llmrt_block_table *t, int32_t n_tokens);
/* Grow t to hold n_tokens tokens. LLMRT_ERR_LIMIT when there are not enough free blocks; then
 * nothing is taken. */
llmrt_status llmrt_kv_table_reserve(llmrt_kv *kv, llmrt_block_table *t, int32_t n_tokens,
                                    llmrt_error *err);
/* Return all of t's blocks to the free list (t keeps its memory, n = 0). */
void llmrt_kv_table_release(llmrt_kv *kv, llmrt_block_table *t);
/* Free t's own memory (after release). */
void llmrt_kv_table_free(llmrt_block_table *t);
/* The slot (block * block_size + row) of position p. */
static inline int32_t llmrt_kv_slot(const llmrt_kv *kv, const llmrt_block_table *t, int32_t p)
{
    return t->ids[p / kv->block_size] * kv->block_size + p % kv->block_size;
}

#endif
