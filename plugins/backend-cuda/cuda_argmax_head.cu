/* cuda_argmax_head.cu — greedy decoding's output projection without computing every logit
 * (the "llmrt.argmax_head" extension, ext/argmax_head.h).
 *
 * Why: at batch-1 decode the lm_head GEMV reads the whole [vocab, d] matrix every token
 * (Qwen3-8B, f16: 1.245 GB, 0.27 ms of a 2.1 ms step on the H200), yet a greedy step needs only
 * the argmax. An int8 copy of the matrix (one scale per row) is half the bytes of f16; with x
 * quantised to int16 (one scale per 32 inputs) a screen logit is eight IDP2A per 16 weight
 * bytes, and it is provably close to the logit L_j that cuda_gemm computes:
 *   |L_j - A_j| <= b_j = c1_j ||x|| + c2_j ||x - x'||
 *   c1_j = ||e_j|| + 2 gamma (||w_j|| + ||w'_j||),  c2_j = ||w'_j|| (1 + 2 gamma)
 * (Cauchy-Schwarz on the weight error e_j = w_j - w'_j, w'_j = s_j q_j, and on the activation
 * error x - x'; gamma = d u / (1 - d u), u = 2^-24, bounds the f32 rounding of the GEMV's sum
 * and of the screen's, integer sums and their conversion included). So the argmax of L is
 * among the rows with A_j + b_j >= T = max_i (A_i - b_i) — on the Qwen3-8B-shaped random model
 * ~14 of 152k — and only those are recomputed from w, in the order of cuda_gemm's GEMV, bit for
 * bit: the ids gemm + argmax give, from about half the bytes. (x in int8 instead: its error
 * term doubled b and gave ~160 candidates.)
 *
 *   create:  q [vocab, d] s8 = round(w / s), s_j = max|w_j| / 127; c1, c2 in double
 *   screen:  each block quantises x (s16, a scale per 32 inputs, ||x||, ||x - x'||) into shared
 *            memory; A [n, vocab] = s_j * sum_groups s_g * dp2a(x', q); per block and row r,
 *            max_j (A - b)
 *   select:  T_r = max of those; each row j with A + b >= T_r: L_j exactly, the largest
 *            (L_j, -j) by a 64-bit atomicMax (lowest index on ties)
 *   finish:  out[r] = the j of that maximum; the maxima reset for the next call
 * Slack: b is taken x (1 + 1e-3) plus |A| 2^-20, for the f32 rounding of the norms and of A ± b.
 * A row whose weights are not finite is always a candidate (c1 = inf); a row of x that is not
 * finite gets id 0.
 *
 * Past 8 rows (batch decode) the screen is the backend's gemm itself (cuBLAS on the tensor
 * cores, x rounded to w's type x'), whose error against the GEMV's logit is bounded the same
 * way: |L_j - A_j| <= ||w_j|| ((gamma + gamma' (1 + 2^-7)) ||x|| + ||x - x'||), gamma' taking
 * u = 2^-20 for the tensor cores' f32 accumulation (truncating adds; Fasi et al. 2021 measure
 * well under that). Candidates are then recomputed in the GEMV's order as above, so the ids of
 * a batch are the ids each row would get alone: greedy decoding of a batch equals the same
 * requests decoded one by one. */
#include "cuda_common.cuh"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AH_THREADS 256             /* threads per block, every kernel */
#define AH_WARPS (AH_THREADS / 32)
#define AH_MAX_ROWS 8              /* rows per call of the int8 screen: the GEMV sizes of cuda_gemm */
#define AH_MANY_ROWS 1024          /* rows per call past those (gemm screen), unless tune ah_rows */
#define AH_R 2                     /* screen: weight rows per warp at once */
#define AH_UNROLL 4                /* screen: 16-byte loads per row and lane in flight */
#define AH_BLOCKS_PER_SM 4         /* screen: resident blocks per SM (grid-stride over rows) */
#define AH_XG 32                   /* screen: inputs per activation scale */

struct llmrt_argmax_head {
    int32_t vocab, d, max_rows;
    llmrt_dtype dtype;
    const void *w;                  /* [vocab, d] the caller's weights (exact logits) */
    int8_t *q;                      /* [vocab, d] round(w / s) */
    float *scale;                   /* [vocab] s_j */
    float2 *cb;                     /* [vocab] (c1_j, c2_j) */
    float2 *cbg;                    /* [vocab] the same for the gemm screen (n > 8) */
    float *approx;                  /* [max_rows, vocab] A */
    float *part;                    /* [max_rows, blocks] per-block max (A - b) */
    float2 *xnorm;                  /* [max_rows] (||x_r||, ||x_r - x'_r||) */
    unsigned long long *best;       /* [max_rows] packed (L, -j) maxima; 0 between calls */
    unsigned long long *stats;      /* [2] candidates, rows ([backend.cuda] tune ah_stats=1) */
    int blocks;                     /* screen grid */
};

/* ---- create ---- */

__device__ __forceinline__ double warp_sum_d(double v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(CUDA_FULL_MASK, v, o);
    return v;
}

/* One warp per row: s_j, q_j, c1_j and c2_j. */
template <typename T>
__global__ void ah_prepare_kernel(int8_t *__restrict__ q, float *__restrict__ scale,
                                  float2 *__restrict__ cb, float2 *__restrict__ cbg,
                                  const T *__restrict__ w, int vocab, int d, double gamma,
                                  double gamma_tc)
{
    const int lane = threadIdx.x & 31;
    const int64_t n_warps = (int64_t)gridDim.x * (blockDim.x / 32);
    for (int64_t row = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; row < vocab;
         row += n_warps) {
        const T *wr = w + row * d;
        int8_t *qr = q + row * d;
        float mx = 0.0f;
        for (int k = lane; k < d; k += 32)
            mx = fmaxf(mx, fabsf(to_f32(wr[k])));
        mx = warp_max(mx);
        const int finite = isfinite(mx);
        const float s = finite ? mx / 127.0f : 0.0f;
        double ee = 0.0, ww = 0.0, qq = 0.0;
        for (int k = lane; k < d; k += 32) {
            const float v = to_f32(wr[k]);
            float qi = s > 0.0f ? rintf(v / s) : 0.0f;
            qi = fminf(fmaxf(qi, -127.0f), 127.0f);
            qr[k] = (int8_t)qi;
            const double ws = (double)s * (double)qi; /* exact: 24 x 8 bits */
            const double e = (double)v - ws;          /* exact */
            ee = fma(e, e, ee);
            ww = fma((double)v, (double)v, ww);
            qq = fma(ws, ws, qq);
        }
        ee = warp_sum_d(ee), ww = warp_sum_d(ww), qq = warp_sum_d(qq);
        if (lane == 0) {
            scale[row] = s;
            const double c1 = sqrt(ee) + 2.0 * gamma * (sqrt(ww) + sqrt(qq));
            const double c2 = sqrt(qq) * (1.0 + 2.0 * gamma);
            cb[row] = finite ? make_float2(__double2float_ru(c1 * 1.0001), __double2float_ru(c2 * 1.0001))
                             : make_float2(INFINITY, 0.0f);
            const double wn = sqrt(ww);
            const double g1 = wn * (gamma + gamma_tc * (1.0 + 0x1p-7));
            cbg[row] = finite ? make_float2(__double2float_ru(g1 * 1.0001), __double2float_ru(wn * 1.0001))
                              : make_float2(INFINITY, 0.0f);
        }
    }
}

/* ---- forward ---- */

__device__ __forceinline__ float ah_slack(float2 c, float2 xn, float a)
{
    return fmaf(c.x, xn.x, c.y * xn.y) * 1.001f + fabsf(a) * 0x1p-20f;
}

/* Screen. Each block first quantises the n rows of x into shared memory: x' = s_g * round(x /
 * s_g), s_g = max |x| / 32767 over each group of AH_XG inputs (xq [n][d] s16, then
 * xs [n][d / AH_XG] f32), and ||x||, ||x - x'|| per row. Then warps walk row pairs grid-stride;
 * lane l takes bytes [16 l, 16 l + 16) of each 512-byte stretch of a weight row, AH_UNROLL
 * stretches per round: eight IDP2A against x' per 16 bytes, exact in int32, scaled by s_g into
 * an f32 sum. The first round's weight loads are issued before the wait on the previous kernel
 * (the copy never changes). */
template <int N>
__global__ void __launch_bounds__(AH_THREADS)
ah_screen_kernel(float *__restrict__ approx, float *__restrict__ part, float2 *__restrict__ xnorm,
                 const int8_t *__restrict__ q, const float *__restrict__ scale,
                 const float2 *__restrict__ cb, const float *__restrict__ x, int vocab, int d)
{
    extern __shared__ uint4 ah_smem[];
    int16_t *xq = reinterpret_cast<int16_t *>(ah_smem);          /* [N][d] */
    float *xs = reinterpret_cast<float *>(xq + (size_t)N * d);   /* [N][d / AH_XG] */
    __shared__ float sh_red[AH_WARPS][N][2];
    __shared__ float sh_max[AH_WARPS][N];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t n_groups = (vocab + AH_R - 1) / AH_R;
    const int64_t nw = (int64_t)gridDim.x * AH_WARPS;
    const int ng = d / AH_XG;
    constexpr int STRETCH = 32 * 16;

    int64_t grp = (int64_t)blockIdx.x * AH_WARPS + warp;
    const int8_t *wr[AH_R];
    uint4 wv[AH_UNROLL][AH_R];
    auto rows_of = [&](int64_t g) {
#pragma unroll
        for (int r = 0; r < AH_R; r++) {
            const int64_t row = g * AH_R + r;
            wr[r] = q + (row < vocab ? row : g * AH_R) * (int64_t)d; /* clamp: valid address */
        }
    };
    auto load = [&](int k) {
#pragma unroll
        for (int u = 0; u < AH_UNROLL; u++)
#pragma unroll
            for (int r = 0; r < AH_R; r++)
                wv[u][r] = k + u * STRETCH < d ? ld_stream16(wr[r] + k + u * STRETCH)
                                               : make_uint4(0, 0, 0, 0);
    };
    if (grp < n_groups) {
        rows_of(grp);
        load(lane * 16);
    }
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();

    /* x' in shared memory; warp w takes groups w, w + AH_WARPS, ... of every row */
    float xx[N], dd[N];
#pragma unroll
    for (int j = 0; j < N; j++) {
        xx[j] = dd[j] = 0.0f;
        for (int g = warp; g < ng; g += AH_WARPS) {
            const float v = x[(int64_t)j * d + g * AH_XG + lane];
            const float sg = warp_max(fabsf(v)) / 32767.0f;
            const float qv = sg > 0.0f ? fminf(fmaxf(rintf(v / sg), -32767.0f), 32767.0f) : 0.0f;
            xq[j * d + g * AH_XG + lane] = (int16_t)qv;
            if (lane == 0)
                xs[j * ng + g] = sg;
            const float diff = fmaf(-sg, qv, v);
            xx[j] = fmaf(v, v, xx[j]);
            dd[j] = fmaf(diff, diff, dd[j]);
        }
        xx[j] = warp_sum(xx[j]);
        dd[j] = warp_sum(dd[j]);
        if (lane == 0)
            sh_red[warp][j][0] = xx[j], sh_red[warp][j][1] = dd[j];
    }
    __syncthreads();
    float2 xn[N];
    float lo[N];
#pragma unroll
    for (int j = 0; j < N; j++) {
        float a = 0.0f, b = 0.0f;
#pragma unroll
        for (int w = 0; w < AH_WARPS; w++)
            a += sh_red[w][j][0], b += sh_red[w][j][1];
        xn[j] = make_float2(sqrtf(a), sqrtf(b));
        lo[j] = -INFINITY;
        if (blockIdx.x == 0 && threadIdx.x == 0)
            xnorm[j] = xn[j];
    }

    for (bool first = true; grp < n_groups; grp += nw, first = false) {
        if (!first)
            rows_of(grp);
        float acc[AH_R][N];
#pragma unroll
        for (int r = 0; r < AH_R; r++)
#pragma unroll
            for (int j = 0; j < N; j++)
                acc[r][j] = 0.0f;
        for (int k = lane * 16; k < d; k += AH_UNROLL * STRETCH) {
            if (!(first && k == lane * 16))
                load(k);
#pragma unroll
            for (int u = 0; u < AH_UNROLL; u++) {
                const int kk = k + u * STRETCH;
                if (kk >= d)
                    break;
#pragma unroll
                for (int j = 0; j < N; j++) {
                    const uint4 x0 = *reinterpret_cast<const uint4 *>(xq + j * d + kk);
                    const uint4 x1 = *reinterpret_cast<const uint4 *>(xq + j * d + kk + 8);
                    const float sg = xs[j * ng + kk / AH_XG];
#pragma unroll
                    for (int r = 0; r < AH_R; r++) {
                        const uint4 wq = wv[u][r];
                        int t = __dp2a_lo((int)x0.x, (int)wq.x, 0);
                        t = __dp2a_hi((int)x0.y, (int)wq.x, t);
                        t = __dp2a_lo((int)x0.z, (int)wq.y, t);
                        t = __dp2a_hi((int)x0.w, (int)wq.y, t);
                        t = __dp2a_lo((int)x1.x, (int)wq.z, t);
                        t = __dp2a_hi((int)x1.y, (int)wq.z, t);
                        t = __dp2a_lo((int)x1.z, (int)wq.w, t);
                        t = __dp2a_hi((int)x1.w, (int)wq.w, t);
                        acc[r][j] = fmaf((float)t, sg, acc[r][j]);
                    }
                }
            }
        }
#pragma unroll
        for (int r = 0; r < AH_R; r++) {
            const int64_t row = grp * AH_R + r;
            if (row >= vocab)
                break;
            const float s = scale[row];
            const float2 c = cb[row];
#pragma unroll
            for (int j = 0; j < N; j++) {
                const float a = s * warp_sum(acc[r][j]);
                if (lane == ((r * N + j) & 31))
                    approx[(int64_t)j * vocab + row] = a;
                lo[j] = fmaxf(lo[j], a - ah_slack(c, xn[j], a));
            }
        }
    }
#pragma unroll
    for (int j = 0; j < N; j++) {
        const float m = warp_max(lo[j]);
        if (lane == 0)
            sh_max[warp][j] = m;
    }
    __syncthreads();
    if (threadIdx.x < N) {
        float m = -INFINITY;
#pragma unroll
        for (int w = 0; w < AH_WARPS; w++)
            m = fmaxf(m, sh_max[w][threadIdx.x]);
        part[(int64_t)threadIdx.x * gridDim.x + blockIdx.x] = m;
    }
}

/* x_r · w_j exactly as cuda_gemm's GEMV computes it (gemv_vec_kernel: lane l takes the
 * 16-byte pieces l, l + 32, ... in order, one fmaf per element, then warp_sum). */
template <typename T>
__device__ __forceinline__ float ah_exact(const T *__restrict__ wr, const float *__restrict__ xr,
                                          int d, int lane)
{
    constexpr int VEC = 16 / (int)sizeof(T);
    float acc = 0.0f;
    for (int k = lane * VEC; k < d; k += 32 * VEC) {
        float wf[VEC], xv[VEC];
        vec_to_f32<T>(ld_stream16(wr + k), wf);
#pragma unroll
        for (int e = 0; e < VEC; e += 4) {
            const float4 t = __ldg(reinterpret_cast<const float4 *>(xr + k + e));
            xv[e] = t.x, xv[e + 1] = t.y, xv[e + 2] = t.z, xv[e + 3] = t.w;
        }
#pragma unroll
        for (int e = 0; e < VEC; e++)
            acc = fmaf(wf[e], xv[e], acc);
    }
    return warp_sum(acc);
}

/* (value, index) as one integer whose order is (value, then lower index): the value's bits
 * made monotone, the index complemented. -0 counts as +0 (they tie, as in argmax). */
__device__ __forceinline__ unsigned long long ah_pack(float v, int64_t j)
{
    uint32_t u = __float_as_uint(v + 0.0f);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((unsigned long long)u << 32) | (0xFFFFFFFFu - (uint32_t)j);
}

/* Select: grid (blocks, n). Each block finds T_r from the screen's per-block maxima, then its
 * warps test 32 rows at a time and recompute the candidates. */
template <typename T>
__global__ void __launch_bounds__(AH_THREADS)
ah_select_kernel(unsigned long long *__restrict__ best, unsigned long long *stats,
                 const float *__restrict__ approx, const float *__restrict__ part,
                 const float2 *__restrict__ xnorm, const float2 *__restrict__ cb,
                 const T *__restrict__ w, const float *__restrict__ x, int vocab, int d,
                 int screen_blocks)
{
    __shared__ float red[32];
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int r = blockIdx.y;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float t = -INFINITY;
    for (int i = threadIdx.x; i < screen_blocks; i += AH_THREADS)
        t = fmaxf(t, part[(int64_t)r * screen_blocks + i]);
    t = block_max(t, red);
    const float2 xn = xnorm[r];
    const float *a_r = approx + (int64_t)r * vocab;
    const float *xr = x + (int64_t)r * d;
    const int64_t stride = (int64_t)gridDim.x * AH_WARPS * 32;
    for (int64_t base = ((int64_t)blockIdx.x * AH_WARPS + warp) * 32; base < vocab; base += stride) {
        const int64_t row = base + lane;
        bool cand = false;
        if (row < vocab) {
            const float a = a_r[row];
            cand = a + ah_slack(cb[row], xn, a) >= t;
        }
        for (unsigned m = __ballot_sync(CUDA_FULL_MASK, cand); m; m &= m - 1) {
            const int64_t j = base + __ffs(m) - 1;
            const float l = ah_exact<T>(w + j * d, xr, d, lane);
            if (lane == 0 && l == l) { /* a NaN logit never wins */
                atomicMax(best + r, ah_pack(l, j));
                if (stats)
                    atomicAdd(stats, 1ull);
            }
        }
    }
}

__global__ void ah_finish_kernel(int32_t *__restrict__ out, unsigned long long *__restrict__ best,
                                 unsigned long long *stats, int n)
{
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int r = threadIdx.x;
    if (r < n) {
        const unsigned long long v = best[r];
        out[r] = v ? (int32_t)(0xFFFFFFFFu - (uint32_t)(v & 0xFFFFFFFFu)) : 0;
        best[r] = 0;
    }
    if (stats && r == 0)
        atomicAdd(stats + 1, (unsigned long long)n);
}

/* ---- more than 8 rows: the gemm as the screen ---- */

/* Per row r of x [n, d]: (||x_r||, ||x_r - x'_r||), x' = x rounded to T as cuda_gemm's cast. */
template <typename T>
__global__ void __launch_bounds__(AH_THREADS)
ah_norms_kernel(float2 *__restrict__ xnorm, const float *__restrict__ x, int d)
{
    __shared__ float red[32];
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const float *xr = x + (int64_t)blockIdx.x * d;
    float xx = 0.0f, dd = 0.0f;
    for (int k = threadIdx.x; k < d; k += AH_THREADS) {
        const float v = xr[k];
        const float e = v - to_f32(from_f32<T>(v));
        xx = fmaf(v, v, xx);
        dd = fmaf(e, e, dd);
    }
    xx = block_sum(xx, red);
    dd = block_sum(dd, red);
    if (threadIdx.x == 0)
        xnorm[blockIdx.x] = make_float2(sqrtf(xx), sqrtf(dd));
}

/* Grid (blocks, n): per block and row, max_j (A_j - b_j) over its stretch of the vocabulary. */
__global__ void __launch_bounds__(AH_THREADS)
ah_lower_kernel(float *__restrict__ part, const float *__restrict__ approx,
                const float2 *__restrict__ xnorm, const float2 *__restrict__ cbg, int vocab)
{
    __shared__ float red[32];
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int r = blockIdx.y;
    const float2 xn = xnorm[r];
    const float *a_r = approx + (int64_t)r * vocab;
    float lo = -INFINITY;
    for (int64_t j = (int64_t)blockIdx.x * AH_THREADS + threadIdx.x; j < vocab;
         j += (int64_t)gridDim.x * AH_THREADS) {
        const float a = a_r[j];
        lo = fmaxf(lo, a - ah_slack(cbg[j], xn, a));
    }
    lo = block_max(lo, red);
    if (threadIdx.x == 0)
        part[(int64_t)r * gridDim.x + blockIdx.x] = lo;
}

/* out[r] for r < n (any n), maxima reset */
__global__ void ah_finish_many_kernel(int32_t *__restrict__ out,
                                      unsigned long long *__restrict__ best,
                                      unsigned long long *stats, int n)
{
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    for (int r = threadIdx.x; r < n; r += blockDim.x) {
        const unsigned long long v = best[r];
        out[r] = v ? (int32_t)(0xFFFFFFFFu - (uint32_t)(v & 0xFFFFFFFFu)) : 0;
        best[r] = 0;
    }
    if (stats && threadIdx.x == 0)
        atomicAdd(stats + 1, (unsigned long long)n);
}

/* ---- host side ---- */

extern "C" void cuda_argmax_head_destroy(llmrt_backend *b, llmrt_argmax_head *h)
{
    if (!h)
        return;
    cudaSetDevice(b->device);
    cudaStreamSynchronize(b->stream);
    if (h->stats && b->tune.ah_stats) {
        unsigned long long st[2] = {0, 0};
        if (cudaMemcpy(st, h->stats, sizeof st, cudaMemcpyDeviceToHost) == cudaSuccess && st[1])
            fprintf(stderr, "cuda argmax_head: %llu rows, %.1f candidates per row\n", st[1],
                    (double)st[0] / (double)st[1]);
    }
    void *bufs[] = {h->q, h->scale, h->cb, h->cbg, h->approx, h->part, h->xnorm, h->best, h->stats};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        if (bufs[i])
            cuda_dev_free(b, bufs[i]);
    cudaGetLastError();
    free(h);
}

/* Dynamic shared memory of the screen for n rows of d inputs: x' and its scales. */
static size_t screen_smem(int n, int d)
{
    return (size_t)n * (size_t)d * sizeof(int16_t) + (size_t)n * (size_t)(d / AH_XG) * sizeof(float);
}

/* Let every screen instantiation take the device's whole opt-in shared memory (less its static
 * part): a second head never lowers what the first one needs. */
static cudaError_t set_screen_smem(size_t optin)
{
    void (*const fns[AH_MAX_ROWS])(float *, float *, float2 *, const int8_t *, const float *,
                                   const float2 *, const float *, int, int) = {
        ah_screen_kernel<1>, ah_screen_kernel<2>, ah_screen_kernel<3>, ah_screen_kernel<4>,
        ah_screen_kernel<5>, ah_screen_kernel<6>, ah_screen_kernel<7>, ah_screen_kernel<8>};
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < AH_MAX_ROWS && e == cudaSuccess; i++) {
        cudaFuncAttributes fa;
        e = cudaFuncGetAttributes(&fa, fns[i]);
        if (e == cudaSuccess)
            e = cudaFuncSetAttribute(fns[i], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)(optin - fa.sharedSizeBytes));
    }
    if (e != cudaSuccess)
        cudaGetLastError(); /* not sticky: later launches must not report it */
    return e;
}

extern "C" llmrt_status cuda_argmax_head_create(llmrt_backend *b, const llmrt_tensor *w,
                                                int32_t max_rows, llmrt_argmax_head **out,
                                                llmrt_error *err)
{
    *out = NULL;
    if (w->ndim != 2 || !cuda_is_float_dtype(w->dtype))
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "cuda argmax_head: w must be a 2-D F32/F16/BF16 tensor (got %d-D %s)",
                          w->ndim, llmrt_dtype_name(w->dtype));
    const int64_t vocab = w->shape[0], d = w->shape[1];
    if (vocab < 1 || vocab > INT32_MAX / 2 || d < AH_XG || d % AH_XG != 0 || d > (1 << 20) ||
        !is_aligned16(w->data))
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "cuda argmax_head: w [%lld, %lld] must have a multiple of %d columns "
                          "and 16-byte aligned data",
                          (long long)vocab, (long long)d, AH_XG);
    const int most = b->tune.ah_rows > 0 ? b->tune.ah_rows : AH_MANY_ROWS;
    if (max_rows < 1 || max_rows > (most > AH_MAX_ROWS ? most : AH_MAX_ROWS))
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "cuda argmax_head: %d rows per call; 1..%d are supported", max_rows,
                          most > AH_MAX_ROWS ? most : AH_MAX_ROWS);
    const int screen_rows = max_rows < AH_MAX_ROWS ? max_rows : AH_MAX_ROWS;
    const size_t smem = screen_smem(screen_rows, (int)d);
    if (smem + 1024 > b->smem_optin) /* 1 KB: the screen's static shared memory */
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "cuda argmax_head: %d rows of %lld inputs need %zu bytes of shared "
                          "memory; the device has %zu per block",
                          screen_rows, (long long)d, smem, b->smem_optin);
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    if (smem + 1024 > 48 * 1024) {
        cudaError_t ea = set_screen_smem(b->smem_optin);
        if (ea != cudaSuccess)
            return cuda_fail(err, LLMRT_ERR_DEVICE, ea, "cuda argmax_head: shared memory limit");
    }
    llmrt_argmax_head *h = (llmrt_argmax_head *)calloc(1, sizeof *h);
    if (!h)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "cuda argmax_head: out of memory");
    h->vocab = (int32_t)vocab, h->d = (int32_t)d, h->max_rows = max_rows;
    h->dtype = w->dtype, h->w = w->data;
    h->blocks = b->sm_count * AH_BLOCKS_PER_SM;
    const size_t V = (size_t)vocab;
    struct {
        void **p;
        size_t bytes;
    } allocs[] = {
        {(void **)&h->q, V * (size_t)d},
        {(void **)&h->scale, V * sizeof(float)},
        {(void **)&h->cb, V * sizeof(float2)},
        {(void **)&h->cbg, V * sizeof(float2)},
        {(void **)&h->approx, (size_t)max_rows * V * sizeof(float)},
        {(void **)&h->part, (size_t)max_rows * (size_t)h->blocks * sizeof(float)},
        {(void **)&h->xnorm, (size_t)max_rows * sizeof(float2)},
        {(void **)&h->best, (size_t)max_rows * sizeof(unsigned long long)},
        {(void **)&h->stats, 2 * sizeof(unsigned long long)},
    };
    cudaError_t e = cudaSuccess;
    for (size_t i = 0; i < sizeof allocs / sizeof *allocs; i++)
        if ((st = cuda_dev_alloc(b, allocs[i].bytes, allocs[i].p, err)))
            goto fail;
    if ((e = cudaMemsetAsync(h->best, 0, (size_t)max_rows * sizeof(unsigned long long),
                             b->stream)) ||
        (e = cudaMemsetAsync(h->stats, 0, 2 * sizeof(unsigned long long), b->stream))) {
        st = cuda_fail(err, LLMRT_ERR_DEVICE, e, "cuda argmax_head: cudaMemsetAsync");
        goto fail;
    }
    {
        const double u = ldexp(1.0, -24), gamma = (double)d * u / (1.0 - (double)d * u);
        const double utc = ldexp(1.0, -20), gtc = (double)d * utc / (1.0 - (double)d * utc);
        const unsigned grid = (unsigned)(b->sm_count * 8);
        switch (w->dtype) {
        case LLMRT_DTYPE_F16:
            ah_prepare_kernel<__half><<<grid, AH_THREADS, 0, b->stream>>>(
                h->q, h->scale, h->cb, h->cbg, (const __half *)w->data, h->vocab, h->d, gamma, gtc);
            break;
        case LLMRT_DTYPE_BF16:
            ah_prepare_kernel<__nv_bfloat16><<<grid, AH_THREADS, 0, b->stream>>>(
                h->q, h->scale, h->cb, h->cbg, (const __nv_bfloat16 *)w->data, h->vocab, h->d,
                gamma, gtc);
            break;
        default:
            ah_prepare_kernel<float><<<grid, AH_THREADS, 0, b->stream>>>(
                h->q, h->scale, h->cb, h->cbg, (const float *)w->data, h->vocab, h->d, gamma, gtc);
            break;
        }
    }
    if ((st = cuda_check_launch(err, "argmax_head prepare")))
        goto fail;
    /* the screen reads the copy before waiting on the kernel before it: complete it now */
    if ((e = cudaStreamSynchronize(b->stream))) {
        st = cuda_fail(err, LLMRT_ERR_DEVICE, e, "cuda argmax_head: preparing the int8 copy");
        goto fail;
    }
    *out = h;
    return LLMRT_OK;
fail:
    cuda_argmax_head_destroy(b, h);
    return st;
}

template <int N>
static void launch_screen(llmrt_backend *b, llmrt_argmax_head *h, const float *x)
{
    cuda_launch(b, ah_screen_kernel<N>, (unsigned)h->blocks, AH_THREADS, screen_smem(N, h->d),
                h->approx, h->part, h->xnorm, h->q, h->scale, h->cb, x, h->vocab, h->d);
}

template <typename T>
static void launch_select(llmrt_backend *b, llmrt_argmax_head *h, const float2 *cb,
                          unsigned long long *stats, const float *x, int n)
{
    const dim3 grid((unsigned)h->blocks, (unsigned)n);
    cuda_launch(b, ah_select_kernel<T>, grid, AH_THREADS, 0, h->best, stats, h->approx, h->part,
                h->xnorm, cb, (const T *)h->w, x, h->vocab, h->d, h->blocks);
}

/* n > 8 rows: approx = the backend's gemm, then the same select as the int8 screen's. */
static llmrt_status forward_many(llmrt_backend *b, llmrt_argmax_head *h, int32_t *out,
                                 const float *x, int32_t n, llmrt_error *err)
{
    llmrt_tensor w;
    memset(&w, 0, sizeof w);
    w.dtype = h->dtype;
    w.ndim = 2;
    w.shape[0] = h->vocab;
    w.shape[1] = h->d;
    w.data = (void *)h->w;
    llmrt_status st = cuda_gemm(b, h->approx, x, &w, n, err);
    if (st)
        return st;
    switch (h->dtype) {
    case LLMRT_DTYPE_F16: cuda_launch(b, ah_norms_kernel<__half>, (unsigned)n, AH_THREADS, 0, h->xnorm, x, h->d); break;
    case LLMRT_DTYPE_BF16: cuda_launch(b, ah_norms_kernel<__nv_bfloat16>, (unsigned)n, AH_THREADS, 0, h->xnorm, x, h->d); break;
    default: cuda_launch(b, ah_norms_kernel<float>, (unsigned)n, AH_THREADS, 0, h->xnorm, x, h->d); break;
    }
    if ((st = cuda_check_launch(err, "argmax_head norms")))
        return st;
    cuda_launch(b, ah_lower_kernel, dim3((unsigned)h->blocks, (unsigned)n), AH_THREADS, 0,
                h->part, (const float *)h->approx, (const float2 *)h->xnorm,
                (const float2 *)h->cbg, h->vocab);
    if ((st = cuda_check_launch(err, "argmax_head lower bounds")))
        return st;
    unsigned long long *stats = b->tune.ah_stats ? h->stats : NULL;
    switch (h->dtype) {
    case LLMRT_DTYPE_F16: launch_select<__half>(b, h, h->cbg, stats, x, n); break;
    case LLMRT_DTYPE_BF16: launch_select<__nv_bfloat16>(b, h, h->cbg, stats, x, n); break;
    default: launch_select<float>(b, h, h->cbg, stats, x, n); break;
    }
    if ((st = cuda_check_launch(err, "argmax_head select")))
        return st;
    cuda_launch(b, ah_finish_many_kernel, 1, 256, 0, out, h->best, stats, n);
    return cuda_check_launch(err, "argmax_head finish");
}

extern "C" llmrt_status cuda_argmax_head_forward(llmrt_backend *b, llmrt_argmax_head *h,
                                                 int32_t *out, const float *x, int32_t n,
                                                 llmrt_error *err)
{
    if (n < 1 || n > h->max_rows)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cuda argmax_head: %d rows; this head takes 1..%d", n, h->max_rows);
    if (!is_aligned16(x))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "cuda argmax_head: x must be 16-byte aligned");
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    if (n > AH_MAX_ROWS)
        return forward_many(b, h, out, x, n, err);
    switch (n) {
    case 1: launch_screen<1>(b, h, x); break;
    case 2: launch_screen<2>(b, h, x); break;
    case 3: launch_screen<3>(b, h, x); break;
    case 4: launch_screen<4>(b, h, x); break;
    case 5: launch_screen<5>(b, h, x); break;
    case 6: launch_screen<6>(b, h, x); break;
    case 7: launch_screen<7>(b, h, x); break;
    default: launch_screen<8>(b, h, x); break;
    }
    if ((st = cuda_check_launch(err, "argmax_head screen")))
        return st;
    unsigned long long *stats = b->tune.ah_stats ? h->stats : NULL;
    const dim3 grid((unsigned)h->blocks, (unsigned)n);
    switch (h->dtype) {
    case LLMRT_DTYPE_F16:
        cuda_launch(b, ah_select_kernel<__half>, grid, AH_THREADS, 0, h->best, stats, h->approx,
                    h->part, h->xnorm, h->cb, (const __half *)h->w, x, h->vocab, h->d, h->blocks);
        break;
    case LLMRT_DTYPE_BF16:
        cuda_launch(b, ah_select_kernel<__nv_bfloat16>, grid, AH_THREADS, 0, h->best, stats,
                    h->approx, h->part, h->xnorm, h->cb, (const __nv_bfloat16 *)h->w, x,
                    h->vocab, h->d, h->blocks);
        break;
    default:
        cuda_launch(b, ah_select_kernel<float>, grid, AH_THREADS, 0, h->best, stats, h->approx,
                    h->part, h->xnorm, h->cb, (const float *)h->w, x, h->vocab, h->d, h->blocks);
        break;
    }
    if ((st = cuda_check_launch(err, "argmax_head select")))
        return st;
    cuda_launch(b, ah_finish_kernel, 1, 32, 0, out, h->best, stats, n);
    return cuda_check_launch(err, "argmax_head finish");
}
