/* ext/logits_mask.h — the "llmrt.logits_mask" backend extension: a token mask applied to
 * rows of logits on the device, before argmax / sample.
 *
 * Why: structured outputs allow only the tokens that continue a grammar. The mask depends on
 * the previous token, so the host computes it each step (a bit per vocabulary entry); with
 * this op the mask travels to the device with the step's inputs and the logits never come
 * to the host. Without it the engine samples constrained rows on the host. Conventions
 * (device pointers, the backend's stream, capturable) are backend.h's. */
#ifndef LLMRT_EXT_LOGITS_MASK_H
#define LLMRT_EXT_LOGITS_MASK_H

#include "../backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LLMRT_EXT_LOGITS_MASK "llmrt.logits_mask"
#define LLMRT_EXT_LOGITS_MASK_VERSION 1

typedef struct llmrt_logits_mask_ops {
    uint32_t struct_size; /* (required) */

    /* (required) For each row r < rows with s = row_slot[r] >= 0:
     *   logits[r, v] = -inf for every v < vocab whose bit is clear in words[s, :]
     * where words is [slots, (vocab + 31) / 32] uint32 and token v's bit is
     * (words[s, v / 32] >> (v % 32)) & 1. Rows with row_slot[r] < 0 are untouched.
     * logits [rows, vocab]; row_slot [rows] and words are device-readable. */
    llmrt_status (*apply)(llmrt_backend *b, float *logits, const int32_t *row_slot,
                          const uint32_t *words, int32_t rows, int32_t vocab, llmrt_error *err);
} llmrt_logits_mask_ops;

#ifdef __cplusplus
}
#endif
#endif
