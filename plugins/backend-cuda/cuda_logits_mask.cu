/* cuda_logits_mask.cu — the "llmrt.logits_mask" extension (ext/logits_mask.h): the tokens a
 * row's mask forbids get -inf, in place, before argmax / sample.
 *
 * Why a kernel of its own: the mask (a bit per token, vocab/32 words per constrained row)
 * comes from the host with the step; applying it where the logits are keeps them off the
 * bus. One thread per logit: a warp's 32 threads share one mask word (one load, broadcast)
 * and touch 32 consecutive logits (coalesced). Rows without a slot return at once. */
#include <math.h>

#include <llmrt/ext/logits_mask.h>

#include "cuda_common.cuh"

#define MASK_THREADS 256
#define MASK_MAX_BLOCKS 128 /* per row */
#define MASK_ROWS_PER_LAUNCH 65535

__global__ void __launch_bounds__(MASK_THREADS)
logits_mask_kernel(float *__restrict__ logits, const int32_t *__restrict__ row_slot,
                   const uint32_t *__restrict__ words, int vocab, int n_words)
{
    llmrt_cuda_pdl_wait(); /* the logits come from the kernel before */
    llmrt_cuda_pdl_trigger();
    const int row = blockIdx.y;
    const int slot = row_slot[row];
    if (slot < 0)
        return;
    float *x = logits + (int64_t)row * vocab;
    const uint32_t *w = words + (int64_t)slot * n_words;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < vocab; i += gridDim.x * blockDim.x)
        if (!((w[i >> 5] >> (i & 31)) & 1u))
            x[i] = -INFINITY;
}

static llmrt_status cuda_logits_mask_apply(llmrt_backend *b, float *logits,
                                           const int32_t *row_slot, const uint32_t *words,
                                           int32_t rows, int32_t vocab, llmrt_error *err)
{
    if (rows <= 0)
        return LLMRT_OK;
    if (vocab <= 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cuda logits_mask: vocab must be positive (got %d)", vocab);
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    int64_t blocks = ceil_div64(vocab, MASK_THREADS * 4);
    if (blocks > MASK_MAX_BLOCKS)
        blocks = MASK_MAX_BLOCKS;
    const int n_words = (vocab + 31) / 32;
    for (int32_t r0 = 0; r0 < rows; r0 += MASK_ROWS_PER_LAUNCH) {
        const int32_t n = rows - r0 < MASK_ROWS_PER_LAUNCH ? rows - r0 : MASK_ROWS_PER_LAUNCH;
        cuda_launch(b, logits_mask_kernel, dim3((unsigned)blocks, (unsigned)n), MASK_THREADS, 0,
                    logits + (int64_t)r0 * vocab, row_slot + r0, words, vocab, n_words);
        if ((st = cuda_check_launch(err, "logits_mask")) != LLMRT_OK)
            return st;
    }
    return LLMRT_OK;
}

extern "C" const llmrt_logits_mask_ops cuda_logits_mask_ext = {
    sizeof(llmrt_logits_mask_ops),
    cuda_logits_mask_apply,
};
