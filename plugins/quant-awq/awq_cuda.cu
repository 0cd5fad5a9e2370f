/* awq_cuda.cu — AWQ int4 linears on the CUDA backend (the C interface is awq_cuda.h).
 *
 * Why this shape: at decode a linear is a GEMV bound by reading its packed weights once
 * (Qwen3-8B: 3.61 GB of int4 per token), so the kernel must stream them at HBM speed with
 * little arithmetic per byte. Weights are repacked at load (on the device, by a kernel) into
 * tensor-core fragment order (awq_cuda_layout.cuh): every 16-byte load is one lane's A
 * fragments for four 16x16 tiles, dequantised with the 0x6400 magic-number trick (two LOP3
 * and one HSUB2/HFMA2 per four weights, q - z exact in f16), multiplied on the tensor cores
 * (mma.sync m16n8k16, f16 in, f32 accumulate) against up to 32 tokens, and the group scale is
 * applied in f32 after each group. The K dimension is split across warps when the matrix has
 * few rows, and the last warp of each row block sums the splits in a fixed order
 * (deterministic, one launch, graph-capturable).
 *
 * For n > 32 tokens (prefill) tensor cores at full tile sizes win: the linear is dequantised
 * into an f16 scratch matrix and multiplied by the backend's gemm (cuBLAS). */
#include "awq_cuda.h"
#include "awq_cuda_layout.cuh"

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AWQ_WARPS 4         /* warps per block of the GEMV kernel */
#define AWQ_MT 2            /* m-tiles (16 rows each) per warp: AWQ_CL_MPAD / 16 */
#define AWQ_MAX_N 32        /* tokens the tensor-core GEMV handles (4 n-tiles of 8) */
#define AWQ_ITK AWQ_CL_KPAD /* inputs per kernel iteration */

struct awq_cuda_ctx {
    llmrt_backend_ref be;
    cudaStream_t stream;
    int device;
    int sm_count;
    void *staging;            /* raw qweight | qzeros | scales during a load */
    size_t staging_bytes;
    float *part;              /* split-K partials [ksplit][AWQ_MAX_N][outp] */
    size_t part_bytes;
    unsigned int *counters;   /* per row block, zero between launches */
    size_t n_counters;
    __half *deq;              /* dequantised f16 [out, in] for n > AWQ_MAX_N */
    size_t deq_bytes;
};

struct awq_cuda_linear {
    int64_t in, out, group;
    int64_t kpad, outp;       /* padded inputs and rows */
    int64_t n_mtiles;
    int ksplit;               /* warps sharing one row block's K range */
    int iters_per_split;      /* AWQ_ITK-input iterations per warp */
    uint32_t *wq;             /* [n_mtiles][kpad/64][32][4] */
    uint32_t *meta;           /* [n_mtiles][kpad/group][8][2] */
    size_t wq_bytes, meta_bytes;
};

/* ---- errors and device selection ---- */

static llmrt_status cfail(llmrt_error *err, cudaError_t e, const char *what)
{
    return llmrt_fail(err, LLMRT_ERR_DEVICE, "awq cuda: %s: %s (%s)", what, cudaGetErrorName(e),
                      cudaGetErrorString(e));
}

static llmrt_status use_device(const awq_cuda_ctx *ctx, llmrt_error *err)
{
    cudaError_t e = cudaSetDevice(ctx->device);
    return e == cudaSuccess ? LLMRT_OK : cfail(err, e, "cudaSetDevice");
}

static llmrt_status check_launch(llmrt_error *err, const char *kernel)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        return LLMRT_OK;
    char what[128];
    snprintf(what, sizeof what, "launching %s", kernel);
    return cfail(err, e, what);
}

/* Grow a device buffer owned by the context (allocation happens at load time only). */
static llmrt_status grow(awq_cuda_ctx *ctx, void **p, size_t *have, size_t want, int zero,
                         const char *what, llmrt_error *err)
{
    if (*have >= want)
        return LLMRT_OK;
    void *np = NULL;
    llmrt_status st = ctx->be.vt->dev_alloc(ctx->be.b, want, &np, err);
    if (st) {
        llmrt_fail(err, st, "awq cuda: allocating %zu bytes for %s: %s", want, what, err->msg);
        return st;
    }
    if (zero) {
        cudaError_t e = cudaMemsetAsync(np, 0, want, ctx->stream);
        if (e != cudaSuccess) {
            ctx->be.vt->dev_free(ctx->be.b, np);
            return cfail(err, e, "cudaMemsetAsync");
        }
    }
    if (*p) {
        /* the old buffer may still be read by queued work */
        cudaStreamSynchronize(ctx->stream);
        ctx->be.vt->dev_free(ctx->be.b, *p);
    }
    *p = np;
    *have = want;
    return LLMRT_OK;
}

/* ---- load: repack on the device ---- */

__global__ void awq_repack_words(uint32_t *__restrict__ wq, const int32_t *__restrict__ qweight,
                                 int64_t out, int64_t in, int64_t kpad, int64_t n_mtiles)
{
    const int64_t n_kt = kpad / 16;
    const int64_t total = n_mtiles * n_kt * 32;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int lane = (int)(i % 32);
        const int64_t kt = (i / 32) % n_kt;
        const int64_t mt = i / 32 / n_kt;
        wq[awq_cl_word_index(kpad, mt, kt, lane)] = awq_cl_word(qweight, out, in, mt, kt, lane);
    }
}

__global__ void awq_repack_meta(uint32_t *__restrict__ meta, const int32_t *__restrict__ qzeros,
                                const uint16_t *__restrict__ scales, int64_t out, int64_t in,
                                int64_t group, int64_t kpad, int64_t n_mtiles)
{
    const int64_t n_grp = kpad / group;
    const int64_t total = n_mtiles * n_grp * 8;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int g = (int)(i % 8);
        const int64_t grp = (i / 8) % n_grp;
        const int64_t mt = i / 8 / n_grp;
        uint32_t m0, m1;
        awq_cl_meta(qzeros, scales, out, in, group, mt, grp, g, &m0, &m1);
        const int64_t at = awq_cl_meta_index(kpad, group, mt, grp, g);
        meta[at] = m0;
        meta[at + 1] = m1;
    }
}

/* Dense W [out, in] from the repacked tensors (tests: f32; prefill: f16). */
template <typename OT>
__global__ void awq_dequant_kernel(OT *__restrict__ w, const uint32_t *__restrict__ wq,
                                   const uint32_t *__restrict__ meta, int64_t out, int64_t in,
                                   int64_t group, int64_t kpad)
{
    const int64_t total = out * in;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / in, k = i % in;
        const int64_t mt = r / 16;
        const int rr = (int)(r % 16), g = rr % 8, hi = rr / 8;
        const int kk = (int)(k % 16);
        const int t = (kk % 8) / 2;
        const uint32_t word = wq[awq_cl_word_index(kpad, mt, k / 16, g * 4 + t)];
        const uint32_t q = (word >> (4 * awq_cl_nibble(hi, kk))) & 0xfu;
        const int64_t at = awq_cl_meta_index(kpad, group, mt, k / group, g);
        const uint32_t sbits = (meta[at] >> (16 * hi)) & 0xffffu;
        const uint32_t z = (meta[at + 1] >> (16 * hi)) & 0xfu;
        const float s = __half2float(__ushort_as_half((unsigned short)sbits));
        const float v = ((float)q - (float)z) * s;
        if constexpr (sizeof(OT) == 4)
            w[i] = v;
        else
            w[i] = __float2half_rn(v);
    }
}

static unsigned grid_for(const awq_cuda_ctx *ctx, int64_t total, int threads)
{
    int64_t b = (total + threads - 1) / threads;
    const int64_t cap = (int64_t)ctx->sm_count * 32;
    if (b > cap)
        b = cap;
    return (unsigned)(b > 0 ? b : 1);
}

extern "C" llmrt_status awq_cuda_create(const llmrt_backend_ref *backend, awq_cuda_ctx **out,
                                        llmrt_error *err)
{
    *out = NULL;
    awq_cuda_ctx *ctx = (awq_cuda_ctx *)calloc(1, sizeof *ctx);
    if (!ctx)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "awq cuda: out of memory");
    ctx->be = *backend;
    ctx->stream = (cudaStream_t)(backend->vt->native_handle
                                     ? backend->vt->native_handle(backend->b, "cuda.stream")
                                     : NULL);
    if (!ctx->stream) {
        free(ctx);
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "awq cuda: backend '%s' has no \"cuda.stream\" native handle",
                          backend->name ? backend->name : "?");
    }
    cudaError_t e = cudaStreamGetDevice(ctx->stream, &ctx->device);
    if (e == cudaSuccess)
        e = cudaSetDevice(ctx->device);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&ctx->sm_count, cudaDevAttrMultiProcessorCount, ctx->device);
    if (e != cudaSuccess) {
        free(ctx);
        return cfail(err, e, "reading the backend stream's device");
    }
    *out = ctx;
    return LLMRT_OK;
}

extern "C" void awq_cuda_destroy(awq_cuda_ctx *ctx)
{
    if (!ctx)
        return;
    cudaSetDevice(ctx->device);
    cudaStreamSynchronize(ctx->stream);
    void *bufs[] = {ctx->staging, ctx->part, ctx->counters, ctx->deq};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        if (bufs[i])
            ctx->be.vt->dev_free(ctx->be.b, bufs[i]);
    cudaGetLastError();
    free(ctx);
}

/* Split K so that about 8 warps per SM have work; never more splits than iterations. */
static void choose_split(const awq_cuda_ctx *ctx, awq_cuda_linear *l)
{
    const int64_t n_iters = l->kpad / AWQ_ITK;
    const int64_t n_blocks = l->n_mtiles / AWQ_MT; /* row blocks of 32 rows */
    const int64_t target = (int64_t)ctx->sm_count * 8;
    int64_t ks = (target + n_blocks - 1) / n_blocks;
    if (ks > n_iters)
        ks = n_iters;
    if (ks < 1)
        ks = 1;
    const int64_t per = (n_iters + ks - 1) / ks;
    l->iters_per_split = (int)per;
    l->ksplit = (int)((n_iters + per - 1) / per);
}

extern "C" llmrt_status awq_cuda_load(awq_cuda_ctx *ctx, const int32_t *qweight,
                                      const int32_t *qzeros, const uint16_t *scales, int64_t in,
                                      int64_t out, int64_t group, awq_cuda_linear **out_linear,
                                      llmrt_error *err)
{
    *out_linear = NULL;
    llmrt_status st = use_device(ctx, err);
    if (st)
        return st;
    if (AWQ_ITK % group != 0 || in % 32 != 0)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "awq cuda: group size %lld with in_features %lld is not supported "
                          "(groups of 32, 64 or 128; in_features a multiple of 32)",
                          (long long)group, (long long)in);
    awq_cuda_linear *l = (awq_cuda_linear *)calloc(1, sizeof *l);
    if (!l)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "awq cuda: out of memory");
    l->in = in;
    l->out = out;
    l->group = group;
    l->kpad = awq_cl_round_up(in, AWQ_CL_KPAD);
    l->outp = awq_cl_round_up(out, AWQ_CL_MPAD);
    l->n_mtiles = l->outp / 16;
    l->wq_bytes = (size_t)l->n_mtiles * (size_t)(l->kpad / 16) * 32 * sizeof(uint32_t);
    l->meta_bytes = (size_t)l->n_mtiles * (size_t)(l->kpad / group) * 8 * 2 * sizeof(uint32_t);
    choose_split(ctx, l);

    const size_t qw_bytes = (size_t)in * (size_t)(out / 8) * 4;
    const size_t qz_bytes = (size_t)(in / group) * (size_t)(out / 8) * 4;
    const size_t sc_bytes = (size_t)(in / group) * (size_t)out * 2;
    const size_t qz_off = (qw_bytes + 255) / 256 * 256;
    const size_t sc_off = qz_off + (qz_bytes + 255) / 256 * 256;
    const size_t stage_bytes = sc_off + sc_bytes;
    cudaError_t e;
    void *wq = NULL, *meta = NULL;

    if ((st = ctx->be.vt->dev_alloc(ctx->be.b, l->wq_bytes, &wq, err)) != LLMRT_OK)
        goto fail;
    if ((st = ctx->be.vt->dev_alloc(ctx->be.b, l->meta_bytes, &meta, err)) != LLMRT_OK)
        goto fail;
    l->wq = (uint32_t *)wq;
    l->meta = (uint32_t *)meta;
    if ((st = grow(ctx, &ctx->staging, &ctx->staging_bytes, stage_bytes, 0, "load staging", err)))
        goto fail;
    {
        /* split-K partials and counters for the largest linear so far */
        const size_t part = (size_t)l->ksplit * AWQ_MAX_N * (size_t)l->outp * sizeof(float);
        if (l->ksplit > 1 &&
            (st = grow(ctx, (void **)&ctx->part, &ctx->part_bytes, part, 0, "split-K partials", err)))
            goto fail;
        const size_t cnt = (size_t)(l->n_mtiles / AWQ_MT) * sizeof(unsigned int);
        size_t have = ctx->n_counters * sizeof(unsigned int);
        if ((st = grow(ctx, (void **)&ctx->counters, &have, cnt, 1, "split-K counters", err)))
            goto fail;
        ctx->n_counters = have / sizeof(unsigned int);
        const size_t deq = (size_t)out * (size_t)in * sizeof(__half);
        if ((st = grow(ctx, (void **)&ctx->deq, &ctx->deq_bytes, deq, 0, "prefill dequant scratch",
                       err)))
            goto fail;
    }
    {
        char *stage = (char *)ctx->staging;
        /* pageable sources: each call returns once the source has been consumed */
        if ((e = cudaMemcpyAsync(stage, qweight, qw_bytes, cudaMemcpyHostToDevice, ctx->stream)) ||
            (e = cudaMemcpyAsync(stage + qz_off, qzeros, qz_bytes, cudaMemcpyHostToDevice,
                                 ctx->stream)) ||
            (e = cudaMemcpyAsync(stage + sc_off, scales, sc_bytes, cudaMemcpyHostToDevice,
                                 ctx->stream))) {
            st = cfail(err, e, "copying the AWQ tensors to the device");
            goto fail;
        }
        const int64_t words = l->n_mtiles * (l->kpad / 16) * 32;
        awq_repack_words<<<grid_for(ctx, words, 256), 256, 0, ctx->stream>>>(
            l->wq, (const int32_t *)stage, out, in, l->kpad, l->n_mtiles);
        if ((st = check_launch(err, "awq_repack_words")))
            goto fail;
        const int64_t metas = l->n_mtiles * (l->kpad / group) * 8;
        awq_repack_meta<<<grid_for(ctx, metas, 256), 256, 0, ctx->stream>>>(
            l->meta, (const int32_t *)(stage + qz_off), (const uint16_t *)(stage + sc_off), out, in,
            group, l->kpad, l->n_mtiles);
        if ((st = check_launch(err, "awq_repack_meta")))
            goto fail;
    }
    *out_linear = l;
    return LLMRT_OK;
fail:
    if (wq)
        ctx->be.vt->dev_free(ctx->be.b, wq);
    if (meta)
        ctx->be.vt->dev_free(ctx->be.b, meta);
    free(l);
    return st;
}

extern "C" void awq_cuda_free(awq_cuda_ctx *ctx, awq_cuda_linear *l)
{
    if (!l)
        return;
    cudaSetDevice(ctx->device);
    cudaStreamSynchronize(ctx->stream); /* queued work may still read it */
    ctx->be.vt->dev_free(ctx->be.b, l->wq);
    ctx->be.vt->dev_free(ctx->be.b, l->meta);
    free(l);
}

extern "C" uint64_t awq_cuda_bytes(const awq_cuda_linear *l)
{
    return l ? (uint64_t)(l->wq_bytes + l->meta_bytes) : 0;
}

extern "C" llmrt_status awq_cuda_dequant(awq_cuda_ctx *ctx, const awq_cuda_linear *l, float *out,
                                         llmrt_error *err)
{
    llmrt_status st = use_device(ctx, err);
    if (st)
        return st;
    const size_t bytes = (size_t)l->out * (size_t)l->in * sizeof(float);
    void *d = NULL;
    if ((st = ctx->be.vt->dev_alloc(ctx->be.b, bytes, &d, err)))
        return st;
    awq_dequant_kernel<float><<<grid_for(ctx, l->out * l->in, 256), 256, 0, ctx->stream>>>(
        (float *)d, l->wq, l->meta, l->out, l->in, l->group, l->kpad);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(out, d, bytes, cudaMemcpyDeviceToHost, ctx->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(ctx->stream);
    ctx->be.vt->dev_free(ctx->be.b, d);
    return e == cudaSuccess ? LLMRT_OK : cfail(err, e, "dequantising to the host");
}

/* ---- forward, n <= 32: tensor-core dequant-GEMV ---- */

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

/* Warp unit u = (row block mb of 32 rows, K split ks). Each lane holds, per m-tile and
 * n-tile, the C fragment: rows r0 = 16 mt + g and r0 + 8, tokens 8 nt + 2 t and + 1. */
template <int GROUP, int NT>
__global__ void __launch_bounds__(AWQ_WARPS * 32)
awq_gemv_kernel(float *__restrict__ y, float *__restrict__ part, unsigned int *__restrict__ counters,
                const float *__restrict__ x, const uint32_t *__restrict__ wq,
                const uint32_t *__restrict__ meta, int n, int out, int in, int kpad, int n_blocks,
                int ksplit, int iters_per_split)
{
    constexpr int KT_IT = AWQ_ITK / 16;    /* k-tiles per iteration (16) */
    constexpr int LD_IT = KT_IT / 4;       /* 16-byte loads per m-tile per iteration (4) */
    constexpr int GPI = AWQ_ITK / GROUP;   /* groups per iteration */
    constexpr int KPG = GROUP / 16;        /* k-tiles per group */

    const int lane = threadIdx.x & 31;
    const int unit = blockIdx.x * AWQ_WARPS + (threadIdx.x >> 5);
    if (unit >= n_blocks * ksplit)
        return;
    const int mb = unit / ksplit, ks = unit % ksplit;
    const int g = lane >> 2, t = lane & 3;
    const int n_iters = kpad / AWQ_ITK;
    const int it0 = ks * iters_per_split;
    const int it1 = min(n_iters, it0 + iters_per_split);
    const int64_t n_super = kpad / 64; /* 16-byte loads per lane per m-tile over all of K */
    const int n_grp = kpad / GROUP;

    const uint4 *wbase[AWQ_MT];
    const uint2 *mbase[AWQ_MT];
#pragma unroll
    for (int mt = 0; mt < AWQ_MT; mt++) {
        const int64_t m = (int64_t)mb * AWQ_MT + mt;
        wbase[mt] = reinterpret_cast<const uint4 *>(wq) + (m * n_super) * 32 + lane;
        mbase[mt] = reinterpret_cast<const uint2 *>(meta) + (m * n_grp) * 8 + g;
    }

    float acc[AWQ_MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < AWQ_MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int c = 0; c < 4; c++)
                acc[mt][nt][c] = 0.0f;

    const __half2 sixteenth = __float2half2_rn(0.0625f);
    const __half2 h960 = __float2half2_rn(960.0f);

    /* weights and meta of iteration it into (w, m) */
    auto load = [&](uint4 (&w)[AWQ_MT][LD_IT], uint2 (&m)[AWQ_MT][GPI], int it) {
#pragma unroll
        for (int mt = 0; mt < AWQ_MT; mt++)
#pragma unroll
            for (int c = 0; c < LD_IT; c++)
                w[mt][c] = ld_stream16(wbase[mt] + (int64_t)(it * LD_IT + c) * 32);
#pragma unroll
        for (int mt = 0; mt < AWQ_MT; mt++)
#pragma unroll
            for (int gi = 0; gi < GPI; gi++)
                m[mt][gi] = __ldg(mbase[mt] + (int64_t)(it * GPI + gi) * 8);
    };
    /* NT = 1 (decode): a software pipeline, iteration it + 1's loads in flight while it is
     * computed (+~56 registers; for NT > 1 that would spill, and more tokens per weight byte
     * hide the latency anyway) */
    constexpr bool PIPE = NT == 1;
    uint4 wv[AWQ_MT][LD_IT], wn[AWQ_MT][LD_IT];
    uint2 mv[AWQ_MT][GPI], mn[AWQ_MT][GPI];
    if (PIPE && it0 < it1)
        load(wv, mv, it0);
    for (int it = it0; it < it1; it++) {
        if constexpr (PIPE) {
            if (it + 1 < it1)
                load(wn, mn, it + 1);
        } else {
            load(wv, mv, it);
        }

#pragma unroll
        for (int gi = 0; gi < GPI; gi++) {
            float pacc[AWQ_MT][NT][4];
            __half2 zlo[AWQ_MT], nzhi[AWQ_MT];
#pragma unroll
            for (int mt = 0; mt < AWQ_MT; mt++) {
                const __half2 zz = bits_h2(mv[mt][gi].y); /* (1024 + z[r0], 1024 + z[r1]) */
                zlo[mt] = __low2half2(zz);
                nzhi[mt] = __hsub2(h960, __high2half2(zz)); /* -(64 + z[r1]) */
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
#pragma unroll
                    for (int c = 0; c < 4; c++)
                        pacc[mt][nt][c] = 0.0f;
            }
#pragma unroll
            for (int kk = 0; kk < KPG; kk++) {
                const int j = gi * KPG + kk;              /* k-tile within the iteration */
                const int k0 = (it * KT_IT + j) * 16;     /* first input of the k-tile */
                uint32_t b[NT][2];
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    const int row = nt * 8 + g;
                    float2 f0 = make_float2(0.0f, 0.0f), f1 = f0;
                    if (row < n && k0 < in) {
                        const float *xr = x + (int64_t)row * in + k0 + 2 * t;
                        f0 = __ldg(reinterpret_cast<const float2 *>(xr));
                        f1 = __ldg(reinterpret_cast<const float2 *>(xr + 8));
                    }
                    b[nt][0] = h2_bits(__float22half2_rn(f0));
                    b[nt][1] = h2_bits(__float22half2_rn(f1));
                }
#pragma unroll
                for (int mt = 0; mt < AWQ_MT; mt++) {
                    const uint32_t w = word_of(wv[mt][j / 4], j % 4);
                    uint32_t a[4];
                    a[0] = h2_bits(__hsub2(bits_h2(awq_cl_frag_raw(w, 0)), zlo[mt]));
                    a[1] = h2_bits(__hfma2(bits_h2(awq_cl_frag_raw(w, 1)), sixteenth, nzhi[mt]));
                    a[2] = h2_bits(__hsub2(bits_h2(awq_cl_frag_raw(w, 2)), zlo[mt]));
                    a[3] = h2_bits(__hfma2(bits_h2(awq_cl_frag_raw(w, 3)), sixteenth, nzhi[mt]));
#pragma unroll
                    for (int nt = 0; nt < NT; nt++)
                        mma_16816(pacc[mt][nt], a, b[nt][0], b[nt][1]);
                }
            }
            /* the group's scales, in f32 */
#pragma unroll
            for (int mt = 0; mt < AWQ_MT; mt++) {
                const float2 s = __half22float2(bits_h2(mv[mt][gi].x)); /* (s[r0], s[r1]) */
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    acc[mt][nt][0] = fmaf(s.x, pacc[mt][nt][0], acc[mt][nt][0]);
                    acc[mt][nt][1] = fmaf(s.x, pacc[mt][nt][1], acc[mt][nt][1]);
                    acc[mt][nt][2] = fmaf(s.y, pacc[mt][nt][2], acc[mt][nt][2]);
                    acc[mt][nt][3] = fmaf(s.y, pacc[mt][nt][3], acc[mt][nt][3]);
                }
            }
        }
        if constexpr (PIPE) {
#pragma unroll
            for (int mt = 0; mt < AWQ_MT; mt++) {
#pragma unroll
                for (int c = 0; c < LD_IT; c++)
                    wv[mt][c] = wn[mt][c];
#pragma unroll
                for (int gi = 0; gi < GPI; gi++)
                    mv[mt][gi] = mn[mt][gi];
            }
        }
    }

    const int outp = n_blocks * AWQ_MT * 16;
    if (ksplit == 1) {
#pragma unroll
        for (int mt = 0; mt < AWQ_MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    const int r = (mb * AWQ_MT + mt) * 16 + g + (c >> 1) * 8;
                    const int col = nt * 8 + 2 * t + (c & 1);
                    if (r < out && col < n)
                        y[(int64_t)col * out + r] = acc[mt][nt][c];
                }
        return;
    }
    /* split K: publish this warp's partial; the last warp of the row block adds them up */
#pragma unroll
    for (int mt = 0; mt < AWQ_MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int r = (mb * AWQ_MT + mt) * 16 + g + (c >> 1) * 8;
                const int col = nt * 8 + 2 * t + (c & 1);
                if (col < n)
                    part[((int64_t)ks * AWQ_MAX_N + col) * outp + r] = acc[mt][nt][c];
            }
    __threadfence();
    __syncwarp();
    unsigned int prev = 0;
    if (lane == 0)
        prev = atomicAdd(&counters[mb], 1u);
    prev = __shfl_sync(0xffffffffu, prev, 0);
    if (prev != (unsigned)ksplit - 1)
        return;
    __threadfence();
    const int r = mb * AWQ_MT * 16 + lane; /* 32 rows, one per lane */
    for (int col = 0; col < n; col++) {
        float s = 0.0f;
        for (int k = 0; k < ksplit; k++)
            s += __ldcg(&part[((int64_t)k * AWQ_MAX_N + col) * outp + r]);
        if (r < out)
            y[(int64_t)col * out + r] = s;
    }
    if (lane == 0)
        counters[mb] = 0; /* ready for the next launch */
}

template <int GROUP, int NT>
static void launch_gemv(const awq_cuda_ctx *ctx, const awq_cuda_linear *l, float *y, const float *x,
                        int n)
{
    const int n_blocks = (int)(l->n_mtiles / AWQ_MT);
    const int units = n_blocks * l->ksplit;
    const unsigned grid = (unsigned)((units + AWQ_WARPS - 1) / AWQ_WARPS);
    awq_gemv_kernel<GROUP, NT><<<grid, AWQ_WARPS * 32, 0, ctx->stream>>>(
        y, ctx->part, ctx->counters, x, l->wq, l->meta, n, (int)l->out, (int)l->in, (int)l->kpad,
        n_blocks, l->ksplit, l->iters_per_split);
}

template <int GROUP>
static void launch_gemv_nt(const awq_cuda_ctx *ctx, const awq_cuda_linear *l, float *y,
                           const float *x, int n)
{
    if (n <= 8)
        launch_gemv<GROUP, 1>(ctx, l, y, x, n);
    else if (n <= 16)
        launch_gemv<GROUP, 2>(ctx, l, y, x, n);
    else
        launch_gemv<GROUP, 4>(ctx, l, y, x, n);
}

extern "C" llmrt_status awq_cuda_forward(awq_cuda_ctx *ctx, const awq_cuda_linear *l, float *y,
                                         const float *x, int32_t n, llmrt_error *err)
{
    if (n <= 0)
        return LLMRT_OK;
    llmrt_status st = use_device(ctx, err);
    if (st)
        return st;
    if (n <= AWQ_MAX_N && ((uintptr_t)x & 7u) == 0 && l->in <= INT32_MAX / 2 &&
        l->out <= INT32_MAX / 64) {
        switch (l->group) {
        case 32: launch_gemv_nt<32>(ctx, l, y, x, n); break;
        case 64: launch_gemv_nt<64>(ctx, l, y, x, n); break;
        default: launch_gemv_nt<128>(ctx, l, y, x, n); break;
        }
        return check_launch(err, "awq_gemv_kernel");
    }
    /* prefill: dense f16 W in scratch, then the backend's gemm (cuBLAS, fp32 accumulation) */
    awq_dequant_kernel<__half><<<grid_for(ctx, l->out * l->in, 256), 256, 0, ctx->stream>>>(
        ctx->deq, l->wq, l->meta, l->out, l->in, l->group, l->kpad);
    if ((st = check_launch(err, "awq_dequant_kernel")))
        return st;
    llmrt_tensor w;
    memset(&w, 0, sizeof w);
    w.dtype = LLMRT_DTYPE_F16;
    w.ndim = 2;
    w.shape[0] = l->out;
    w.shape[1] = l->in;
    w.data = ctx->deq;
    return ctx->be.vt->gemm(ctx->be.b, y, x, &w, n, err);
}
