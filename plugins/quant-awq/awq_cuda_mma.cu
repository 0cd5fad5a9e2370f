/* awq_cuda_mma.cu — the AWQ batch kernel: y [n, out] = x [n, in] · Wᵀ for 9..256 rows on the
 * tensor cores, each weight read once per step for up to 32 tokens (awq_cuda_internal.cuh
 * declares the entry points; awq_cuda.cu dispatches to it by n).
 *
 * Why its own kernel: the decode GEMV (awq_cuda.cu) gives each 32-row block all of x from
 * global memory once per k-tile, so at batch 32 it reads x ~770 times for gate/up (402 MB of
 * L2 traffic for 52 MB of weights) and runs 4x slower than at batch 1; the dequantise +
 * cuBLAS path writes and rereads the whole linear as f16 every step. Here a block of W warps
 * (each 32 output rows, two m-tiles) shares one staging of x (up to 32 tokens) per 256-input
 * iteration: the f32 rows are loaded into registers (in flight while the block computes the
 * previous iteration) and converted once per block to f16 pairs in the order the GEMV stages
 * them, into one of two stages (one barrier per iteration), so a B fragment is one 8-byte
 * shared load that serves both m-tiles.
 * Weights stream through a per-warp ring of `stages` iterations in shared memory (cp.async,
 * stages - 1 iterations ahead: a lane reads back only the 16-byte words it copied, so the
 * ring needs no barrier).
 * Nsight Compute puts the kernel's limit in latency at low occupancy (a warp's dependent
 * dequant + mma chain, ~1.7 warps per scheduler), not in DRAM: deeper rings change nothing
 * measurable, so the default is two stages, the least shared memory (BENCHMARKS.md). More
 * tokens than a block's columns (16 or 32 by shape, tune mma_bn) take more column blocks,
 * which run next to each other (blockIdx.x) so the later ones find the weights in L2.
 *
 * Batch invariance: a token's outputs are bit for bit the GEMV's for that token alone. Each
 * output is the GEMV's sum in the GEMV's order: per group of inputs a chain of m16n8k16 mma
 * over the group's k-tiles from 0 (exact q - z in f16 times x rounded to f16, f32 inside),
 * scaled in f32 with fmaf into the slice's sum; slice w of the linear's KW K-splitting warps
 * takes iterations w, w + KW, ... in order; the slices are added in order starting from 0.0f
 * (as the GEMV's shared-memory sum; a single slice is stored as it is). Here one warp walks
 * the slices one after the other (their running sum, T, lives in shared memory), or, where the
 * grid would otherwise be too small, blocks take contiguous ranges of slices (split-K): the
 * first range's sum and the later slices' sums go to a partial buffer and a second small
 * kernel adds them in the same order. SwiGLU (the GLU fold) pairs a gate m-tile with its up
 * m-tile in one warp, as the GLU GEMV does, so silu(gate) * up is a per-lane epilogue. */
#include "awq_cuda_internal.cuh"

#include <llmrt/cuda.h>

#include <string.h>

#define MMA_BN 32                    /* most token columns a block computes */
#define MMA_XS_WORDS (AWQ_ITK / 2 + 8) /* staged f16 row of one iteration, padded 8 banks */
#define MMA_SLOT (4 * AWQ_MT * 32)     /* 16-byte words of one warp's iteration of weights */
#define MMA_STAGES 2                   /* default ring depth (tune mma_stages, 2..5): as fast as
                                          deeper rings, and the least shared memory */
#define MMA_XDB 2                      /* default x stages (tune mma_xdb, 1 or 2) */

/* Shared memory of one block: the f16 stages of x in fragment order [xdb][BN][MMA_XS_WORDS],
 * the warps' slice sums T [W][NV][32], then each warp's weight ring [W][stages][MMA_SLOT]. */
template <int NT, int W> struct mma_smem {
    static constexpr int BN = 8 * NT;
    static constexpr int NV = AWQ_MT * NT * 4; /* accumulators per lane */
    static constexpr size_t XH = (size_t)BN * MMA_XS_WORDS * 4;
    static constexpr size_t TS = (size_t)W * NV * 32 * 4;
    static constexpr int XPT = BN * (AWQ_ITK / 4) / (W * 32); /* float4s of x per thread */
    static_assert(BN * (AWQ_ITK / 4) % (W * 32) == 0, "x stage: whole float4s per thread");
};

typedef struct awq_mma_args {
    float *y;              /* [n, out] (GLU: [n, out / 2]) */
    float *part;           /* split-K partials [kw][n][out] */
    const float *x;        /* [n, in], 16-byte aligned */
    const uint32_t *wq, *meta;
    int n, out, in, kpad;
    int kw;                /* the linear's K slices (the GEMV's K-splitting warps) */
    int split;             /* slice ranges, one per blockIdx.z */
    int cpb;               /* token columns per column block */
    int units;             /* 32-row units: out_padded / 32 (GLU: gate m-tiles) */
    int stages;            /* weight ring depth, 2..5 */
    int xdb;               /* x stages: 2 (double-buffered) or 1 */
} awq_mma_args;

/* 16-byte cp.async of a streamed weight word (L2 only, like ld.global.nc's no_allocate). */
__device__ __forceinline__ void mma_cp16(void *smem, const void *src)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(src) : "memory");
}

__device__ __forceinline__ void mma_cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

/* Wait until at most stages - 2 of this thread's copy groups are in flight: the oldest one,
 * the iteration about to be computed, has landed. */
__device__ __forceinline__ void mma_cp_wait_ring(int stages)
{
    switch (stages) {
    case 2: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
    case 3: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
    case 4: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
    }
}

/* The block's iterations in the order they are computed: slices s_first .. s_end - 1, each its
 * iterations s, s + kw, ... below n_iters (the GEMV's order). */
struct mma_cursor {
    int s, it;
    __device__ __forceinline__ void advance(int kw, int n_iters)
    {
        it += kw;
        if (it >= n_iters)
            it = ++s;
    }
};

/* This lane's words of iteration it (four quarters of both m-tiles) into a ring slot. */
__device__ __forceinline__ void mma_fetch_iter(uint4 *slot, const uint4 *const (&wb)[AWQ_MT],
                                               int it, int lane)
{
#pragma unroll
    for (int c = 0; c < 4; c++)
#pragma unroll
        for (int mt = 0; mt < AWQ_MT; mt++)
            mma_cp16(slot + (c * AWQ_MT + mt) * 32 + lane, wb[mt] + (int64_t)(it * 4 + c) * 32);
}

/* Quarter C (inputs 64 C .. 64 C + 63) of a slot: one 16-byte word per m-tile. */
template <int C>
__device__ __forceinline__ void mma_read_quarter(uint4 (&w)[AWQ_MT], const uint4 *slot, int lane)
{
#pragma unroll
    for (int mt = 0; mt < AWQ_MT; mt++)
        w[mt] = slot[(C * AWQ_MT + mt) * 32 + lane];
}

/* The meta of iteration it's groups. */
template <int GROUP>
__device__ __forceinline__ void mma_load_meta(uint2 (&m)[AWQ_MT][AWQ_ITK / GROUP],
                                              const uint2 *const (&mb)[AWQ_MT], int it)
{
    constexpr int GPI = AWQ_ITK / GROUP;
#pragma unroll
    for (int mt = 0; mt < AWQ_MT; mt++)
#pragma unroll
        for (int gi = 0; gi < GPI; gi++)
            m[mt][gi] = __ldg(mb[mt] + (int64_t)(it * GPI + gi) * 8);
}

/* acc += quarter C of the staged iteration (k-tiles 4 C .. 4 C + 3), group by group as the
 * GEMV's awq_compute_iter: a group's chain of mma starts from 0 at its first k-tile (pacc,
 * which with the zero points lives on across quarters when a group spans several) and is
 * scaled in f32 into acc after its last. A k-tile's B fragments serve both m-tiles. Once a
 * group's meta is used for the last time, iteration nit's meta of that group is loaded into
 * its registers (when nit >= 0): three quarters ahead of its use at groups of 128. */
template <int GROUP, int NT, int C>
__device__ __forceinline__ void mma_compute_quarter(float (&acc)[AWQ_MT][NT][4],
                                                    float (&pacc)[AWQ_MT][NT][4],
                                                    __half2 (&zlo)[AWQ_MT], __half2 (&nzhi)[AWQ_MT],
                                                    const uint4 (&w)[AWQ_MT],
                                                    uint2 (&m)[AWQ_MT][AWQ_ITK / GROUP],
                                                    const uint2 *const (&mb)[AWQ_MT], int nit,
                                                    const uint32_t *__restrict__ xh, int g, int t)
{
    constexpr int GPI = AWQ_ITK / GROUP;
    constexpr int KPG = GROUP / 16;
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        const int j = C * 4 + kk; /* k-tile within the iteration */
        const int gi = j / KPG;
        if (j % KPG == 0) {
#pragma unroll
            for (int mt = 0; mt < AWQ_MT; mt++) {
                awq_zero_pair(m[mt][gi].y, &zlo[mt], &nzhi[mt]);
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
#pragma unroll
                    for (int c = 0; c < 4; c++)
                        pacc[mt][nt][c] = 0.0f;
            }
        }
        uint32_t b[NT][2];
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            const uint2 bb =
                *reinterpret_cast<const uint2 *>(xh + (nt * 8 + g) * MMA_XS_WORDS + j * 8 + 2 * t);
            b[nt][0] = bb.x;
            b[nt][1] = bb.y;
        }
#pragma unroll
        for (int mt = 0; mt < AWQ_MT; mt++) {
            uint32_t a[4];
            awq_dequant_frag(a, word_of(w[mt], kk), zlo[mt], nzhi[mt]);
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
                mma_16816(pacc[mt][nt], a, b[nt][0], b[nt][1]);
        }
        if ((j + 1) % KPG == 0) { /* the group's scales, in f32 */
#pragma unroll
            for (int mt = 0; mt < AWQ_MT; mt++) {
                const float2 s = __half22float2(bits_h2(m[mt][gi].x)); /* (s[r0], s[r1]) */
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    acc[mt][nt][0] = fmaf(s.x, pacc[mt][nt][0], acc[mt][nt][0]);
                    acc[mt][nt][1] = fmaf(s.x, pacc[mt][nt][1], acc[mt][nt][1]);
                    acc[mt][nt][2] = fmaf(s.y, pacc[mt][nt][2], acc[mt][nt][2]);
                    acc[mt][nt][3] = fmaf(s.y, pacc[mt][nt][3], acc[mt][nt][3]);
                }
                if (nit >= 0)
                    m[mt][gi] = __ldg(mb[mt] + (int64_t)(nit * GPI + gi) * 8);
            }
        }
    }
}

/* The block's outputs: y (SwiGLU for GLU), or with split-K the first range's sum to slot 0. */
template <int NT, bool GLU>
__device__ __forceinline__ void mma_store(const awq_mma_args &a, const float (&acc)[AWQ_MT][NT][4],
                                          const float *tw, const int64_t (&mtile)[AWQ_MT], int u,
                                          int col0, int ncols, int g, int t, bool plain_single)
{
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int c = 0; c < 4; c++) {
            const int col = nt * 8 + 2 * t + (c & 1);
            if (col >= ncols)
                continue;
            const int64_t tok = col0 + col;
            if (a.split > 1) { /* the first range's sum, to slot 0 */
#pragma unroll
                for (int mt = 0; mt < AWQ_MT; mt++) {
                    const int row = (int)mtile[mt] * 16 + g + (c >> 1) * 8;
                    if (row < a.out)
                        a.part[tok * a.out + row] = tw[((mt * NT + nt) * 4 + c) * 32];
                }
            } else if (GLU) {
                const float gate = tw[((0 * NT + nt) * 4 + c) * 32];
                const float up = tw[((1 * NT + nt) * 4 + c) * 32];
                a.y[tok * (a.out / 2) + u * 16 + g + (c >> 1) * 8] = awq_silu_mul(gate, up);
            } else {
#pragma unroll
                for (int mt = 0; mt < AWQ_MT; mt++) {
                    const int row = (int)mtile[mt] * 16 + g + (c >> 1) * 8;
                    if (row < a.out)
                        a.y[tok * a.out + row] =
                            plain_single ? acc[mt][nt][c] : tw[((mt * NT + nt) * 4 + c) * 32];
                }
            }
        }
}

/* Block (column block, row block of W units, slice range). */
template <int GROUP, int NT, int W, bool GLU>
__global__ void __launch_bounds__(W * 32, W == 8 ? 1 : NT <= 2 ? 3 : 2)
awq_mma_kernel(const awq_mma_args a)
{
    using S = mma_smem<NT, W>;
    constexpr int NV = S::NV, XPT = S::XPT;
    extern __shared__ float4 mma_dyn[];
    uint32_t *xh0 = reinterpret_cast<uint32_t *>(mma_dyn);
    float *ts = reinterpret_cast<float *>(reinterpret_cast<char *>(mma_dyn) + a.xdb * S::XH);

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    uint4 *ring = reinterpret_cast<uint4 *>(reinterpret_cast<char *>(mma_dyn) + a.xdb * S::XH +
                                            S::TS) +
                  (size_t)warp * a.stages * MMA_SLOT;
    const int g = lane >> 2, t = lane & 3;
    const int col0 = blockIdx.x * a.cpb;
    const int ncols = min(a.cpb, a.n - col0);
    const int u = blockIdx.y * W + warp;
    const bool valid = u < a.units;
    const int n_iters = a.kpad / AWQ_ITK;
    const int per = a.kw / a.split;
    const int s_first = blockIdx.z * per, s_end = s_first + per;
    const int64_t n_super = a.kpad / 64;
    const int n_grp = a.kpad / GROUP;
    /* the warp's m-tiles: rows 32 u .. 32 u + 31, or (GLU) gate m-tile u and up m-tile u + units */
    const int64_t uu = valid ? u : 0;
    const int64_t mtile[AWQ_MT] = {GLU ? uu : 2 * uu, GLU ? uu + a.units : 2 * uu + 1};
    const uint4 *wb[AWQ_MT];
    const uint2 *mb[AWQ_MT];
#pragma unroll
    for (int mt = 0; mt < AWQ_MT; mt++) {
        wb[mt] = reinterpret_cast<const uint4 *>(a.wq) + (mtile[mt] * n_super) * 32 + lane;
        mb[mt] = reinterpret_cast<const uint2 *>(a.meta) + (mtile[mt] * n_grp) * 8 + g;
    }

    /* weights never change: the ring's first stages - 1 iterations are in flight before the
     * wait; each thread commits one copy group per iteration (empty past the block's last) */
    constexpr int GPI = AWQ_ITK / GROUP;
    uint2 mc[AWQ_MT][GPI];
    int s = s_first, it = s_first, seq = 0;
    mma_cursor pf = {s_first, s_first};
    if (valid) {
        mma_load_meta<GROUP>(mc, mb, it);
        for (int p = 0; p < a.stages - 1; p++) {
            if (pf.s < s_end) {
                mma_fetch_iter(ring + p * MMA_SLOT, wb, pf.it, lane);
                pf.advance(a.kw, n_iters);
            }
            mma_cp_commit();
        }
    }
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();

    /* x rows col0 .. col0 + ncols - 1 of iteration `at` into registers (zeros past n, in), and
     * from there to an f16 stage. Double-buffered (xdb = 2), the next iteration's loads are
     * in flight while this one computes and one barrier per iteration is enough: a warp
     * stores stage (seq + 1) % 2 only after the barrier every warp passes once it is done
     * with that stage's previous use. Single (xdb = 1), the loads go out after the warp's
     * compute, before a barrier on each side of the store. */
    float4 xv[XPT];
    auto load_x = [&](int at) {
#pragma unroll
        for (int r = 0; r < XPT; r++) {
            const int c = threadIdx.x + r * W * 32;
            const int j = c / (AWQ_ITK / 4), q = c % (AWQ_ITK / 4);
            const int k = at * AWQ_ITK + 4 * q;
            xv[r] = j < ncols && k < a.in
                        ? __ldcg(reinterpret_cast<const float4 *>(a.x + (int64_t)(col0 + j) * a.in + k))
                        : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
    };
    auto store_x = [&](uint32_t *xh) {
#pragma unroll
        for (int r = 0; r < XPT; r++) {
            const int c = threadIdx.x + r * W * 32;
            const int j = c / (AWQ_ITK / 4), q = c % (AWQ_ITK / 4);
            uint32_t *row = xh + j * MMA_XS_WORDS;
            row[awq_stage_word(2 * q)] = h2_bits(__floats2half2_rn(xv[r].x, xv[r].y));
            row[awq_stage_word(2 * q + 1)] = h2_bits(__floats2half2_rn(xv[r].z, xv[r].w));
        }
    };

    float acc[AWQ_MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < AWQ_MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int c = 0; c < 4; c++)
                acc[mt][nt][c] = 0.0f;
    /* the slice sums go through T unless a single unsplit slice is stored as it is */
    const bool plain_single = !GLU && a.kw == 1;
    const bool to_slots = blockIdx.z > 0; /* later ranges: each slice's sum to its slot */
    float *tw = ts + (size_t)warp * NV * 32 + lane;
    bool first_slice = true;
    const bool xdb = a.xdb == 2;
    if (xdb)
        load_x(it);
    for (;;) {
        int nit = it + a.kw, ns = s;
        const bool slice_end = nit >= n_iters;
        if (slice_end)
            ns = s + 1, nit = ns;
        const bool more = !(slice_end && ns >= s_end);

        const uint32_t *xh = xh0 + (xdb ? (seq & 1) * (S::XH / 4) : 0);
        if (xdb) {
            store_x(xh0 + (seq & 1) * (S::XH / 4));
            __syncthreads(); /* the stage holds x(it); every warp is done with iteration seq - 1 */
            if (more)
                load_x(nit); /* from L2, in flight during this iteration's compute */
        } else {
            load_x(it);      /* from L2, in flight while the slowest warp finishes the last one */
            __syncthreads(); /* every warp is done with the f16 stage */
            store_x(xh0);
            __syncthreads(); /* the stage holds x(it) */
        }
        if (valid) {
            /* this iteration's weights have landed; the slot the last one used takes the
             * iteration stages - 1 ahead */
            mma_cp_wait_ring(a.stages);
            if (pf.s < s_end) {
                mma_fetch_iter(ring + ((seq + a.stages - 1) % a.stages) * MMA_SLOT, wb, pf.it, lane);
                pf.advance(a.kw, n_iters);
            }
            mma_cp_commit();
            const uint4 *slot = ring + (seq % a.stages) * MMA_SLOT;
            float pacc[AWQ_MT][NT][4];
            __half2 zlo[AWQ_MT], nzhi[AWQ_MT];
            uint4 w[AWQ_MT];
            const int mnext = more ? nit : -1;
            mma_read_quarter<0>(w, slot, lane);
            mma_compute_quarter<GROUP, NT, 0>(acc, pacc, zlo, nzhi, w, mc, mb, mnext, xh, g, t);
            mma_read_quarter<1>(w, slot, lane);
            mma_compute_quarter<GROUP, NT, 1>(acc, pacc, zlo, nzhi, w, mc, mb, mnext, xh, g, t);
            mma_read_quarter<2>(w, slot, lane);
            mma_compute_quarter<GROUP, NT, 2>(acc, pacc, zlo, nzhi, w, mc, mb, mnext, xh, g, t);
            mma_read_quarter<3>(w, slot, lane);
            mma_compute_quarter<GROUP, NT, 3>(acc, pacc, zlo, nzhi, w, mc, mb, mnext, xh, g, t);
            if (slice_end && !plain_single) {
#pragma unroll
                for (int mt = 0; mt < AWQ_MT; mt++)
#pragma unroll
                    for (int nt = 0; nt < NT; nt++)
#pragma unroll
                        for (int c = 0; c < 4; c++) {
                            const int v = (mt * NT + nt) * 4 + c;
                            if (to_slots) {
                                /* slice s's own sum, to slot s */
                                const int row = (int)mtile[mt] * 16 + g + (c >> 1) * 8;
                                const int col = nt * 8 + 2 * t + (c & 1);
                                if (row < a.out && col < ncols)
                                    a.part[((int64_t)s * a.n + col0 + col) * a.out + row] =
                                        acc[mt][nt][c];
                            } else {
                                tw[v * 32] = first_slice ? 0.0f + acc[mt][nt][c]
                                                         : tw[v * 32] + acc[mt][nt][c];
                            }
                            acc[mt][nt][c] = 0.0f;
                        }
                first_slice = false;
            }
        }
        if (!more)
            break;
        s = ns, it = nit, seq++;
    }
    if (valid && !to_slots)
        mma_store<NT, GLU>(a, acc, tw, mtile, u, col0, ncols, g, t, plain_single);
}

/* Split-K: y from the partials in the GEMV's order, slot 0 (the first range's sum) and then
 * slots w1 .. kw - 1 (the later slices' own sums); with glu, silu(gate) * up. */
__global__ void awq_mma_reduce_kernel(float *__restrict__ y, const float *__restrict__ part,
                                      int n, int out, int kw, int w1, int glu)
{
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int64_t ss = (int64_t)n * out; /* slot stride */
    const int ow = glu ? out / 2 : out;
    const int64_t total = (int64_t)n * ow;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t col = i / ow, r = i % ow;
        const float *p = part + col * out + r;
        float v = __ldcg(p);
        for (int w = w1; w < kw; w++)
            v += __ldcg(p + w * ss);
        if (glu) {
            float up = __ldcg(p + ow);
            for (int w = w1; w < kw; w++)
                up += __ldcg(p + w * ss + ow);
            v = awq_silu_mul(v, up);
        }
        y[col * ow + r] = v;
    }
}

/* ---- host side ---- */

typedef void (*mma_fn)(const awq_mma_args);

typedef struct mma_plan {
    int cb, cpb, nt; /* column blocks, tokens per column block, n-tiles (cpb <= 8 nt) */
    int w, rb;       /* row warps per block, row blocks */
    int split;       /* slice ranges (blockIdx.z) */
} mma_plan;

template <int GROUP, int W, bool GLU> static mma_fn mma_fn_nt(int nt)
{
    switch (nt) {
    case 1: return awq_mma_kernel<GROUP, 1, W, GLU>;
    case 2: return awq_mma_kernel<GROUP, 2, W, GLU>;
    case 3: return awq_mma_kernel<GROUP, 3, W, GLU>;
    default: return awq_mma_kernel<GROUP, 4, W, GLU>;
    }
}

template <int GROUP, bool GLU> static mma_fn mma_fn_w(int w, int nt)
{
    return w == 8 ? mma_fn_nt<GROUP, 8, GLU>(nt) : mma_fn_nt<GROUP, 4, GLU>(nt);
}

/* The kernel for (group, w, nt, glu); GLU exists at groups of 128 only (the GEMV's fold). */
static mma_fn mma_kernel_for(int group, int w, int nt, int glu)
{
    if (glu)
        return mma_fn_w<128, true>(w, nt);
    switch (group) {
    case 32: return mma_fn_w<32, false>(w, nt);
    case 64: return mma_fn_w<64, false>(w, nt);
    default: return mma_fn_w<128, false>(w, nt);
    }
}

static size_t mma_smem_bytes(int w, int nt, int stages, int xdb)
{
    const size_t bn = (size_t)8 * nt, nv = (size_t)AWQ_MT * nt * 4;
    return (size_t)xdb * bn * MMA_XS_WORDS * 4 + (size_t)w * nv * 32 * 4 +
           (size_t)w * stages * MMA_SLOT * sizeof(uint4);
}

/* The x stages: the knob's (1 or 2), else MMA_XDB. */
static int mma_xdb(const awq_cuda_ctx *ctx)
{
    return ctx->tune.mma_xdb == 1 || ctx->tune.mma_xdb == 2 ? ctx->tune.mma_xdb : MMA_XDB;
}

/* The ring depth: the knob's (2..5), else MMA_STAGES. */
static int mma_stages(const awq_cuda_ctx *ctx)
{
    const int s = awq_knob(ctx->tune.mma_stages, MMA_STAGES);
    return s < 2 ? 2 : s > 5 ? 5 : s;
}

/* The most token columns per block: the knob's (8, 16, 24 or 32); else 16 for linears of up
 * to 4096 inputs at up to 64 rows (two n-tiles: three blocks per SM instead of two, which
 * beats reading each weight from L2 once more), 32 otherwise (long K re-reads a long x; past
 * 64 rows the extra column blocks cost more than the occupancy gains) — measured on the
 * H200 for the 8B shapes (BENCHMARKS.md, 2026-12-02). */
static int mma_bn(const awq_cuda_ctx *ctx, const awq_cuda_linear *l, int n)
{
    if (ctx->tune.mma_bn != 0) {
        const int bn = ctx->tune.mma_bn / 8 * 8;
        return bn < 8 ? 8 : bn > MMA_BN ? MMA_BN : bn;
    }
    return l->kpad <= 4096 && n <= 64 ? 16 : MMA_BN;
}

/* The launch shape for n rows of l with at most bn token columns per block (balanced); W = 4 row
 * warps per block (three blocks per SM at <= 2 n-tiles, else two), or W = 8 (one block per
 * SM, half the x traffic per weight) where w says so or, with w = 0, from three column blocks
 * on, where re-reading x for every 128 rows would cost more L2 bandwidth than the weights;
 * slice ranges doubled while the grid is short of `fill` blocks per SM (0: mma_fill, 2; at
 * most the linear's kw). */
static mma_plan plan_shape(const awq_cuda_ctx *ctx, const awq_cuda_linear *l, int n, int bn,
                           int w, int fill)
{
    mma_plan p;
    p.cb = (n + bn - 1) / bn;
    p.cpb = (n + p.cb - 1) / p.cb;
    p.nt = (p.cpb + 7) / 8;
    const int units = (int)(l->outp / 32);
    const int64_t target =
        (int64_t)(fill > 0 ? fill : awq_knob(ctx->tune.mma_fill, 2)) * ctx->sm_count;
    if (!ctx->mma_w8)
        p.w = 4;
    else if (w == 4 || w == 8)
        p.w = w;
    else
        p.w = p.cb >= 3 && (int64_t)((units + 7) / 8) * p.cb >= ctx->sm_count ? 8 : 4;
    p.rb = (units + p.w - 1) / p.w;
    p.split = 1;
    if (ctx->tune.mma_split > 0) {
        while (p.split * 2 <= ctx->tune.mma_split && p.split * 2 <= l->kw)
            p.split *= 2;
    } else {
        while (p.split < l->kw && (int64_t)p.rb * p.cb * p.split < target)
            p.split *= 2;
    }
    return p;
}

/* Bytes of split-K partials plan p needs at n rows of l (0 without a split). */
static size_t mma_part_need(const awq_cuda_linear *l, const mma_plan &p, int n)
{
    return p.split > 1 ? (size_t)l->kw * (size_t)n * (size_t)l->out * sizeof(float) : 0;
}

/* Whether two plans launch the same grid. */
static bool mma_same_plan(const mma_plan &a, const mma_plan &b)
{
    return a.cb == b.cb && a.cpb == b.cpb && a.w == b.w && a.split == b.split;
}

/* Row buckets of the launch shapes timed at load: a step of n rows takes the shape timed at
 * the first bucket bound >= n. */
static const int mma_bucket_rows[AWQ_MMA_BUCKETS] = {16, 24, 32, 48, 64, 96, 128, 192, 256};

static int mma_bucket(int n)
{
    for (int b = 0; b < AWQ_MMA_BUCKETS; b++)
        if (n <= mma_bucket_rows[b])
            return b;
    return -1;
}

/* The launch shape for n rows of l: the knobs' (mma_bn, mma_w, mma_split, mma_fill) where
 * set, else the one timed for n's bucket at load, else the built-in rule. */
static mma_plan plan_for(const awq_cuda_ctx *ctx, const awq_cuda_linear *l, int n)
{
    const int b = mma_bucket(n);
    if (ctx->tune.mma_bn == 0 && ctx->tune.mma_w == 0 && ctx->tune.mma_split == 0 &&
        ctx->tune.mma_fill == 0 && b >= 0 && l->mma_pick[b].bn)
        return plan_shape(ctx, l, n, l->mma_pick[b].bn, l->mma_pick[b].w, l->mma_pick[b].fill);
    return plan_shape(ctx, l, n, mma_bn(ctx, l, n), ctx->tune.mma_w, 0);
}

llmrt_status awq_mma_init(awq_cuda_ctx *ctx, llmrt_error *err)
{
    static const int groups[3] = {32, 64, 128};
    /* blocks of 8 row warps only where their shared memory fits a block (sm_86 / sm_89 opt in
     * to 99 KB, sm_90 to 227 KB); of 4 the kernel needs, else it is off */
    int optin = 0;
    cudaError_t e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                           ctx->device);
    const int dev_optin = optin;
    if (ctx->tune.mma_smem_kb > 0 && ctx->tune.mma_smem_kb * 1024 < optin)
        optin = ctx->tune.mma_smem_kb * 1024; /* a smaller device's limit, for tests */
    const int stages = mma_stages(ctx), xdb = mma_xdb(ctx);
    ctx->mma_w8 = e == cudaSuccess && mma_smem_bytes(8, 4, stages, xdb) <= (size_t)optin;
    if (e == cudaSuccess && mma_smem_bytes(4, 4, stages, xdb) > (size_t)optin)
        e = cudaErrorInvalidValue;
    for (int glu = 0; glu < 2 && e == cudaSuccess; glu++)
        for (int gi = 0; gi < 3 && e == cudaSuccess; gi++)
            for (int w = 4; w <= (ctx->mma_w8 ? 8 : 4) && e == cudaSuccess; w += 4)
                for (int nt = 1; nt <= 4 && e == cudaSuccess; nt++) {
                    if (glu && groups[gi] != 128)
                        continue;
                    /* a kernel's attribute holds for the whole process: the device's
                     * limit, so that instances with other knobs (another config in the
                     * same bench) launch it with what they need */
                    e = cudaFuncSetAttribute(mma_kernel_for(groups[gi], w, nt, glu),
                                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             dev_optin);
                }
    if (e != cudaSuccess) {
        /* a device with less shared memory per block: the batch kernel is off, the rest runs */
        cudaGetLastError();
        ctx->tune.mma = -1;
    }
    (void)err;
    return LLMRT_OK;
}

int awq_mma_serves(const awq_cuda_ctx *ctx, const awq_cuda_linear *l, int n,
                              const float *x)
{
    if (ctx->tune.mma < 0 || n < awq_knob(ctx->tune.mma_min, 9) ||
        n > awq_knob(ctx->tune.mma_max, 256) || n < 1)
        return 0;
    if (x && ((uintptr_t)x & 15u) != 0)
        return 0;
    /* every slice has an iteration (the GEMV's K split never exceeds them unless forced) */
    if (l->kw > l->kpad / AWQ_ITK || (l->outp / 32 + 3) / 4 > 65535)
        return 0;
    return 1;
}

size_t awq_mma_part_bytes(const awq_cuda_ctx *ctx, const awq_cuda_linear *l)
{
    if (ctx->tune.mma < 0)
        return 0;
    const int lo = awq_knob(ctx->tune.mma_min, 9), hi = awq_knob(ctx->tune.mma_max, 256);
    size_t most = 0;
    for (int n = lo < 1 ? 1 : lo; n <= hi && n <= 65536; n++) {
        if (!awq_mma_serves(ctx, l, n, NULL))
            continue;
        const mma_plan p = plan_for(ctx, l, n);
        const size_t b = mma_part_need(l, p, n);
        most = b > most ? b : most;
    }
    return most;
}

/* Launch l at n rows with plan p (x, y: scratch, the partials grown by the caller). */
static llmrt_status mma_launch(awq_cuda_ctx *ctx, const awq_cuda_linear *l, const mma_plan &p,
                               float *y, const float *x, int n, int glu, llmrt_error *err);

/* Time the batch kernel's launch shapes for l at each row bucket on this device and keep the
 * fastest per bucket (every shape gives the same bits: only speed depends on the choice).
 * Why not a rule: which shape wins depends on waves — the grid's blocks against the blocks
 * an SM holds at that shape's registers and shared memory — so it moves with the linear's
 * shape, the row count and the GPU (BENCHMARKS.md, 2026-12-02 third session: the rule lost
 * up to 30% at 48 / 96 rows on the H200). Candidates: 16, 24 or 32 token columns per block
 * (8 too at up to 16 rows), 4 or 8 row warps, K split until 1, 2 or 4 blocks per SM; the
 * rule's own shape stays unless another is 3% faster (timing noise would otherwise flip
 * near-ties from load to load). Shapes are timed once per (out, in, group) and context; a
 * knob forcing the shape (mma_bn, mma_w, mma_split, mma_fill) or mma_tune=0 skips it. Costs
 * some tens of ms per distinct shape at load. */
llmrt_status awq_mma_tune_linear(awq_cuda_ctx *ctx, awq_cuda_linear *l, llmrt_error *err)
{
    if (ctx->tune.mma < 0 || ctx->tune.mma_tune < 0 || ctx->tune.mma_bn != 0 ||
        ctx->tune.mma_w != 0 || ctx->tune.mma_split != 0 || ctx->tune.mma_fill != 0)
        return LLMRT_OK;
    for (int i = 0; i < ctx->n_mma_shapes; i++) {
        const awq_mma_shape *sh = &ctx->mma_shapes[i];
        if (sh->out == l->out && sh->in == l->in && sh->group == l->group && sh->kw == l->kw) {
            memcpy(l->mma_pick, sh->pick, sizeof l->mma_pick);
            return LLMRT_OK;
        }
    }
    const int hi = awq_knob(ctx->tune.mma_max, 256);
    int nmax = 0;
    for (int b = 0; b < AWQ_MMA_BUCKETS; b++)
        if (mma_bucket_rows[b] <= hi && awq_mma_serves(ctx, l, mma_bucket_rows[b], NULL))
            nmax = mma_bucket_rows[b];
    if (nmax == 0)
        return LLMRT_OK;
    /* x [nmax, in] and y [nmax, out] in the dequant scratch, the partials of every candidate */
    const size_t xb = ((size_t)nmax * (size_t)l->in * sizeof(float) + 255) / 256 * 256;
    const size_t yb = (size_t)nmax * (size_t)l->out * sizeof(float);
    llmrt_status st = awq_cuda_grow(ctx, (void **)&ctx->deq, &ctx->deq_bytes, xb + yb,
                                    "batch kernel timing scratch", err);
    if (st)
        return st;
    float *x = reinterpret_cast<float *>(ctx->deq);
    float *y = reinterpret_cast<float *>(reinterpret_cast<char *>(ctx->deq) + xb);
    cudaEvent_t ev[2] = {NULL, NULL};
    cudaError_t e = cudaMemsetAsync(x, 0, xb, ctx->stream);
    if (e == cudaSuccess)
        e = cudaEventCreate(&ev[0]);
    if (e == cudaSuccess)
        e = cudaEventCreate(&ev[1]);
    static const int bns[4] = {8, 16, 24, 32};
    for (int b = 0; b < AWQ_MMA_BUCKETS && e == cudaSuccess && !st; b++) {
        const int n = mma_bucket_rows[b];
        if (n > nmax || !awq_mma_serves(ctx, l, n, NULL))
            continue;
        const mma_plan rule = plan_shape(ctx, l, n, mma_bn(ctx, l, n), 0, 0);
        float best = 0.0f, rule_ms = 0.0f;
        awq_mma_pick pick = {0, 0, 0};
        mma_plan tried[24];
        int n_tried = 0;
        for (int c = 0; c < 24 && e == cudaSuccess && !st; c++) {
            const int bn = bns[c / 6], w = c / 3 % 2 ? 8 : 4, fill = 1 << (c % 3);
            if ((bn == 8 && n > 16) || bn > (n + 7) / 8 * 8 || (w == 8 && !ctx->mma_w8))
                continue;
            const mma_plan p = plan_shape(ctx, l, n, bn, w, fill);
            bool seen = false; /* fills that give the same split are one shape */
            for (int i = 0; i < n_tried; i++)
                seen = seen || mma_same_plan(tried[i], p);
            if (seen)
                continue;
            tried[n_tried++] = p;
            const size_t part = mma_part_need(l, p, n);
            if (part && (st = awq_cuda_grow(ctx, (void **)&ctx->mma_part, &ctx->mma_part_bytes,
                                            part, "batch kernel split-K partials", err)))
                break;
            constexpr int REPS = 5;
            float ms = 0.0f;
            for (int r = 0; r <= REPS && !st; r++) { /* the first launch warms up */
                if (r == 1 && (e = cudaEventRecord(ev[0], ctx->stream)) != cudaSuccess)
                    break;
                st = mma_launch(ctx, l, p, y, x, n, 0, err);
            }
            if (st || e != cudaSuccess || (e = cudaEventRecord(ev[1], ctx->stream)) ||
                (e = cudaEventSynchronize(ev[1])) || (e = cudaEventElapsedTime(&ms, ev[0], ev[1])))
                break;
            if (mma_same_plan(p, rule))
                rule_ms = ms;
            if (pick.bn == 0 || ms < best)
                best = ms, pick.bn = (uint8_t)bn, pick.w = (uint8_t)w, pick.fill = (uint8_t)fill;
        }
        /* the rule's shape unless another is clearly faster */
        if (pick.bn != 0 && rule_ms > 0.0f && best > rule_ms * 0.97f)
            pick.bn = 0, pick.w = 0, pick.fill = 0;
        l->mma_pick[b] = pick;
    }
    for (int i = 0; i < 2; i++)
        if (ev[i])
            cudaEventDestroy(ev[i]);
    if (st)
        return st;
    if (e != cudaSuccess)
        return llmrt_cuda_fail(err, LLMRT_ERR_DEVICE, e, "awq cuda",
                               "timing the batch kernel's launch shapes");
    if (ctx->n_mma_shapes < AWQ_MMA_CACHE) {
        awq_mma_shape *sh = &ctx->mma_shapes[ctx->n_mma_shapes++];
        sh->out = l->out, sh->in = l->in, sh->group = l->group, sh->kw = l->kw;
        memcpy(sh->pick, l->mma_pick, sizeof sh->pick);
    }
    return LLMRT_OK;
}

static llmrt_status mma_launch(awq_cuda_ctx *ctx, const awq_cuda_linear *l, const mma_plan &p,
                               float *y, const float *x, int n, int glu, llmrt_error *err)
{
    awq_mma_args a;
    a.y = y;
    a.part = ctx->mma_part;
    a.x = x;
    a.wq = l->wq;
    a.meta = l->meta;
    a.n = n;
    a.out = (int)l->out;
    a.in = (int)l->in;
    a.kpad = (int)l->kpad;
    a.kw = l->kw;
    a.split = p.split;
    a.cpb = p.cpb;
    a.units = (int)(l->outp / 32);
    a.stages = mma_stages(ctx);
    a.xdb = mma_xdb(ctx);
    if (mma_part_need(l, p, n) > ctx->mma_part_bytes)
        return llmrt_fail(err, LLMRT_ERR_INTERNAL,
                          "awq cuda: the batch kernel's partials for [%lld, %lld] at %d rows "
                          "exceed the %zu bytes sized at load",
                          (long long)l->out, (long long)l->in, n, ctx->mma_part_bytes);
    llmrt_cuda_launch(ctx->stream, ctx->pdl, mma_kernel_for((int)l->group, p.w, p.nt, glu),
                      dim3((unsigned)p.cb, (unsigned)p.rb, (unsigned)p.split), p.w * 32,
                      mma_smem_bytes(p.w, p.nt, a.stages, a.xdb), a);
    llmrt_status st = llmrt_cuda_check_launch(err, "awq cuda", "awq_mma_kernel");
    if (st || p.split == 1)
        return st;
    const int64_t total = (int64_t)n * (glu ? l->out / 2 : l->out);
    int64_t blocks = (total + 255) / 256;
    if (blocks > (int64_t)ctx->sm_count * 8)
        blocks = (int64_t)ctx->sm_count * 8;
    llmrt_cuda_launch(ctx->stream, ctx->pdl, awq_mma_reduce_kernel, (unsigned)blocks, 256, 0, y,
                      (const float *)ctx->mma_part, n, (int)l->out, l->kw, l->kw / p.split, glu);
    return llmrt_cuda_check_launch(err, "awq cuda", "awq_mma_reduce_kernel");
}

llmrt_status awq_mma_forward(awq_cuda_ctx *ctx, const awq_cuda_linear *l, float *y,
                                        const float *x, int n, int glu, llmrt_error *err)
{
    return mma_launch(ctx, l, plan_for(ctx, l, n), y, x, n, glu, err);
}
