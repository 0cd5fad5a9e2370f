/* kv_cache.c — see kv_cache.h. */
#include "kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

uint64_t llmrt_kv_bytes_per_token(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim,
                                  llmrt_dtype dtype)
{
    return 2ull * (uint64_t)n_layers * (uint64_t)n_kv_heads * (uint64_t)head_dim *
           llmrt_dtype_size(dtype);
}

llmrt_status llmrt_kv_init(llmrt_kv *kv, const llmrt_backend_ref *be, int32_t n_layers,
                           int32_t n_kv_heads, int32_t head_dim, int32_t block_size,
                           int32_t n_usable, llmrt_dtype dtype, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    void *zeros = NULL;
    memset(kv, 0, sizeof *kv);
    kv->be = *be;
    if (n_layers <= 0 || n_kv_heads <= 0 || head_dim <= 0 || block_size <= 0 || n_usable <= 0 ||
        llmrt_dtype_size(dtype) == 0)
        FAIL(err, LLMRT_ERR_INVALID_ARG,
             "KV cache: bad geometry (layers %d, kv heads %d, head dim %d, block size %d, "
             "blocks %d, dtype %s)",
             n_layers, n_kv_heads, head_dim, block_size, n_usable, llmrt_dtype_name(dtype));
    kv->n_layers = n_layers, kv->n_kv_heads = n_kv_heads, kv->head_dim = head_dim;
    kv->block_size = block_size, kv->n_blocks = n_usable + 1, kv->dtype = dtype;
    kv->block_bytes = (uint64_t)block_size * (uint64_t)n_kv_heads * (uint64_t)head_dim *
                      llmrt_dtype_size(dtype);
    uint64_t layer_bytes = kv->block_bytes * (uint64_t)kv->n_blocks;
    kv->bytes = 2 * layer_bytes * (uint64_t)n_layers;
    kv->k = calloc((size_t)n_layers, sizeof *kv->k);
    kv->v = calloc((size_t)n_layers, sizeof *kv->v);
    kv->free_ids = malloc(sizeof *kv->free_ids * (size_t)n_usable);
    kv->refs = calloc((size_t)kv->n_blocks, sizeof *kv->refs);
    TRY_ALLOC(err, kv->k && kv->v && kv->free_ids && kv->refs, "the KV cache tables");
    st = be->vt->dev_alloc(be->b, (size_t)kv->bytes, &kv->base, err);
    if (st) {
        llmrt_error_prefix(err, "allocating the KV cache (%d blocks of %d tokens, %.2f GiB)",
                           kv->n_blocks, block_size, (double)kv->bytes / (1u << 30));
        goto cleanup;
    }
    for (int32_t l = 0; l < n_layers; l++) {
        kv->k[l] = (char *)kv->base + (size_t)(2 * l) * layer_bytes;
        kv->v[l] = (char *)kv->base + (size_t)(2 * l + 1) * layer_bytes;
    }
    /* Zero the reserved block 0 of every K and V array. */
    zeros = calloc(1, (size_t)kv->block_bytes);
    TRY_ALLOC(err, zeros, "a zero block");
    for (int32_t l = 0; l < n_layers; l++) {
        TRY(be->vt->copy(be->b, kv->k[l], zeros, (size_t)kv->block_bytes, LLMRT_COPY_H2D, err));
        TRY(be->vt->copy(be->b, kv->v[l], zeros, (size_t)kv->block_bytes, LLMRT_COPY_H2D, err));
    }
    TRY(be->vt->synchronize(be->b, err));
    /* Stack with the lowest id on top, so a lightly used cache touches little memory. */
    for (int32_t i = 0; i < n_usable; i++)
        kv->free_ids[i] = n_usable - i;
    kv->n_unindexed = kv->n_free = n_usable;
    kv->view.n_layers = n_layers;
    kv->view.n_blocks = kv->n_blocks;
    kv->view.block_size = block_size;
    kv->view.n_kv_heads = n_kv_heads;
    kv->view.head_dim = head_dim;
    kv->view.dtype = dtype;
    kv->view.k = kv->k;
    kv->view.v = kv->v;
cleanup:
    free(zeros);
    if (st)
        llmrt_kv_free(kv);
    return st;
}

void llmrt_kv_free(llmrt_kv *kv)
{
    if (kv->base && kv->be.vt)
        kv->be.vt->dev_free(kv->be.b, kv->base);
    free(kv->k);
    free(kv->v);
    free(kv->free_ids);
    free(kv->refs);
    llmrt_prefix_free(&kv->pc);
    memset(kv, 0, sizeof *kv);
}

int32_t llmrt_kv_usable_blocks(const llmrt_kv *kv) { return kv->n_blocks - 1; }
int32_t llmrt_kv_used_blocks(const llmrt_kv *kv) { return kv->n_blocks - 1 - kv->n_free; }

int32_t llmrt_kv_blocks_needed(const llmrt_kv *kv, const llmrt_block_table *t, int32_t n_tokens)
{
    int32_t want = llmrt_kv_blocks_for(kv, n_tokens);
    return want > t->n ? want - t->n : 0;
}

llmrt_status llmrt_kv_table_room(llmrt_block_table *t, int32_t n_blocks)
{
    if (n_blocks <= t->cap)
        return LLMRT_OK;
    int32_t cap = t->cap ? t->cap : 8;
    while (cap < n_blocks)
        cap *= 2;
    int32_t *ids = realloc(t->ids, sizeof *ids * (size_t)cap);
    if (!ids)
        return LLMRT_ERR_NOMEM;
    t->ids = ids, t->cap = cap;
    return LLMRT_OK;
}

llmrt_status llmrt_kv_table_reserve(llmrt_kv *kv, llmrt_block_table *t, int32_t n_tokens,
                                    llmrt_error *err)
{
    int32_t need = llmrt_kv_blocks_needed(kv, t, n_tokens);
    if (need == 0)
        return LLMRT_OK;
    if (need > kv->n_free)
        return llmrt_fail(err, LLMRT_ERR_LIMIT,
                          "KV cache full: %d more blocks needed, %d free of %d", need,
                          kv->n_free, kv->n_blocks - 1);
    if (llmrt_kv_table_room(t, t->n + need) != LLMRT_OK)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory growing a block table");
    for (int32_t i = 0; i < need; i++) {
        /* never-indexed blocks first; then the indexed block released longest ago */
        int32_t b = kv->n_unindexed > 0 ? kv->free_ids[--kv->n_unindexed]
                                        : llmrt_prefix_evict(&kv->pc);
        kv->refs[b] = 1;
        kv->n_free--;
        t->ids[t->n++] = b;
    }
    return LLMRT_OK;
}

void llmrt_kv_table_release(llmrt_kv *kv, llmrt_block_table *t)
{
    /* In reverse: the table's first block goes on top of the stack again, and its last
     * indexed block is the first of its blocks to be evicted (a later block is only ever
     * found after the ones before it). */
    for (int32_t i = t->n - 1; i >= 0; i--) {
        int32_t b = t->ids[i];
        if (--kv->refs[b] > 0)
            continue; /* another table still holds it */
        if (kv->prefix_on && kv->pc.indexed[b])
            llmrt_prefix_lru_push(&kv->pc, b);
        else
            kv->free_ids[kv->n_unindexed++] = b;
        kv->n_free++;
    }
    t->n = 0;
    t->n_indexed = 0;
    t->last_hash = 0;
    t->last_node = 0;
    t->last_gen = 0;
}

void llmrt_kv_table_free(llmrt_block_table *t)
{
    free(t->ids);
    memset(t, 0, sizeof *t);
}

/* ---------------------------------------------------------------- prefix caching */

llmrt_status llmrt_kv_prefix_enable(llmrt_kv *kv, llmrt_error *err)
{
    llmrt_status st = llmrt_prefix_init(&kv->pc, kv->n_blocks, kv->block_size, err);
    if (st) {
        llmrt_error_prefix(err, "cache.prefix_caching");
        return st;
    }
    kv->prefix_on = 1;
    return LLMRT_OK;
}

/* The leading full blocks of tokens that are cached, at most `most`: their ids into ids[]
 * (may be NULL), their number returned; *n_unheld of them held by nobody, *last_hash the
 * hash of the last one. */
static int32_t prefix_walk(const llmrt_kv *kv, const int32_t *tokens, int32_t most,
                           int32_t *ids, int32_t *n_unheld, uint64_t *last_hash)
{
    const int32_t bs = kv->block_size;
    uint64_t h = LLMRT_PREFIX_ROOT;
    int32_t parent = 0, found = 0, unheld = 0;
    while (found < most) {
        const int32_t *tk = tokens + (size_t)found * (size_t)bs;
        uint64_t hb = llmrt_prefix_hash(h, tk, bs);
        int32_t b = llmrt_prefix_find(&kv->pc, hb, parent, tk);
        if (!b)
            break;
        unheld += kv->refs[b] == 0;
        if (ids)
            ids[found] = b;
        h = hb;
        parent = b;
        found++;
    }
    *n_unheld = unheld;
    *last_hash = h;
    return found;
}

/* Blocks a lookup may find for n_tokens tokens: the full blocks before the last token. */
static int32_t prefix_most(const llmrt_kv *kv, int32_t n_tokens)
{
    return n_tokens > 0 ? (n_tokens - 1) / kv->block_size : 0;
}

int32_t llmrt_kv_prefix_probe(const llmrt_kv *kv, const int32_t *tokens, int32_t n_tokens,
                              int32_t *n_unheld)
{
    uint64_t h;
    int32_t unheld = 0, found = 0;
    if (kv->prefix_on && tokens)
        found = prefix_walk(kv, tokens, prefix_most(kv, n_tokens), NULL, &unheld, &h);
    if (n_unheld)
        *n_unheld = unheld;
    return found;
}

int32_t llmrt_kv_prefix_attach(llmrt_kv *kv, llmrt_block_table *t, const int32_t *tokens,
                               int32_t n_tokens)
{
    if (!kv->prefix_on || !tokens || t->n != 0)
        return 0;
    kv->prefix_queries += (uint64_t)(n_tokens > 0 ? n_tokens : 0);
    const int32_t most = prefix_most(kv, n_tokens);
    if (most == 0)
        return 0;
    if (llmrt_kv_table_room(t, most) != LLMRT_OK)
        return 0; /* out of memory: computed instead of shared */
    int32_t unheld;
    uint64_t h;
    int32_t found = prefix_walk(kv, tokens, most, t->ids, &unheld, &h);
    for (int32_t i = 0; i < found; i++) {
        int32_t b = t->ids[i];
        if (kv->refs[b]++ == 0) { /* it was reclaimable: now it is held */
            llmrt_prefix_lru_remove(&kv->pc, b);
            kv->n_free--;
        }
    }
    t->n = found;
    if (found) {
        t->n_indexed = found;
        t->last_hash = h;
        t->last_node = t->ids[found - 1];
        t->last_gen = kv->pc.gen[t->last_node];
    }
    kv->prefix_hits += (uint64_t)found * (uint64_t)kv->block_size;
    return found;
}

void llmrt_kv_prefix_commit(llmrt_kv *kv, llmrt_block_table *t, const int32_t *tokens,
                            int32_t n_ready)
{
    if (!kv->prefix_on || !tokens)
        return;
    const int32_t bs = kv->block_size;
    llmrt_prefix_cache *pc = &kv->pc;
    while (t->n_indexed < t->n && (int64_t)(t->n_indexed + 1) * bs <= n_ready) {
        const int32_t i = t->n_indexed;
        const int32_t *tk = tokens + (size_t)i * (size_t)bs;
        for (int32_t j = 0; j < bs; j++)
            if (tk[j] < 0)
                return; /* a token still being computed: never hashed */
        int32_t parent = i ? t->last_node : 0;
        if (i && pc->gen[parent] != t->last_gen)
            return; /* the block before was evicted: nothing after it can be found */
        uint64_t h = llmrt_prefix_hash(i ? t->last_hash : LLMRT_PREFIX_ROOT, tk, bs);
        int32_t b = llmrt_prefix_find(pc, h, parent, tk);
        if (!b) {
            b = t->ids[i];
            llmrt_prefix_insert(pc, b, h, parent, tk);
        }
        t->n_indexed = i + 1;
        t->last_hash = h;
        t->last_node = b;
        t->last_gen = pc->gen[b];
    }
}
