/* fp8_cpu.h — the CPU kernels of quant-fp8, the reference path: y = x·Wᵀ over e4m3 weights
 * with 128x128 block scales, dequantized on the fly, f32 accumulation.
 *
 * Two semantics (fp8_config.h fp8_act):
 *   W8A16  y = x · (e4m3(w) * s_w)ᵀ with x in f32: bit for bit what the backend's dense gemm
 *          gives on the dequantized f32 weights (linear_dequant), since it adds the same
 *          products in the same order (16 lanes, lane l taking inputs i = l mod 16).
 *   W8A8   x quantized per token per 128 inputs (fp8_act.h), then
 *          y = Σ_blocks ((Σ_i xq_i · wq_i) · s_x) · s_w, each block's sum in 16 lanes.
 * Results do not depend on the thread count, on the rows that share a call, or on the vector
 * path (AVX2 or the 16-byte baseline), as in backend-cpu. */
#ifndef LLMRT_QUANT_FP8_CPU_H
#define LLMRT_QUANT_FP8_CPU_H

#include <stdint.h>

#include <llmrt/backend.h>

#include "fp8_config.h"

typedef struct fp8_cpu_linear fp8_cpu_linear;

/* Copy n_parts linears of in_features `in` into one [sum(out), in] in memory from the
 * backend's dev_alloc (host memory on a HOST_IS_DEVICE backend); checked by the caller:
 * parts before the last have out % 128 == 0 (their scale blocks stay whole). An e4m3 NaN
 * code in a weight is an error naming the tensor and the element. */
llmrt_status fp8_cpu_load(const llmrt_backend_ref *be, const fp8_part *parts, int n_parts,
                          int64_t in, fp8_cpu_linear **out, llmrt_error *err);
void fp8_cpu_free(const llmrt_backend_ref *be, fp8_cpu_linear *l);
uint64_t fp8_cpu_bytes(const fp8_cpu_linear *l);

/* Dense W [out, in] in f32: e4m3(w) * s, exact as f32 products. */
void fp8_cpu_dequant(const fp8_cpu_linear *l, float *out);

/* y [n, out] = x [n, in] · Wᵀ, W8A16. */
void fp8_cpu_forward_w8a16(const llmrt_backend_ref *be, const fp8_cpu_linear *l, float *y,
                           const float *x, int32_t n);

/* The same, W8A8. scratch: at least fp8_cpu_scratch_floats(l, n) floats, not shared with a
 * concurrent call (the quant instance owns one; calls on one backend are sequential). */
int64_t fp8_cpu_scratch_floats(const fp8_cpu_linear *l, int32_t n);
void fp8_cpu_forward_w8a8(const llmrt_backend_ref *be, const fp8_cpu_linear *l, float *y,
                          const float *x, int32_t n, float *scratch);

#endif
