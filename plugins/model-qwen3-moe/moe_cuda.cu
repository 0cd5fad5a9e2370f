/* moe_cuda.cu — the MoE block's own ops on CUDA (the C interface is moe_cuda.h): routing,
 * sorting rows by expert, the dense experts' grouped GEMV, SwiGLU and the weighted combine.
 *
 * Why on the device: a decode step must not wait for the host to learn which experts its
 * tokens chose — the engine captures the step in a CUDA graph, and a host round trip per
 * layer would cost more than the layer. So routing writes, on the device, each token's top-k
 * and the rows sorted by expert with every expert's range; the grouped linears read them
 * there; nothing here allocates or synchronises.
 *
 *   route    one warp per token: its logits in registers (lane l holds experts l, l + 32, ...),
 *            the max and the softmax denominator by warp reductions, then K rounds of a warp
 *            argmax (the largest logit, the lowest index among equal ones), weights
 *            exp(l - max) / sum, divided by their sum when norm_topk_prob: moe_cpu.c's rule
 *   sort     one block: per-expert counts in shared memory, a warp scan to each expert's
 *            start, then every row placed at its expert's next slot (atomics: within an
 *            expert the order may vary, and no row's value depends on it)
 *   route_sort  both in one block for small steps (decode): one launch instead of two
 *   route_rows  the routing kernel writing the rows too, left in (token, choice) order, for
 *            steps of so few rows that the grouped linears run a block per row and need no
 *            sort (batch-1 decode)
 *   dense grouped GEMV  bf16/f16/f32 experts: a block takes 8 output rows (4 warps, 2 each)
 *            of one expert, the expert's weight pointer read from a device table at the row's
 *            expert; per row (decode) or per expert (rows sorted by expert: the weights read
 *            once per 8 of the expert's rows); lanes stride the input with 16-byte loads,
 *            fp32 accumulation, a warp sum; SwiGLU folded for [gate; up] experts
 *   combine  out[t] = Σ_k w[t, k] · rows[row_of[t, k]], k in order: a thread per output over
 *            (token, 256 outputs) blocks, the K loads issued together, fmaf in k order from 0
 *            (one block per token looping over H with K dependent loads per output was the
 *            step's longest small kernel)
 * Every kernel launches through llmrt_cuda_launch with the backend's protocol (PDL: wait
 * before reading anything an earlier kernel wrote, then let the next one start). */
#include "moe_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <float.h>
#include <stdint.h>
#include <stdlib.h>

#include <llmrt/cuda.h>

struct moe_cuda {
    llmrt_backend_ref be;
    cudaStream_t stream;
    int device, pdl, sm_count;
};

namespace {

constexpr int ROUTE_WARPS = 4;     /* warps (tokens) per routing block */
constexpr int SORT_THREADS = 1024;
constexpr int ROUTE_SORT_THREADS = 256; /* small steps: 8 warps route, then sort */
constexpr int SMALL_STEP_TOKENS = 64; /* route_sort in one block up to here */
constexpr int GEMV_WARPS = 4;
constexpr int GEMV_OPW = 2;        /* outputs per warp */
constexpr int GEMV_ROWS = 8;       /* rows of one expert per pass (per expert) */
constexpr int COMBINE_THREADS = 256;

__device__ __forceinline__ float warp_max(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Route token t with the calling warp (EPL = experts per lane, E <= 32 EPL). With row_expert
 * (route_rows), the token's rows in (token, choice) order too. */
template <int EPL>
__device__ __forceinline__ void route_token(const float *__restrict__ logits, int t, int E, int K,
                                            int norm_topk, int *__restrict__ topk_id,
                                            float *__restrict__ topk_w,
                                            int *__restrict__ row_expert = nullptr,
                                            int *__restrict__ row_src = nullptr,
                                            int *__restrict__ row_of = nullptr)
{
    const int lane = threadIdx.x & 31;
    const float *l = logits + (int64_t)t * E;
    float v[EPL];
    float mx = -FLT_MAX;
#pragma unroll
    for (int j = 0; j < EPL; j++) {
        const int e = lane + 32 * j;
        v[j] = e < E ? l[e] : -FLT_MAX;
        mx = fmaxf(mx, v[j]);
    }
    mx = warp_max(mx);
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < EPL; j++)
        if (lane + 32 * j < E)
            s += expf(v[j] - mx);
    s = warp_sum(s);
    uint32_t taken = 0;
    float mine = 0.0f; /* lane k keeps the k-th weight */
    for (int k = 0; k < K; k++) {
        float bv = 0.0f;
        int be = INT32_MAX;
#pragma unroll
        for (int j = 0; j < EPL; j++) {
            const int e = lane + 32 * j;
            if (e < E && !(taken & (1u << j)) && (be == INT32_MAX || v[j] > bv))
                bv = v[j], be = e; /* ascending e within a lane: ties keep the lower */
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            const int oe = __shfl_xor_sync(0xffffffffu, be, o);
            if (oe != INT32_MAX && (be == INT32_MAX || ov > bv || (ov == bv && oe < be)))
                bv = ov, be = oe;
        }
        if ((be & 31) == lane)
            taken |= 1u << (be >> 5);
        if (lane == k) {
            const int64_t r = (int64_t)t * K + k;
            mine = expf(bv - mx) / s;
            topk_id[r] = be;
            if (row_expert) {
                row_expert[r] = be;
                row_src[r] = t;
                row_of[r] = (int)r;
            }
        }
    }
    if (norm_topk) {
        const float tot = warp_sum(lane < K ? mine : 0.0f);
        mine /= tot;
    }
    if (lane < K)
        topk_w[(int64_t)t * K + lane] = mine;
}

/* Routing, a warp per token; with row_expert (steps whose rows need no sort), the rows in
 * (token, choice) order too. */
template <int EPL>
__global__ void __launch_bounds__(ROUTE_WARPS * 32)
moe_route_kernel(const float *__restrict__ logits, int T, int E, int K, int norm_topk,
                 int *__restrict__ topk_id, float *__restrict__ topk_w,
                 int *__restrict__ row_expert, int *__restrict__ row_src, int *__restrict__ row_of)
{
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int t = blockIdx.x * ROUTE_WARPS + (threadIdx.x >> 5);
    if (t < T)
        route_token<EPL>(logits, t, E, K, norm_topk, topk_id, topk_w, row_expert, row_src, row_of);
}

/* The block's sort of the N = T·K rows (topk_id [N]); sh: shared [2 E]. */
__device__ void sort_rows(const int *__restrict__ topk_id, int N, int K, int E,
                          int *__restrict__ row_expert, int *__restrict__ row_src,
                          int *__restrict__ expert_start, int *__restrict__ row_of, int *sh)
{
    int *cnt = sh, *cur = sh + E;
    for (int e = threadIdx.x; e < E; e += blockDim.x)
        cnt[e] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < N; i += blockDim.x)
        atomicAdd(&cnt[topk_id[i]], 1);
    __syncthreads();
    if (threadIdx.x < 32) { /* exclusive scan: lane l sums experts [l C, l C + C) */
        const int lane = threadIdx.x, C = (E + 31) / 32;
        int local = 0;
        for (int j = 0; j < C; j++)
            if (lane * C + j < E)
                local += cnt[lane * C + j];
        int incl = local;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int u = __shfl_up_sync(0xffffffffu, incl, o);
            if (lane >= o)
                incl += u;
        }
        int run = incl - local;
        for (int j = 0; j < C; j++) {
            const int e = lane * C + j;
            if (e < E) {
                cur[e] = run;
                expert_start[e] = run;
                run += cnt[e];
            }
        }
        if (lane == 31)
            expert_start[E] = incl;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < N; i += blockDim.x) {
        const int e = topk_id[i], pos = atomicAdd(&cur[e], 1);
        row_expert[pos] = e;
        row_src[pos] = i / K;
        row_of[i] = pos;
    }
}

__global__ void __launch_bounds__(SORT_THREADS)
moe_sort_kernel(const int *__restrict__ topk_id, int N, int K, int E, int *__restrict__ row_expert,
                int *__restrict__ row_src, int *__restrict__ expert_start, int *__restrict__ row_of)
{
    extern __shared__ int moe_sort_sh[];
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    sort_rows(topk_id, N, K, E, row_expert, row_src, expert_start, row_of, moe_sort_sh);
}

/* Small steps: the block's warps route the tokens (topk_id / topk_w to global memory), then
 * the block sorts them. */
template <int EPL>
__global__ void __launch_bounds__(ROUTE_SORT_THREADS)
moe_route_sort_kernel(const float *__restrict__ logits, int T, int E, int K, int norm_topk,
                      int *__restrict__ topk_id, float *__restrict__ topk_w,
                      int *__restrict__ row_expert, int *__restrict__ row_src,
                      int *__restrict__ expert_start, int *__restrict__ row_of)
{
    extern __shared__ int moe_sort_sh[];
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    for (int t = threadIdx.x >> 5; t < T; t += ROUTE_SORT_THREADS / 32)
        route_token<EPL>(logits, t, E, K, norm_topk, topk_id, topk_w);
    __threadfence_block();
    __syncthreads();
    sort_rows(topk_id, T * K, K, E, row_expert, row_src, expert_start, row_of, moe_sort_sh);
}

/* ---- the dense grouped GEMV ---- */

template <typename W> struct wload;
template <> struct wload<__nv_bfloat16> {
    static constexpr int VEC = 8;
    static __device__ __forceinline__ void get(const __nv_bfloat16 *p, float (&f)[8])
    {
        const uint4 u = __ldg(reinterpret_cast<const uint4 *>(p));
        const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            f[2 * i] = __uint_as_float(w[i] << 16);
            f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
        }
    }
};
template <> struct wload<__half> {
    static constexpr int VEC = 8;
    static __device__ __forceinline__ void get(const __half *p, float (&f)[8])
    {
        const uint4 u = __ldg(reinterpret_cast<const uint4 *>(p));
        const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float2 v = __half22float2(*reinterpret_cast<const __half2 *>(&w[i]));
            f[2 * i] = v.x, f[2 * i + 1] = v.y;
        }
    }
};
template <> struct wload<float> {
    static constexpr int VEC = 4;
    static __device__ __forceinline__ void get(const float *p, float (&f)[4])
    {
        const float4 u = __ldg(reinterpret_cast<const float4 *>(p));
        f[0] = u.x, f[1] = u.y, f[2] = u.z, f[3] = u.w;
    }
};

/* Rows [r0, r0 + nr) (nr <= GEMV_ROWS) of expert weight w: each warp its GEMV_OPW outputs
 * (GLU: one output from weight rows o and o + half). */
template <typename W, bool GLU>
__device__ __forceinline__ void gemv_rows(float *__restrict__ y, const float *__restrict__ x,
                                          const W *__restrict__ w, const int *__restrict__ row_src,
                                          int r0, int nr, int w_rows, int in, int o0)
{
    constexpr int VEC = wload<W>::VEC;
    constexpr int NW = GLU ? 2 : GEMV_OPW; /* weight rows per warp */
    const int lane = threadIdx.x & 31;
    const int half = w_rows / 2;
    const int n_out = GLU ? half : w_rows;
    int wr[NW];
    bool live[NW];
#pragma unroll
    for (int j = 0; j < NW; j++) {
        const int o = GLU ? o0 + j * half : o0 + j;
        live[j] = GLU ? o0 < half : o < n_out;
        wr[j] = live[j] ? o : 0;
    }
    float acc[NW][GEMV_ROWS];
#pragma unroll
    for (int j = 0; j < NW; j++)
#pragma unroll
        for (int r = 0; r < GEMV_ROWS; r++)
            acc[j][r] = 0.0f;
    const float *xr[GEMV_ROWS];
#pragma unroll
    for (int r = 0; r < GEMV_ROWS; r++) {
        const int row = r0 + (r < nr ? r : 0);
        xr[r] = x + (int64_t)(row_src ? row_src[row] : row) * in;
    }
    for (int k = lane * VEC; k < in; k += 32 * VEC) {
        float wf[NW][VEC];
#pragma unroll
        for (int j = 0; j < NW; j++)
            wload<W>::get(w + (int64_t)wr[j] * in + k, wf[j]);
#pragma unroll
        for (int r = 0; r < GEMV_ROWS; r++) {
            if (r >= nr)
                break;
            float xv[VEC];
#pragma unroll
            for (int e = 0; e < VEC; e += 4) {
                const float4 t = __ldg(reinterpret_cast<const float4 *>(xr[r] + k + e));
                xv[e] = t.x, xv[e + 1] = t.y, xv[e + 2] = t.z, xv[e + 3] = t.w;
            }
#pragma unroll
            for (int j = 0; j < NW; j++)
#pragma unroll
                for (int e = 0; e < VEC; e++)
                    acc[j][r] = fmaf(wf[j][e], xv[e], acc[j][r]);
        }
    }
#pragma unroll
    for (int r = 0; r < GEMV_ROWS; r++) {
        if (r >= nr)
            break;
#pragma unroll
        for (int j = 0; j < NW; j++)
            acc[j][r] = warp_sum(acc[j][r]);
        if (lane != 0)
            continue;
        float *yr = y + (int64_t)(r0 + r) * n_out;
        if (GLU) {
            if (live[0])
                yr[o0] = acc[0][r] / (1.0f + expf(-acc[0][r])) * acc[1][r];
        } else {
#pragma unroll
            for (int j = 0; j < NW; j++)
                if (live[j])
                    yr[o0 + j] = acc[j][r];
        }
    }
}

/* Block (bx, gy): outputs of warp w are bx·GEMV_WARPS·OPW + w·OPW ... (GLU: one per warp),
 * of row gy (per row) or of expert gy's rows, GEMV_ROWS at a time (per expert). */
template <typename W, bool GLU>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
moe_dense_gemv_kernel(float *__restrict__ y, const float *__restrict__ x,
                      const void *const *__restrict__ table, const int *__restrict__ row_expert,
                      const int *__restrict__ row_src, const int *__restrict__ expert_start,
                      int n_rows, int w_rows, int in, int per_expert)
{
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int gy = blockIdx.y, warp = threadIdx.x >> 5;
    const int per_warp = GLU ? 1 : GEMV_OPW;
    const int o0 = (blockIdx.x * GEMV_WARPS + warp) * per_warp;
    int e, r0, r1;
    if (per_expert) {
        e = gy, r0 = expert_start[gy], r1 = expert_start[gy + 1];
    } else {
        if (gy >= n_rows)
            return;
        e = row_expert[gy], r0 = gy, r1 = gy + 1;
    }
    if (e < 0 || r0 >= r1)
        return;
    const W *w = static_cast<const W *>(table[e]);
    if (!w)
        return;
    for (int c = r0; c < r1; c += GEMV_ROWS)
        gemv_rows<W, GLU>(y, x, w, row_src, c, r1 - c < GEMV_ROWS ? r1 - c : GEMV_ROWS, w_rows,
                          in, o0);
}

/* The scalar path for inputs not a multiple of 8 (or unaligned): one output per thread. */
template <bool GLU>
__global__ void moe_dense_scalar_kernel(float *__restrict__ y, const float *__restrict__ x,
                                        const void *const *__restrict__ table, int dtype,
                                        const int *__restrict__ row_expert,
                                        const int *__restrict__ row_src, int n_rows, int w_rows,
                                        int in)
{
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int r = blockIdx.y;
    const int n_out = GLU ? w_rows / 2 : w_rows;
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n_rows || o >= n_out)
        return;
    const int e = row_expert[r];
    if (e < 0 || !table[e])
        return;
    const float *xr = x + (int64_t)(row_src ? row_src[r] : r) * in;
    float acc[2] = {0.0f, 0.0f};
    for (int h = 0; h < (GLU ? 2 : 1); h++) {
        const int64_t row = o + (int64_t)h * n_out;
        for (int k = 0; k < in; k++) {
            float wv;
            if (dtype == 0)
                wv = static_cast<const float *>(table[e])[row * in + k];
            else if (dtype == 1)
                wv = __half2float(static_cast<const __half *>(table[e])[row * in + k]);
            else
                wv = __bfloat162float(static_cast<const __nv_bfloat16 *>(table[e])[row * in + k]);
            acc[h] = fmaf(wv, xr[k], acc[h]);
        }
    }
    y[(int64_t)r * n_out + o] = GLU ? acc[0] / (1.0f + expf(-acc[0])) * acc[1] : acc[0];
}

__global__ void moe_swiglu_kernel(float *__restrict__ out, const float *__restrict__ gu, int n,
                                  int d)
{
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int64_t total = (int64_t)n * d;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / d, c = i - r * d;
        const float g = gu[r * 2 * d + c];
        out[i] = g / (1.0f + expf(-g)) * gu[r * 2 * d + d + c];
    }
}

/* Block (t, y): outputs h = y·COMBINE_THREADS + thread of token t, one per thread; the K
 * (token, choice) weights and rows loaded together, then summed with fmaf in k order from
 * 0.0f: the bits of a loop over k. */
template <int KMAX>
__global__ void __launch_bounds__(COMBINE_THREADS)
moe_combine_kernel(float *__restrict__ out, const float *__restrict__ rows,
                   const float *__restrict__ topk_w, const int *__restrict__ row_of, int K, int H)
{
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int t = blockIdx.x, h = blockIdx.y * COMBINE_THREADS + threadIdx.x;
    if (h >= H)
        return;
    float wk[KMAX], v[KMAX];
#pragma unroll
    for (int k = 0; k < KMAX; k++) {
        if (k < K) {
            wk[k] = topk_w[(int64_t)t * K + k];
            v[k] = rows[(int64_t)row_of[(int64_t)t * K + k] * H + h];
        }
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < KMAX; k++)
        if (k < K)
            s = fmaf(wk[k], v[k], s);
    out[(int64_t)t * H + h] = s;
}

} /* namespace */

static llmrt_status mfail(llmrt_error *err, cudaError_t e, const char *what)
{
    return llmrt_cuda_fail(err, LLMRT_ERR_DEVICE, e, "qwen3_moe cuda", what);
}

static llmrt_status use_device(const moe_cuda *c, llmrt_error *err)
{
    cudaError_t e = cudaSetDevice(c->device);
    return e == cudaSuccess ? LLMRT_OK : mfail(err, e, "cudaSetDevice");
}

static llmrt_status check(llmrt_error *err, const char *kernel)
{
    return llmrt_cuda_check_launch(err, "qwen3_moe cuda", kernel);
}

extern "C" llmrt_status moe_cuda_create(const llmrt_backend_ref *be, moe_cuda **out,
                                        llmrt_error *err)
{
    *out = NULL;
    const llmrt_cuda_ext *cx = llmrt_cuda_ext_of(be);
    if (!cx)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "qwen3_moe cuda: backend '%s' does not offer the \"" LLMRT_EXT_CUDA
                          "\" extension",
                          be->name ? be->name : "?");
    moe_cuda *c = (moe_cuda *)calloc(1, sizeof *c);
    if (!c)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "qwen3_moe cuda: out of memory");
    c->be = *be;
    c->stream = cx->stream(be->b);
    c->device = cx->device(be->b);
    c->pdl = cx->pdl(be->b) != 0;
    cudaError_t e = cudaSetDevice(c->device);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&c->sm_count, cudaDevAttrMultiProcessorCount, c->device);
    if (e != cudaSuccess) {
        free(c);
        return mfail(err, e, "selecting the backend's device");
    }
    *out = c;
    return LLMRT_OK;
}

extern "C" void moe_cuda_destroy(moe_cuda *c)
{
    free(c);
}

typedef void (*route_fn)(const float *, int, int, int, int, int *, float *, int *, int *, int *);
typedef void (*route_sort_fn)(const float *, int, int, int, int, int *, float *, int *, int *,
                              int *, int *);

struct route_fns {
    route_fn route;
    route_sort_fn route_sort;
};

template <int EPL> static void pick_route(int E, route_fns *f)
{
    if constexpr (EPL < 32) {
        if (E > 32 * EPL) {
            pick_route<EPL * 2>(E, f);
            return;
        }
    }
    f->route = moe_route_kernel<EPL>;
    f->route_sort = moe_route_sort_kernel<EPL>;
}

static llmrt_status check_routing(int32_t E, int32_t K, llmrt_error *err)
{
    if (E < 1 || E > MOE_CUDA_MAX_EXPERTS || K < 1 || K > MOE_CUDA_MAX_TOPK || K > E)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "qwen3_moe cuda: routing %d experts, top %d (1..%d experts, top 1..%d)",
                          E, K, MOE_CUDA_MAX_EXPERTS, MOE_CUDA_MAX_TOPK);
    return LLMRT_OK;
}

/* The routing kernel over T tokens (row_expert NULL: topk only). */
static llmrt_status launch_route(moe_cuda *c, const float *logits, int32_t T, int32_t E,
                                 int32_t K, int norm_topk, int32_t *topk_id, float *topk_w,
                                 int32_t *row_expert, int32_t *row_src, int32_t *row_of,
                                 llmrt_error *err)
{
    if (T <= 0)
        return LLMRT_OK;
    llmrt_status st = check_routing(E, K, err);
    if (st || (st = use_device(c, err)))
        return st;
    route_fns f;
    pick_route<1>(E, &f);
    llmrt_cuda_launch(c->stream, c->pdl, f.route,
                      dim3((unsigned)((T + ROUTE_WARPS - 1) / ROUTE_WARPS)),
                      dim3(ROUTE_WARPS * 32), 0, logits, T, E, K, norm_topk, topk_id, topk_w,
                      row_expert, row_src, row_of);
    return check(err, "moe_route_kernel");
}

extern "C" llmrt_status moe_cuda_route(moe_cuda *c, const float *logits, int32_t T, int32_t E,
                                       int32_t K, int norm_topk, int32_t *topk_id,
                                       float *topk_w, llmrt_error *err)
{
    return launch_route(c, logits, T, E, K, norm_topk, topk_id, topk_w, NULL, NULL, NULL, err);
}

extern "C" llmrt_status moe_cuda_route_rows(moe_cuda *c, const float *logits, int32_t T,
                                            int32_t E, int32_t K, int norm_topk,
                                            int32_t *topk_id, float *topk_w, int32_t *row_expert,
                                            int32_t *row_src, int32_t *row_of, llmrt_error *err)
{
    return launch_route(c, logits, T, E, K, norm_topk, topk_id, topk_w, row_expert, row_src,
                        row_of, err);
}

extern "C" llmrt_status moe_cuda_sort(moe_cuda *c, const int32_t *topk_id, int32_t T, int32_t K,
                                      int32_t E, int32_t *row_expert, int32_t *row_src,
                                      int32_t *expert_start, int32_t *row_of, llmrt_error *err)
{
    if (T <= 0)
        return LLMRT_OK;
    llmrt_status st = use_device(c, err);
    if (st)
        return st;
    llmrt_cuda_launch(c->stream, c->pdl, moe_sort_kernel, dim3(1), dim3(SORT_THREADS),
                      (size_t)2 * E * sizeof(int), topk_id, T * K, K, E, row_expert, row_src,
                      expert_start, row_of);
    return check(err, "moe_sort_kernel");
}

/* Routing and sorting of a step: one launch for small steps, two above. */
extern "C" llmrt_status moe_cuda_route_sort(moe_cuda *c, const float *logits, int32_t T,
                                            int32_t E, int32_t K, int norm_topk,
                                            int32_t *topk_id, float *topk_w, int32_t *row_expert,
                                            int32_t *row_src, int32_t *expert_start,
                                            int32_t *row_of, llmrt_error *err)
{
    if (T <= 0)
        return LLMRT_OK;
    if (T > SMALL_STEP_TOKENS) {
        llmrt_status st = moe_cuda_route(c, logits, T, E, K, norm_topk, topk_id, topk_w, err);
        return st ? st
                  : moe_cuda_sort(c, topk_id, T, K, E, row_expert, row_src, expert_start, row_of,
                                  err);
    }
    llmrt_status st = check_routing(E, K, err);
    if (st || (st = use_device(c, err)))
        return st;
    route_fns f;
    pick_route<1>(E, &f);
    llmrt_cuda_launch(c->stream, c->pdl, f.route_sort, dim3(1), dim3(ROUTE_SORT_THREADS),
                      (size_t)2 * E * sizeof(int), logits, T, E, K, norm_topk, topk_id, topk_w,
                      row_expert, row_src, expert_start, row_of);
    return check(err, "moe_route_sort_kernel");
}

typedef void (*gemv_fn)(float *, const float *, const void *const *, const int *, const int *,
                        const int *, int, int, int, int);

template <bool GLU> static gemv_fn pick_gemv(llmrt_dtype dt)
{
    switch (dt) {
    case LLMRT_DTYPE_BF16: return moe_dense_gemv_kernel<__nv_bfloat16, GLU>;
    case LLMRT_DTYPE_F16: return moe_dense_gemv_kernel<__half, GLU>;
    default: return moe_dense_gemv_kernel<float, GLU>;
    }
}

extern "C" llmrt_status moe_cuda_dense_grouped(moe_cuda *c, const void *const *w_table,
                                               llmrt_dtype dt, int64_t w_rows, int64_t in,
                                               float *y, const float *x,
                                               const int32_t *row_expert, const int32_t *row_src,
                                               const int32_t *expert_start, int32_t n_rows,
                                               int32_t n_experts, int glu, llmrt_error *err)
{
    if (n_rows <= 0)
        return LLMRT_OK;
    if (dt != LLMRT_DTYPE_BF16 && dt != LLMRT_DTYPE_F16 && dt != LLMRT_DTYPE_F32)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "qwen3_moe cuda: dense experts of dtype %s (F32, F16 or BF16)",
                          llmrt_dtype_name(dt));
    if (w_rows > INT32_MAX || in > INT32_MAX || (glu && w_rows % 2 != 0))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "qwen3_moe cuda: experts of [%lld, %lld]",
                          (long long)w_rows, (long long)in);
    llmrt_status st = use_device(c, err);
    if (st)
        return st;
    const int64_t n_out = glu ? w_rows / 2 : w_rows;
    const int vec = dt == LLMRT_DTYPE_F32 ? 4 : 8;
    if (in % vec != 0 || ((uintptr_t)x & 15u) != 0) {
        const dim3 grid((unsigned)((n_out + 127) / 128), (unsigned)n_rows);
        const int code = dt == LLMRT_DTYPE_F32 ? 0 : dt == LLMRT_DTYPE_F16 ? 1 : 2;
        if (glu)
            llmrt_cuda_launch(c->stream, c->pdl, moe_dense_scalar_kernel<true>, grid, dim3(128), 0,
                              y, x, w_table, code, row_expert, row_src, n_rows, (int)w_rows,
                              (int)in);
        else
            llmrt_cuda_launch(c->stream, c->pdl, moe_dense_scalar_kernel<false>, grid, dim3(128),
                              0, y, x, w_table, code, row_expert, row_src, n_rows, (int)w_rows,
                              (int)in);
        return check(err, "moe_dense_scalar_kernel");
    }
    const int per_expert = expert_start != NULL && n_rows > GEMV_ROWS;
    const int per_block = GEMV_WARPS * (glu ? 1 : GEMV_OPW);
    const dim3 grid((unsigned)((n_out + per_block - 1) / per_block),
                    (unsigned)(per_expert ? n_experts : n_rows));
    gemv_fn k = glu ? pick_gemv<true>(dt) : pick_gemv<false>(dt);
    llmrt_cuda_launch(c->stream, c->pdl, k, grid, dim3(GEMV_WARPS * 32), 0, y, x, w_table,
                      row_expert, row_src, expert_start, n_rows, (int)w_rows, (int)in, per_expert);
    return check(err, "moe_dense_gemv_kernel");
}

extern "C" llmrt_status moe_cuda_swiglu(moe_cuda *c, float *out, const float *gu, int32_t n,
                                        int32_t d, llmrt_error *err)
{
    if (n <= 0 || d <= 0)
        return LLMRT_OK;
    llmrt_status st = use_device(c, err);
    if (st)
        return st;
    int64_t blocks = ((int64_t)n * d + 255) / 256;
    const int64_t cap = (int64_t)c->sm_count * 16;
    llmrt_cuda_launch(c->stream, c->pdl, moe_swiglu_kernel,
                      dim3((unsigned)(blocks < cap ? blocks : cap)), dim3(256), 0, out, gu, n, d);
    return check(err, "moe_swiglu_kernel");
}

extern "C" llmrt_status moe_cuda_combine(moe_cuda *c, float *out, const float *rows,
                                         const float *topk_w, const int32_t *row_of, int32_t T,
                                         int32_t K, int32_t H, llmrt_error *err)
{
    if (T <= 0 || H <= 0)
        return LLMRT_OK;
    if (K < 1 || K > MOE_CUDA_MAX_TOPK || H > 65535 * COMBINE_THREADS)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "qwen3_moe cuda: combine over hidden %d, top %d (hidden up to %d, top "
                          "1..%d)",
                          H, K, 65535 * COMBINE_THREADS, MOE_CUDA_MAX_TOPK);
    llmrt_status st = use_device(c, err);
    if (st)
        return st;
    const dim3 grid((unsigned)T, (unsigned)((H + COMBINE_THREADS - 1) / COMBINE_THREADS));
    if (K <= 8)
        llmrt_cuda_launch(c->stream, c->pdl, moe_combine_kernel<8>, grid, dim3(COMBINE_THREADS), 0,
                          out, rows, topk_w, row_of, K, H);
    else
        llmrt_cuda_launch(c->stream, c->pdl, moe_combine_kernel<MOE_CUDA_MAX_TOPK>, grid,
                          dim3(COMBINE_THREADS), 0, out, rows, topk_w, row_of, K, H);
    return check(err, "moe_combine_kernel");
}
