/* awq_cpu.h — the CPU kernel of quant-awq: a CPU-friendly repack of AutoAWQ "gemm" weights
 * and y = x·Wᵀ that dequantises on the fly.
 *
 * Why: AutoAWQ packs eight output columns per int32, which suits GPUs reading along the
 * output dimension. A CPU computes one output at a time as a dot product along the input
 * dimension, so the load repacks each output row into 16-lane words (layout in awq_cpu.c),
 * once, in backend memory. The full matrix is never materialised in f16 or f32. */
#ifndef LLMRT_QUANT_AWQ_CPU_H
#define LLMRT_QUANT_AWQ_CPU_H

#include <stdint.h>

#include <llmrt/backend.h>

typedef struct awq_cpu_linear awq_cpu_linear;

/* The kernel family: AVX2 (32-byte vectors, four rows per pass) or the portable baseline
 * (16-byte vectors, two rows per pass); both give the same bits. */
typedef enum awq_cpu_simd { AWQ_CPU_BASELINE = 0, AWQ_CPU_AVX2 = 1 } awq_cpu_simd;

/* The family for backend `be`: AVX2 when its "llmrt.cpu" extension says its kernels use
 * "avx2" (and this build has the AVX2 kernel), else the baseline — also for a backend without
 * the extension, or a vector path not known here. */
awq_cpu_simd awq_cpu_choose_simd(const llmrt_backend_ref *be);

/* Repack one linear into memory from the backend's dev_alloc (host memory on "cpu"), for
 * the kernel family `simd`.
 *   qweight int32 [in, out/8], qzeros int32 [in/group, out/8], scales f16 [in/group, out];
 *   checked by the caller: in % group == 0, group % 16 == 0 and (128 % group == 0 or
 *   group % 128 == 0), out % 8 == 0. Source pointers need no alignment. */
llmrt_status awq_cpu_load(const llmrt_backend_ref *be, awq_cpu_simd simd, const void *qweight,
                          const void *qzeros, const void *scales, int64_t in, int64_t out,
                          int64_t group, awq_cpu_linear **out_linear, llmrt_error *err);
void awq_cpu_free(const llmrt_backend_ref *be, awq_cpu_linear *l);
uint64_t awq_cpu_bytes(const awq_cpu_linear *l);

/* y [n, out] = x [n, in] · Wᵀ, fp32 accumulation, split over outputs with the backend's
 * parallel_for. scratch: at least awq_cpu_scratch_floats(l, n) floats, not shared with a
 * concurrent call (the quant instance owns one; calls on one backend are sequential). */
int64_t awq_cpu_scratch_floats(const awq_cpu_linear *l, int32_t n);
void awq_cpu_forward(const llmrt_backend_ref *be, const awq_cpu_linear *l, float *y,
                     const float *x, int32_t n, float *scratch);

/* Dense W [out, in] as f32 on the host: w[o][i] = (q - z) * s, exact. */
void awq_cpu_dequant(const awq_cpu_linear *l, float *out);

#endif
