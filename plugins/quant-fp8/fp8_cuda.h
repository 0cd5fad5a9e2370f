/* fp8_cuda.h — the seam between quant-fp8 (plain C, fp8.c) and its CUDA kernels
 * (fp8_cuda.cu, built only when CMake finds CUDA).
 *
 * Why: fp8.c owns the format (probe, tensor checks, messages) and the policy (which
 * semantics serve which row count); the CUDA file owns the device layout and the kernels.
 * fp8.c has checked every dtype and shape before fp8_cuda_load, so the CUDA side may rely on
 * in > 0, every part's out > 0, parts before the last with out % 128 == 0, scales finite.
 *
 * Everything runs on the backend's stream (the "llmrt.cuda" extension, llmrt/cuda.h) with its
 * launch protocol; fp8_cuda_forward neither synchronizes nor allocates once the largest
 * W8A8 row count has been seen (its activation scratch grows then, and never while a graph
 * is being captured), so it can be captured. Nothing prints, exits or aborts. */
#ifndef LLMRT_QUANT_FP8_CUDA_H
#define LLMRT_QUANT_FP8_CUDA_H

#include <stdint.h>

#include <llmrt/backend.h>
#include <llmrt/plugin.h>

#include "fp8_config.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fp8_cuda_ctx fp8_cuda_ctx;       /* one per quant instance */
typedef struct fp8_cuda_linear fp8_cuda_linear; /* one loaded linear on the device */

/* 1 when the backend offers the "llmrt.cuda" extension. */
int fp8_cuda_offered(const llmrt_backend_ref *backend);

/* The per-instance context on a backend that offers "llmrt.cuda". The backend outlives it.
 * tune: [quant.fp8] tune, "key=value,..." (developer knobs for benchmark sweeps; NULL or ""
 * for none): kw=N forces the GEMV's K-splitting warps (1..16), mma=0 acts as if the device
 * had no FP8 tensor cores (the sm_86 paths on any GPU), gemv_rows=N (1..32) sets the most rows
 * the GEMV serves, sx=0 has the decode GEMV (n <= 8) read x from global memory instead of
 * staging it in shared memory, pers=0 gives it one block per row block instead of a grid of
 * one wave; unknown knobs are ignored. */
llmrt_status fp8_cuda_create(const llmrt_backend_ref *backend, const char *tune,
                             fp8_cuda_ctx **out, llmrt_error *err);
void fp8_cuda_destroy(fp8_cuda_ctx *ctx);

/* 1 when the device has FP8 tensor cores (compute capability 8.9 or newer) and they are
 * used: W8A8 above the GEMV's rows runs on them (mma.sync e4m3). */
int fp8_cuda_has_fp8_mma(const fp8_cuda_ctx *ctx);
/* "NVIDIA H200 (sm_90)", for messages and logs. */
const char *fp8_cuda_device_name(const fp8_cuda_ctx *ctx);

/* Copy n_parts linears [out_p, in] to the device as one [sum(out_p), in] (repacked into
 * tensor-core fragment order; see fp8_cuda.cu). The host arrays are only read during the
 * call. An e4m3 NaN code is LLMRT_ERR_FORMAT naming the part's tensor and the element. */
llmrt_status fp8_cuda_load(fp8_cuda_ctx *ctx, const fp8_part *parts, int n_parts, int64_t in,
                           fp8_cuda_linear **out, llmrt_error *err);
void fp8_cuda_free(fp8_cuda_ctx *ctx, fp8_cuda_linear *l);
uint64_t fp8_cuda_bytes(const fp8_cuda_linear *l);

/* y [n, out] = x [n, in] · Wᵀ on the device (x, y device pointers, f32, row-major), with
 * activations as `w8a8` says: 0 W8A16 (x rounded to f16 against the exact e4m3 weights), 1
 * W8A8 (fp8_act.h's quantization, bit for bit the CPU's). Kernels: n <= gemv_rows (16
 * unless tuned) the tensor-core GEMV (either semantics); above, W8A8 on the FP8 tensor cores
 * (sm_89+; else the GEMV gemv_rows rows at a time), W8A16 as dequantization to f16 + the
 * backend's gemm. */
llmrt_status fp8_cuda_forward(fp8_cuda_ctx *ctx, const fp8_cuda_linear *l, float *y,
                              const float *x, int32_t n, int w8a8, llmrt_error *err);

/* The decode GEMV of a [gate; up] linear finishing SwiGLU: y [n, out/2] = silu(gate) * up,
 * for 1 <= n <= fp8_cuda_fused_max_rows(ctx, l) (0: not for this linear). */
int32_t fp8_cuda_fused_max_rows(const fp8_cuda_ctx *ctx, const fp8_cuda_linear *l);
llmrt_status fp8_cuda_forward_swiglu(fp8_cuda_ctx *ctx, const fp8_cuda_linear *l, float *y,
                                     const float *x, int32_t n, int w8a8, llmrt_error *err);

/* Dense W [out, in] as f32 in host memory (tests): synchronous. */
llmrt_status fp8_cuda_dequant(fp8_cuda_ctx *ctx, const fp8_cuda_linear *l, float *out,
                              llmrt_error *err);

#ifdef __cplusplus
}
#endif
#endif
