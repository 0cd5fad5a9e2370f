/* fp8_cuda.cu — block-scaled FP8 linears on a CUDA backend (the C interface is fp8_cuda.h).
 *
 * Device layout. The weight is padded to inp = in rounded up to 128 (whole scale blocks) and
 * outp = out rounded up to 64 rows, with zeros, and repacked at load (on the device) into
 * tensor-core fragment order: for m-tile mt (16 rows), k-chunk kc (32 inputs) and lane
 * L = 4 g + t, one 16-byte word holds
 *     .x  row 16 mt + g,      inputs 32 kc + 4 t + 0..3
 *     .y  row 16 mt + g + 8,  the same inputs
 *     .z  row 16 mt + g,      inputs 32 kc + 16 + 4 t + 0..3
 *     .w  row 16 mt + g + 8,  the same inputs
 * stored wq [n_mt][n_kc][32 lanes]: a warp's load of one (mt, kc) is 512 contiguous bytes.
 * These four words are the A fragment of mma.sync m16n8k32 e4m3 as they stand (registers 0/2
 * hold row g, 1/3 row g + 8; B takes the same inputs of a token: 4 t + 0..3 and 16 + 4 t +
 * 0..3), and, converted to f16 pairs, the A fragments of two mma m16n8k16 f16 with the inputs
 * of each k16 tile permuted (phys 4 t, 4 t + 1 <-> logical 2 t, 2 t + 1; phys 4 t + 2, 4 t + 3
 * <-> logical 2 t + 8, 2 t + 9) — the same permutation applied to B, so the sums are the same.
 * Scales: f32 [ceil(outp / 128)][inp / 128].
 *
 * Kernels:
 *  - the GEMV (n <= gemv_rows, FP8_GEMV_ROWS by default; both semantics): a row block of 32
 *    rows (two m-tiles) is summed by KW warps splitting K by 128-input blocks; each warp
 *    streams its weights (the first block issued before the PDL wait: weights never change;
 *    at up to 8 rows one block ahead in two register sets, and a grid of one wave walking the
 *    row blocks, so the next row block's weights are in flight while a block sums the last;
 *    x staged once per block in shared memory as the f16 pairs the B fragments take),
 *    converts e4m3 to f16 in registers
 *    (cvt.rn.f16x2.e4m3x2 on sm_89+, NVIDIA's software conversion on sm_86: sm_90 has no FP8
 *    GEMV instruction), multiplies on the tensor cores (mma m16n8k16, f32 accumulation),
 *    applies each block's scale in f32, and the warps' sums meet in shared memory in a fixed
 *    order (deterministic, no atomics). W8A16 rounds x to f16; W8A8 quantizes x per token
 *    per 128 inputs in registers (amax across the four lanes holding a token's inputs) to
 *    e4m3, exactly as fp8_act.h, and multiplies the codes (exact in f16) — so on any GPU the
 *    GEMV implements either semantics. It can also finish SwiGLU for a [gate; up] linear (GLU).
 *  - W8A8 above the GEMV's rows on FP8 tensor cores (sm_89+): the activations quantized by
 *    one kernel (codes [n, inp], scales transposed [inp / 128, n]), then a tiled GEMM on
 *    mma.sync m16n8k32 e4m3 (block tile 64 rows x 64 tokens x 128 inputs, cp.async double
 *    buffering, four warps of 32 x 32), each 128-input block's partial sums scaled in f32 by
 *    s_x[token] * s_w[block] — the promotion every 128 inputs keeps the FP8 MMA's shorter
 *    accumulator from adding up. Without FP8 tensor cores, the GEMV gemv_rows rows at a time.
 *  - W8A16 above the GEMV's rows: the weight dequantized into an f16 scratch [out, in] and the
 *    backend's gemm (cuBLAS, f32 accumulation). A first step; a Marlin-style kernel that
 *    converts in registers would save the scratch's round trip. */
#include "fp8_cuda.h"

#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llmrt/cuda.h>

#include "fp8_cuda_layout.h"

#define FP8_MAX_RETIRED 64
#define GM_BM FP8_GM_BM
#define GM_BN FP8_GM_BN
#define GM_BSTRIDE FP8_GM_BSTRIDE

struct fp8_cuda_ctx {
    llmrt_backend_ref be;
    cudaStream_t stream;
    int device, sm_count, cc, pdl;
    int mma;     /* use the FP8 tensor cores (cc >= 8.9 and not tuned off) */
    int tune_kw; /* 0: chosen per linear */
    int tune_sx; /* 0: the decode GEMV reads x from global memory (tune sx=0), 1: staged */
    int tune_pers; /* 1: the decode GEMV's grid is one wave over the row blocks (tune pers=0: one
                      block per row block) */
    int gemv_rows; /* the GEMV serves 1..gemv_rows rows, the GEMMs more (tune gemv_rows) */
    char name[192];
    void *staging; /* one part's raw weight during a load */
    size_t staging_bytes;
    unsigned long long *bad; /* device: first NaN element of a repack */
    __half *deq;             /* W8A16 above the GEMV: dequantized f16 [out, in] */
    size_t deq_bytes;
    void *act; /* W8A8 GEMM: codes [ldn, inp] then scales [nkb, ldn] */
    size_t act_bytes;
    void *retired[FP8_MAX_RETIRED]; /* outgrown scratch: a captured graph may still use it */
    int n_retired;
};

struct fp8_cuda_linear {
    int64_t in, out, inp, outp, n_mt, n_kc, nkb, nrb;
    int kw;       /* GEMV K-splitting warps (a power of two) */
    int wave;     /* decode GEMV blocks resident at once (wave_blocks) */
    uint4 *wq;    /* [n_mt][n_kc][32] */
    float *scale; /* [nrb][nkb] */
    size_t wq_bytes, scale_bytes;
};

/* ---- errors, devices, buffers ---- */

static llmrt_status cfail(llmrt_error *err, cudaError_t e, const char *what)
{
    return llmrt_cuda_fail(err, LLMRT_ERR_NOMEM, e, "quant-fp8 cuda", what);
}

static llmrt_status use_device(const fp8_cuda_ctx *ctx, llmrt_error *err)
{
    cudaError_t e = cudaSetDevice(ctx->device);
    return e == cudaSuccess ? LLMRT_OK : cfail(err, e, "cudaSetDevice");
}

static llmrt_status dalloc(fp8_cuda_ctx *ctx, size_t bytes, void **p, const char *what,
                           llmrt_error *err)
{
    *p = NULL;
    llmrt_status st = ctx->be.vt->dev_alloc(ctx->be.b, bytes ? bytes : 16, p, err);
    if (st != LLMRT_OK)
        llmrt_fail(err, st, "quant-fp8 cuda: allocating %zu bytes for %s: %s", bytes, what,
                   err->msg);
    return st;
}

/* Grow a scratch buffer to `want` bytes. The old one is kept until destroy (queued work or a
 * captured graph may still use it); never while the stream is being captured. */
static llmrt_status grow(fp8_cuda_ctx *ctx, void **p, size_t *have, size_t want, const char *what,
                         llmrt_error *err)
{
    if (*have >= want)
        return LLMRT_OK;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(ctx->stream, &cs) == cudaSuccess && cs != cudaStreamCaptureStatusNone)
        return llmrt_fail(err, LLMRT_ERR_STATE,
                          "quant-fp8 cuda: %s needs %zu bytes (has %zu) while a graph is being "
                          "captured: run the largest shape once before capturing",
                          what, want, *have);
    if (*p && ctx->n_retired == FP8_MAX_RETIRED)
        return llmrt_fail(err, LLMRT_ERR_LIMIT, "quant-fp8 cuda: %s grew too many times", what);
    void *np = NULL;
    llmrt_status st = dalloc(ctx, want, &np, what, err);
    if (st != LLMRT_OK)
        return st;
    if (*p)
        ctx->retired[ctx->n_retired++] = *p;
    *p = np;
    *have = want;
    return LLMRT_OK;
}

static unsigned grid_for(const fp8_cuda_ctx *ctx, int64_t total, int threads)
{
    int64_t b = (total + threads - 1) / threads;
    const int64_t cap = (int64_t)ctx->sm_count * 32;
    if (b > cap)
        b = cap;
    return (unsigned)(b > 0 ? b : 1);
}

static int64_t round_up(int64_t v, int64_t m)
{
    return (v + m - 1) / m * m;
}

/* ---- device helpers ---- */

__device__ __forceinline__ uint4 ld_stream16(const uint4 *p)
{
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}

/* Two e4m3 codes (low byte first) as an f16 pair (exact). */
__device__ __forceinline__ uint32_t e4m3x2_h2(uint32_t two)
{
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(two & 0xffffu), __NV_E4M3);
    return (uint32_t)h.x | ((uint32_t)h.y << 16);
}

__device__ __forceinline__ float e4m3_f32(uint32_t code)
{
    const __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)(code & 0xffu), __NV_E4M3);
    return __half2float(__half(h));
}

/* fp8_act.h's code of v = x / s (clamped to +-448 by saturation, NaN kept) for two inputs,
 * as two e4m3 bytes (low first). */
__device__ __forceinline__ uint32_t quant2(float a, float b, float s)
{
    return (uint32_t)__nv_cvt_float2_to_fp8x2(make_float2(__fdiv_rn(a, s), __fdiv_rn(b, s)),
                                              __NV_SATFINITE, __NV_E4M3);
}

__device__ __forceinline__ float act_scale(float amax)
{
    return __fdiv_rn(fmaxf(amax, 1e-10f), 448.0f);
}

__device__ __forceinline__ uint32_t h2_bits(float a, float b)
{
    __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<uint32_t *>(&h);
}

__device__ __forceinline__ void mma_16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                          uint32_t a3, uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma_16832_e4m3(float (&d)[4], const uint4 &a, uint32_t b0,
                                               uint32_t b1)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
#else
    (void)d, (void)a, (void)b0, (void)b1;
    __trap(); /* launched only on sm_89+ */
#endif
}

/* Inputs k..k+3 of token row `tok` of x [n, in] (zeros past n or in). vec: x is 16-byte
 * aligned and in % 4 == 0. */
__device__ __forceinline__ float4 load_x4(const float *__restrict__ x, int tok, int n, int in,
                                          int k, int vec)
{
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (tok >= n || k >= in)
        return v;
    const float *p = x + (int64_t)tok * in + k;
    if (vec)
        return __ldg(reinterpret_cast<const float4 *>(p));
    v.x = p[0];
    if (k + 1 < in)
        v.y = p[1];
    if (k + 2 < in)
        v.z = p[2];
    if (k + 3 < in)
        v.w = p[3];
    return v;
}

/* ---- load: repack on the device ---- */

/* One 32-bit word of the layout per thread, for the part's m-tiles [0, n_mt) of src
 * [out_p, in]; rows or inputs past the part's are zeros. The first NaN code's index (row *
 * in + col) goes to *bad. */
__global__ void fp8_repack_kernel(uint32_t *__restrict__ wq, const uint8_t *__restrict__ src,
                                  int64_t out_p, int64_t in, int64_t n_mt, int64_t n_kc,
                                  unsigned long long *bad)
{
    const int64_t total = n_mt * n_kc * 128;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int j = (int)(i & 3), lane = (int)((i >> 2) & 31);
        const int64_t kc = (i >> 7) % n_kc, mt = (i >> 7) / n_kc;
        int64_t r, k0;
        fp8_cl_word_pos(mt, kc, lane, j, &r, &k0);
        uint32_t word = 0;
        for (int b = 0; b < 4; b++) {
            const int64_t k = k0 + b;
            if (r < out_p && k < in) {
                const uint32_t c = src[r * in + k];
                if ((c & 0x7fu) == 0x7fu)
                    atomicMin(bad, (unsigned long long)(r * in + k));
                word |= c << (8 * b);
            }
        }
        wq[i] = word;
    }
}

/* The code of element (r, k) in the layout. */
__device__ __forceinline__ uint32_t code_at(const uint32_t *__restrict__ wq, int64_t n_kc,
                                            int64_t r, int64_t k)
{
    int b;
    const int64_t at = fp8_cl_word_index(n_kc, r, k, &b);
    return (wq[at] >> (8 * b)) & 0xffu;
}

/* Dense f32 W [out, in] (tests). */
__global__ void fp8_dequant_f32_kernel(float *__restrict__ w, const uint32_t *__restrict__ wq,
                                       const float *__restrict__ scale, int64_t out, int64_t in,
                                       int64_t n_kc, int64_t nkb)
{
    const int64_t total = out * in;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / in, k = i % in;
        w[i] = __fmul_rn(e4m3_f32(code_at(wq, n_kc, r, k)), scale[(r / 128) * nkb + k / 128]);
    }
}

/* Dense f16 W [out, in] for the backend's gemm, one layout word (4 inputs) per thread. On the
 * forward stream: waits for the kernel before (the previous gemm may still read w). */
__global__ void fp8_dequant_f16_kernel(__half *__restrict__ w, const uint32_t *__restrict__ wq,
                                       const float *__restrict__ scale, int64_t out, int64_t in,
                                       int64_t n_mt, int64_t n_kc, int64_t nkb)
{
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int64_t total = n_mt * n_kc * 128;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int j = (int)(i & 3), lane = (int)((i >> 2) & 31);
        const int64_t kc = (i >> 7) % n_kc, mt = (i >> 7) / n_kc;
        int64_t r, k0;
        fp8_cl_word_pos(mt, kc, lane, j, &r, &k0);
        if (r >= out || k0 >= in)
            continue;
        const uint32_t word = wq[i];
        const float s = scale[(r / 128) * nkb + k0 / 128];
        float v[4];
        for (int b = 0; b < 4; b++)
            v[b] = __fmul_rn(e4m3_f32(word >> (8 * b)), s);
        __half *dst = w + r * in + k0;
        if ((in & 3) == 0) { /* 8-byte aligned: one store of the four */
            uint2 u;
            u.x = h2_bits(v[0], v[1]);
            u.y = h2_bits(v[2], v[3]);
            *reinterpret_cast<uint2 *>(dst) = u;
        } else {
            for (int b = 0; b < 4 && k0 + b < in; b++)
                dst[b] = __float2half_rn(v[b]);
        }
    }
}

/* ---- the GEMV (n <= FP8_GEMV_MAX_N) ---- */

#define GV_MT FP8_GV_MT

/* The GEMV's epilogue through shared memory: each output summed over the KW warps in warp
 * order (GLU: silu(gate) * up). */
template <int NT, int KW, bool GLU>
__device__ __forceinline__ void gv_reduce(float (&red)[KW][GV_MT * NT * 4][32],
                                          const float (&acc)[GV_MT][NT][4], float *__restrict__ y,
                                          int n, int out, int mb, const int64_t (&m)[GV_MT])
{
    constexpr int NV = GV_MT * NT * 4;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
#pragma unroll
    for (int mt = 0; mt < GV_MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int c = 0; c < 4; c++)
                red[w][(mt * NT + nt) * 4 + c][lane] = acc[mt][nt][c];
    __syncthreads();
    /* value v = (mt NT + nt) 4 + c of lane ln: row 16 m[mt] + (ln >> 2) + 8 (c >> 1),
     * token 8 nt + 2 (ln & 3) + (c & 1) */
    constexpr int N_OUT = GLU ? NT * 4 * 32 : NV * 32;
    for (int idx = threadIdx.x; idx < N_OUT; idx += KW * 32) {
        const int ln = idx & 31, v = idx >> 5;
        const int c = v & 3, nt = (v >> 2) % NT, mt = (v >> 2) / NT;
        const int rr = fp8_cl_c_row(ln >> 2, c);
        const int tok = nt * 8 + fp8_cl_c_tok(ln & 3, c);
        if (tok >= n)
            continue;
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < KW; k++)
            s += red[k][v][ln];
        if constexpr (GLU) {
            float up = 0.0f;
#pragma unroll
            for (int k = 0; k < KW; k++)
                up += red[k][v + NT * 4][ln];
            y[(int64_t)tok * (out / 2) + 16 * mb + rr] = s / (1.0f + expf(-s)) * up;
        } else {
            const int64_t r = 16 * m[mt] + rr;
            if (r < out)
                y[(int64_t)tok * out + r] = s;
        }
    }
}

/* Stage x [n, in] into fp8_xs (zeros up to inp): one warp per (token, 128-input block), lane
 * L taking inputs 4 L .. 4 L + 3 of the block (chunk L / 8, half (L / 4) % 2, lane t = L % 4
 * of fp8_xs_chunk_word). W8A8: the block's amax over the warp gives act_scale, the codes are
 * quant2's, and lane 0 stores the scale at sxs [tok][kb] after the n rows. */
template <bool W8A8, int KW>
__device__ __forceinline__ void gv_stage(const float *__restrict__ x, int n, int in, int nkb,
                                         int xvec, int xstride)
{
    extern __shared__ uint4 fp8_xs[];
    uint32_t *xs = reinterpret_cast<uint32_t *>(fp8_xs);
    float *sxs = reinterpret_cast<float *>(fp8_xs) + n * xstride;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    for (int item = w; item < n * nkb; item += KW) {
        const int tok = item / nkb, kb = item - tok * nkb;
        const float4 v = load_x4(x, tok, n, in, kb * 128 + 4 * lane, xvec);
        uint2 pr;
        if constexpr (W8A8) {
            float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
                amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
            const float s = act_scale(amax);
            pr.x = e4m3x2_h2(quant2(v.x, v.y, s));
            pr.y = e4m3x2_h2(quant2(v.z, v.w, s));
            if (lane == 0)
                sxs[tok * nkb + kb] = s;
        } else {
            pr.x = h2_bits(v.x, v.y);
            pr.y = h2_bits(v.z, v.w);
        }
        *reinterpret_cast<uint2 *>(xs + tok * xstride + fp8_xs_stage_word(kb, lane)) = pr;
    }
    __syncthreads();
}

/* y [n, out] = x [n, in] · Wᵀ for n <= 8 NT (GLU: y [n, out/2] = silu(gate) * up, row block
 * mb taking gate m-tile mb and up m-tile out/32 + mb). Block: KW warps, K blocks kb = w,
 * w + KW, ... per warp, C fragments summed over the warps in warp order. A block serves row
 * blocks mb = blockIdx.x, + gridDim.x, ... up to n_mb: with a grid of about one wave (the
 * launch's choice), each warp's next weights — of the same row block or of the next — are
 * in flight while it computes and while the block sums a finished row block, instead of the
 * SM's stream stopping at every block's end; every (row block, K block) is the same
 * arithmetic whatever the grid, so the bits do not depend on it. */
template <int NT, int KW, bool W8A8, bool GLU, bool SX>
__global__ void __launch_bounds__(KW * 32)
fp8_gemv_kernel(float *__restrict__ y, const float *__restrict__ x, const uint4 *__restrict__ wq,
                const float *__restrict__ scale, int n, int out, int in, int n_kc, int nkb,
                int xvec, int n_mb)
{
    static_assert(!GLU || NT == 1, "GLU: the decode kernel");
    static_assert(!SX || NT == 1, "SX: the decode kernel");
    constexpr int NV = GV_MT * NT * 4;
    __shared__ float red[KW][NV][32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    /* this warp's K blocks per row block and the row blocks of this block; (lmb, lkb) is the
     * next item to load, one ahead of the one computed (fp8_gv_next) */
    const int cnt = w < nkb ? (nkb - w + KW - 1) / KW : 0;
    const int bx = (int)blockIdx.x, grid = (int)gridDim.x;
    const int n_my = bx < n_mb ? (n_mb - bx + grid - 1) / grid : 0;
    int lmb = cnt > 0 ? bx : n_mb, lkb = w;
    auto mtiles = [&](int mb, int64_t (&m)[GV_MT]) {
        m[0] = GLU ? mb : 2 * (int64_t)mb;
        m[1] = GLU ? (int64_t)(out / 32) + mb : 2 * (int64_t)mb + 1;
    };
    auto load_next = [&](uint4 (&wv)[GV_MT][4]) {
        if (lmb >= n_mb)
            return;
        int64_t m[GV_MT];
        mtiles(lmb, m);
#pragma unroll
        for (int mt = 0; mt < GV_MT; mt++)
#pragma unroll
            for (int c = 0; c < 4; c++)
                wv[mt][c] = ld_stream16(wq + (m[mt] * n_kc + lkb * 4 + c) * 32 + lane);
        fp8_gv_next(&lmb, &lkb, w, KW, nkb, grid);
    };
    /* decode (one n-tile): two register sets of weights, item j + 1 in flight while item j
     * computes */
    uint4 wv0[GV_MT][4], wv1[GV_MT][4];
    load_next(wv0); /* in flight before the wait: weights never change */
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    /* SX: the block stages x [n, inp] once in shared memory as the f16 pairs its B fragments
     * take (W8A8: the e4m3 codes, exact in f16, and each 128-input block's scale), so a
     * k-chunk's B fragment is one 16-byte shared load instead of two global loads, their
     * conversions and (W8A8) the amax and quantization in every block — the same values, so
     * the same sums as reading x from global memory */
    extern __shared__ uint4 fp8_xs[];
    const int xstride = fp8_xs_words(n_kc);
    const uint32_t *xs = reinterpret_cast<const uint32_t *>(fp8_xs);
    const float *sxs = reinterpret_cast<const float *>(fp8_xs) + n * xstride; /* [n][nkb] */
    if constexpr (SX)
        gv_stage<W8A8, KW>(x, n, in, nkb, xvec, xstride);

    float acc[GV_MT][NT][4];

    /* one 128-input block kb of the warp's m-tiles into acc */
    auto step = [&](const int kb, const uint4 (&wv)[GV_MT][4], const float *const (&sb)[GV_MT]) {
        const int k_blk = kb * 128;
        /* W8A8: the scale of token 8 nt + g over this block's 128 inputs (its four lanes t
         * hold 32 inputs each: chunks c, halves h, 4 t + 0..3) */
        float sx[NT];
        if constexpr (W8A8 && !SX) {
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                float amax = 0.0f;
#pragma unroll
                for (int c = 0; c < 4; c++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const float4 v = load_x4(x, nt * 8 + g, n, in, k_blk + fp8_cl_x_k(c, h, t), xvec);
                        amax = fmaxf(amax, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
                    }
                amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
                amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
                sx[nt] = act_scale(amax);
            }
        }
        float pacc[GV_MT][NT][4];
#pragma unroll
        for (int mt = 0; mt < GV_MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int c = 0; c < 4; c++)
                    pacc[mt][nt][c] = 0.0f;
#pragma unroll
        for (int c = 0; c < 4; c++) {
            uint32_t b[NT][2][2];
            if constexpr (SX) { /* B columns past n repeat token 0: never stored */
                const uint4 bb = *reinterpret_cast<const uint4 *>(
                    xs + (g < n ? g : 0) * xstride + fp8_xs_chunk_word(kb * 4 + c, t));
                b[0][0][0] = bb.x, b[0][0][1] = bb.y, b[0][1][0] = bb.z, b[0][1][1] = bb.w;
            } else {
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const float4 v = load_x4(x, nt * 8 + g, n, in, k_blk + fp8_cl_x_k(c, h, t), xvec);
                        if constexpr (W8A8) {
                            b[nt][h][0] = e4m3x2_h2(quant2(v.x, v.y, sx[nt]));
                            b[nt][h][1] = e4m3x2_h2(quant2(v.z, v.w, sx[nt]));
                        } else {
                            b[nt][h][0] = h2_bits(v.x, v.y);
                            b[nt][h][1] = h2_bits(v.z, v.w);
                        }
                    }
            }
#pragma unroll
            for (int mt = 0; mt < GV_MT; mt++) {
                const uint4 a = wv[mt][c];
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const uint32_t lo = h ? a.z : a.x, hi = h ? a.w : a.y; /* rows g, g + 8 */
                    const uint32_t a0 = e4m3x2_h2(lo), a1 = e4m3x2_h2(hi);
                    const uint32_t a2 = e4m3x2_h2(lo >> 16), a3 = e4m3x2_h2(hi >> 16);
#pragma unroll
                    for (int nt = 0; nt < NT; nt++)
                        mma_16816(pacc[mt][nt], a0, a1, a2, a3, b[nt][h][0], b[nt][h][1]);
                }
            }
        }
        /* the block's scales, in f32: W8A16 pacc * s_w; W8A8 (pacc * s_x[token]) * s_w, with
         * the C fragment's tokens 8 nt + 2 t, + 1 (their scales live in lanes 4 (2 t), ...) */
#pragma unroll
        for (int mt = 0; mt < GV_MT; mt++) {
            const float sw = __ldg(sb[mt] + kb);
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                if constexpr (W8A8) {
                    float s0, s1;
                    if constexpr (SX) {
                        const int t0 = fp8_cl_c_tok(t, 0), t1 = fp8_cl_c_tok(t, 1);
                        s0 = sxs[(t0 < n ? t0 : 0) * nkb + kb];
                        s1 = sxs[(t1 < n ? t1 : 0) * nkb + kb];
                    } else {
                        s0 = __shfl_sync(0xffffffffu, sx[nt], fp8_cl_tok_lane(fp8_cl_c_tok(t, 0)));
                        s1 = __shfl_sync(0xffffffffu, sx[nt], fp8_cl_tok_lane(fp8_cl_c_tok(t, 1)));
                    }
                    acc[mt][nt][0] += __fmul_rn(__fmul_rn(pacc[mt][nt][0], s0), sw);
                    acc[mt][nt][1] += __fmul_rn(__fmul_rn(pacc[mt][nt][1], s1), sw);
                    acc[mt][nt][2] += __fmul_rn(__fmul_rn(pacc[mt][nt][2], s0), sw);
                    acc[mt][nt][3] += __fmul_rn(__fmul_rn(pacc[mt][nt][3], s1), sw);
                } else {
#pragma unroll
                    for (int c = 0; c < 4; c++)
                        acc[mt][nt][c] = fmaf(pacc[mt][nt][c], sw, acc[mt][nt][c]);
                }
            }
        }
    };

    int j = 0;
    for (int r = 0; r < n_my; r++) {
        const int mb = bx + r * grid;
        int64_t m[GV_MT];
        mtiles(mb, m);
        const float *sb[GV_MT];
#pragma unroll
        for (int mt = 0; mt < GV_MT; mt++)
            sb[mt] = scale + ((m[mt] * 16) / 128) * nkb;
#pragma unroll
        for (int mt = 0; mt < GV_MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int c = 0; c < 4; c++)
                    acc[mt][nt][c] = 0.0f;
        for (int i = 0; i < cnt; i++, j++) {
            const int kb = w + i * KW;
            if constexpr (NT == 1) {
                if ((j & 1) == 0) {
                    load_next(wv1);
                    step(kb, wv0, sb);
                } else {
                    load_next(wv0);
                    step(kb, wv1, sb);
                }
            } else { /* more n-tiles: the second set measured slower (registers); loads after use */
                step(kb, wv0, sb);
                load_next(wv0);
            }
        }

        if constexpr (KW == 1 && !GLU) {
#pragma unroll
            for (int mt = 0; mt < GV_MT; mt++)
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
#pragma unroll
                    for (int c = 0; c < 4; c++) {
                        const int64_t rr = 16 * m[mt] + fp8_cl_c_row(g, c);
                        const int tok = nt * 8 + fp8_cl_c_tok(t, c);
                        if (rr < out && tok < n)
                            y[(int64_t)tok * out + rr] = acc[mt][nt][c];
                    }
        } else {
            gv_reduce<NT, KW, GLU>(red, acc, y, n, out, mb, m);
            if (r + 1 < n_my)
                __syncthreads(); /* red is written again by the next row block */
        }
    }
}

typedef void (*gemv_fn)(float *, const float *, const uint4 *, const float *, int, int, int, int,
                        int, int, int);

template <int NT, int KW, bool W8A8, bool GLU, bool SX> static gemv_fn gemv_at()
{
    if constexpr (KW * NT > FP8_KW_MAX)
        return gemv_at<NT, KW / 2, W8A8, GLU, SX>();
    else
        return fp8_gemv_kernel<NT, KW, W8A8, GLU, SX>;
}

template <int NT, bool W8A8, bool GLU, bool SX> static gemv_fn gemv_kw(int kw)
{
    switch (kw) {
    case 16: return gemv_at<NT, 16, W8A8, GLU, SX>();
    case 8: return gemv_at<NT, 8, W8A8, GLU, SX>();
    case 4: return gemv_at<NT, 4, W8A8, GLU, SX>();
    case 2: return gemv_at<NT, 2, W8A8, GLU, SX>();
    default: return gemv_at<NT, 1, W8A8, GLU, SX>();
    }
}

/* sx: x staged in shared memory (nt = 1 only) */
static gemv_fn gemv_pick(int nt, int kw, int w8a8, int glu, int sx)
{
    if (nt == 1 && sx) {
        if (glu)
            return w8a8 ? gemv_kw<1, true, true, true>(kw) : gemv_kw<1, false, true, true>(kw);
        return w8a8 ? gemv_kw<1, true, false, true>(kw) : gemv_kw<1, false, false, true>(kw);
    }
    if (glu) /* callers check nt == 1 */
        return w8a8 ? gemv_kw<1, true, true, false>(kw) : gemv_kw<1, false, true, false>(kw);
    if (nt == 1)
        return w8a8 ? gemv_kw<1, true, false, false>(kw) : gemv_kw<1, false, false, false>(kw);
    if (nt == 2)
        return w8a8 ? gemv_kw<2, true, false, false>(kw) : gemv_kw<2, false, false, false>(kw);
    return w8a8 ? gemv_kw<4, true, false, false>(kw) : gemv_kw<4, false, false, false>(kw);
}

/* Bytes of shared memory the decode GEMV stages x in for n rows, or 0 where it reads x from
 * global memory (more than 8 rows, tune sx=0, or above FP8_SX_MAX_BYTES). */
#define FP8_SX_MAX_BYTES 32768
static size_t stage_bytes(const fp8_cuda_ctx *ctx, const fp8_cuda_linear *l, int n, int w8a8)
{
    if (n > 8 || !ctx->tune_sx)
        return 0;
    const size_t b = (size_t)n * (size_t)fp8_xs_words((int)l->n_kc) * 4 +
                     (w8a8 ? (size_t)n * (size_t)l->nkb * 4 : 0);
    return b <= FP8_SX_MAX_BYTES ? b : 0;
}

/* One GEMV launch for n <= 32 rows (glu: the SwiGLU variant, n <= 8). The decode shape
 * (n <= 8) runs a grid of one wave (l->wave blocks, unless tune pers=0) over the row blocks. */
static llmrt_status launch_gemv(fp8_cuda_ctx *ctx, const fp8_cuda_linear *l, float *y,
                                const float *x, int n, int w8a8, int glu, llmrt_error *err)
{
    const int nt = n <= 8 ? 1 : n <= 16 ? 2 : 4;
    int kw = l->kw;
    while (kw * nt > FP8_KW_MAX)
        kw /= 2;
    const int xvec = ((uintptr_t)x & 15u) == 0 && (l->in & 3) == 0;
    const int n_mb = (int)((glu ? l->out : l->outp) / 32);
    const int grid = nt == 1 && ctx->tune_pers && l->wave < n_mb ? l->wave : n_mb;
    const size_t sx = stage_bytes(ctx, l, n, w8a8);
    llmrt_cuda_launch(ctx->stream, ctx->pdl, gemv_pick(nt, kw, w8a8, glu, sx > 0), dim3((unsigned)grid),
                      dim3((unsigned)(kw * 32)), sx, y, x, (const uint4 *)l->wq,
                      (const float *)l->scale, n, (int)l->out, (int)l->in, (int)l->n_kc,
                      (int)l->nkb, xvec, n_mb);
    return llmrt_cuda_check_launch(err, "quant-fp8 cuda", glu ? "fp8_gemv_kernel (SwiGLU)"
                                                              : "fp8_gemv_kernel");
}

/* Blocks of the decode GEMV (n = 1) that the device holds at once: the grid of one wave. */
static int wave_blocks(const fp8_cuda_ctx *ctx, const fp8_cuda_linear *l)
{
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gemv_pick(1, l->kw, 0, 0, ctx->tune_sx),
                                                      l->kw * 32, stage_bytes(ctx, l, 1, 0)) !=
            cudaSuccess ||
        per_sm < 1) {
        cudaGetLastError();
        per_sm = 1;
    }
    return per_sm * ctx->sm_count;
}

/* The GEMV's K-splitting warps for a linear of nkb K blocks: FP8_KW_DEFAULT, at most one per
 * K block. (The first choice, per linear the most that kept the grid within ~16 warps per SM
 * — 2 for Qwen3-8B's gate/up, 8 or 16 for the others — was slower at batch 1 on the H200
 * than 16 everywhere, and 4 everywhere slower still: BENCHMARKS.md, 2026-12-03.) */
#define FP8_KW_DEFAULT 16
static int choose_kw(const fp8_cuda_ctx *ctx, int64_t nkb)
{
    const int want = ctx->tune_kw > 0 ? ctx->tune_kw : FP8_KW_DEFAULT;
    int kw = 1;
    while (kw * 2 <= want && kw * 2 <= FP8_KW_MAX && (ctx->tune_kw > 0 || kw * 2 <= nkb))
        kw *= 2;
    return kw;
}

/* ---- W8A8 above the GEMV's rows: activation quantization + the FP8 tensor-core GEMM ---- */

/* One warp per (token, 128-input block) of x [n, in]: codes xq [ldn, inp] (zeros past n and
 * in) and scales sxt [nkb, ldn] (0 past n), as fp8_act.h. */
__global__ void fp8_quant_kernel(uint8_t *__restrict__ xq, float *__restrict__ sxt,
                                 const float *__restrict__ x, int n, int in, int64_t inp, int nkb,
                                 int ldn, int xvec)
{
    llmrt_cuda_pdl_wait(); /* x comes from the kernel before; xq may still be read by the last GEMM */
    llmrt_cuda_pdl_trigger();
    const int64_t gw = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (gw >= (int64_t)ldn * nkb)
        return;
    const int tok = (int)(gw / nkb), kb = (int)(gw % nkb);
    const int k = kb * 128 + 4 * lane;
    const float4 v = load_x4(x, tok, n, in, k, xvec);
    float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float s = act_scale(amax);
    const uint32_t word = quant2(v.x, v.y, s) | (quant2(v.z, v.w, s) << 16);
    *reinterpret_cast<uint32_t *>(xq + (int64_t)tok * inp + k) = word;
    if (lane == 0)
        sxt[(int64_t)kb * ldn + tok] = tok < n ? s : 0.0f;
}

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::);
}
template <int N> __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

struct gm_stage {
    uint4 a[4][4][32];                  /* the block's 4 m-tiles x 4 k-chunks, fragment order */
    uint8_t b[GM_BN * GM_BSTRIDE];      /* 64 tokens x 128 codes */
    float s[GM_BN];                     /* the tokens' activation scales */
};

/* y [n, out] for W8A8 codes xq [ldn, inp], scales sxt [nkb, ldn]. Block (bx, by): rows
 * 64 bx .. + 63 (one 128-row scale block), tokens 64 by .. + 63; warp w: rows + 32 (w & 1),
 * tokens + 32 (w >> 1). */
__global__ void __launch_bounds__(128)
fp8_gemm_kernel(float *__restrict__ y, const uint8_t *__restrict__ xq,
                const float *__restrict__ sxt, const uint4 *__restrict__ wq,
                const float *__restrict__ scale, int n, int out, int n_kc, int nkb, int64_t inp,
                int ldn)
{
    __shared__ gm_stage st[2];
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, g = lane >> 2, t = lane & 3;
    const int wm = w & 1, wn = w >> 1;
    const int64_t mt0 = (int64_t)blockIdx.x * 4;
    const int n0 = blockIdx.y * GM_BN;
    const float *srow = scale + ((mt0 * 16) / 128) * nkb;
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();

    auto load = [&](int s, int kb) {
#pragma unroll
        for (int i = 0; i < 4; i++) { /* A: 512 x 16 bytes */
            const int idx = tid + 128 * i, mt = idx >> 7, kc = (idx >> 5) & 3, ln = idx & 31;
            cp_async16(&st[s].a[mt][kc][ln], wq + ((mt0 + mt) * n_kc + (int64_t)kb * 4 + kc) * 32 + ln);
        }
#pragma unroll
        for (int i = 0; i < 4; i++) { /* B: 64 tokens x 8 chunks of 16 codes */
            const int idx = tid + 128 * i, tok = idx >> 3, ch = idx & 7;
            cp_async16(&st[s].b[tok * GM_BSTRIDE + ch * 16],
                       xq + (int64_t)(n0 + tok) * inp + (int64_t)kb * 128 + ch * 16);
        }
        if (tid < GM_BN / 4)
            cp_async16(&st[s].s[tid * 4], sxt + (int64_t)kb * ldn + n0 + tid * 4);
        cp_async_commit();
    };

    float acc[2][4][4];
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int nt = 0; nt < 4; nt++)
#pragma unroll
            for (int c = 0; c < 4; c++)
                acc[mt][nt][c] = 0.0f;

    load(0, 0);
    for (int kb = 0; kb < nkb; kb++) {
        const int s = kb & 1;
        if (kb + 1 < nkb) {
            load(s ^ 1, kb + 1);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        float pacc[2][4][4];
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int nt = 0; nt < 4; nt++)
#pragma unroll
                for (int c = 0; c < 4; c++)
                    pacc[mt][nt][c] = 0.0f;
#pragma unroll
        for (int kc = 0; kc < 4; kc++) {
            uint4 a[2];
#pragma unroll
            for (int mt = 0; mt < 2; mt++)
                a[mt] = st[s].a[2 * wm + mt][kc][lane];
#pragma unroll
            for (int nt = 0; nt < 4; nt++) {
                const int row = 32 * wn + 8 * nt + g;
                const uint32_t b0 = *reinterpret_cast<const uint32_t *>(
                    st[s].b + fp8_cl_gemm_b_offset(row, kc, 0, t, GM_BSTRIDE));
                const uint32_t b1 = *reinterpret_cast<const uint32_t *>(
                    st[s].b + fp8_cl_gemm_b_offset(row, kc, 1, t, GM_BSTRIDE));
#pragma unroll
                for (int mt = 0; mt < 2; mt++)
                    mma_16832_e4m3(pacc[mt][nt], a[mt], b0, b1);
            }
        }
        const float sw = __ldg(srow + kb);
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
            const int tk = 32 * wn + 8 * nt;
            const float s0 = st[s].s[tk + fp8_cl_c_tok(t, 0)], s1 = st[s].s[tk + fp8_cl_c_tok(t, 1)];
#pragma unroll
            for (int mt = 0; mt < 2; mt++) {
                acc[mt][nt][0] += __fmul_rn(__fmul_rn(pacc[mt][nt][0], s0), sw);
                acc[mt][nt][1] += __fmul_rn(__fmul_rn(pacc[mt][nt][1], s1), sw);
                acc[mt][nt][2] += __fmul_rn(__fmul_rn(pacc[mt][nt][2], s0), sw);
                acc[mt][nt][3] += __fmul_rn(__fmul_rn(pacc[mt][nt][3], s1), sw);
            }
        }
        __syncthreads(); /* the stage is refilled next iteration */
    }
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int nt = 0; nt < 4; nt++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int64_t r = 16 * (mt0 + 2 * wm + mt) + fp8_cl_c_row(g, c);
                const int tok = n0 + 32 * wn + 8 * nt + fp8_cl_c_tok(t, c);
                if (r < out && tok < n)
                    y[(int64_t)tok * out + r] = acc[mt][nt][c];
            }
}

static llmrt_status forward_gemm_w8a8(fp8_cuda_ctx *ctx, const fp8_cuda_linear *l, float *y,
                                      const float *x, int n, llmrt_error *err)
{
    const int ldn = (int)round_up(n, GM_BN);
    const size_t codes = (size_t)round_up((int64_t)ldn * l->inp, 256);
    const size_t need = codes + (size_t)(l->nkb * ldn) * sizeof(float);
    llmrt_status st = grow(ctx, &ctx->act, &ctx->act_bytes, need, "W8A8 activation scratch", err);
    if (st != LLMRT_OK)
        return st;
    uint8_t *xq = (uint8_t *)ctx->act;
    float *sxt = (float *)((char *)ctx->act + codes);
    const int xvec = ((uintptr_t)x & 15u) == 0 && (l->in & 3) == 0;
    const int64_t threads = (int64_t)ldn * l->nkb * 32;
    llmrt_cuda_launch(ctx->stream, ctx->pdl, fp8_quant_kernel, dim3((unsigned)((threads + 255) / 256)),
                      dim3(256), 0, xq, sxt, x, n, (int)l->in, l->inp, (int)l->nkb, ldn, xvec);
    if ((st = llmrt_cuda_check_launch(err, "quant-fp8 cuda", "fp8_quant_kernel")))
        return st;
    llmrt_cuda_launch(ctx->stream, ctx->pdl, fp8_gemm_kernel,
                      dim3((unsigned)(l->outp / GM_BM), (unsigned)(ldn / GM_BN)), dim3(128), 0, y,
                      (const uint8_t *)xq, (const float *)sxt, (const uint4 *)l->wq,
                      (const float *)l->scale, n, (int)l->out, (int)l->n_kc, (int)l->nkb, l->inp,
                      ldn);
    return llmrt_cuda_check_launch(err, "quant-fp8 cuda", "fp8_gemm_kernel");
}

/* W8A16 above the GEMV's rows: dequantized f16 weights and the backend's gemm. */
static llmrt_status forward_dequant_gemm(fp8_cuda_ctx *ctx, const fp8_cuda_linear *l, float *y,
                                         const float *x, int n, llmrt_error *err)
{
    const int64_t words = l->n_mt * l->n_kc * 128;
    llmrt_cuda_launch(ctx->stream, ctx->pdl, fp8_dequant_f16_kernel, dim3(grid_for(ctx, words, 256)),
                      dim3(256), 0, ctx->deq, (const uint32_t *)l->wq, (const float *)l->scale,
                      l->out, l->in, l->n_mt, l->n_kc, l->nkb);
    llmrt_status st = llmrt_cuda_check_launch(err, "quant-fp8 cuda", "fp8_dequant_f16_kernel");
    if (st != LLMRT_OK)
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

/* ---- the C interface ---- */

extern "C" int fp8_cuda_offered(const llmrt_backend_ref *backend)
{
    return llmrt_cuda_ext_of(backend) != NULL;
}

extern "C" llmrt_status fp8_cuda_create(const llmrt_backend_ref *backend, const char *tune,
                                        fp8_cuda_ctx **out, llmrt_error *err)
{
    *out = NULL;
    const llmrt_cuda_ext *x = llmrt_cuda_ext_of(backend);
    if (!x || !x->stream || !x->device || !x->pdl)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "quant-fp8 cuda: backend '%s' offers no usable llmrt.cuda extension",
                          backend->name ? backend->name : "?");
    fp8_cuda_ctx *ctx = (fp8_cuda_ctx *)calloc(1, sizeof *ctx);
    if (!ctx)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "quant-fp8 cuda: out of memory");
    ctx->be = *backend;
    ctx->stream = x->stream(backend->b);
    ctx->device = x->device(backend->b);
    ctx->pdl = x->pdl(backend->b);
    cudaDeviceProp prop;
    cudaError_t e = cudaSetDevice(ctx->device);
    if (e == cudaSuccess)
        e = cudaGetDeviceProperties(&prop, ctx->device);
    if (e != cudaSuccess) {
        free(ctx);
        return cfail(err, e, "reading the backend's device");
    }
    ctx->sm_count = prop.multiProcessorCount;
    ctx->cc = prop.major * 10 + prop.minor;
    ctx->mma = ctx->cc >= 89;
    ctx->gemv_rows = FP8_GEMV_ROWS;
    ctx->tune_sx = 1;
    ctx->tune_pers = 1;
    snprintf(ctx->name, sizeof ctx->name, "%s (sm_%d)", prop.name, ctx->cc);
    /* [quant.fp8] tune = "kw=8,mma=0" (fp8_cuda.h); unknown knobs are ignored */
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
                ctx->tune_kw = v;
            else if (strcmp(tok, "sx") == 0)
                ctx->tune_sx = v != 0;
            else if (strcmp(tok, "pers") == 0)
                ctx->tune_pers = v != 0;
            else if (strcmp(tok, "mma") == 0 && v == 0)
                ctx->mma = 0;
            else if (strcmp(tok, "gemv_rows") == 0 && v >= 1 && v <= FP8_GEMV_MAX_N)
                ctx->gemv_rows = v;
        }
    }
    void *bad = NULL;
    llmrt_status st = dalloc(ctx, sizeof(unsigned long long), &bad, "the NaN check", err);
    if (st != LLMRT_OK) {
        free(ctx);
        return st;
    }
    ctx->bad = (unsigned long long *)bad;
    *out = ctx;
    return LLMRT_OK;
}

extern "C" void fp8_cuda_destroy(fp8_cuda_ctx *ctx)
{
    if (!ctx)
        return;
    cudaSetDevice(ctx->device);
    cudaStreamSynchronize(ctx->stream);
    void *bufs[] = {ctx->staging, ctx->deq, ctx->act, ctx->bad};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        if (bufs[i])
            ctx->be.vt->dev_free(ctx->be.b, bufs[i]);
    for (int i = 0; i < ctx->n_retired; i++)
        ctx->be.vt->dev_free(ctx->be.b, ctx->retired[i]);
    cudaGetLastError();
    free(ctx);
}

extern "C" int fp8_cuda_has_fp8_mma(const fp8_cuda_ctx *ctx)
{
    return ctx->mma;
}

extern "C" const char *fp8_cuda_device_name(const fp8_cuda_ctx *ctx)
{
    return ctx->name;
}

extern "C" llmrt_status fp8_cuda_load(fp8_cuda_ctx *ctx, const fp8_part *parts, int n_parts,
                                      int64_t in, fp8_cuda_linear **out_l, llmrt_error *err)
{
    *out_l = NULL;
    llmrt_status st = use_device(ctx, err);
    if (st != LLMRT_OK)
        return st;
    int64_t out = 0, max_part = 0;
    for (int p = 0; p < n_parts; p++) {
        out += parts[p].out;
        if (parts[p].out * in > max_part)
            max_part = parts[p].out * in;
    }
    if (out > INT32_MAX / 2 || in > INT32_MAX / 2 || out * in > ((int64_t)1 << 40))
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "quant-fp8 cuda: linear [%lld, %lld] is too large", (long long)out,
                          (long long)in);
    fp8_cuda_linear *l = (fp8_cuda_linear *)calloc(1, sizeof *l);
    if (!l)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "quant-fp8 cuda: out of memory");
    l->in = in;
    l->out = out;
    l->inp = round_up(in, 128);
    l->outp = round_up(out, GM_BM);
    l->n_mt = l->outp / 16;
    l->n_kc = l->inp / 32;
    l->nkb = l->inp / 128;
    l->nrb = (l->outp + 127) / 128;
    l->wq_bytes = (size_t)(l->n_mt * l->n_kc * 32) * sizeof(uint4);
    l->scale_bytes = (size_t)(l->nrb * l->nkb) * sizeof(float);
    l->kw = choose_kw(ctx, l->nkb);
    l->wave = wave_blocks(ctx, l);
    float *hs = (float *)calloc((size_t)(l->nrb * l->nkb), sizeof(float));
    void *wq = NULL, *sc = NULL;
    cudaError_t e;
    if (!hs) {
        st = llmrt_fail(err, LLMRT_ERR_NOMEM, "quant-fp8 cuda: out of memory");
        goto fail;
    }
    if ((st = dalloc(ctx, l->wq_bytes, &wq, "FP8 weights", err)) ||
        (st = dalloc(ctx, l->scale_bytes, &sc, "FP8 scales", err)))
        goto fail;
    l->wq = (uint4 *)wq;
    l->scale = (float *)sc;
    /* load time only: the dequantized f16 scratch of W8A16 above the GEMV */
    if ((st = grow(ctx, (void **)&ctx->deq, &ctx->deq_bytes, (size_t)(out * in) * sizeof(__half),
                   "W8A16 dequantization scratch", err)) ||
        (st = grow(ctx, &ctx->staging, &ctx->staging_bytes, (size_t)max_part, "load staging", err)))
        goto fail;
    {
        int64_t row0 = 0;
        for (int p = 0; p < n_parts; p++) {
            const int64_t po = parts[p].out;
            if ((e = cudaMemsetAsync(ctx->bad, 0xff, sizeof(unsigned long long), ctx->stream)) ||
                (e = cudaMemcpyAsync(ctx->staging, parts[p].weight, (size_t)(po * in),
                                     cudaMemcpyHostToDevice, ctx->stream))) {
                st = cfail(err, e, "copying the FP8 weights to the device");
                goto fail;
            }
            /* this part's m-tiles; the last part also fills the padding rows */
            const int64_t mt0 = row0 / 16;
            const int64_t n_mt = p + 1 < n_parts ? po / 16 : l->n_mt - mt0;
            const int64_t words = n_mt * l->n_kc * 128;
            fp8_repack_kernel<<<grid_for(ctx, words, 256), 256, 0, ctx->stream>>>(
                (uint32_t *)(l->wq + mt0 * l->n_kc * 32), (const uint8_t *)ctx->staging, po, in,
                n_mt, l->n_kc, ctx->bad);
            if ((st = llmrt_cuda_check_launch(err, "quant-fp8 cuda", "fp8_repack_kernel")))
                goto fail;
            unsigned long long bad = 0;
            if ((e = cudaMemcpyAsync(&bad, ctx->bad, sizeof bad, cudaMemcpyDeviceToHost,
                                     ctx->stream)) ||
                (e = cudaStreamSynchronize(ctx->stream))) {
                st = cfail(err, e, "repacking the FP8 weights");
                goto fail;
            }
            if (bad != ~0ull) {
                st = llmrt_fail(err, LLMRT_ERR_FORMAT,
                                "quant-fp8: %s holds a NaN (e4m3 code 0x7f or 0xff) at [%lld, "
                                "%lld]",
                                parts[p].name, (long long)(bad / (unsigned long long)in),
                                (long long)(bad % (unsigned long long)in));
                goto fail;
            }
            const int64_t prb = (po + 127) / 128;
            for (int64_t i = 0; i < prb * l->nkb; i++)
                hs[(row0 / 128) * l->nkb + i] = fp8_part_scale(&parts[p], i);
            row0 += po;
        }
        if ((e = cudaMemcpyAsync(l->scale, hs, l->scale_bytes, cudaMemcpyHostToDevice,
                                 ctx->stream)) ||
            (e = cudaStreamSynchronize(ctx->stream))) {
            /* forward kernels read weights before waiting on the kernel before them (PDL):
             * everything must be in place first */
            st = cfail(err, e, "copying the FP8 scales to the device");
            goto fail;
        }
    }
    free(hs);
    *out_l = l;
    return LLMRT_OK;
fail:
    cudaStreamSynchronize(ctx->stream);
    cudaGetLastError();
    if (wq)
        ctx->be.vt->dev_free(ctx->be.b, wq);
    if (sc)
        ctx->be.vt->dev_free(ctx->be.b, sc);
    free(hs);
    free(l);
    return st;
}

extern "C" void fp8_cuda_free(fp8_cuda_ctx *ctx, fp8_cuda_linear *l)
{
    if (!l)
        return;
    cudaSetDevice(ctx->device);
    cudaStreamSynchronize(ctx->stream); /* queued work may still read it */
    ctx->be.vt->dev_free(ctx->be.b, l->wq);
    ctx->be.vt->dev_free(ctx->be.b, l->scale);
    free(l);
}

extern "C" uint64_t fp8_cuda_bytes(const fp8_cuda_linear *l)
{
    return l ? (uint64_t)(l->wq_bytes + l->scale_bytes) : 0;
}

extern "C" llmrt_status fp8_cuda_forward(fp8_cuda_ctx *ctx, const fp8_cuda_linear *l, float *y,
                                         const float *x, int32_t n, int w8a8, llmrt_error *err)
{
    if (n <= 0)
        return LLMRT_OK;
    llmrt_status st = use_device(ctx, err);
    if (st != LLMRT_OK)
        return st;
    const int gr = ctx->gemv_rows;
    if (n <= gr)
        return launch_gemv(ctx, l, y, x, n, w8a8, 0, err);
    if (w8a8 && ctx->mma)
        return forward_gemm_w8a8(ctx, l, y, x, n, err);
    if (w8a8) { /* no FP8 tensor cores: the GEMV, gemv_rows rows at a time */
        for (int32_t r0 = 0; r0 < n && st == LLMRT_OK; r0 += gr) {
            const int rows = n - r0 < gr ? n - r0 : gr;
            st = launch_gemv(ctx, l, y + (int64_t)r0 * l->out, x + (int64_t)r0 * l->in, rows, 1,
                             0, err);
        }
        return st;
    }
    return forward_dequant_gemm(ctx, l, y, x, n, err);
}

extern "C" int32_t fp8_cuda_fused_max_rows(const fp8_cuda_ctx *ctx, const fp8_cuda_linear *l)
{
    (void)ctx;
    /* the halves must be whole m-tiles: gate rows 16 mb.., up rows out/2 + 16 mb.. */
    return l->out % 32 == 0 ? 8 : 0;
}

extern "C" llmrt_status fp8_cuda_forward_swiglu(fp8_cuda_ctx *ctx, const fp8_cuda_linear *l,
                                                float *y, const float *x, int32_t n, int w8a8,
                                                llmrt_error *err)
{
    if (n < 1 || n > fp8_cuda_fused_max_rows(ctx, l))
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "quant-fp8 cuda: SwiGLU GEMV of [%lld, %lld] takes 1..%d rows, not %d",
                          (long long)l->out, (long long)l->in, fp8_cuda_fused_max_rows(ctx, l), n);
    llmrt_status st = use_device(ctx, err);
    if (st != LLMRT_OK)
        return st;
    return launch_gemv(ctx, l, y, x, n, w8a8, 1, err); /* one row block per gate m-tile */
}

extern "C" llmrt_status fp8_cuda_dequant(fp8_cuda_ctx *ctx, const fp8_cuda_linear *l, float *out,
                                         llmrt_error *err)
{
    llmrt_status st = use_device(ctx, err);
    if (st != LLMRT_OK)
        return st;
    const size_t bytes = (size_t)(l->out * l->in) * sizeof(float);
    void *d = NULL;
    if ((st = dalloc(ctx, bytes, &d, "dequantized weights", err)))
        return st;
    fp8_dequant_f32_kernel<<<grid_for(ctx, l->out * l->in, 256), 256, 0, ctx->stream>>>(
        (float *)d, (const uint32_t *)l->wq, l->scale, l->out, l->in, l->n_kc, l->nkb);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(out, d, bytes, cudaMemcpyDeviceToHost, ctx->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(ctx->stream);
    ctx->be.vt->dev_free(ctx->be.b, d);
    return e == cudaSuccess ? LLMRT_OK : cfail(err, e, "dequantizing to the host");
}
