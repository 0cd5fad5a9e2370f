/* awq_cuda_grouped.h — grouped AWQ linears on CUDA (awq_cuda_grouped.cu): a MoE layer's
 * experts, each row of a call multiplied by its own expert's repacked weights (the layout of
 * awq_cuda_layout.cuh), the expert read on the device, for quant.h's linear_forward_grouped.
 *
 * Why its own file: the kernels are the decode GEMV of awq_cuda.cu (tensor-core fragments,
 * fp32 group scales) with a per-row weight table instead of one linear, launched over rows ×
 * output tiles; for many rows (rows sorted by expert) over experts × output tiles, each block
 * reading its expert's weights once per 8 of its rows. Everything the caller passes is
 * checked by awq.c; nothing here allocates or synchronises in forward. */
#ifndef LLMRT_QUANT_AWQ_CUDA_GROUPED_H
#define LLMRT_QUANT_AWQ_CUDA_GROUPED_H

#include <stdint.h>

#include <llmrt/backend.h>
#include <llmrt/plugin.h>

#include "awq_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct awq_cuda_group awq_cuda_group;

/* A group over ls [n] (NULL entries skipped), all of one shape and group size, for calls of up
 * to max_rows rows with the folds in flags (LLMRT_FUSE_OUT_SWIGLU: out % 32 == 0, else
 * LLMRT_ERR_UNSUPPORTED). Copies the weight table to the device and waits. */
llmrt_status awq_cuda_group_create(const llmrt_backend_ref *be, const awq_cuda_linear *const *ls,
                                   int32_t n, int32_t max_rows, uint32_t flags,
                                   awq_cuda_group **out, llmrt_error *err);
/* quant.h linear_forward_grouped on device pointers. */
llmrt_status awq_cuda_group_forward(awq_cuda_group *g, float *y, const float *x,
                                    const int32_t *row_linear, const int32_t *row_src,
                                    const int32_t *linear_start, int32_t n_rows, uint32_t flags,
                                    llmrt_error *err);
void awq_cuda_group_destroy(awq_cuda_group *g);

#ifdef __cplusplus
}
#endif
#endif
