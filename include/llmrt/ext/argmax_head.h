/* ext/argmax_head.h — the "llmrt.argmax_head" backend extension: greedy decoding's output
 * projection without every logit.
 *
 * Why: a greedy step needs only the argmax of x · wᵀ over the vocabulary, and reading the
 * whole 16-bit lm_head for it is a large share of a decode step. A backend may find the
 * argmax from a compact copy of w and recompute exactly only the rows that could win. */
#ifndef LLMRT_EXT_ARGMAX_HEAD_H
#define LLMRT_EXT_ARGMAX_HEAD_H

#include "../backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LLMRT_EXT_ARGMAX_HEAD "llmrt.argmax_head"
#define LLMRT_EXT_ARGMAX_HEAD_VERSION 1

typedef struct llmrt_argmax_head_ops {
    uint32_t struct_size; /* (required) */

    /* (required) Prepare w [vocab, d] (its memory must outlive the head; the backend may keep
     * a compact copy of it) for calls of up to max_rows rows, or LLMRT_ERR_UNSUPPORTED for a
     * w it cannot take. Allocates; not for use inside a graph capture. */
    llmrt_status (*create)(llmrt_backend *b, const llmrt_tensor *w, int32_t max_rows,
                           llmrt_argmax_head **out, llmrt_error *err);
    /* (required) For x [n, d], 0 < n <= max_rows:
     *   out[r] = argmax_j (x[r, :] · w[j, :]), lowest j on ties
     * — the ids that gemm of that row alone (n = 1) followed by argmax gives: every row that
     * could be the argmax has its logit computed as gemm computes it for one row, so a row's
     * id does not depend on the others in the call. Enqueued like an op, capturable in a
     * graph. */
    llmrt_status (*forward)(llmrt_backend *b, llmrt_argmax_head *h, int32_t *out, const float *x,
                            int32_t n, llmrt_error *err);
    /* (required) */
    void (*destroy)(llmrt_backend *b, llmrt_argmax_head *h);
} llmrt_argmax_head_ops;

#ifdef __cplusplus
}
#endif
#endif
