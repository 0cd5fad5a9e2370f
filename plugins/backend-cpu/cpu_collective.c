/* cpu_collective.c — the "llmrt.collective" extension (ext/collective.h) on the CPU: the
 * ranks of a tensor-parallel group are threads of one process, each with its own backend
 * instance, and a collective is a barrier over the ranks' buffers.
 *
 * Why this way: it checks the sharding math of a tensor-parallel model in CI, where there is
 * one process and no GPU. all_reduce_sum splits the vector into one chunk per rank; each rank
 * adds its chunk over the ranks' buffers in rank order (0, 1, ..., n-1) and writes the sum back
 * into every buffer, so the result is identical on every rank and from run to run. Ops run on
 * the calling thread, so each call returns after the collective is complete (the CPU
 * backend's ops are synchronous). */
#include "cpu_internal.h"

#include <llmrt/ext/collective.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cpu_group {
    int32_t n;
    pthread_barrier_t bar;
    void **ptrs; /* [n] each rank's buffer of the collective in progress */
};

static llmrt_status grp_init(llmrt_backend *const *ranks, int32_t n, llmrt_error *err)
{
    if (!ranks || n < 2)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cpu collective: a group needs at least 2 ranks (got %d)", (int)n);
    for (int32_t r = 0; r < n; r++) {
        if (!ranks[r] || ranks[r]->group)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "cpu collective: rank %d is %s", (int)r,
                              ranks[r] ? "already in a group" : "NULL");
        for (int32_t q = 0; q < r; q++)
            if (ranks[q] == ranks[r])
                return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                                  "cpu collective: ranks %d and %d are the same backend "
                                  "instance (each rank needs its own)",
                                  (int)q, (int)r);
    }
    cpu_group *g = calloc(1, sizeof *g);
    void **ptrs = calloc((size_t)n, sizeof *ptrs);
    if (!g || !ptrs || pthread_barrier_init(&g->bar, NULL, (unsigned)n) != 0) {
        free(g);
        free(ptrs);
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "cpu collective: out of memory for %d ranks",
                          (int)n);
    }
    g->n = n;
    g->ptrs = ptrs;
    for (int32_t r = 0; r < n; r++)
        ranks[r]->group = g, ranks[r]->rank = r;
    return LLMRT_OK;
}

static void grp_free(llmrt_backend *const *ranks, int32_t n)
{
    cpu_group *g = n > 0 && ranks && ranks[0] ? ranks[0]->group : NULL;
    if (!g)
        return;
    for (int32_t r = 0; r < n; r++)
        if (ranks[r] && ranks[r]->group == g)
            ranks[r]->group = NULL, ranks[r]->rank = 0;
    pthread_barrier_destroy(&g->bar);
    free(g->ptrs);
    free(g);
}

static void grp_rank(llmrt_backend *b, int32_t *rank, int32_t *size)
{
    *rank = b->group ? b->rank : 0;
    *size = b->group ? b->group->n : 1;
}

static llmrt_status all_reduce_sum(llmrt_backend *b, float *x, int64_t n, llmrt_error *err)
{
    cpu_group *g = b->group;
    if (!g)
        return LLMRT_OK; /* a group of one: the sum is x */
    if (n < 0 || (n > 0 && !x))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "cpu all_reduce_sum: bad buffer (n %lld)",
                          (long long)n);
    const int32_t R = g->n;
    g->ptrs[b->rank] = x;
    pthread_barrier_wait(&g->bar);
    const int64_t i0 = n * b->rank / R, i1 = n * (b->rank + 1) / R;
    for (int64_t i = i0; i < i1; i++) {
        float s = ((const float *)g->ptrs[0])[i];
        for (int32_t r = 1; r < R; r++)
            s += ((const float *)g->ptrs[r])[i];
        for (int32_t r = 0; r < R; r++)
            ((float *)g->ptrs[r])[i] = s;
    }
    pthread_barrier_wait(&g->bar); /* every chunk written before anyone reads its buffer */
    return LLMRT_OK;
}

static llmrt_status broadcast(llmrt_backend *b, void *buf, size_t bytes, llmrt_error *err)
{
    cpu_group *g = b->group;
    if (!g || bytes == 0)
        return LLMRT_OK;
    if (!buf)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "cpu broadcast: NULL buffer");
    g->ptrs[b->rank] = buf;
    pthread_barrier_wait(&g->bar);
    if (b->rank != 0 && buf != g->ptrs[0])
        memcpy(buf, g->ptrs[0], bytes);
    pthread_barrier_wait(&g->bar); /* rank 0's buffer is read until here */
    return LLMRT_OK;
}

static llmrt_status attach_thread(llmrt_backend *b, llmrt_error *err)
{
    (void)b, (void)err; /* any thread may run a CPU backend's ops */
    return LLMRT_OK;
}

static void describe_links(llmrt_backend *b, char *buf, size_t n)
{
    snprintf(buf, n, "tensor-parallel ranks run as threads of this process, %d CPU threads "
                     "each; the all-reduce is an in-process barrier and sum in rank order",
             b->n_threads);
}

const llmrt_collective_ops cpu_collective_ext = {
    .struct_size = sizeof(llmrt_collective_ops),
    .group_init = grp_init,
    .group_free = grp_free,
    .rank = grp_rank,
    .all_reduce_sum = all_reduce_sum,
    .broadcast = broadcast,
    .attach_thread = attach_thread,
    .describe_links = describe_links,
};
