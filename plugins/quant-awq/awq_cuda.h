/* awq_cuda.h — the seam between the quant-awq plugin (plain C, awq.c) and its CUDA kernels
 * (awq_cuda.cu, built only when CMake finds CUDA).
 *
 * Why: awq.c owns the format (probe, tensor validation, error messages) and chooses the kernels
 * by what the backend offers; the CUDA file owns only device layout and kernels. awq.c has already checked
 * every dtype and shape before calling awq_cuda_load, so the CUDA side may rely on:
 *   in % group == 0, out % 8 == 0, group in {32, 64, 128}, in > 0, out > 0.
 *
 * Packed layout of the inputs (AutoAWQ "gemm", see awq_pack.h for the nibble order):
 *   qweight int32 [in, out/8]          eight 4-bit q values of columns 8c..8c+7 per word
 *   qzeros  int32 [in/group, out/8]    eight 4-bit zero points, same nibble order
 *   scales  f16   [in/group, out]      IEEE half bits
 *   w[o][i] = (q[i][o] - z[i/group][o]) * s[i/group][o]
 *
 * Every function fills err (message naming what failed) and returns its status; nothing
 * prints, exits or aborts. Kernels run on the backend's stream, on its device and with its
 * launch protocol, from its "llmrt.cuda" extension (llmrt/cuda.h); awq_cuda_forward neither
 * allocates nor synchronizes, so it can be captured in a graph. */
#ifndef LLMRT_QUANT_AWQ_CUDA_H
#define LLMRT_QUANT_AWQ_CUDA_H

#include <stdint.h>

#include <llmrt/backend.h>
#include <llmrt/plugin.h>
#include <llmrt/quant.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct awq_cuda_ctx awq_cuda_ctx;       /* one per quant instance (stream, scratch) */
typedef struct awq_cuda_linear awq_cuda_linear; /* one loaded linear on the device */

/* Create the per-instance context on a backend that offers the "llmrt.cuda" extension
 * (LLMRT_ERR_UNSUPPORTED otherwise). tune: [quant.awq] tune, "key=value,..." (NULL or "":
 * the built-in choices). The backend outlives the context. */
llmrt_status awq_cuda_create(const llmrt_backend_ref *backend, const char *tune,
                             awq_cuda_ctx **out, llmrt_error *err);
void awq_cuda_destroy(awq_cuda_ctx *ctx);

/* Copy one linear to the device (any repacking is the CUDA side's choice). The host arrays
 * are only valid during the call (checkpoint mmap, little-endian).
 *   qweight [in, out/8], qzeros [in/group, out/8], scales [in/group, out] (f16 bits) */
llmrt_status awq_cuda_load(awq_cuda_ctx *ctx, const int32_t *qweight, const int32_t *qzeros,
                           const uint16_t *scales, int64_t in, int64_t out, int64_t group,
                           awq_cuda_linear **out_linear, llmrt_error *err);
void awq_cuda_free(awq_cuda_ctx *ctx, awq_cuda_linear *l);
/* The quant vtable's linear_move for a CUDA linear: its packed weights and metadata. */
llmrt_status awq_cuda_move(awq_cuda_ctx *ctx, awq_cuda_linear *l, const llmrt_buffer_mover *mv,
                           llmrt_error *err);

/* One linear of a fused load: its AutoAWQ tensors (as in awq_cuda_load) and out_features. */
typedef struct awq_cuda_part {
    const int32_t *qweight; /* [in, out/8] */
    const int32_t *qzeros;  /* [in/group, out/8] */
    const uint16_t *scales; /* [in/group, out] */
    int64_t out;
} awq_cuda_part;

/* Load n_parts linears of the same in_features as one linear [sum(out), in] (outputs of part
 * 0 first): one GEMV launch serves them all. Every part but the last needs out % 16 == 0
 * (LLMRT_ERR_UNSUPPORTED otherwise). awq_cuda_load is this with one part. */
llmrt_status awq_cuda_load_parts(awq_cuda_ctx *ctx, const awq_cuda_part *parts, int32_t n_parts,
                                 int64_t in, int64_t group, awq_cuda_linear **out_linear,
                                 llmrt_error *err);

/* y [n, out] = x [n, in] · Wᵀ on the device, fp32 accumulation, enqueued on the stream.
 * x, y: device pointers, f32, row-major. */
llmrt_status awq_cuda_forward(awq_cuda_ctx *ctx, const awq_cuda_linear *l, float *y,
                              const float *x, int32_t n, llmrt_error *err);

/* awq_cuda_forward with folds (quant.h LLMRT_FUSE_*), for 1 <= n <=
 * awq_cuda_fused_max_rows(ctx, l, flags) (0: not for this linear; LLMRT_ERR_UNSUPPORTED past
 * it, with nothing enqueued). */
llmrt_status awq_cuda_forward_fused(awq_cuda_ctx *ctx, const awq_cuda_linear *l, float *y,
                                    const float *x, int32_t n, uint32_t flags, llmrt_error *err);
int32_t awq_cuda_fused_max_rows(const awq_cuda_ctx *ctx, const awq_cuda_linear *l,
                                uint32_t flags);

/* Device bytes the linear occupies (for load reports). */
uint64_t awq_cuda_bytes(const awq_cuda_linear *l);

/* Where a loaded linear's repacked tensors are (awq_cuda_layout.cuh), for kernels in other
 * files (awq_cuda_grouped.cu). */
typedef struct awq_cuda_layout {
    const uint32_t *wq;   /* [n_mtiles][kpad/64][32][4] */
    const uint32_t *meta; /* [n_mtiles][kpad/group][8][2] */
    int64_t in, out, group, kpad, n_mtiles;
} awq_cuda_layout;
void awq_cuda_linear_layout(const awq_cuda_linear *l, awq_cuda_layout *out);

/* Dense W as f32 [out, in] in host memory (tests): synchronous. */
llmrt_status awq_cuda_dequant(awq_cuda_ctx *ctx, const awq_cuda_linear *l, float *out,
                              llmrt_error *err);

#ifdef __cplusplus
}
#endif
#endif
