/* fp8_act.h — the "dynamic" activation quantization of block-scaled FP8 (W8A8), as scalar
 * functions: the one definition the CPU kernel and the tests use, and the CUDA kernels
 * reproduce bit for bit (fp8_cuda.cu: same f32 operations, hardware e4m3 rounding).
 *
 * For each token (row of x) and each group of 128 inputs (the last group may be shorter,
 * as the weight's last block): amax = max |x| over the group (at least 1e-10, so a group
 * of zeros gets a tiny finite scale), s = amax / 448, and each input becomes
 * xq = e4m3(x / s) (round to nearest even; |x / s| <= 448 so nothing saturates beyond
 * rounding). Then y = Σ_groups ((Σ_i xq_i · wq_i) · s_x) · s_w: the products of two e4m3
 * values are exact in f32, the sums run in f32. This is what vLLM's
 * per_token_group_quant_fp8 + w8a8_block_fp8_matmul compute for these checkpoints. */
#ifndef LLMRT_QUANT_FP8_ACT_H
#define LLMRT_QUANT_FP8_ACT_H

#include <math.h>
#include <stdint.h>

#include <llmrt/tensor.h>

#define FP8_E4M3_MAX 448.0f
#define FP8_AMAX_MIN 1e-10f

/* The activation scale of a group whose largest magnitude is amax. */
static inline float fp8_act_scale(float amax)
{
    return fmaxf(amax, FP8_AMAX_MIN) / FP8_E4M3_MAX;
}

/* One input of a group with scale s, as e4m3 bits (NaN stays NaN). */
static inline uint8_t fp8_act_quant(float x, float s)
{
    float v = x / s;
    if (v == v)
        v = fminf(fmaxf(v, -FP8_E4M3_MAX), FP8_E4M3_MAX);
    return llmrt_f32_to_e4m3(v);
}

/* Quantize one row of n inputs: xq [n] (as f32 values of the e4m3 codes) and its scales
 * sx [ceil(n / 128)]. */
static inline void fp8_act_quant_row(const float *x, int64_t n, float *xq, float *sx)
{
    for (int64_t g0 = 0, gi = 0; g0 < n; g0 += 128, gi++) {
        const int64_t g1 = g0 + 128 < n ? g0 + 128 : n;
        float amax = 0.0f;
        for (int64_t i = g0; i < g1; i++)
            amax = fmaxf(amax, fabsf(x[i]));
        const float s = fp8_act_scale(amax);
        sx[gi] = s;
        for (int64_t i = g0; i < g1; i++)
            xq[i] = llmrt_e4m3_to_f32(fp8_act_quant(x[i], s));
    }
}

#endif
