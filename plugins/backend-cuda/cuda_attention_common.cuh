/* cuda_attention_common.cuh — what the decode attention kernels share (cuda_attention.cu:
 * the split-K kernel of one split per block; cuda_attention_batch.cu: the same splits walked
 * by fewer blocks at large batch): the split plan, the lane geometry, the row loads.
 *
 * Why a header: both kernels must compute every split bit for bit alike (a token decoded in a
 * batch equals the token decoded alone), so the plan and the loads are written once. */
#ifndef LLMRT_CUDA_ATTENTION_COMMON_CUH
#define LLMRT_CUDA_ATTENTION_COMMON_CUH

#include "cuda_common.cuh"

#include <math.h>

#define ATT_WARPS 4          /* decode: warps per block */
#define ATT_TT 2             /* decode: tokens per row group per iteration (loads in flight;
                              * H200, 8B, ctx 2048: 4 -> 2 took 2.40 -> 2.37 ms: a shorter
                              * dependent chain per thread, more splits) */
#define ATT_MAX_SPLITS 256   /* decode: most splits of one sequence */
#define ATT_DEFAULT_SPLITS 32 /* decode: most splits unless [backend.cuda] tune att_maxs says */
#define ATT_COUNTERS (1 << 20) /* decode: completion counters at the start of the scratch */
#define ATT_WINDOW_BYTES 32768 /* decode: K/V a block copies to shared memory before its wait */

/* Splits a context of L tokens uses, out of at most S, none shorter than cmin tokens. */
__device__ __forceinline__ int att_active_splits(int L, int S, int cmin)
{
    int a = (L + cmin - 1) / cmin;
    if (a > S)
        a = S;
    return a < 1 ? 1 : a;
}

/* Largest power of two <= cap that divides v (host and device). */
__host__ __device__ constexpr int att_pow2_div(int v, int cap)
{
    int d = 1;
    while (d * 2 <= cap && v % (d * 2) == 0)
        d *= 2;
    return d;
}

/* Largest power of two <= v (v >= 1). */
__host__ __device__ constexpr int att_pow2_floor(int v)
{
    int d = 1;
    while (d * 2 <= v)
        d *= 2;
    return d;
}

/* How lanes cover one K/V row of HD elements of T with 16-byte loads: LPR lanes per row (a
 * power of two, so row sums are xor-shuffles), EPL elements per lane. head_dim 32..256 in
 * steps of 32 all fit; when HD / VEC is not a power of two (96) a lane takes several vectors
 * and a block handles fewer query heads at once (GB_MAX) to stay within registers. */
template <typename T, int HD> struct att_geom {
    static constexpr int VEC = 16 / (int)sizeof(T);           /* elements per 16-byte load */
    static constexpr int LPR = att_pow2_div(HD / VEC, 32);     /* lanes per row */
    static constexpr int EPL = HD / LPR;                       /* elements per lane */
    static constexpr int NV = EPL / VEC;                       /* 16-byte loads per lane per row */
    static constexpr int RPW = 32 / LPR;                       /* rows a warp reads at once */
    static constexpr int NRG = ATT_WARPS * RPW;                /* row groups per block */
    static constexpr int TT = EPL <= 8 ? ATT_TT : 2;           /* tokens per row group per step */
    static constexpr int GB_MAX = att_pow2_floor(64 / EPL >= 8 ? 8 : 64 / EPL >= 1 ? 64 / EPL : 1); /* query heads per block */
};

/* The head_dims the kernels are built for. */
static inline int att_head_dim_ok(int hd)
{
    return hd == 32 || hd == 64 || hd == 96 || hd == 128 || hd == 256;
}

/* ---- decode ---- */

/* K/V rows of tokens t = first .. first + TT - 1 for one row group (zero past t1): tokens
 * before w_end from the block's staged window in shared memory (ks/vs: row t - t0, RV
 * 16-byte pieces per row, this lane's from piece lr * NV), the rest from the cache. */
template <typename T, int TT, int NV, int VEC>
__device__ __forceinline__ void att_load_rows(uint4 (&kraw)[TT][NV], uint4 (&vraw)[TT][NV],
                                              bool (&valid)[TT], int first, int t1, int t0,
                                              int w_end, const uint4 *ks, const uint4 *vs,
                                              int rv, int lr, const int32_t *__restrict__ bt,
                                              int bs, const T *__restrict__ kc,
                                              const T *__restrict__ vc, int64_t slot_stride,
                                              int64_t head_off)
{
#pragma unroll
    for (int u = 0; u < TT; u++) {
        const int t = first + u;
        valid[u] = t < t1;
        if (!valid[u]) {
#pragma unroll
            for (int v = 0; v < NV; v++)
                kraw[u][v] = vraw[u][v] = make_uint4(0, 0, 0, 0);
        } else if (t < w_end) {
            const int at = (t - t0) * rv + lr * NV;
#pragma unroll
            for (int v = 0; v < NV; v++) {
                kraw[u][v] = ks[at + v];
                vraw[u][v] = vs[at + v];
            }
        } else {
            const int64_t slot = (int64_t)bt[t / bs] * bs + t % bs;
            const T *kp = kc + slot * slot_stride + head_off;
            const T *vp = vc + slot * slot_stride + head_off;
#pragma unroll
            for (int v = 0; v < NV; v++) {
                kraw[u][v] = ldg16(kp + v * VEC);
                vraw[u][v] = ldg16(vp + v * VEC);
            }
        }
    }
}

/* ---- entry points of the attention files (cuda_attention.cu dispatches) ---- */

/* The batch decode kernel's launch (cuda_attention_batch.cu): grid (blocks per sequence and
 * head group, head groups, sequences); partials sized for S splits per sequence. */
typedef struct cuda_decode_batch_args {
    const llmrt_attn_params *p;
    float *out, *part, *part_ml;
    unsigned int *counters;
    const float *q;
    int S, cmin, gb;
    int prefetch; /* each step's K/V rows loaded one step ahead (tune att_bpf=0: off) */
    dim3 grid;
} cuda_decode_batch_args;
llmrt_status cuda_attention_decode_batch(llmrt_backend *b, const cuda_decode_batch_args *a,
                                         llmrt_error *err);

/* The tensor-core prefill kernel (cuda_attention_mma.cu): 1 when it takes p (f16/bf16 cache,
 * head_dim 64/96/128, not switched off by [backend.cuda] tune att_pf_mma=-1); its launch
 * (skip_single: leave one-token sequences to the decode kernel); its shared-memory limits,
 * raised once at create. */
int cuda_attention_mma_ok(const llmrt_backend *b, const llmrt_attn_params *p);
llmrt_status cuda_attention_prefill_mma(llmrt_backend *b, float *out, const float *q,
                                        const llmrt_attn_params *p, int skip_single,
                                        llmrt_error *err);
llmrt_status cuda_attention_mma_init(llmrt_backend *b, llmrt_error *err);

#endif
