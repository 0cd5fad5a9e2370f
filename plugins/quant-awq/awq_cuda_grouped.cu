/* awq_cuda_grouped.cu — grouped AWQ linears on CUDA: a MoE layer's experts in one launch
 * (the C interface is awq_cuda_grouped.h; quant.h linear_forward_grouped).
 *
 * Why: at decode a MoE layer runs each token through its K chosen experts, and which those
 * are is known only on the device. One launch covers every (row, expert) pair: a block takes
 * 32 output rows of one expert's repacked weights (awq_cuda_layout.cuh, the same layout and
 * the same tensor-core dequant-GEMV arithmetic as awq_cuda.cu's decode kernel: f16 q - z
 * exact, mma.sync m16n8k16 against up to 8 tokens, the group scale applied in f32), the
 * expert's weight pointers read from a device table at the row's expert. So a step reads
 * only the chosen experts' weights, never waits for the host, and can be captured in a graph.
 *
 * Two grids. Per row (few rows, each its own expert: decode): grid.y = rows, one token per
 * block. Per expert (rows sorted by expert, linear_start given, more than 8 rows: batched
 * decode and prefill): grid.y = experts; a block walks its expert's rows 8 (or, for wide
 * inputs, fewer) at a time, staging them in shared memory, so each expert's weights are read
 * once per chunk of its rows and experts nobody chose cost an empty block. Each token's
 * result depends only on its own column of the mma: the same whichever grid, chunk or batch.
 *
 * K is split between KW warps of a block (the smallest power of two covering the input's
 * 256-wide iterations, at most 8), summed in shared memory in warp order: deterministic, no
 * atomics. SwiGLU can finish in the epilogue ([gate; up] experts: a block takes gate m-tile
 * mb and the matching up m-tile). */
#include "awq_cuda_grouped.h"
#include "awq_cuda_layout.cuh"

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llmrt/cuda.h>
#include <llmrt/quant.h>

namespace {

constexpr int MT = 2;            /* m-tiles (16 rows) per block: AWQ_CL_MPAD / 16 */
constexpr int ITK = AWQ_CL_KPAD; /* inputs per warp iteration */
constexpr int NTOK = 8;          /* tokens per chunk: one mma n-tile */
constexpr int KW_MAX = 8;
constexpr size_t SMEM_BUDGET = 48 * 1024; /* without opting in to more dynamic shared memory */

/* One expert's repacked tensors (NULL: not this group's). */
struct grp_expert {
    const uint4 *wq;   /* [n_mtiles][kpad/64][32] */
    const uint2 *meta; /* [n_mtiles][kpad/group][8] */
};

__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t h2_bits(__half2 h) { return *reinterpret_cast<uint32_t *>(&h); }
__device__ __forceinline__ __half2 bits_h2(uint32_t u) { return *reinterpret_cast<__half2 *>(&u); }

__device__ __forceinline__ uint4 ld_stream16(const void *p)
{
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}

__device__ __forceinline__ uint32_t word_of(const uint4 &v, int j)
{
    return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

/* Word of a staged x row holding input pair p (inputs 2p, 2p + 1): per k-tile 8 words, ordered
 * so that lane t's B fragment (pairs t and t + 4) is the adjacent words 2t, 2t + 1. */
__device__ __forceinline__ int stage_word(int p)
{
    const int q = p & 7;
    return (p >> 3) * 8 + 2 * (q & 3) + (q >> 2);
}

/* Iteration `it`'s weights and meta of the block's two m-tiles. */
template <int GROUP>
__device__ __forceinline__ void load_iter(uint4 (&w)[MT][ITK / 64], uint2 (&m)[MT][ITK / GROUP],
                                          const uint4 *const (&wbase)[MT],
                                          const uint2 *const (&mbase)[MT], int it)
{
    constexpr int LD_IT = ITK / 64, GPI = ITK / GROUP;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int c = 0; c < LD_IT; c++)
            w[mt][c] = ld_stream16(wbase[mt] + (int64_t)(it * LD_IT + c) * 32);
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int gi = 0; gi < GPI; gi++)
            m[mt][gi] = __ldg(mbase[mt] + (int64_t)(it * GPI + gi) * 8);
}

/* acc += the iteration's weights times the staged tokens (C fragment per m-tile: rows
 * 16 mt + g and + 8, tokens 2t and 2t + 1). Columns past ntok repeat token 0; they are never
 * stored. */
template <int GROUP>
__device__ __forceinline__ void compute_iter(float (&acc)[MT][4], const uint4 (&wv)[MT][ITK / 64],
                                             const uint2 (&mv)[MT][ITK / GROUP], int it, int g,
                                             int t, const uint32_t *xs, int xstride, int ntok)
{
    constexpr int KT_IT = ITK / 16, GPI = ITK / GROUP, KPG = GROUP / 16;
    const __half2 sixteenth = __float2half2_rn(0.0625f);
    const __half2 h960 = __float2half2_rn(960.0f);
    const uint32_t *xrow = xs + (g < ntok ? g : 0) * xstride;
#pragma unroll
    for (int gi = 0; gi < GPI; gi++) {
        float pacc[MT][4];
        __half2 zlo[MT], nzhi[MT];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            const __half2 zz = bits_h2(mv[mt][gi].y); /* (1024 + z[r0], 1024 + z[r1]) */
            zlo[mt] = __low2half2(zz);
            nzhi[mt] = __hsub2(h960, __high2half2(zz)); /* -(64 + z[r1]) */
#pragma unroll
            for (int c = 0; c < 4; c++)
                pacc[mt][c] = 0.0f;
        }
#pragma unroll
        for (int kk = 0; kk < KPG; kk++) {
            const int j = gi * KPG + kk;
            const int k0 = (it * KT_IT + j) * 16;
            const uint2 bb = *reinterpret_cast<const uint2 *>(xrow + (k0 >> 4) * 8 + 2 * t);
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                const uint32_t w = word_of(wv[mt][j / 4], j % 4);
                uint32_t a[4];
                a[0] = h2_bits(__hsub2(bits_h2(awq_cl_frag_raw(w, 0)), zlo[mt]));
                a[1] = h2_bits(__hfma2(bits_h2(awq_cl_frag_raw(w, 1)), sixteenth, nzhi[mt]));
                a[2] = h2_bits(__hsub2(bits_h2(awq_cl_frag_raw(w, 2)), zlo[mt]));
                a[3] = h2_bits(__hfma2(bits_h2(awq_cl_frag_raw(w, 3)), sixteenth, nzhi[mt]));
                mma_16816(pacc[mt], a, bb.x, bb.y);
            }
        }
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            const float2 s = __half22float2(bits_h2(mv[mt][gi].x)); /* (s[r0], s[r1]) */
            acc[mt][0] = fmaf(s.x, pacc[mt][0], acc[mt][0]);
            acc[mt][1] = fmaf(s.x, pacc[mt][1], acc[mt][1]);
            acc[mt][2] = fmaf(s.y, pacc[mt][2], acc[mt][2]);
            acc[mt][3] = fmaf(s.y, pacc[mt][3], acc[mt][3]);
        }
    }
}

/* The sum over the KW warps, in warp order, of block row r (0..31) and token tok (< 8). */
template <int KW>
__device__ __forceinline__ float red_sum(const float (&red)[KW][MT * 4][32], int r, int tok)
{
    const int rr = r & 15;
    const int v = (r >> 4) * 4 + ((rr >> 3) << 1) + (tok & 1);
    const int ln = (rr & 7) * 4 + (tok >> 1);
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < KW; k++)
        s += red[k][v][ln];
    return s;
}

/* Block (mb, gy): output rows 32 mb .. 32 mb + 31 (GLU: gate rows 16 mb .., up rows
 * out/2 + 16 mb ..) of one expert — row gy's (per row) or expert gy's rows in chunks of
 * ntok_max (per expert). y [n_rows, out] (GLU: [n_rows, out/2]). */
template <int GROUP, int KW, bool GLU>
__global__ void __launch_bounds__(KW * 32)
awq_grouped_kernel(float *__restrict__ y, const float *__restrict__ x,
                   const grp_expert *__restrict__ experts, const int *__restrict__ row_linear,
                   const int *__restrict__ row_src, const int *__restrict__ linear_start,
                   int n_rows, int out, int in, int kpad, int xstride, int ntok_max,
                   int per_expert)
{
    __shared__ float red[KW][MT * 4][32];
    extern __shared__ uint32_t grp_xs[];
    llmrt_cuda_pdl_wait(); /* the rows and x come from the kernels before */
    llmrt_cuda_pdl_trigger();
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int mb = blockIdx.x, gy = blockIdx.y;
    int e, r0, r1;
    if (per_expert) {
        e = gy;
        r0 = linear_start[gy];
        r1 = linear_start[gy + 1];
    } else {
        if (gy >= n_rows)
            return;
        e = row_linear[gy];
        r0 = gy;
        r1 = gy + 1;
    }
    if (e < 0 || r0 >= r1)
        return;
    const grp_expert ex = experts[e];
    if (!ex.wq)
        return;
    const int n_iters = kpad / ITK, n_grp = kpad / GROUP;
    const int64_t n_super = kpad / 64;
    const int64_t m0 = GLU ? mb : (int64_t)mb * MT, mstep = GLU ? out / 32 : 1;
    const uint4 *wbase[MT];
    const uint2 *mbase[MT];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        const int64_t m = m0 + mt * mstep;
        wbase[mt] = ex.wq + (m * n_super) * 32 + lane;
        mbase[mt] = ex.meta + (m * n_grp) * 8 + g;
    }
    const int kq = kpad / 4;
    for (int c0 = r0; c0 < r1; c0 += ntok_max) {
        const int nt = r1 - c0 < ntok_max ? r1 - c0 : ntok_max;
        __syncthreads(); /* the previous chunk is done with grp_xs and red */
        for (int i = threadIdx.x; i < nt * kq; i += KW * 32) {
            const int tok = i / kq, c = i - tok * kq;
            const int r = c0 + tok, src = row_src ? row_src[r] : r;
            float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (4 * c < in)
                v = __ldg(reinterpret_cast<const float4 *>(x + (int64_t)src * in + 4 * c));
            uint32_t *row = grp_xs + tok * xstride;
            row[stage_word(2 * c)] = h2_bits(__floats2half2_rn(v.x, v.y));
            row[stage_word(2 * c + 1)] = h2_bits(__floats2half2_rn(v.z, v.w));
        }
        __syncthreads();
        float acc[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int c = 0; c < 4; c++)
                acc[mt][c] = 0.0f;
        uint4 wv[MT][ITK / 64];
        uint2 mv[MT][ITK / GROUP];
        for (int it = w; it < n_iters; it += KW) {
            load_iter<GROUP>(wv, mv, wbase, mbase, it);
            compute_iter<GROUP>(acc, wv, mv, it, g, t, grp_xs, xstride, nt);
        }
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int c = 0; c < 4; c++)
                red[w][mt * 4 + c][lane] = acc[mt][c];
        __syncthreads();
        if constexpr (GLU) {
            const int half = out / 2;
            for (int idx = threadIdx.x; idx < nt * 16; idx += KW * 32) {
                const int tok = idx >> 4, i = idx & 15;
                const float gate = red_sum<KW>(red, i, tok);
                const float up = red_sum<KW>(red, 16 + i, tok);
                y[(int64_t)(c0 + tok) * half + mb * 16 + i] = gate / (1.0f + expf(-gate)) * up;
            }
        } else {
            for (int idx = threadIdx.x; idx < MT * 4 * 32; idx += KW * 32) {
                const int ln = idx & 31, v = idx >> 5;
                const int c = v & 3, mt = v >> 2;
                const int r = (mb * MT + mt) * 16 + (ln >> 2) + (c >> 1) * 8;
                const int col = 2 * (ln & 3) + (c & 1);
                if (r >= out || col >= nt)
                    continue;
                float s = 0.0f;
#pragma unroll
                for (int k = 0; k < KW; k++)
                    s += red[k][v][ln];
                y[(int64_t)(c0 + col) * out + r] = s;
            }
        }
    }
}

typedef void (*grouped_fn)(float *, const float *, const grp_expert *, const int *, const int *,
                           const int *, int, int, int, int, int, int, int);

template <int GROUP, bool GLU> grouped_fn pick_kw(int kw)
{
    switch (kw) {
    case 8: return awq_grouped_kernel<GROUP, 8, GLU>;
    case 4: return awq_grouped_kernel<GROUP, 4, GLU>;
    case 2: return awq_grouped_kernel<GROUP, 2, GLU>;
    default: return awq_grouped_kernel<GROUP, 1, GLU>;
    }
}

template <bool GLU> grouped_fn pick(int group, int kw)
{
    switch (group) {
    case 32: return pick_kw<32, GLU>(kw);
    case 64: return pick_kw<64, GLU>(kw);
    default: return pick_kw<128, GLU>(kw);
    }
}

} /* namespace */

struct awq_cuda_group {
    llmrt_backend_ref be;
    cudaStream_t stream;
    int device, pdl;
    int32_t n, max_rows;
    int64_t in, out, group, kpad, n_mtiles;
    int kw;           /* K-splitting warps per block */
    int xstride;      /* words per staged token row */
    int ntok_max;     /* tokens per chunk (per expert) */
    uint32_t flags;   /* the folds it was made for */
    grp_expert *table; /* device [n] */
};

static llmrt_status gfail(llmrt_error *err, cudaError_t e, const char *what)
{
    return llmrt_cuda_fail(err, LLMRT_ERR_DEVICE, e, "awq cuda grouped", what);
}

extern "C" llmrt_status awq_cuda_group_create(const llmrt_backend_ref *be,
                                              const awq_cuda_linear *const *ls, int32_t n,
                                              int32_t max_rows, uint32_t flags,
                                              awq_cuda_group **out, llmrt_error *err)
{
    *out = NULL;
    const llmrt_cuda_ext *cx = llmrt_cuda_ext_of(be);
    if (!cx)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "awq cuda grouped: backend '%s' does not offer \"" LLMRT_EXT_CUDA "\"",
                          be->name ? be->name : "?");
    awq_cuda_layout first = {0};
    int have = 0;
    for (int32_t i = 0; i < n; i++) {
        if (!ls[i])
            continue;
        awq_cuda_layout l;
        awq_cuda_linear_layout(ls[i], &l);
        if (!have)
            first = l, have = 1;
        else if (l.in != first.in || l.out != first.out || l.group != first.group ||
                 l.kpad != first.kpad)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "awq cuda grouped: linear %d is [%lld, %lld] in groups of %lld, "
                              "the first [%lld, %lld] in groups of %lld",
                              i, (long long)l.out, (long long)l.in, (long long)l.group,
                              (long long)first.out, (long long)first.in, (long long)first.group);
    }
    if (!have)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "awq cuda grouped: no linears");
    if ((flags & LLMRT_FUSE_OUT_SWIGLU) && first.out % 32 != 0)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "awq cuda grouped: SwiGLU needs out_features a multiple of 32 (gate "
                          "and up halves of whole 16-row tiles), not %lld",
                          (long long)first.out);
    if (first.out > INT32_MAX / 64 || first.in > INT32_MAX / 2 || max_rows < 1)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "awq cuda grouped: [%lld, %lld] x %d rows is too large",
                          (long long)first.out, (long long)first.in, max_rows);
    awq_cuda_group *g = (awq_cuda_group *)calloc(1, sizeof *g);
    if (!g)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "awq cuda grouped: out of memory");
    g->be = *be;
    g->stream = cx->stream(be->b);
    g->device = cx->device(be->b);
    g->pdl = cx->pdl(be->b) != 0;
    g->n = n, g->max_rows = max_rows, g->flags = flags;
    g->in = first.in, g->out = first.out, g->group = first.group, g->kpad = first.kpad;
    g->n_mtiles = first.n_mtiles;
    const int64_t n_iters = first.kpad / ITK;
    g->kw = 1;
    while (g->kw < n_iters && g->kw < KW_MAX)
        g->kw *= 2;
    g->xstride = (int)(first.kpad / 2 + 8); /* token rows 8 banks apart */
    const size_t red_bytes = (size_t)g->kw * MT * 4 * 32 * sizeof(float);
    const size_t row_bytes = (size_t)g->xstride * 4;
    const size_t room = SMEM_BUDGET > red_bytes ? SMEM_BUDGET - red_bytes : 0;
    g->ntok_max = (int)(room / row_bytes < NTOK ? room / row_bytes : NTOK);
    if (g->ntok_max < 1) {
        free(g);
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "awq cuda grouped: in_features %lld is too wide to stage one token in "
                          "shared memory",
                          (long long)first.in);
    }
    grp_expert *host = (grp_expert *)calloc((size_t)n, sizeof *host);
    llmrt_status st = host ? LLMRT_OK : llmrt_fail(err, LLMRT_ERR_NOMEM, "awq cuda grouped: out of memory");
    for (int32_t i = 0; st == LLMRT_OK && i < n; i++) {
        if (!ls[i])
            continue;
        awq_cuda_layout l;
        awq_cuda_linear_layout(ls[i], &l);
        host[i].wq = reinterpret_cast<const uint4 *>(l.wq);
        host[i].meta = reinterpret_cast<const uint2 *>(l.meta);
    }
    void *dev = NULL;
    cudaError_t e = cudaSuccess;
    if (st == LLMRT_OK && (e = cudaSetDevice(g->device)) != cudaSuccess)
        st = gfail(err, e, "cudaSetDevice");
    if (st == LLMRT_OK)
        st = be->vt->dev_alloc(be->b, (size_t)n * sizeof *host, &dev, err);
    if (st == LLMRT_OK &&
        ((e = cudaMemcpyAsync(dev, host, (size_t)n * sizeof *host, cudaMemcpyHostToDevice,
                              g->stream)) != cudaSuccess ||
         (e = cudaStreamSynchronize(g->stream)) != cudaSuccess))
        st = gfail(err, e, "copying the expert table");
    free(host);
    if (st) {
        if (dev)
            be->vt->dev_free(be->b, dev);
        free(g);
        return st;
    }
    g->table = (grp_expert *)dev;
    *out = g;
    return LLMRT_OK;
}

extern "C" void awq_cuda_group_destroy(awq_cuda_group *g)
{
    if (!g)
        return;
    cudaSetDevice(g->device);
    cudaStreamSynchronize(g->stream); /* queued work may still read the table */
    g->be.vt->dev_free(g->be.b, g->table);
    cudaGetLastError();
    free(g);
}

extern "C" llmrt_status awq_cuda_group_forward(awq_cuda_group *g, float *y, const float *x,
                                               const int32_t *row_linear, const int32_t *row_src,
                                               const int32_t *linear_start, int32_t n_rows,
                                               uint32_t flags, llmrt_error *err)
{
    if (n_rows <= 0)
        return LLMRT_OK;
    if (((uintptr_t)x & 15u) != 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "awq cuda grouped: x must be 16-byte aligned");
    cudaError_t e = cudaSetDevice(g->device);
    if (e != cudaSuccess)
        return gfail(err, e, "cudaSetDevice");
    const bool glu = (flags & LLMRT_FUSE_OUT_SWIGLU) != 0;
    const int per_expert = linear_start != NULL && n_rows > NTOK;
    const int ntok = per_expert ? g->ntok_max : 1;
    const dim3 grid((unsigned)(glu ? g->out / 32 : g->n_mtiles / MT),
                    (unsigned)(per_expert ? g->n : n_rows));
    const size_t smem = (size_t)ntok * (size_t)g->xstride * 4;
    grouped_fn k = glu ? pick<true>((int)g->group, g->kw) : pick<false>((int)g->group, g->kw);
    llmrt_cuda_launch(g->stream, g->pdl, k, grid, dim3((unsigned)(g->kw * 32)), smem, y, x,
                      (const grp_expert *)g->table, row_linear, row_src, linear_start, n_rows,
                      (int)g->out, (int)g->in, (int)g->kpad, g->xstride, ntok, per_expert);
    return llmrt_cuda_check_launch(err, "awq cuda grouped", "awq_grouped_kernel");
}
