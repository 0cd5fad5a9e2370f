/* kv_cache.h — the paged KV cache: per-layer K and V arrays in backend memory, cut into
 * fixed-size blocks, a free list, per-sequence block tables, and (cache.prefix_caching) the
 * sharing of full blocks between sequences with the same prefix.
 *
 * Why paged: sequences grow one token at a time and finish in any order; fixed blocks let
 * any free block serve any sequence, so the capacity is used fully and never fragments.
 * Block 0 is reserved and zero-filled: padding rows of a batch (CUDA-graph buckets) point
 * at it, so they read finite values and never touch a live sequence's data.
 *
 * Prefix caching: a block is held by as many tables as list it (refs). A full block whose
 * tokens are known and whose KV is written (or being written by a launched step, which any
 * later reader follows on the stream) is indexed by its content (prefix_cache.h); a new
 * sequence whose leading full blocks are indexed lists those blocks instead of computing
 * them. A block nobody holds stays indexed and reclaimable: allocation takes never-indexed
 * free blocks first, then evicts the least recently released indexed one. Only full blocks
 * are ever shared, and a sequence never writes into a block it shares: the blocks it
 * computes are its own, and the hit stops short of its last token, so at least that token
 * is computed (the first output needs its logits). */
#ifndef LLMRT_CORE_KV_CACHE_H
#define LLMRT_CORE_KV_CACHE_H

#include <stdint.h>

#include <llmrt/backend.h>
#include <llmrt/model.h>

#include "prefix_cache.h"

typedef struct llmrt_kv {
    llmrt_backend_ref be;
    int32_t n_layers, n_kv_heads, head_dim, block_size;
    int32_t n_blocks;      /* including the reserved block 0 */
    llmrt_dtype dtype;
    uint64_t block_bytes;  /* one block of K (or V) of one layer */
    uint64_t bytes;        /* K + V of every layer, all blocks */
    void *base;            /* one device allocation holding everything */
    void **k, **v;         /* [n_layers] → [n_blocks, block_size, n_kv_heads, head_dim] */
    int32_t *free_ids;     /* [n_blocks - 1] stack of free blocks never indexed (or evicted);
                              top = lowest id */
    int32_t n_unindexed;   /* blocks on that stack */
    int32_t n_free;        /* blocks a table can take: the stack + the indexed ones nobody
                              holds (pc.n_lru) */
    int32_t *refs;         /* [n_blocks] tables holding each block */
    int prefix_on;         /* cache.prefix_caching: pc is in use */
    llmrt_prefix_cache pc;
    uint64_t prefix_queries; /* tokens looked up when sequences were admitted */
    uint64_t prefix_hits;    /* of them, found in the cache */
    llmrt_kv_cache view;   /* what the model's forward receives */
} llmrt_kv;

/* A sequence's blocks: token at position p lives in block ids[p / block_size]. */
typedef struct llmrt_block_table {
    int32_t *ids; /* [cap] */
    int32_t n, cap;
    /* prefix caching: the leading blocks already indexed (found there, or indexed from this
     * table), and the last of them as the index knows it */
    int32_t n_indexed;
    uint64_t last_hash;
    int32_t last_node;   /* the indexed block holding block n_indexed - 1's tokens (this
                            table's own, or an equal one another table indexed first) */
    uint64_t last_gen;   /* last_node's generation then: when it changes, the chain is gone */
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
/* Make room in t's id array for n_blocks blocks (LLMRT_ERR_NOMEM: it stays as it was). */
llmrt_status llmrt_kv_table_room(llmrt_block_table *t, int32_t n_blocks);
/* Grow t to hold n_tokens tokens. LLMRT_ERR_LIMIT when there are not enough free blocks; then
 * nothing is taken. */
llmrt_status llmrt_kv_table_reserve(llmrt_kv *kv, llmrt_block_table *t, int32_t n_tokens,
                                    llmrt_error *err);
/* Return all of t's blocks to the free list (t keeps its memory, n = 0); blocks other
 * tables still hold stay theirs, indexed blocks stay indexed until evicted. */
void llmrt_kv_table_release(llmrt_kv *kv, llmrt_block_table *t);
/* Free t's own memory (after release). */
void llmrt_kv_table_free(llmrt_block_table *t);
/* The slot (block * block_size + row) of position p. */
static inline int32_t llmrt_kv_slot(const llmrt_kv *kv, const llmrt_block_table *t, int32_t p)
{
    return t->ids[p / kv->block_size] * kv->block_size + p % kv->block_size;
}

/* ---- prefix caching ---- */

/* Turn prefix caching on (right after init, before any table is reserved). */
llmrt_status llmrt_kv_prefix_enable(llmrt_kv *kv, llmrt_error *err);
/* Leading full blocks of tokens [n_tokens] that are in the cache, at most
 * (n_tokens - 1) / block_size (the last token is always computed); *n_unheld: of them, the
 * blocks nobody holds (they count in n_free now and will not once attached). 0 when prefix
 * caching is off. */
int32_t llmrt_kv_prefix_probe(const llmrt_kv *kv, const int32_t *tokens, int32_t n_tokens,
                              int32_t *n_unheld);
/* Put those cached blocks at the start of t (empty) and count the lookup in prefix_queries
 * and prefix_hits. Returns the blocks attached (their tokens need no computing). */
int32_t llmrt_kv_prefix_attach(llmrt_kv *kv, llmrt_block_table *t, const int32_t *tokens,
                               int32_t n_tokens);
/* Index t's full blocks that lie within its first n_ready tokens (known, and their KV
 * written or being written by a launched step), in order; a block whose content another
 * table indexed first is not indexed again. A negative id (a token still being computed)
 * stops it. */
void llmrt_kv_prefix_commit(llmrt_kv *kv, llmrt_block_table *t, const int32_t *tokens,
                            int32_t n_ready);

#endif
