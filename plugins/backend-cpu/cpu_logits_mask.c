/* cpu_logits_mask.c — the "llmrt.logits_mask" extension (ext/logits_mask.h) on the CPU: the
 * tokens a row's mask forbids get -inf, rows split across the pool. */
#include <math.h>

#include <llmrt/ext/logits_mask.h>

#include "cpu_internal.h"

typedef struct {
    float *logits;
    const int32_t *slot;
    const uint32_t *words;
    int64_t vocab, n_words;
} mask_ctx;

static void mask_rows(void *ctx, int64_t r0, int64_t r1)
{
    const mask_ctx *m = ctx;
    for (int64_t r = r0; r < r1; r++) {
        if (m->slot[r] < 0)
            continue;
        float *l = m->logits + r * m->vocab;
        const uint32_t *w = m->words + (int64_t)m->slot[r] * m->n_words;
        for (int64_t i = 0; i < m->vocab; i++)
            if (!((w[i >> 5] >> (i & 31)) & 1u))
                l[i] = -INFINITY;
    }
}

static llmrt_status cpu_mask_apply(llmrt_backend *b, float *logits, const int32_t *row_slot,
                                   const uint32_t *words, int32_t rows, int32_t vocab,
                                   llmrt_error *err)
{
    if (vocab <= 0 || rows < 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cpu backend: logits_mask: %d rows of %d logits", rows, vocab);
    mask_ctx c = {logits, row_slot, words, vocab, (vocab + 31) / 32};
    cpu_parallel(b, rows, vocab, 0, mask_rows, &c);
    return LLMRT_OK;
}

const llmrt_logits_mask_ops cpu_logits_mask_ext = {
    .struct_size = sizeof(llmrt_logits_mask_ops),
    .apply = cpu_mask_apply,
};
