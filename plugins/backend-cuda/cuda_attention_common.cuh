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
#define ATT_GB_CAP 4         /* decode: most query heads per block by default (tune att_gb; H200,
                              * GQA groups of 8: eight heads per block were slower at every
                              * context, BENCHMARKS.md 2026-12-04) */

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

/* A row group's running softmax state for GB query heads, empty: max -inf, sum 0, acc 0. */
template <int GB, int EPL>
__device__ __forceinline__ void att_state_init(float (&m)[GB], float (&l)[GB],
                                               float (&acc)[GB][EPL])
{
#pragma unroll
    for (int g = 0; g < GB; g++) {
        m[g] = -INFINITY;
        l[g] = 0.0f;
#pragma unroll
        for (int e = 0; e < EPL; e++)
            acc[g][e] = 0.0f;
    }
}

/* One step of a row group: TT tokens' K and V rows (kraw, vraw; valid[u] false past the
 * split's end, rows zero) folded into its running (m, l, acc) for GB query heads (qv: this
 * lane's EPL elements of each head, scaled). Both decode kernels step through it, so a split
 * has the same bits whichever kernel computes it (batch invariance). */
template <typename T, int TT, int NV, int VEC, int EPL, int LPR, int GB>
__device__ __forceinline__ void att_decode_step(const float (&qv)[GB][EPL],
                                                const uint4 (&kraw)[TT][NV],
                                                const uint4 (&vraw)[TT][NV],
                                                const bool (&valid)[TT], float (&m)[GB],
                                                float (&l)[GB], float (&acc)[GB][EPL])
{
    float sc[TT][GB];
#pragma unroll
    for (int u = 0; u < TT; u++) {
        float kf[EPL];
#pragma unroll
        for (int v = 0; v < NV; v++)
            vec_to_f32<T>(kraw[u][v], kf + v * VEC);
#pragma unroll
        for (int g = 0; g < GB; g++) {
            float d = 0.0f;
#pragma unroll
            for (int e = 0; e < EPL; e++)
                d = fmaf(qv[g][e], kf[e], d);
            sc[u][g] = d;
        }
    }
    /* finish the dot products across the LPR lanes of each row group */
#pragma unroll
    for (int u = 0; u < TT; u++)
#pragma unroll
        for (int g = 0; g < GB; g++)
#pragma unroll
            for (int o = LPR / 2; o > 0; o >>= 1)
                sc[u][g] += __shfl_xor_sync(CUDA_FULL_MASK, sc[u][g], o);

    float vf[TT][EPL];
#pragma unroll
    for (int u = 0; u < TT; u++)
#pragma unroll
        for (int v = 0; v < NV; v++)
            vec_to_f32<T>(vraw[u][v], vf[u] + v * VEC);

#pragma unroll
    for (int g = 0; g < GB; g++) {
        float mx = -INFINITY;
#pragma unroll
        for (int u = 0; u < TT; u++)
            if (valid[u])
                mx = fmaxf(mx, sc[u][g]);
        const float mnew = fmaxf(m[g], mx);
        if (mnew == -INFINITY)
            continue; /* no valid token yet in this row group */
        const float corr = __expf(m[g] - mnew);
        float p[TT], ps = 0.0f;
#pragma unroll
        for (int u = 0; u < TT; u++) {
            p[u] = valid[u] ? __expf(sc[u][g] - mnew) : 0.0f;
            ps += p[u];
        }
        l[g] = l[g] * corr + ps;
        m[g] = mnew;
#pragma unroll
        for (int e = 0; e < EPL; e++) {
            float a = acc[g][e] * corr;
#pragma unroll
            for (int u = 0; u < TT; u++)
                a = fmaf(p[u], vf[u][e], a);
            acc[g][e] = a;
        }
    }
}

/* One split's result from its NRG row groups (both decode kernels: the same bits): each row
 * group's (m, l, acc) of GB heads through shared memory, weights w_r = exp(m_r - M) once per
 * (row group, head), then per output element A = sum_r acc_r w_r and Ls = sum_r l_r w_r in
 * row-group order from 0. A thread takes four consecutive elements of one head (one 16-byte
 * shared load per row group), so the weights and l are read once per four outputs. Written
 * to out_h (single: the whole context in this split, A / Ls) or to the split's partial
 * (part_h [head][HD], part_ml_h [head][2], heads hs partials apart). Begins after the caller's
 * last use of the shared arrays; ends with them still read by slow threads (a caller that
 * merges again syncs first). */
template <int HD, int GB, int NRG, int EPL>
__device__ __forceinline__ void att_merge_split(const float (&m)[GB], const float (&l)[GB],
                                                const float (&acc)[GB][EPL], int rg, int lr,
                                                float (&sm_ml)[NRG][GB][2],
                                                float (&sm_acc)[NRG][GB][HD],
                                                float (&sm_w)[NRG][GB], float (&sm_m)[GB],
                                                bool single, float *out_h, float *part_h,
                                                float *part_ml_h, int64_t hs)
{
    static_assert(HD % 4 == 0 && EPL % 4 == 0, "float4 pieces");
#pragma unroll
    for (int g = 0; g < GB; g++) {
        if (lr == 0)
            *reinterpret_cast<float2 *>(sm_ml[rg][g]) = make_float2(m[g], l[g]);
#pragma unroll
        for (int e = 0; e < EPL; e += 4)
            *reinterpret_cast<float4 *>(&sm_acc[rg][g][lr * EPL + e]) =
                make_float4(acc[g][e], acc[g][e + 1], acc[g][e + 2], acc[g][e + 3]);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < NRG * GB; i += blockDim.x) {
        const int r = i / GB, g = i % GB;
        float M = -INFINITY;
#pragma unroll
        for (int r2 = 0; r2 < NRG; r2++)
            M = fmaxf(M, sm_ml[r2][g][0]);
        sm_w[r][g] = M == -INFINITY ? 0.0f : __expf(sm_ml[r][g][0] - M); /* -inf -> 0 */
        if (r == 0)
            sm_m[g] = M;
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < GB * HD / 4; idx += blockDim.x) {
        const int g = idx / (HD / 4), d = 4 * (idx % (HD / 4));
        const float M = sm_m[g];
        float4 A = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        float Ls = 0.0f;
        if (M != -INFINITY) {
#pragma unroll
            for (int r = 0; r < NRG; r++) {
                const float w = sm_w[r][g];
                const float4 a = *reinterpret_cast<const float4 *>(&sm_acc[r][g][d]);
                Ls = fmaf(sm_ml[r][g][1], w, Ls);
                A = make_float4(fmaf(a.x, w, A.x), fmaf(a.y, w, A.y), fmaf(a.z, w, A.z),
                                fmaf(a.w, w, A.w));
            }
        }
        if (single) {
            float *o = out_h + (int64_t)g * HD + d;
            o[0] = Ls > 0.0f ? A.x / Ls : 0.0f;
            o[1] = Ls > 0.0f ? A.y / Ls : 0.0f;
            o[2] = Ls > 0.0f ? A.z / Ls : 0.0f;
            o[3] = Ls > 0.0f ? A.w / Ls : 0.0f;
        } else {
            *reinterpret_cast<float4 *>(part_h + g * hs * HD + d) = A;
            if (d == 0)
                *reinterpret_cast<float2 *>(part_ml_h + g * hs * 2) = make_float2(M, Ls);
        }
    }
}

/* The end of both decode kernels, run by every thread of each of a (sequence, head group)'s
 * `blocks` participating blocks after its splits' partials are written: the last block to
 * arrive (counter *cnt) merges the `active` partials in split order into out — one pass with
 * a running max (online log-sum-exp), each thread four consecutive elements of one head,
 * eight partials' (m, l) and values in flight at a time: one round trip to L2 per eight
 * splits — and resets the counter for the next launch (graph replay). sh0 = s * n_heads +
 * hq0 (the partials' head index of the block's first head), rh0 = row * n_heads + hq0. */
template <int HD, int GB>
__device__ __forceinline__ void att_merge_partials(unsigned int *cnt, unsigned int &s_done,
                                                   unsigned int blocks, int active, int S,
                                                   const float *part, const float *part_ml,
                                                   int64_t sh0, float *out, int64_t rh0)
{
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0)
        s_done = atomicAdd(cnt, 1u);
    __syncthreads();
    if (s_done != blocks - 1)
        return;
    __threadfence();
    for (int idx = threadIdx.x; idx < GB * HD / 4; idx += blockDim.x) {
        const int g = idx / (HD / 4), d = 4 * (idx % (HD / 4));
        const int64_t pb = (sh0 + g) * S;
        float M = -INFINITY, ls = 0.0f;
        float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int j0 = 0; j0 < active; j0 += 8) {
            float2 ml[8];
            float4 pv[8];
#pragma unroll
            for (int u = 0; u < 8; u++)
                if (j0 + u < active) {
                    ml[u] = __ldcg(reinterpret_cast<const float2 *>(part_ml + (pb + j0 + u) * 2));
                    pv[u] = __ldcg(reinterpret_cast<const float4 *>(part + (pb + j0 + u) * HD + d));
                }
#pragma unroll
            for (int u = 0; u < 8; u++) {
                if (j0 + u >= active)
                    break;
                const float mn = fmaxf(M, ml[u].x);
                if (mn == -INFINITY)
                    continue; /* nothing in this split or before */
                const float c = __expf(M - mn), w = __expf(ml[u].x - mn);
                ls = ls * c + w * ml[u].y;
                a = make_float4(fmaf(w, pv[u].x, a.x * c), fmaf(w, pv[u].y, a.y * c),
                                fmaf(w, pv[u].z, a.z * c), fmaf(w, pv[u].w, a.w * c));
                M = mn;
            }
        }
        const float inv = ls > 0.0f ? 1.0f / ls : 0.0f;
        float *o = out + (rh0 + g) * HD + d;
        o[0] = a.x * inv, o[1] = a.y * inv, o[2] = a.z * inv, o[3] = a.w * inv;
    }
    if (threadIdx.x == 0)
        *cnt = 0;
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
