/* awq_cuda.cu — AWQ int4 linears on the CUDA backend (the C interface is awq_cuda.h).
 *
 * Why this shape: at decode a linear is a GEMV bound by reading its packed weights once
 * (Qwen3-8B: 3.61 GB of int4 per token), so the kernel must stream them at HBM speed with
 * little arithmetic per byte. Weights are repacked at load (on the device, by a kernel) into
 * tensor-core fragment order (awq_cuda_layout.cuh): every 16-byte load is one lane's A
 * fragments for four 16x16 tiles, dequantised with the 0x6400 magic-number trick (per 32-bit
 * word of eight weights one shift, four LOP3 and four HSUB2/HFMA2; q - z exact in f16; the
 * instruction count per weight is what bounds the decode GEMV), multiplied on the tensor cores
 * (mma.sync m16n8k16, f16 in, f32 accumulate) against up to 32 tokens, and the group scale is
 * applied in f32 after each group.
 *
 * The GEMV (n <= 32): a block owns 32 output rows and KW warps that split K between them,
 * summed in shared memory in a fixed order (deterministic, no atomics, one launch). KW is
 * chosen per linear at load from the occupancy calculator (shortest chain of waves x
 * iterations per warp): small linears get many K-splitting warps, wide ones few. For decode
 * (n <= 8) the block stages x once in shared memory as f16 pairs, ordered so a k-tile's B
 * fragment is one 8-byte shared load (staging took the big linears from ~2.2 to ~2.85 TB/s on
 * the H200; the one-load order 2.15 -> 2.12 ms per decode step); at 16
 * warps per block it also keeps two iterations of weights in flight (DB below). Each warp
 * issues its first 4 KB of weight loads before waiting on the previous kernel (programmatic
 * dependent launch, when the backend uses it): weights never change, activations do.
 *
 * The kernels run on the backend's stream and device, and launch the way its kernels launch,
 * all three from the backend's "llmrt.cuda" extension (llmrt/cuda.h: llmrt_cuda_launch, the
 * PDL wait and trigger).
 *
 * Several linears reading the same input (q/k/v, gate/up) load as one (awq_cuda_load_parts):
 * each part is repacked into its own range of m-tiles, so one launch computes all of them.
 * The decode GEMV of a [gate; up] linear can also finish the MLP's SwiGLU (the GLU variant,
 * awq_cuda_forward_fused): each block then takes a gate m-tile and the matching up m-tile and
 * writes silu(gate) * up — one launch and one buffer round trip less per layer (H200, Qwen3-8B:
 * decode 2.32 -> 2.25 ms).
 *
 * Which kernel serves n rows (awq_cuda_forward; the bounds are [quant.awq] tune knobs, so an
 * H200 run can sweep them):
 *   n <= 8 (mma_min - 1)       this GEMV (decode);
 *   9 <= n <= 256 (mma_max)    the batch kernel (awq_cuda_mma.cu): each weight read once per
 *                              step for up to 32 tokens a block, x staged per block, the same
 *                              arithmetic as this GEMV, so a token's outputs do not depend on
 *                              its batch;
 *   above                      the linear dequantised into an f16 scratch matrix and multiplied
 *                              by the backend's gemm (cuBLAS): prefill at full tile sizes.
 * With mma=0 the GEMV serves up to 32 rows and cuBLAS the rest (the layout before the batch
 * kernel). Counting for Qwen3-8B's gate/up at n = 32: 52 MB of weights (13 us at 4 TB/s)
 * against 6.4 GFLOP (~11 us on mma.sync): the batch kernel must overlap both; at n = 256,
 * 51 GFLOP dominate and cuBLAS's larger tiles start to pay for the dequant round trip. */
#include "awq_cuda_internal.cuh"

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llmrt/cuda.h>

/* ---- errors and device selection ---- */

static llmrt_status cfail(llmrt_error *err, cudaError_t e, const char *what)
{
    return llmrt_cuda_fail(err, LLMRT_ERR_DEVICE, e, "awq cuda", what);
}

static llmrt_status use_device(const awq_cuda_ctx *ctx, llmrt_error *err)
{
    cudaError_t e = cudaSetDevice(ctx->device);
    return e == cudaSuccess ? LLMRT_OK : cfail(err, e, "cudaSetDevice");
}

static llmrt_status check_launch(llmrt_error *err, const char *kernel)
{
    return llmrt_cuda_check_launch(err, "awq cuda", kernel);
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

/* Scratch of the context at least `want` bytes (awq_cuda_mma.cu's tuning borrows it). */
llmrt_status awq_cuda_grow(awq_cuda_ctx *ctx, void **p, size_t *have, size_t want,
                           const char *what, llmrt_error *err)
{
    return grow(ctx, p, have, want, 0, what, err);
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

/* Prefill: dense f16 W [out, in] from the repacked tensors, one thread per fragment word
 * (8 weights: rows r0, r0 + 8, inputs ka, ka + 1, ka + 8, ka + 9), written as f16 pairs.
 * Launched on the forward stream (the PDL wait first: the previous gemm may still read deq). */
__global__ void awq_dequant_f16_kernel(__half *__restrict__ w, const uint32_t *__restrict__ wq,
                                       const uint32_t *__restrict__ meta, int64_t out,
                                       int64_t in, int group, int64_t kpad, int64_t n_words)
{
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int64_t n_super = kpad / 64;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n_words;
         i += (int64_t)gridDim.x * blockDim.x) {
        /* i = ((mt * n_super + c) * 32 + lane) * 4 + j, k-tile kt = 4 c + j */
        const int j = (int)(i & 3), lane = (int)((i >> 2) & 31);
        const int64_t mc = i >> 7;
        const int64_t mt = mc / n_super, kt = (mc - mt * n_super) * 4 + j;
        const int g = lane >> 2, t = lane & 3;
        const int64_t ka = 16 * kt + 2 * t;
        if (ka >= in)
            continue;
        const uint32_t word = wq[i];
        const int64_t at = awq_cl_meta_index(kpad, group, mt, (16 * kt) / group, g);
        const uint32_t sb = meta[at], zb = meta[at + 1];
#pragma unroll
        for (int hi = 0; hi < 2; hi++) {
            const int64_t r = 16 * mt + g + 8 * hi;
            if (r >= out)
                continue;
            const float s = __half2float(__ushort_as_half((unsigned short)((sb >> (16 * hi)) & 0xffffu)));
            const float z = (float)((zb >> (16 * hi)) & 0xfu);
#pragma unroll
            for (int p = 0; p < 2; p++) { /* inputs ka + 8p, ka + 8p + 1 */
                const float q0 = (float)((word >> (4 * awq_cl_nibble(hi, 2 * t + 8 * p))) & 0xfu);
                const float q1 = (float)((word >> (4 * awq_cl_nibble(hi, 2 * t + 8 * p + 1))) & 0xfu);
                if (ka + 8 * p < in)
                    *reinterpret_cast<__half2 *>(w + r * in + ka + 8 * p) =
                        __floats2half2_rn((q0 - z) * s, (q1 - z) * s);
            }
        }
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

static llmrt_status sx_init(awq_cuda_ctx *ctx, llmrt_error *err); /* below gemv_fn */

extern "C" llmrt_status awq_cuda_create(const llmrt_backend_ref *backend, const char *tune,
                                        awq_cuda_ctx **out, llmrt_error *err)
{
    *out = NULL;
    const llmrt_cuda_ext *cx = llmrt_cuda_ext_of(backend);
    if (!cx)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "awq cuda: backend '%s' does not offer the \"" LLMRT_EXT_CUDA
                          "\" extension (version %d) the CUDA kernels run through",
                          backend->name ? backend->name : "?", LLMRT_EXT_CUDA_VERSION);
    awq_cuda_ctx *ctx = (awq_cuda_ctx *)calloc(1, sizeof *ctx);
    if (!ctx)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "awq cuda: out of memory");
    ctx->be = *backend;
    ctx->stream = cx->stream(backend->b);
    ctx->device = cx->device(backend->b);
    ctx->pdl = cx->pdl(backend->b) != 0;
    cudaError_t e = cudaSetDevice(ctx->device);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&ctx->sm_count, cudaDevAttrMultiProcessorCount, ctx->device);
    if (e != cudaSuccess) {
        free(ctx);
        return cfail(err, e, "selecting the backend's device");
    }
    /* tune = "kw=8,sx=0" (see awq_tune); unknown knobs are ignored */
    if (tune && *tune) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", tune);
        for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
             tok = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(tok, '=');
            if (!eq)
                continue;
            *eq = 0;
            const int v = atoi(eq + 1);
            if (strcmp(tok, "kw") == 0)
                ctx->tune.kw = v;
            else if (strcmp(tok, "sx") == 0)
                ctx->tune.sx = v > 0 ? 1 : -1;
            else if (strcmp(tok, "sx_kb") == 0)
                ctx->tune.sx_kb = v;
            else if (strcmp(tok, "fx") == 0)
                ctx->tune.fx = v > 0 ? 1 : -1;
            else if (strcmp(tok, "mma") == 0)
                ctx->tune.mma = v > 0 ? 1 : -1;
            else if (strcmp(tok, "mma_min") == 0)
                ctx->tune.mma_min = v;
            else if (strcmp(tok, "mma_max") == 0)
                ctx->tune.mma_max = v;
            else if (strcmp(tok, "mma_w") == 0)
                ctx->tune.mma_w = v;
            else if (strcmp(tok, "mma_split") == 0)
                ctx->tune.mma_split = v;
            else if (strcmp(tok, "mma_fill") == 0)
                ctx->tune.mma_fill = v;
            else if (strcmp(tok, "mma_stages") == 0)
                ctx->tune.mma_stages = v;
            else if (strcmp(tok, "mma_bn") == 0)
                ctx->tune.mma_bn = v;
            else if (strcmp(tok, "mma_smem_kb") == 0)
                ctx->tune.mma_smem_kb = v;
            else if (strcmp(tok, "mma_xdb") == 0)
                ctx->tune.mma_xdb = v;
            else if (strcmp(tok, "mma_tune") == 0)
                ctx->tune.mma_tune = v > 0 ? 1 : -1;
        }
    }
    llmrt_status st = awq_mma_init(ctx, err);
    if (!st)
        st = sx_init(ctx, err);
    if (st) {
        awq_cuda_destroy(ctx);
        return st;
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
    void *bufs[] = {ctx->staging, ctx->deq, ctx->mma_part};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        if (bufs[i])
            ctx->be.vt->dev_free(ctx->be.b, bufs[i]);
    cudaGetLastError();
    free(ctx);
}

static int choose_kw(const awq_cuda_ctx *ctx, int64_t group, int64_t n_blocks, int64_t n_iters);

extern "C" llmrt_status awq_cuda_load_parts(awq_cuda_ctx *ctx, const awq_cuda_part *parts,
                                            int32_t n_parts, int64_t in, int64_t group,
                                            awq_cuda_linear **out_linear, llmrt_error *err)
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
    if (n_parts < 1)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "awq cuda: no parts to load");
    int64_t out = 0;
    for (int32_t p = 0; p < n_parts; p++) {
        /* each part starts on an m-tile (16 rows) boundary */
        if (p + 1 < n_parts && parts[p].out % 16 != 0)
            return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                              "awq cuda: fused part %d has %lld outputs; parts before the last "
                              "must have a multiple of 16",
                              p, (long long)parts[p].out);
        out += parts[p].out;
    }
    if (out > INT32_MAX / 64 || in > INT32_MAX / 2)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "awq cuda: linear [%lld, %lld] is too large", (long long)out,
                          (long long)in);
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
    l->kw = choose_kw(ctx, l->group, l->n_mtiles / AWQ_MT, l->kpad / AWQ_ITK);

    cudaError_t e;
    void *wq = NULL, *meta = NULL;
    if ((st = ctx->be.vt->dev_alloc(ctx->be.b, l->wq_bytes, &wq, err)) != LLMRT_OK)
        goto fail;
    if ((st = ctx->be.vt->dev_alloc(ctx->be.b, l->meta_bytes, &meta, err)) != LLMRT_OK)
        goto fail;
    l->wq = (uint32_t *)wq;
    l->meta = (uint32_t *)meta;
    {
        const size_t deq = (size_t)out * (size_t)in * sizeof(__half);
        if ((st = grow(ctx, (void **)&ctx->deq, &ctx->deq_bytes, deq, 0, "prefill dequant scratch",
                       err)))
            goto fail;
    }
    {
        int64_t row0 = 0;
        for (int32_t p = 0; p < n_parts; p++) {
            const int64_t po = parts[p].out;
            const size_t qw_bytes = (size_t)in * (size_t)(po / 8) * 4;
            const size_t qz_bytes = (size_t)(in / group) * (size_t)(po / 8) * 4;
            const size_t sc_bytes = (size_t)(in / group) * (size_t)po * 2;
            const size_t qz_off = (qw_bytes + 255) / 256 * 256;
            const size_t sc_off = qz_off + (qz_bytes + 255) / 256 * 256;
            if ((st = grow(ctx, &ctx->staging, &ctx->staging_bytes, sc_off + sc_bytes, 0,
                           "load staging", err)))
                goto fail;
            char *stage = (char *)ctx->staging;
            /* pageable sources: each call returns once the source has been consumed; the
             * staging buffer is reused by the next part only after this part's repack (stream
             * order) */
            if ((e = cudaMemcpyAsync(stage, parts[p].qweight, qw_bytes, cudaMemcpyHostToDevice,
                                     ctx->stream)) ||
                (e = cudaMemcpyAsync(stage + qz_off, parts[p].qzeros, qz_bytes,
                                     cudaMemcpyHostToDevice, ctx->stream)) ||
                (e = cudaMemcpyAsync(stage + sc_off, parts[p].scales, sc_bytes,
                                     cudaMemcpyHostToDevice, ctx->stream))) {
                st = cfail(err, e, "copying the AWQ tensors to the device");
                goto fail;
            }
            /* this part's m-tiles: [row0 / 16, ...); the last part also fills the padding */
            const int64_t mt0 = row0 / 16;
            const int64_t n_mt = p + 1 < n_parts ? po / 16 : l->n_mtiles - mt0;
            uint32_t *pwq = l->wq + mt0 * (l->kpad / 16) * 32;
            uint32_t *pmeta = l->meta + mt0 * (l->kpad / group) * 16;
            const int64_t words = n_mt * (l->kpad / 16) * 32;
            awq_repack_words<<<grid_for(ctx, words, 256), 256, 0, ctx->stream>>>(
                pwq, (const int32_t *)stage, po, in, l->kpad, n_mt);
            if ((st = check_launch(err, "awq_repack_words")))
                goto fail;
            const int64_t metas = n_mt * (l->kpad / group) * 8;
            awq_repack_meta<<<grid_for(ctx, metas, 256), 256, 0, ctx->stream>>>(
                pmeta, (const int32_t *)(stage + qz_off), (const uint16_t *)(stage + sc_off), po,
                in, group, l->kpad, n_mt);
            if ((st = check_launch(err, "awq_repack_meta")))
                goto fail;
            row0 += po;
        }
        /* Forward kernels read the weights before waiting on the kernel before them
         * (programmatic dependent launch): the repack must be complete and visible first. */
        if ((e = cudaStreamSynchronize(ctx->stream)) != cudaSuccess) {
            st = cfail(err, e, "repacking the AWQ tensors");
            goto fail;
        }
    }
    /* the batch kernel's launch shapes, timed on this device; then the partials they need
     * (sized here, after the timing, which picks the shapes they depend on) */
    if ((st = awq_mma_tune_linear(ctx, l, err)))
        goto fail;
    {
        const size_t part = awq_mma_part_bytes(ctx, l);
        if (part && (st = grow(ctx, (void **)&ctx->mma_part, &ctx->mma_part_bytes, part, 0,
                               "batch kernel split-K partials", err)))
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

extern "C" llmrt_status awq_cuda_load(awq_cuda_ctx *ctx, const int32_t *qweight,
                                      const int32_t *qzeros, const uint16_t *scales, int64_t in,
                                      int64_t out, int64_t group, awq_cuda_linear **out_linear,
                                      llmrt_error *err)
{
    awq_cuda_part p = {qweight, qzeros, scales, out};
    return awq_cuda_load_parts(ctx, &p, 1, in, group, out_linear, err);
}

extern "C" void awq_cuda_free(awq_cuda_ctx *ctx, awq_cuda_linear *l)
{
    if (!l)
        return;
    cudaSetDevice(ctx->device);
    cudaStreamSynchronize(ctx->stream); /* queued work may still read it */
    if (!l->wq_moved)
        ctx->be.vt->dev_free(ctx->be.b, l->wq);
    if (!l->meta_moved)
        ctx->be.vt->dev_free(ctx->be.b, l->meta);
    free(l);
}

/* linear_move: the two buffers a linear owns (wq, meta); scratch is the context's. */
extern "C" llmrt_status awq_cuda_move(awq_cuda_ctx *ctx, awq_cuda_linear *l,
                                      const llmrt_buffer_mover *mv, llmrt_error *err)
{
    (void)ctx;
    void *now = NULL;
    llmrt_status st = mv->fn(mv->ctx, l->wq, l->wq_bytes, &now, err);
    if (st)
        return st;
    if (now != (void *)l->wq)
        l->wq = (uint32_t *)now, l->wq_moved = 1;
    if ((st = mv->fn(mv->ctx, l->meta, l->meta_bytes, &now, err)))
        return st;
    if (now != (void *)l->meta)
        l->meta = (uint32_t *)now, l->meta_moved = 1;
    return LLMRT_OK;
}

extern "C" void awq_cuda_linear_layout(const awq_cuda_linear *l, awq_cuda_layout *out)
{
    out->wq = l->wq;
    out->meta = l->meta;
    out->in = l->in;
    out->out = l->out;
    out->group = l->group;
    out->kpad = l->kpad;
    out->n_mtiles = l->n_mtiles;
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

/* The 16-byte weight loads and meta of iteration `it` (AWQ_ITK inputs) of a warp's 32 rows. */
template <int GROUP>
__device__ __forceinline__ void awq_load_iter(uint4 (&w)[AWQ_MT][AWQ_ITK / 64],
                                              uint2 (&m)[AWQ_MT][AWQ_ITK / GROUP],
                                              const uint4 *const (&wbase)[AWQ_MT],
                                              const uint2 *const (&mbase)[AWQ_MT], int it)
{
    constexpr int LD_IT = AWQ_ITK / 64, GPI = AWQ_ITK / GROUP;
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
}

/* acc += the iteration's weights (w, m) times x [n, in] at inputs it * AWQ_ITK ... Each lane
 * holds, per m-tile and n-tile, the C fragment: rows r0 = 16 mt + g and r0 + 8, tokens
 * 8 nt + 2 t and + 1. */
template <int GROUP, int NT, bool SX = false>
__device__ __forceinline__ void awq_compute_iter(float (&acc)[AWQ_MT][NT][4],
                                                 const uint4 (&wv)[AWQ_MT][AWQ_ITK / 64],
                                                 const uint2 (&mv)[AWQ_MT][AWQ_ITK / GROUP],
                                                 const float *__restrict__ x, int it, int n,
                                                 int in, int g, int t,
                                                 const uint32_t *xs = nullptr, int xstride = 0)
{
    constexpr int KT_IT = AWQ_ITK / 16; /* k-tiles per iteration (16) */
    constexpr int GPI = AWQ_ITK / GROUP;
    constexpr int KPG = GROUP / 16;     /* k-tiles per group */
    const __half2 sixteenth = __float2half2_rn(0.0625f);
    const __half2 h960 = __float2half2_rn(960.0f);
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
            const int j = gi * KPG + kk;          /* k-tile within the iteration */
            const int k0 = (it * KT_IT + j) * 16; /* first input of the k-tile */
            uint32_t b[NT][2];
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                const int row = nt * 8 + g;
                if constexpr (SX) { /* staged x: b0 and b1 adjacent (awq_stage_word) */
                    /* B columns past n repeat token 0: their C columns are never stored */
                    const uint2 bb = *reinterpret_cast<const uint2 *>(
                        xs + (row < n ? row : 0) * xstride + (k0 >> 4) * 8 + 2 * t);
                    b[nt][0] = bb.x;
                    b[nt][1] = bb.y;
                    continue;
                }
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
}

/* The sum over the K-splitting warps, in warp order (as the plain store), of row r (0..31) of
 * the block and token tok (< 8) from red [KW][8][32], the warps' C fragments of the decode
 * kernel (NT = 1: value v = 4 mt + c of lane 4 g + t holds row 16 mt + g + 8 (c >> 1), token
 * 2 t + (c & 1)). */
template <int KW, int NV>
__device__ __forceinline__ float awq_red_sum(const float (&red)[KW > 1 ? KW : 1][NV][32], int r,
                                             int tok)
{
    const int rr = r & 15;
    const int v = (r >> 4) * 4 + ((rr >> 3) << 1) + (tok & 1);
    const int ln = (rr & 7) * 4 + ((tok & 7) >> 1);
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < (KW > 1 ? KW : 1); k++)
        s += red[k][v][ln];
    return s;
}

/* Kernel 2 (default). Block = row block mb of 32 rows (two m-tiles); its KW warps take the
 * K iterations w, w + KW, ...; their partial sums meet in shared memory and are added in
 * warp order. y [n, out]. */
template <int GROUP, int NT, int KW, bool SX, bool GLU>
__device__ __forceinline__ void awq_gemv_body(float *__restrict__ y, const float *__restrict__ x,
                                              const uint32_t *__restrict__ wq,
                                              const uint32_t *__restrict__ meta, int n, int out,
                                              int in, int kpad, int xstride)
{
    constexpr int LD_IT = AWQ_ITK / 64, GPI = AWQ_ITK / GROUP;
    constexpr int NV = AWQ_MT * NT * 4; /* accumulators per lane */
    __shared__ float red[KW > 1 ? KW : 1][NV][32];

    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int mb = blockIdx.x;
    const int g = lane >> 2, t = lane & 3;
    const int n_iters = kpad / AWQ_ITK;
    const int64_t n_super = kpad / 64; /* 16-byte loads per lane per m-tile over all of K */
    const int n_grp = kpad / GROUP;
    const uint4 *wbase[AWQ_MT];
    const uint2 *mbase[AWQ_MT];
    /* GLU: the block's m-tiles are gate rows 16 mb .. 16 mb + 15 and the matching up rows */
    const int64_t m0 = GLU ? mb : (int64_t)mb * AWQ_MT, mstep = GLU ? out / 32 : 1;
#pragma unroll
    for (int mt = 0; mt < AWQ_MT; mt++) {
        const int64_t m = m0 + mt * mstep;
        wbase[mt] = reinterpret_cast<const uint4 *>(wq) + (m * n_super) * 32 + lane;
        mbase[mt] = reinterpret_cast<const uint2 *>(meta) + (m * n_grp) * 8 + g;
    }

    /* DB: two iterations of weights in flight per warp (a second register set). Only for the
     * decode kernel (x staged) at 16 warps per block: one 512-thread block per SM either way
     * (<= 128 registers), so the extra registers cost no occupancy (H200: down_proj
     * 11.97 -> 10.95 us, decode step 2.68 -> 2.60 ms); at fewer warps per block they would
     * (the capped kernels run 24 warps per SM at 80 registers), at groups of 32 or 64 (more
     * scale registers) it would spill, and with x read from global memory (n = 4..8) it was
     * ~4% slower. */
    constexpr bool DB = KW == 16 && NT == 1 && GROUP == 128 && SX;
    /* the first weights are in flight before the wait for the kernel that writes x */
    uint4 wv[AWQ_MT][LD_IT], wv2[AWQ_MT][LD_IT];
    uint2 mv[AWQ_MT][GPI], mv2[AWQ_MT][GPI];
    int it = w;
    if (it < n_iters)
        awq_load_iter<GROUP>(wv, mv, wbase, mbase, it);
    if (DB && it + KW < n_iters)
        awq_load_iter<GROUP>(wv2, mv2, wbase, mbase, it + KW);
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    /* SX: the block stages x [n, in] as f16 pairs in shared memory once (rows of xstride
     * words, padded so token rows start in different banks; zeros up to kpad), so each k-tile
     * reads its B fragment with one 8-byte shared load instead of two global loads and
     * conversions */
    extern __shared__ uint32_t awq_xs[];
    if constexpr (SX) {
        const int kq = kpad / 4;
        for (int i = threadIdx.x; i < n * kq; i += KW * 32) {
            const int tok = i / kq, c = i - tok * kq;
            float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (4 * c < in)
                v = __ldg(reinterpret_cast<const float4 *>(x + (int64_t)tok * in + 4 * c));
            uint32_t *row = awq_xs + tok * xstride;
            row[awq_stage_word(2 * c)] = h2_bits(__floats2half2_rn(v.x, v.y));
            row[awq_stage_word(2 * c + 1)] = h2_bits(__floats2half2_rn(v.z, v.w));
        }
        __syncthreads();
    }

    float acc[AWQ_MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < AWQ_MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int c = 0; c < 4; c++)
                acc[mt][nt][c] = 0.0f;
    while (it < n_iters) {
        awq_compute_iter<GROUP, NT, SX>(acc, wv, mv, x, it, n, in, g, t, awq_xs, xstride);
        if constexpr (DB) { /* refill the set just used, then compute the other */
            if (it + 2 * KW < n_iters)
                awq_load_iter<GROUP>(wv, mv, wbase, mbase, it + 2 * KW);
            it += KW;
            if (it >= n_iters)
                break;
            awq_compute_iter<GROUP, NT, SX>(acc, wv2, mv2, x, it, n, in, g, t, awq_xs, xstride);
            if (it + 2 * KW < n_iters)
                awq_load_iter<GROUP>(wv2, mv2, wbase, mbase, it + 2 * KW);
            it += KW;
        } else {
            it += KW;
            if (it < n_iters)
                awq_load_iter<GROUP>(wv, mv, wbase, mbase, it);
        }
    }

    if constexpr (KW == 1 && !GLU) {
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
    } else {
#pragma unroll
        for (int mt = 0; mt < AWQ_MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int c = 0; c < 4; c++)
                    red[w][(mt * NT + nt) * 4 + c][lane] = acc[mt][nt][c];
        __syncthreads();
        if constexpr (GLU) { /* per token 16 outputs: gate row 16 mb + i with up row out/2 + ... */
            static_assert(NT == 1, "GLU: decode kernel only");
            const int half = out / 2;
            for (int idx = threadIdx.x; idx < n * 16; idx += KW * 32) {
                const int tok = idx >> 4, i = idx & 15;
                const float gate = awq_red_sum<KW, NV>(red, i, tok);
                const float up = awq_red_sum<KW, NV>(red, 16 + i, tok);
                y[(int64_t)tok * half + mb * 16 + i] = gate / (1.0f + expf(-gate)) * up;
            }
        } else {
            for (int idx = threadIdx.x; idx < NV * 32; idx += KW * 32) {
                const int ln = idx & 31, v = idx >> 5;
                const int c = v & 3, nt = (v >> 2) % NT, mt = (v >> 2) / NT;
                const int r = (mb * AWQ_MT + mt) * 16 + (ln >> 2) + (c >> 1) * 8;
                const int col = nt * 8 + 2 * (ln & 3) + (c & 1);
                if (r >= out || col >= n)
                    continue;
                float s = 0.0f;
#pragma unroll
                for (int k = 0; k < KW; k++)
                    s += red[k][v][ln];
                y[(int64_t)col * out + r] = s;
            }
        }
    }
}

/* The kernel: with a register cap where ptxas then still needs no spills (decode at g128,
 * 2..8 warps: 80 registers, 24 warps per SM; sm_90 -Xptxas -v), else ptxas's own choice (a
 * minimum block count there makes it take every register it may). */
template <int GROUP, int NT, int KW, bool SX, bool GLU>
__global__ void __launch_bounds__(KW * 32)
awq_gemv_kernel(float *__restrict__ y, const float *__restrict__ x, const uint32_t *__restrict__ wq,
                const uint32_t *__restrict__ meta, int n, int out, int in, int kpad, int xstride)
{
    awq_gemv_body<GROUP, NT, KW, SX, GLU>(y, x, wq, meta, n, out, in, kpad, xstride);
}

template <int KW, bool SX, bool GLU>
__global__ void __launch_bounds__(KW * 32, 24 / KW)
awq_gemv_capped_kernel(float *__restrict__ y, const float *__restrict__ x,
                       const uint32_t *__restrict__ wq, const uint32_t *__restrict__ meta, int n,
                       int out, int in, int kpad, int xstride)
{
    awq_gemv_body<128, 1, KW, SX, GLU>(y, x, wq, meta, n, out, in, kpad, xstride);
}

typedef void (*awq_gemv_fn)(float *, const float *, const uint32_t *, const uint32_t *, int, int,
                            int, int, int);

/* The kernel function for (GROUP, NT, KW, SX, GLU). SX (x staged in shared memory) exists for
 * the decode shapes, NT = 1; GLU for those at groups of 128. */
template <int GROUP, int NT, int KW, bool SX = false, bool GLU = false> static awq_gemv_fn gemv_fn()
{
    static_assert(!GLU || (GROUP == 128 && NT == 1), "GLU: decode at g128 only");
    if constexpr (GROUP == 128 && NT == 1 && KW >= 2 && KW <= 8)
        return awq_gemv_capped_kernel<KW, SX, GLU>;
    else
        return awq_gemv_kernel<GROUP, NT, KW, SX && NT == 1, GLU>;
}


/* The decode GEMV's x staging limit: AWQ_SX_MAX_BYTES, or tune sx_kb up to the device's
 * opt-in shared memory per block (every staging kernel then allowed that much). */
template <int GROUP, bool GLU> static cudaError_t sx_allow(int bytes)
{
    const awq_gemv_fn fns[5] = {gemv_fn<GROUP, 1, 1, true, GLU>(), gemv_fn<GROUP, 1, 2, true, GLU>(),
                                gemv_fn<GROUP, 1, 4, true, GLU>(), gemv_fn<GROUP, 1, 8, true, GLU>(),
                                gemv_fn<GROUP, 1, 16, true, GLU>()};
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < 5 && e == cudaSuccess; i++)
        e = cudaFuncSetAttribute(fns[i], cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    return e;
}

static llmrt_status sx_init(awq_cuda_ctx *ctx, llmrt_error *err)
{
    ctx->sx_max_bytes = AWQ_SX_MAX_BYTES;
    if (ctx->tune.sx_kb <= AWQ_SX_MAX_BYTES / 1024) /* unset, or no more than the default */
        return LLMRT_OK;
    int optin = 0;
    cudaError_t e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                           ctx->device);
    /* beside it the GEMV's static reduction array: at most AWQ_KW_MAX warps of one decode
     * n-tile's accumulators (AWQ_MT * 4) per lane */
    const size_t red = (size_t)AWQ_KW_MAX * AWQ_MT * 4 * 32 * sizeof(float);
    const size_t want = (size_t)ctx->tune.sx_kb * 1024;
    const int bytes = (int)(want < (size_t)optin - red ? want : (size_t)optin - red);
    if (e == cudaSuccess)
        e = sx_allow<32, false>(bytes);
    if (e == cudaSuccess)
        e = sx_allow<64, false>(bytes);
    if (e == cudaSuccess)
        e = sx_allow<128, false>(bytes);
    if (e == cudaSuccess)
        e = sx_allow<128, true>(bytes);
    if (e != cudaSuccess)
        return cfail(err, e, "allowing the decode GEMV's x staging more shared memory");
    ctx->sx_max_bytes = (size_t)bytes;
    return LLMRT_OK;
}

/* Words per token row of the staged x (f16 pairs up to kpad), padded so token rows start 8
 * banks apart: the occupancy estimate and the launch must agree. */
static int awq_xs_words(int64_t kpad)
{
    return (int)(kpad / 2 + 8);
}

/* Kernel 2's K-splitting warps per block for a linear of n_blocks row blocks (32 rows) and
 * n_iters K iterations: the one whose longest chain of dependent iterations — waves of
 * resident blocks times iterations per warp — is shortest; on a tie, the one with fewer
 * waves (no tail), then more warps. Residency comes from the occupancy calculator, so the
 * choice follows the kernel's real register use. */
template <int GROUP> static int choose_kw_g(const awq_cuda_ctx *ctx, int64_t n_blocks, int64_t n_iters)
{
    const awq_gemv_fn kernels[5] = {gemv_fn<GROUP, 1, 1, true>(), gemv_fn<GROUP, 1, 2, true>(),
                                    gemv_fn<GROUP, 1, 4, true>(), gemv_fn<GROUP, 1, 8, true>(),
                                    gemv_fn<GROUP, 1, 16, true>()};
    const size_t xs_bytes = (size_t)awq_xs_words(n_iters * AWQ_ITK) * 4; /* one token staged */
    int best = 1;
    int64_t best_chain = INT64_MAX, best_waves = INT64_MAX;
    for (int i = 0, kw = 1; kw <= AWQ_KW_MAX; i++, kw *= 2) {
        if (kw > 1 && kw > n_iters)
            break;
        int per_sm = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernels[i], kw * 32, xs_bytes) !=
                cudaSuccess ||
            per_sm < 1) {
            cudaGetLastError();
            per_sm = 1;
        }
        const int64_t slots = (int64_t)per_sm * ctx->sm_count;
        const int64_t waves = (n_blocks + slots - 1) / slots;
        const int64_t chain = waves * ((n_iters + kw - 1) / kw);
        if (chain < best_chain || (chain == best_chain && waves < best_waves)) {
            best = kw, best_chain = chain, best_waves = waves;
        }
    }
    return best;
}

static int choose_kw(const awq_cuda_ctx *ctx, int64_t group, int64_t n_blocks, int64_t n_iters)
{
    if (ctx->tune.kw > 0) {
        int kw = 1;
        while (kw * 2 <= ctx->tune.kw && kw * 2 <= AWQ_KW_MAX)
            kw *= 2;
        return kw;
    }
    switch (group) {
    case 32: return choose_kw_g<32>(ctx, n_blocks, n_iters);
    case 64: return choose_kw_g<64>(ctx, n_blocks, n_iters);
    default: return choose_kw_g<128>(ctx, n_blocks, n_iters);
    }
}

template <int GROUP, int NT, int KW, bool GLU>
static void launch_gemv_kw(const awq_cuda_ctx *ctx, const awq_cuda_linear *l, float *y,
                           const float *x, int n)
{
    const int xstride = awq_xs_words(l->kpad);
    const size_t xs_bytes = (size_t)n * (size_t)xstride * 4;
    if (NT == 1 && ctx->tune.sx >= 0 && xs_bytes <= ctx->sx_max_bytes && ((uintptr_t)x & 15u) == 0) {
        llmrt_cuda_launch(ctx->stream, ctx->pdl, gemv_fn<GROUP, NT, KW, true, GLU>(),
                          (unsigned)(l->n_mtiles / AWQ_MT), KW * 32, xs_bytes, y, x, l->wq,
                          l->meta, n, (int)l->out, (int)l->in, (int)l->kpad, xstride);
        return;
    }
    llmrt_cuda_launch(ctx->stream, ctx->pdl, gemv_fn<GROUP, NT, KW, false, GLU>(),
                      (unsigned)(l->n_mtiles / AWQ_MT), KW * 32, 0, y, x, l->wq, l->meta, n,
                      (int)l->out, (int)l->in, (int)l->kpad, 0);
}

template <int GROUP, int NT, bool GLU = false>
static void launch_gemv(const awq_cuda_ctx *ctx, const awq_cuda_linear *l, float *y, const float *x,
                        int n)
{
    switch (l->kw) {
    case 16: /* NT = 4 with 16 warps would need 64 KB of shared memory: 8 warps */
        if constexpr (NT >= 4)
            launch_gemv_kw<GROUP, NT, 8, GLU>(ctx, l, y, x, n);
        else
            launch_gemv_kw<GROUP, NT, 16, GLU>(ctx, l, y, x, n);
        break;
    case 8: launch_gemv_kw<GROUP, NT, 8, GLU>(ctx, l, y, x, n); break;
    case 4: launch_gemv_kw<GROUP, NT, 4, GLU>(ctx, l, y, x, n); break;
    case 2: launch_gemv_kw<GROUP, NT, 2, GLU>(ctx, l, y, x, n); break;
    default: launch_gemv_kw<GROUP, NT, 1, GLU>(ctx, l, y, x, n); break;
    }
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
    /* the batch kernel from mma_min rows (9) to mma_max (256), the GEMV below, cuBLAS above */
    if (awq_mma_serves(ctx, l, n, x))
        return awq_mma_forward(ctx, l, y, x, n, 0, err);
    if (n <= AWQ_MAX_N && ((uintptr_t)x & 7u) == 0) {
        switch (l->group) {
        case 32: launch_gemv_nt<32>(ctx, l, y, x, n); break;
        case 64: launch_gemv_nt<64>(ctx, l, y, x, n); break;
        default: launch_gemv_nt<128>(ctx, l, y, x, n); break;
        }
        return check_launch(err, "awq_gemv_kernel");
    }
    /* prefill: dense f16 W in scratch, then the backend's gemm (cuBLAS, fp32 accumulation) */
    const int64_t n_words = l->n_mtiles * (l->kpad / 16) * 32;
    llmrt_cuda_launch(ctx->stream, ctx->pdl, awq_dequant_f16_kernel, grid_for(ctx, n_words, 256),
                      256, 0, ctx->deq, l->wq, l->meta, l->out, l->in, (int)l->group, l->kpad,
                      n_words);
    if ((st = check_launch(err, "awq_dequant_f16_kernel")))
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

/* ---- forward with folds ---- */

extern "C" int32_t awq_cuda_fused_max_rows(const awq_cuda_ctx *ctx, const awq_cuda_linear *l,
                                           uint32_t flags)
{
    /* SwiGLU: the decode kernel at groups of 128 (the AWQ checkpoints' size), each block a
     * gate m-tile and its up m-tile (halves of whole m-tiles: out % 32 == 0); then the batch
     * kernel's GLU epilogue, when it takes over right after the GEMV's 8 rows */
    if (ctx->tune.fx < 0 || flags != LLMRT_FUSE_OUT_SWIGLU || l->group != 128 || l->out % 32 != 0)
        return 0;
    const int mma_min = awq_knob(ctx->tune.mma_min, 9), mma_max = awq_knob(ctx->tune.mma_max, 256);
    if (mma_min <= 9 && mma_max > 8 && awq_mma_serves(ctx, l, mma_max, NULL))
        return mma_max;
    return 8;
}

extern "C" llmrt_status awq_cuda_forward_fused(awq_cuda_ctx *ctx, const awq_cuda_linear *l,
                                               float *y, const float *x, int32_t n,
                                               uint32_t flags, llmrt_error *err)
{
    const int32_t max_rows = awq_cuda_fused_max_rows(ctx, l, flags);
    if (n < 1 || n > max_rows)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "awq cuda: folds 0x%x on linear [%lld, %lld] take 1..%d rows, not %d",
                          flags, (long long)l->out, (long long)l->in, max_rows, n);
    llmrt_status st = use_device(ctx, err);
    if (st)
        return st;
    if (awq_mma_serves(ctx, l, n, x))
        return awq_mma_forward(ctx, l, y, x, n, 1, err);
    if (n > 8 || ((uintptr_t)x & 7u) != 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "awq cuda: x must be %d-byte aligned for folds over %d rows",
                          n > 8 ? 16 : 8, n);
    launch_gemv<128, 1, true>(ctx, l, y, x, n);
    return check_launch(err, "awq_gemv_kernel (SwiGLU)");
}
