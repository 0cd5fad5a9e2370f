/* moe_cuda.h — the seam between the model-qwen3-moe plugin (plain C) and its CUDA kernels
 * (moe_cuda.cu, built only when CMake finds CUDA): the MoE block's own ops on a backend that
 * offers the "llmrt.cuda" extension (llmrt/cuda.h).
 *
 * Each op computes what its moe_cpu.c namesake computes (moe.h has the rules), on device
 * pointers, enqueued on the backend's stream with its launch protocol: no allocation, no host
 * synchronisation, so a decode step can be captured in a CUDA graph. Every function fills err
 * (naming the kernel) and returns its status. */
#ifndef LLMRT_QWEN3_MOE_CUDA_H
#define LLMRT_QWEN3_MOE_CUDA_H

#include <stdint.h>

#include <llmrt/backend.h>
#include <llmrt/plugin.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct moe_cuda moe_cuda;

/* The most experts and top-k the routing kernel takes (one warp per token holds a token's
 * logits in registers). */
#define MOE_CUDA_MAX_EXPERTS 1024
#define MOE_CUDA_MAX_TOPK 32

/* On a backend with the "llmrt.cuda" extension (LLMRT_ERR_UNSUPPORTED otherwise). */
llmrt_status moe_cuda_create(const llmrt_backend_ref *be, moe_cuda **out, llmrt_error *err);
void moe_cuda_destroy(moe_cuda *c);

/* topk_id / topk_w [T, K] from logits [T, E]. */
llmrt_status moe_cuda_route(moe_cuda *c, const float *logits, int32_t T, int32_t E, int32_t K,
                            int norm_topk, int32_t *topk_id, float *topk_w, llmrt_error *err);
/* The T·K rows sorted by expert: row_expert, row_src, expert_start [E + 1], row_of. Within an
 * expert the rows' order may differ from the CPU's (no row's value depends on it). */
llmrt_status moe_cuda_sort(moe_cuda *c, const int32_t *topk_id, int32_t T, int32_t K, int32_t E,
                           int32_t *row_expert, int32_t *row_src, int32_t *expert_start,
                           int32_t *row_of, llmrt_error *err);
/* route, then sort: one launch for steps of up to 64 tokens (decode), two above. */
llmrt_status moe_cuda_route_sort(moe_cuda *c, const float *logits, int32_t T, int32_t E,
                                 int32_t K, int norm_topk, int32_t *topk_id, float *topk_w,
                                 int32_t *row_expert, int32_t *row_src, int32_t *expert_start,
                                 int32_t *row_of, llmrt_error *err);
/* Routing for a step whose rows need no sort (the grouped linears given no expert ranges run
 * a block per row): topk_id / topk_w as moe_cuda_route, and the T·K rows in (token, choice)
 * order: row_expert[r] = topk_id[r], row_src[r] = r / K, row_of[r] = r. One launch. */
llmrt_status moe_cuda_route_rows(moe_cuda *c, const float *logits, int32_t T, int32_t E,
                                 int32_t K, int norm_topk, int32_t *topk_id, float *topk_w,
                                 int32_t *row_expert, int32_t *row_src, int32_t *row_of,
                                 llmrt_error *err);
/* The dense experts' rows: for every row r with a weight w_table[row_expert[r]] != NULL,
 *   y[r] = x[row_src ? row_src[r] : r] · Wᵀ     W [w_rows, in] of dtype dt (F32/F16/BF16)
 * (glu: W = [gate; up], y [.., w_rows / 2] = silu(gate) * up); other rows untouched.
 * w_table: device [n_experts] of device pointers. expert_start (device [n_experts + 1], rows
 * sorted by expert) lets each block read its expert's weights once for up to 8 rows; NULL: a
 * block per row. fp32 accumulation. */
llmrt_status moe_cuda_dense_grouped(moe_cuda *c, const void *const *w_table, llmrt_dtype dt,
                                    int64_t w_rows, int64_t in, float *y, const float *x,
                                    const int32_t *row_expert, const int32_t *row_src,
                                    const int32_t *expert_start, int32_t n_rows,
                                    int32_t n_experts, int glu, llmrt_error *err);
/* out [n, d] = silu(gu[:, :d]) * gu[:, d:] */
llmrt_status moe_cuda_swiglu(moe_cuda *c, float *out, const float *gu, int32_t n, int32_t d,
                             llmrt_error *err);
/* out[t] = Σ_k topk_w[t, k] · rows[row_of[t·K + k]], k in order. */
llmrt_status moe_cuda_combine(moe_cuda *c, float *out, const float *rows, const float *topk_w,
                              const int32_t *row_of, int32_t T, int32_t K, int32_t H,
                              llmrt_error *err);

#ifdef __cplusplus
}
#endif
#endif
