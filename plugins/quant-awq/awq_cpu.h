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

/* The kernel path, the backend's [backend.cpu] simd (awq_cpu.c says what each computes):
 * exact (all f32 in a fixed order, the widest vectors this CPU has) and baseline (the same
 * bits with 16-byte vectors), or a fast path with int8 activations: avx2, avx512 (VNNI), amx
 * (avx512, and prefill-sized calls of group 128 on AMX-INT8 tiles). */
typedef enum awq_cpu_simd {
    AWQ_CPU_EXACT = 0,
    AWQ_CPU_BASELINE,
    AWQ_CPU_AVX2,
    AWQ_CPU_AVX512,
    AWQ_CPU_AMX,
} awq_cpu_simd;

/* The path for backend `be`: what its "llmrt.cpu" extension's simd() names, exact for
 * "exact", a name not known here, or a backend without the extension. */
awq_cpu_simd awq_cpu_choose_simd(const llmrt_backend_ref *be);
/* "exact", "baseline", "avx2", "avx512" or "amx". */
const char *awq_cpu_simd_name(awq_cpu_simd simd);

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
