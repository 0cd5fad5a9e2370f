/* prefix_cache.h — the content index of the KV cache's full blocks (automatic prefix
 * caching): which block holds "these block_size tokens after exactly that prefix", and the
 * least recently released order of the indexed blocks no sequence holds.
 *
 * A block's key is its parent — the indexed block before it in the prefix, as a block id and
 * that block's generation (0 for a prompt's first block) — and its tokens. A 64-bit hash of
 * the tokens chained with the parent's hash picks the bucket; a lookup then compares the
 * parent and every token, so a hash collision costs a comparison and never hands out the
 * KV of another prefix. A block's generation grows each time it leaves the index, so a
 * block indexed under an earlier content of its parent is never matched again.
 *
 * Why apart from kv_cache.c: this is the bookkeeping of what blocks contain (hash chains,
 * buckets, LRU links); kv_cache.c owns the blocks themselves (who holds them, allocation,
 * the tables) and calls in here. Nothing here touches device memory: sharing a block is
 * only a block id written twice into block tables. */
#ifndef LLMRT_CORE_PREFIX_CACHE_H
#define LLMRT_CORE_PREFIX_CACHE_H

#include <stdint.h>

#include <llmrt/plugin.h>

/* The hash a chain starts from (the "parent hash" of a prompt's first block). */
#define LLMRT_PREFIX_ROOT 0x6a09e667f3bcc909ull

typedef struct llmrt_prefix_cache {
    int32_t n_blocks, block_size;
    uint32_t mask;         /* buckets - 1 (a power of two minus one) */
    int32_t *buckets;      /* [mask + 1] first block of each chain, 0 = empty */
    int32_t *next;         /* [n_blocks] next block in its bucket's chain, 0 = end */
    uint64_t *hash;        /* [n_blocks] chained hash of an indexed block */
    int32_t *parent;       /* [n_blocks] the indexed block before it, 0 = it starts a prompt */
    uint64_t *parent_gen;  /* [n_blocks] the parent's generation when this one was indexed */
    uint64_t *gen;         /* [n_blocks] times the block left the index (block 0: always 0) */
    uint8_t *indexed;      /* [n_blocks] 1: in the index */
    int32_t *tokens;       /* [n_blocks, block_size] the tokens of an indexed block */
    int32_t *lru_prev;     /* [n_blocks] indexed blocks nobody holds, least recently */
    int32_t *lru_next;     /*   released first; block 0 (never indexed) is the list's head */
    int32_t n_indexed;     /* blocks in the index, held or not */
    int32_t n_lru;         /* of them, held by no sequence (reclaimable) */
    uint64_t evictions;    /* indexed blocks taken out to hold other content */
} llmrt_prefix_cache;

/* An empty index for blocks 1 .. n_blocks - 1 of block_size tokens. */
llmrt_status llmrt_prefix_init(llmrt_prefix_cache *pc, int32_t n_blocks, int32_t block_size,
                               llmrt_error *err);
void llmrt_prefix_free(llmrt_prefix_cache *pc);

/* The hash of a block of tokens [n] whose parent's hash is prev (LLMRT_PREFIX_ROOT for a
 * prompt's first block). */
uint64_t llmrt_prefix_hash(uint64_t prev, const int32_t *tokens, int32_t n);

/* The indexed block with this hash whose parent is `parent` (as it is now: same generation)
 * and whose tokens [block_size] are these; 0 when there is none. */
int32_t llmrt_prefix_find(const llmrt_prefix_cache *pc, uint64_t hash, int32_t parent,
                          const int32_t *tokens);
/* Index block b (not indexed yet) as tokens [block_size] after parent (0 or an indexed block). */
void llmrt_prefix_insert(llmrt_prefix_cache *pc, int32_t b, uint64_t hash, int32_t parent,
                         const int32_t *tokens);

/* An indexed block nobody holds any more: it joins the LRU list as the most recent. */
void llmrt_prefix_lru_push(llmrt_prefix_cache *pc, int32_t b);
/* An indexed block in the LRU list is held again: it leaves the list. */
void llmrt_prefix_lru_remove(llmrt_prefix_cache *pc, int32_t b);
/* Take the least recently released block out of the list and the index (its generation
 * grows) and return it; 0 when the list is empty. */
int32_t llmrt_prefix_evict(llmrt_prefix_cache *pc);

#endif
