/* prefix_cache.c — see prefix_cache.h. */
#include "prefix_cache.h"

#include <stdlib.h>
#include <string.h>

void llmrt_prefix_free(llmrt_prefix_cache *pc)
{
    free(pc->buckets);
    free(pc->next);
    free(pc->hash);
    free(pc->parent);
    free(pc->parent_gen);
    free(pc->gen);
    free(pc->indexed);
    free(pc->tokens);
    free(pc->lru_prev);
    free(pc->lru_next);
    memset(pc, 0, sizeof *pc);
}

llmrt_status llmrt_prefix_init(llmrt_prefix_cache *pc, int32_t n_blocks, int32_t block_size,
                               llmrt_error *err)
{
    memset(pc, 0, sizeof *pc);
    if (n_blocks < 2 || block_size < 1)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "prefix cache: %d blocks of %d tokens",
                          n_blocks, block_size);
    uint32_t buckets = 1;
    while (buckets < (uint32_t)n_blocks * 2u && buckets < (1u << 31))
        buckets *= 2;
    const size_t n = (size_t)n_blocks;
    pc->n_blocks = n_blocks;
    pc->block_size = block_size;
    pc->mask = buckets - 1;
    pc->buckets = calloc(buckets, sizeof *pc->buckets);
    pc->next = calloc(n, sizeof *pc->next);
    pc->hash = calloc(n, sizeof *pc->hash);
    pc->parent = calloc(n, sizeof *pc->parent);
    pc->parent_gen = calloc(n, sizeof *pc->parent_gen);
    pc->gen = calloc(n, sizeof *pc->gen);
    pc->indexed = calloc(n, sizeof *pc->indexed);
    pc->tokens = malloc(n * (size_t)block_size * sizeof *pc->tokens);
    pc->lru_prev = calloc(n, sizeof *pc->lru_prev);
    pc->lru_next = calloc(n, sizeof *pc->lru_next);
    if (!pc->buckets || !pc->next || !pc->hash || !pc->parent || !pc->parent_gen || !pc->gen ||
        !pc->indexed || !pc->tokens || !pc->lru_prev || !pc->lru_next) {
        llmrt_prefix_free(pc);
        return llmrt_fail(err, LLMRT_ERR_NOMEM,
                          "out of memory for the prefix cache's index (%d blocks of %d tokens)",
                          n_blocks, block_size);
    }
    return LLMRT_OK; /* the LRU list is empty: block 0 links to itself (both 0) */
}

static inline uint64_t rotl64(uint64_t x, int r) { return x << r | x >> (64 - r); }

/* One 64-bit word into the running hash (MurmurHash3's x64 lane). */
static inline uint64_t mix_word(uint64_t h, uint64_t w)
{
    w *= 0x87c37b91114253d5ull;
    w = rotl64(w, 31);
    w *= 0x4cf5ad432745937full;
    h ^= w;
    return rotl64(h, 27) * 5 + 0x52dce729;
}

uint64_t llmrt_prefix_hash(uint64_t prev, const int32_t *tokens, int32_t n)
{
    uint64_t h = prev ^ ((uint64_t)(uint32_t)n * 0x9e3779b97f4a7c15ull);
    int32_t i = 0;
    for (; i + 1 < n; i += 2)
        h = mix_word(h, (uint64_t)(uint32_t)tokens[i] | (uint64_t)(uint32_t)tokens[i + 1] << 32);
    if (i < n)
        h = mix_word(h, (uint64_t)(uint32_t)tokens[i]);
    /* the finalizer: every input bit reaches every output bit */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

int32_t llmrt_prefix_find(const llmrt_prefix_cache *pc, uint64_t hash, int32_t parent,
                          const int32_t *tokens)
{
    const size_t bytes = (size_t)pc->block_size * sizeof *tokens;
    for (int32_t b = pc->buckets[hash & pc->mask]; b; b = pc->next[b])
        if (pc->hash[b] == hash && pc->parent[b] == parent &&
            pc->parent_gen[b] == pc->gen[parent] &&
            memcmp(pc->tokens + (size_t)b * (size_t)pc->block_size, tokens, bytes) == 0)
            return b;
    return 0;
}

void llmrt_prefix_insert(llmrt_prefix_cache *pc, int32_t b, uint64_t hash, int32_t parent,
                         const int32_t *tokens)
{
    uint32_t k = (uint32_t)(hash & pc->mask);
    pc->hash[b] = hash;
    pc->parent[b] = parent;
    pc->parent_gen[b] = pc->gen[parent];
    memcpy(pc->tokens + (size_t)b * (size_t)pc->block_size, tokens,
           (size_t)pc->block_size * sizeof *tokens);
    pc->next[b] = pc->buckets[k];
    pc->buckets[k] = b;
    pc->indexed[b] = 1;
    pc->n_indexed++;
}

void llmrt_prefix_lru_push(llmrt_prefix_cache *pc, int32_t b)
{
    int32_t tail = pc->lru_prev[0];
    pc->lru_prev[b] = tail;
    pc->lru_next[b] = 0;
    pc->lru_next[tail] = b;
    pc->lru_prev[0] = b;
    pc->n_lru++;
}

void llmrt_prefix_lru_remove(llmrt_prefix_cache *pc, int32_t b)
{
    pc->lru_next[pc->lru_prev[b]] = pc->lru_next[b];
    pc->lru_prev[pc->lru_next[b]] = pc->lru_prev[b];
    pc->lru_prev[b] = pc->lru_next[b] = 0;
    pc->n_lru--;
}

int32_t llmrt_prefix_evict(llmrt_prefix_cache *pc)
{
    int32_t b = pc->lru_next[0];
    if (!b)
        return 0;
    llmrt_prefix_lru_remove(pc, b);
    int32_t *link = &pc->buckets[pc->hash[b] & pc->mask];
    while (*link != b)
        link = &pc->next[*link];
    *link = pc->next[b];
    pc->next[b] = 0;
    pc->indexed[b] = 0;
    pc->gen[b]++;
    pc->n_indexed--;
    pc->evictions++;
    return b;
}
