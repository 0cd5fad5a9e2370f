/* ext/fused.h — the "llmrt.fused" backend extension: fused small ops of a decoder layer.
 *
 * Why an extension: each op computes exactly what a composition of the vtable's ops
 * computes, in one pass: fewer launches and fewer trips through memory at decode. They are
 * an optimisation a backend may or may not offer, so a model asks for the table and falls
 * back to the separate ops without it. Conventions (f32 activations, device pointers,
 * enqueued on the backend's stream, capturable) are backend.h's. */
#ifndef LLMRT_EXT_FUSED_H
#define LLMRT_EXT_FUSED_H

#include "../backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LLMRT_EXT_FUSED "llmrt.fused"
#define LLMRT_EXT_FUSED_VERSION 1

typedef struct llmrt_fused_ops {
    uint32_t struct_size; /* (required) */

    /* (required) x[r, :] += res[r, :] (skipped when res is NULL), then
     * out[r, :] = rmsnorm(x[r, :]) * w — i.e. add(x, x, res) followed by rmsnorm(out, x, w).
     * x, res, out [rows, d]; out must not alias x or res; w [d] F32/F16/BF16. */
    llmrt_status (*add_rmsnorm)(llmrt_backend *b, float *out, float *x, const float *res,
                                const llmrt_tensor *w, int32_t rows, int32_t d, float eps,
                                llmrt_error *err);

    /* (required) The attention prologue on a fused projection
     * qkv [n, (n_heads + 2 n_kv_heads) * head_dim] (per token: the q heads, then the k heads,
     * then the v heads):
     *   q_out [n, n_heads, head_dim] = rope(rmsnorm(q) * q_norm) at positions[n]
     *   k = rope(rmsnorm(k) * k_norm); v as is; both stored at slot_mapping[n] as kv_store does
     * — rmsnorm per head, rope and kv_store over the split q, k, v. q_norm / k_norm [head_dim]
     * may be NULL (no per-head norm: rope only). q_out must not alias qkv. */
    llmrt_status (*qk_norm_rope_store)(llmrt_backend *b, float *q_out, const float *qkv,
                                       const llmrt_tensor *q_norm, const llmrt_tensor *k_norm,
                                       const int32_t *positions, const int32_t *slot_mapping,
                                       int32_t n, int32_t n_heads, int32_t n_kv_heads,
                                       int32_t head_dim, float eps, float theta, void *k_cache,
                                       void *v_cache, llmrt_dtype kv_dtype, llmrt_error *err);

    /* (required) out [n, d] = silu(gu[:, :d]) * gu[:, d:] for gu [n, 2d] (a fused gate|up
     * projection) — silu_mul over the two halves of each row. */
    llmrt_status (*swiglu)(llmrt_backend *b, float *out, const float *gu, int32_t n, int32_t d,
                           llmrt_error *err);
} llmrt_fused_ops;

#ifdef __cplusplus
}
#endif
#endif
