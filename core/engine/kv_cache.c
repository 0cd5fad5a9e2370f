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
    TRY_ALLOC(err, kv->k && kv->v && kv->free_ids, "the KV cache tables");
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
    kv->n_free = n_usable;
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
    memset(kv, 0, sizeof *kv);
}

int32_t llmrt_kv_usable_blocks(const llmrt_kv *kv) { return kv->n_blocks - 1; }
int32_t llmrt_kv_used_blocks(const llmrt_kv *kv) { return kv->n_blocks - 1 - kv->n_free; }

int32_t llmrt_kv_blocks_needed(const llmrt_kv *kv, const llmrt_block_table *t, int32_t n_tokens)
{
    int32_t want = llmrt_kv_blocks_for(kv, n_tokens);
    return want > t->n ? want - t->n : 0;
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
    if (t->n + need > t->cap) {
        int32_t cap = t->cap ? t->cap : 8;
        while (cap < t->n + need)
            cap *= 2;
        int32_t *ids = realloc(t->ids, sizeof *ids * (size_t)cap);
        if (!ids)
            return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory growing a block table");
        t->ids = ids, t->cap = cap;
    }
    for (int32_t i = 0; i < need; i++)
        t->ids[t->n++] = kv->free_ids[--kv->n_free];
    return LLMRT_OK;
}

void llmrt_kv_table_release(llmrt_kv *kv, llmrt_block_table *t)
{
    /* Push back in reverse so the table's first block is on top again. */
    for (int32_t i = t->n - 1; i >= 0; i--)
        kv->free_ids[kv->n_free++] = t->ids[i];
    t->n = 0;
}

void llmrt_kv_table_free(llmrt_block_table *t)
{
    free(t->ids);
    memset(t, 0, sizeof *t);
}
