/* cuda_attention_mma.cu — prefill attention on the tensor cores: FlashAttention-2's online
 * softmax over the paged KV cache with mma.sync m16n8k16 (f16 or bf16 caches, head_dim 64, 96,
 * 128), causal, GQA, chunked prefill (query rows at positions seq_len - qlen .. seq_len - 1
 * against a cache that already holds the earlier tokens).
 *
 * Why: the tiled fp32 FMA kernel (cuda_attention.cu) spends 1.6 ms per layer on a 2048-token
 * prompt of Qwen3-8B (34 GFLOP: ~21 TFLOP/s); on mma.sync the same work is a few hundred
 * microseconds. Shape: a block takes 64 query rows — TQ tokens x GR query heads of one KV
 * head's group, so each K/V tile read from the cache serves GR heads — and four warps of 16
 * rows; K/V tiles of 64 keys come by cp.async into a double buffer (the next tile loads while
 * this one computes). Per tile and warp: S = Q Kᵀ (Q's fragments held in registers, K's by
 * ldmatrix), the causal mask, the running row max and sum in f32 (exp2 of scores pre-scaled by
 * log2 e), P rounded to the cache type and reused from S's accumulators as the A operand of
 * O += P V (V's fragments by ldmatrix.trans).
 *
 * Precision: Q and P are rounded to the cache's 16-bit type (the inputs of the tensor cores),
 * everything else is f32: ~1e-3 relative for f16 caches, a few 1e-3 for bf16 (the tests'
 * tolerances).
 *
 * Key splits (every PFM_SPLIT_KEYS keys, [backend.cuda] tune att_pf_split=N; NOTES.md rounds
 * 15 and 16): a row's keys are cut at fixed positions, every N keys; each split's
 * (unnormalised O, max, sum) starts empty, and the splits are folded left to right with one
 * merge formula (pfm_fold_ml / pfm_fold_o), a split the row sees no key of skipped. Where the
 * grid is small (few query rows over a long context: a chat turn after its cached prefix)
 * each split gets a block of its own and writes a partial, which a second kernel folds;
 * elsewhere one block walks every split of its rows and folds as it goes. Both run the same
 * arithmetic in the same order, so the choice changes the speed, never the bits.
 *
 * Key tiles start at position 0 of the sequence for every query row, and a tile a row cannot
 * see leaves its max, sum and output exactly as they were (exp2(0) = 1, P = 0), so a row's
 * result depends only on its own query and keys: a prompt prefilled alone, in chunks, or
 * beside other sequences gives the same bits. */
#include "cuda_attention_common.cuh"

#include <math.h>
#include <string.h>

#define PFM_WARPS 4
#define PFM_QR 64 /* query rows per block */
#define PFM_KT 64 /* keys per tile */
#define PFM_SPLIT_KEYS 512 /* keys per split unless [tune] att_pf_split (-1: one split) */
#define PFM_MERGE_SUB 16 /* merge blocks per tile (PFM_QR / PFM_MERGE_SUB rows each) */
#define PFM_SCRATCH_MAX ((size_t)64 << 20) /* split blocks' partials: beyond, one block walks all */

template <int HD> struct pfm_shape {
    static constexpr int LD = HD + 8; /* padded smem row (elements): ldmatrix rows hit 8 bank groups */
    static constexpr size_t SMEM = (size_t)(PFM_QR + 4 * PFM_KT) * LD * 2; /* Q, K x2, V x2 */
};

/* 16-bit element types of the tensor cores */
template <typename T> struct pfm_type;
template <> struct pfm_type<__half> {
    static __device__ __forceinline__ uint32_t pack(float lo, float hi)
    {
        __half2 h = __floats2half2_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&h);
    }
    static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                               uint32_t b1)
    {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};
template <> struct pfm_type<__nv_bfloat16> {
    static __device__ __forceinline__ uint32_t pack(float lo, float hi)
    {
        __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&h);
    }
    static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                               uint32_t b1)
    {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};

__device__ __forceinline__ void pfm_ldsm4(uint32_t (&r)[4], const void *smem)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}

__device__ __forceinline__ void pfm_ldsm4_t(uint32_t (&r)[4], const void *smem)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}

/* 16-byte cp.async, zeros when !valid */
__device__ __forceinline__ void pfm_cp16(void *smem, const void *src, bool valid)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(src),
                 "r"(valid ? 16 : 0)
                 : "memory");
}

/* Keys [k0, k0 + 64) of one KV head (K and V) into dst rows of LD elements; zeros from kend. */
template <typename T, int HD>
__device__ __forceinline__ void pfm_load_kv(T *ks, T *vs, const T *__restrict__ kc,
                                            const T *__restrict__ vc,
                                            const int32_t *__restrict__ bt, int bs,
                                            int64_t slot_stride, int64_t head_off, int k0, int kend)
{
    constexpr int LD = pfm_shape<HD>::LD, CPR = HD * 2 / 16; /* 16-byte chunks per row */
    for (int i = threadIdx.x; i < PFM_KT * CPR; i += PFM_WARPS * 32) {
        const int key = i / CPR, c = i % CPR;
        const int t = k0 + key;
        const bool ok = t < kend;
        int64_t at = 0;
        if (ok)
            at = ((int64_t)bt[t / bs] * bs + t % bs) * slot_stride + head_off + c * 8;
        pfm_cp16(ks + key * LD + c * 8, kc + at, ok);
        pfm_cp16(vs + key * LD + c * 8, vc + at, ok);
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
}

/* The query tile of block (tile x, head group y, sequence s) and the keys its rows see. */
struct pfm_tile {
    int qs0, qlen, tok0, pos0, kend, hq0, kvh;
    int n_tiles; /* key tiles up to the tile's last row */
};

/* tile_rev counts from the last tile (the longest start first). Returns false when the block
 * has no rows (past the sequence's query length, or a one-token sequence under skip_single). */
__device__ __forceinline__ bool pfm_tile_of(pfm_tile &t, int tile_rev, int n_tiles_x, int y,
                                            int s, const int32_t *__restrict__ query_start,
                                            const int32_t *__restrict__ seq_lens, int n_heads,
                                            int n_kv_heads, int GR, int skip_single)
{
    const int group = n_heads / n_kv_heads;
    const int subs = group / GR;
    t.kvh = y / subs;
    t.hq0 = t.kvh * group + (y % subs) * GR;
    t.qs0 = query_start[s];
    t.qlen = query_start[s + 1] - t.qs0;
    if (skip_single && t.qlen == 1)
        return false;
    t.tok0 = (n_tiles_x - 1 - tile_rev) * (PFM_QR / GR);
    if (t.tok0 >= t.qlen)
        return false;
    t.pos0 = seq_lens[s] - t.qlen;
    const int last_tok = min(t.qlen - 1, t.tok0 + PFM_QR / GR - 1);
    t.kend = t.pos0 + last_tok + 1;
    t.n_tiles = (t.kend + PFM_KT - 1) / PFM_KT;
    return true;
}

/* Fold split (o, m, l) into the running (fo, fm, fl): the one merge formula of both
 * schedules, contraction spelled out so every kernel rounds alike. Both skip a split the row
 * saw no key of (m = -inf) instead of folding it. */
__device__ __forceinline__ void pfm_fold_ml(float &fm, float &fl, float m, float l, float &c1,
                                            float &c2)
{
    const float mn = fmaxf(fm, m);
    c1 = exp2f(fm - mn);
    c2 = exp2f(m - mn);
    fl = __fmaf_rn(fl, c1, __fmul_rn(l, c2));
    fm = mn;
}
__device__ __forceinline__ float pfm_fold_o(float fo, float o, float c1, float c2)
{
    return __fmaf_rn(fo, c1, __fmul_rn(o, c2));
}

/* Block (query tile [x split], kv-head sub-group, sequence); rows r = tok * GR + head of the
 * tile, as the fp32 kernel. skip_single: sequences with one query token are left to the
 * decode kernel (mixed steps). tps: key tiles per split (0: one split, whatever the length).
 * nsp > 0: split blocks — blockIdx.x = tile_rev * nsp + split; a tile of more than one split
 * writes each split's partial (part [grid y, z, x tiles, nsp, 64 rows, HD], part_ml [.., 2])
 * for pfm_merge_kernel; nsp = 0: this block walks and folds every split. */
template <typename T, int HD>
__global__ void __launch_bounds__(PFM_WARPS * 32, 2)
attn_prefill_mma_kernel(float *__restrict__ out, const float *__restrict__ q,
                        const T *__restrict__ kc, const T *__restrict__ vc,
                        const int32_t *__restrict__ query_start, const int32_t *__restrict__ seq_lens,
                        const int32_t *__restrict__ block_tables, int mbps, int bs, int n_heads,
                        int n_kv_heads, float scale, int GR, int skip_single, int tps, int nsp,
                        float *__restrict__ part, float *__restrict__ part_ml)
{
    using P = pfm_shape<HD>;
    using TT = pfm_type<T>;
    constexpr int LD = P::LD, KS = HD / 16, DT = HD / 8;
    extern __shared__ uint4 pfm_smem[];
    T *Qs = reinterpret_cast<T *>(pfm_smem);
    T *Ks = Qs + PFM_QR * LD; /* [2][KT][LD] */
    T *Vs = Ks + 2 * PFM_KT * LD;

    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    const int s = blockIdx.z;
    const int n_x = nsp > 0 ? gridDim.x / nsp : gridDim.x;
    const int tile_rev = nsp > 0 ? blockIdx.x / nsp : blockIdx.x;
    pfm_tile tl;
    if (!pfm_tile_of(tl, tile_rev, n_x, blockIdx.y, s, query_start, seq_lens, n_heads,
                     n_kv_heads, GR, skip_single))
        return;
    const int qs0 = tl.qs0, qlen = tl.qlen, tok0 = tl.tok0, pos0 = tl.pos0, kend = tl.kend;
    const int hq0 = tl.hq0;
    /* the key tiles this block walks: every split, or split `sp` alone */
    const int n_splits = tps > 0 ? (tl.n_tiles + tps - 1) / tps : 1;
    int j_begin = 0, j_end = tl.n_tiles;
    const int sp = nsp > 0 ? (int)blockIdx.x % nsp : 0;
    const bool partial = nsp > 0 && n_splits > 1;
    if (partial) {
        if (sp >= n_splits)
            return;
        j_begin = sp * tps;
        j_end = min(j_end, j_begin + tps);
    } else if (sp > 0) {
        return; /* split blocks of a one-split tile: block 0 does it all */
    }
    const int32_t *bt = block_tables + (int64_t)s * mbps;
    const int64_t slot_stride = (int64_t)n_kv_heads * HD;
    const int64_t head_off = (int64_t)tl.kvh * HD;

    pfm_load_kv<T, HD>(Ks, Vs, kc, vc, bt, bs, slot_stride, head_off, j_begin * PFM_KT, kend);

    /* Q, pre-scaled by scale * log2(e) (the softmax then runs on exp2) */
    const float qscale = scale * 1.4426950408889634f;
    for (int i = threadIdx.x; i < PFM_QR * (HD / 2); i += PFM_WARPS * 32) {
        const int r = i / (HD / 2), d = 2 * (i % (HD / 2));
        const int tok = tok0 + r / GR, h = hq0 + r % GR;
        float2 v = make_float2(0.0f, 0.0f);
        if (tok < qlen)
            v = __ldg(reinterpret_cast<const float2 *>(q + ((int64_t)(qs0 + tok) * n_heads + h) * HD + d));
        *reinterpret_cast<uint32_t *>(Qs + r * LD + d) = TT::pack(v.x * qscale, v.y * qscale);
    }
    __syncthreads();

    /* this warp's 16 rows: Q fragments for every k-step of the head dimension */
    uint32_t qa[KS][4];
    {
        const int mi = lane >> 3, rr = lane & 7;
        const T *base = Qs + (warp * 16 + (mi & 1) * 8 + rr) * LD + (mi >> 1) * 8;
#pragma unroll
        for (int ks = 0; ks < KS; ks++)
            pfm_ldsm4(qa[ks], base + ks * 16);
    }
    /* positions of this thread's two rows (g and g + 8 of the warp's 16); -1 = padding */
    int rpos[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int tok = tok0 + (warp * 16 + g + 8 * h) / GR;
        rpos[h] = tok < qlen ? pos0 + tok : -1;
    }
    float o[DT][4];
#pragma unroll
    for (int d = 0; d < DT; d++)
#pragma unroll
        for (int c = 0; c < 4; c++)
            o[d][c] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    /* The splits folded so far, when this block walks several: max and sum here, the
     * unnormalised O in this thread's own elements of the output rows (registers would
     * spill at head_dim 128). */
    float fm[2] = {-INFINITY, -INFINITY}, fl[2] = {0.0f, 0.0f};
    bool folded = false;
    float *orow[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int r = warp * 16 + g + 8 * h;
        orow[h] = rpos[h] >= 0 ? out + ((int64_t)(qs0 + tok0 + r / GR) * n_heads + hq0 + r % GR) * HD
                               : NULL;
    }
    /* the split just walked: row sums across the four lanes of a row, folded into f*; with
     * `last`, O / l goes to the output, else the running O, and this split is empty again */
    auto end_split = [&](bool last) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            l[h] += __shfl_xor_sync(CUDA_FULL_MASK, l[h], 1);
            l[h] += __shfl_xor_sync(CUDA_FULL_MASK, l[h], 2);
            /* a row that saw no key of this split (it starts past the row) skips it, as
             * the merge does: not even a fold by exp2(0) = 1 */
            const bool empty = folded && m[h] == -INFINITY;
            float c1 = 0.0f, c2 = 0.0f;
            if (!folded)
                fm[h] = m[h], fl[h] = l[h];
            else if (!empty)
                pfm_fold_ml(fm[h], fl[h], m[h], l[h], c1, c2);
            if (!orow[h] || (empty && !last))
                continue;
            const float inv = !last ? 1.0f : fl[h] > 0.0f ? 1.0f / fl[h] : 0.0f;
#pragma unroll
            for (int d = 0; d < DT; d++) {
                float2 *at = reinterpret_cast<float2 *>(orow[h] + d * 8 + 2 * t);
                float2 v = make_float2(o[d][2 * h], o[d][2 * h + 1]);
                if (folded) {
                    const float2 f = *at;
                    v = empty ? f
                              : make_float2(pfm_fold_o(f.x, v.x, c1, c2), pfm_fold_o(f.y, v.y, c1, c2));
                }
                *at = last ? make_float2(v.x * inv, v.y * inv) : v;
            }
        }
        folded = true;
#pragma unroll
        for (int d = 0; d < DT; d++)
#pragma unroll
            for (int c = 0; c < 4; c++)
                o[d][c] = 0.0f;
        m[0] = m[1] = -INFINITY;
        l[0] = l[1] = 0.0f;
    };

    for (int j = j_begin; j < j_end; j++) {
        const int buf = (j - j_begin) & 1;
        if (tps > 0 && j > j_begin && j % tps == 0)
            end_split(false);
        if (j + 1 < j_end)
            pfm_load_kv<T, HD>(Ks + (buf ^ 1) * PFM_KT * LD, Vs + (buf ^ 1) * PFM_KT * LD, kc, vc,
                               bt, bs, slot_stride, head_off, (j + 1) * PFM_KT, kend);
        else
            asm volatile("cp.async.commit_group;" ::: "memory");
        asm volatile("cp.async.wait_group 1;" ::: "memory");
        __syncthreads(); /* tile j is in buf for every thread */
        const T *kt = Ks + buf * PFM_KT * LD, *vt = Vs + buf * PFM_KT * LD;

        /* S = Q Kᵀ: 8 n-tiles of 8 keys */
        float sc[PFM_KT / 8][4];
#pragma unroll
        for (int n = 0; n < PFM_KT / 8; n++)
#pragma unroll
            for (int c = 0; c < 4; c++)
                sc[n][c] = 0.0f;
        {
            const int mi = lane >> 3, rr = lane & 7;
#pragma unroll
            for (int np = 0; np < PFM_KT / 16; np++) {
                const T *base = kt + (np * 16 + (mi >> 1) * 8 + rr) * LD + (mi & 1) * 8;
#pragma unroll
                for (int ks = 0; ks < KS; ks++) {
                    uint32_t b[4];
                    pfm_ldsm4(b, base + ks * 16);
                    TT::mma(sc[2 * np], qa[ks], b[0], b[1]);
                    TT::mma(sc[2 * np + 1], qa[ks], b[2], b[3]);
                }
            }
        }
        /* mask, running max and sum (rows h = 0: c = 0, 1; h = 1: c = 2, 3) */
        const int k0 = j * PFM_KT;
        float mnew[2], corr[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float mx = -INFINITY;
#pragma unroll
            for (int n = 0; n < PFM_KT / 8; n++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int key = k0 + n * 8 + 2 * t + e;
                    float &v = sc[n][2 * h + e];
                    if (key > rpos[h]) /* causal; padding rows (rpos -1) see nothing */
                        v = -INFINITY;
                    mx = fmaxf(mx, v);
                }
            mx = fmaxf(mx, __shfl_xor_sync(CUDA_FULL_MASK, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(CUDA_FULL_MASK, mx, 2));
            mnew[h] = fmaxf(m[h], mx);
            /* a row that has seen nothing yet keeps m = -inf: subtract 0 instead */
            const float mu = mnew[h] == -INFINITY ? 0.0f : mnew[h];
            corr[h] = exp2f(m[h] - mu);
            m[h] = mnew[h];
            float ps = 0.0f;
#pragma unroll
            for (int n = 0; n < PFM_KT / 8; n++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    float &v = sc[n][2 * h + e];
                    v = exp2f(v - mu);
                    ps += v;
                }
            l[h] = l[h] * corr[h] + ps;
        }
#pragma unroll
        for (int d = 0; d < DT; d++) {
            o[d][0] *= corr[0], o[d][1] *= corr[0];
            o[d][2] *= corr[1], o[d][3] *= corr[1];
        }
        /* O += P V: P's A fragments are S's accumulators of two n-tiles per 16 keys */
        {
            const int mi = lane >> 3, rr = lane & 7;
#pragma unroll
            for (int kk = 0; kk < PFM_KT / 16; kk++) {
                uint32_t pa[4];
                pa[0] = TT::pack(sc[2 * kk][0], sc[2 * kk][1]);
                pa[1] = TT::pack(sc[2 * kk][2], sc[2 * kk][3]);
                pa[2] = TT::pack(sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
                pa[3] = TT::pack(sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
                const T *base = vt + (kk * 16 + (mi & 1) * 8 + rr) * LD + (mi >> 1) * 8;
#pragma unroll
                for (int dp = 0; dp < HD / 16; dp++) {
                    uint32_t b[4];
                    pfm_ldsm4_t(b, base + dp * 16);
                    TT::mma(o[2 * dp], pa, b[0], b[1]);
                    TT::mma(o[2 * dp + 1], pa, b[2], b[3]);
                }
            }
        }
        __syncthreads(); /* buf is free for tile j + 2 */
    }

    if (partial) {
        /* this split's partial, unnormalised, for pfm_merge_kernel */
#pragma unroll
        for (int h = 0; h < 2; h++) {
            l[h] += __shfl_xor_sync(CUDA_FULL_MASK, l[h], 1);
            l[h] += __shfl_xor_sync(CUDA_FULL_MASK, l[h], 2);
        }
        const int64_t blk = ((int64_t)s * gridDim.y + blockIdx.y) * n_x + tile_rev;
        const int64_t row0 = (blk * nsp + sp) * PFM_QR;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = warp * 16 + g + 8 * h;
            float *prow = part + (row0 + r) * HD;
#pragma unroll
            for (int d = 0; d < DT; d++)
                *reinterpret_cast<float2 *>(prow + d * 8 + 2 * t) =
                    make_float2(o[d][2 * h], o[d][2 * h + 1]);
            if (t == 0)
                *reinterpret_cast<float2 *>(part_ml + (row0 + r) * 2) = make_float2(m[h], l[h]);
        }
        return;
    }
    end_split(true);
}

/* Split blocks' second half: block (tile x PFM_MERGE_SUB, head group, sequence) folds, for
 * each of its PFM_QR / PFM_MERGE_SUB rows of a tile of more than one split, the partials of
 * the splits the row sees (in order, with pfm_fold_ml / pfm_fold_o), and writes O / l as the
 * one-block walk would. (Few rows per block: the grid is small exactly when splits are in
 * blocks of their own, and a block per tile left the merge waiting on its loads.) */
template <int HD>
__global__ void __launch_bounds__(PFM_WARPS * 32)
pfm_merge_kernel(float *__restrict__ out, const float *__restrict__ part,
                 const float *__restrict__ part_ml, const int32_t *__restrict__ query_start,
                 const int32_t *__restrict__ seq_lens, int n_heads, int n_kv_heads, int GR,
                 int skip_single, int tps, int nsp)
{
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    constexpr int ROWS = PFM_QR / PFM_MERGE_SUB;
    const int s = blockIdx.z, tile_rev = blockIdx.x / PFM_MERGE_SUB;
    const int n_x = gridDim.x / PFM_MERGE_SUB, sub = blockIdx.x % PFM_MERGE_SUB;
    pfm_tile tl;
    if (!pfm_tile_of(tl, tile_rev, n_x, blockIdx.y, s, query_start, seq_lens, n_heads,
                     n_kv_heads, GR, skip_single))
        return;
    if ((tl.n_tiles + tps - 1) / tps <= 1)
        return; /* written by its one block */
    const int64_t blk = ((int64_t)s * gridDim.y + blockIdx.y) * n_x + tile_rev;
    const int split_keys = tps * PFM_KT;
    for (int i = threadIdx.x; i < ROWS * (HD / 2); i += PFM_WARPS * 32) {
        const int r = sub * ROWS + i / (HD / 2), d = 2 * (i % (HD / 2));
        const int tok = tl.tok0 + r / GR;
        if (tok >= tl.qlen)
            continue;
        const int n_row = (tl.pos0 + tok) / split_keys + 1; /* splits this row sees */
        const int64_t r0 = blk * nsp * PFM_QR + r;
        float2 ml = *reinterpret_cast<const float2 *>(part_ml + r0 * 2);
        float2 fo = *reinterpret_cast<const float2 *>(part + r0 * HD + d);
        float fm = ml.x, fl = ml.y;
        for (int k = 1; k < n_row; k++) {
            const int64_t rk = r0 + (int64_t)k * PFM_QR;
            const float2 mk = *reinterpret_cast<const float2 *>(part_ml + rk * 2);
            const float2 ok = *reinterpret_cast<const float2 *>(part + rk * HD + d);
            float c1, c2;
            pfm_fold_ml(fm, fl, mk.x, mk.y, c1, c2);
            fo.x = pfm_fold_o(fo.x, ok.x, c1, c2);
            fo.y = pfm_fold_o(fo.y, ok.y, c1, c2);
        }
        const float inv = fl > 0.0f ? 1.0f / fl : 0.0f;
        *reinterpret_cast<float2 *>(out + ((int64_t)(tl.qs0 + tok) * n_heads + tl.hq0 + r % GR) *
                                              HD + d) = make_float2(fo.x * inv, fo.y * inv);
    }
}

/* ---- host side ---- */

int cuda_attention_mma_ok(const llmrt_backend *b, const llmrt_attn_params *p)
{
    if (b->tune.att_pf_mma < 0 || b->cc_major < 8)
        return 0;
    if (p->kv_dtype != LLMRT_DTYPE_F16 && p->kv_dtype != LLMRT_DTYPE_BF16)
        return 0;
    const int hd = p->head_dim;
    if (hd != 64 && hd != 96 && hd != 128)
        return 0;
    const size_t smem = hd == 64 ? pfm_shape<64>::SMEM : hd == 96 ? pfm_shape<96>::SMEM
                                                                   : pfm_shape<128>::SMEM;
    return smem <= b->smem_optin;
}

template <typename T, int HD> static cudaError_t pfm_set_smem(void)
{
    return cudaFuncSetAttribute(attn_prefill_mma_kernel<T, HD>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)pfm_shape<HD>::SMEM);
}

llmrt_status cuda_attention_mma_init(llmrt_backend *b, llmrt_error *err)
{
    if (b->cc_major < 8)
        return LLMRT_OK;
    cudaError_t e = cudaSuccess;
#define PFM_SET(HD)                                                                            \
    if (e == cudaSuccess && pfm_shape<HD>::SMEM <= b->smem_optin)                              \
        e = pfm_set_smem<__half, HD>();                                                        \
    if (e == cudaSuccess && pfm_shape<HD>::SMEM <= b->smem_optin)                              \
        e = pfm_set_smem<__nv_bfloat16, HD>();
    PFM_SET(64)
    PFM_SET(96)
    PFM_SET(128)
#undef PFM_SET
    if (e != cudaSuccess)
        return cuda_fail(err, LLMRT_ERR_DEVICE, e, "cudaFuncSetAttribute(attention prefill mma)");
    return LLMRT_OK;
}

/* One prefill launch: the grid of query tiles (x), head groups (y), sequences (z); with
 * nsp > 0, x holds nsp split blocks per tile and the merge follows. */
typedef struct pfm_plan {
    dim3 tiles;
    int gr, skip_single, tps, nsp;
    float *part, *part_ml;
} pfm_plan;

template <typename T, int HD>
static void pfm_launch(const llmrt_backend *b, float *out, const float *q,
                       const llmrt_attn_params *p, const pfm_plan &pl)
{
    dim3 grid = pl.tiles;
    if (pl.nsp > 0)
        grid.x *= (unsigned)pl.nsp;
    cuda_launch(b, attn_prefill_mma_kernel<T, HD>, grid, PFM_WARPS * 32, pfm_shape<HD>::SMEM, out,
                q, (const T *)p->k_cache, (const T *)p->v_cache, p->query_start, p->seq_lens,
                p->block_tables, p->max_blocks_per_seq, p->block_size, p->n_heads, p->n_kv_heads,
                p->scale, pl.gr, pl.skip_single, pl.tps, pl.nsp, pl.part, pl.part_ml);
    if (pl.nsp > 0)
        cuda_launch(b, pfm_merge_kernel<HD>,
                    dim3(pl.tiles.x * PFM_MERGE_SUB, pl.tiles.y, pl.tiles.z), PFM_WARPS * 32, 0, out,
                    (const float *)pl.part, (const float *)pl.part_ml, p->query_start,
                    p->seq_lens, p->n_heads, p->n_kv_heads, pl.gr, pl.skip_single, pl.tps, pl.nsp);
}

template <typename T>
static void pfm_launch_hd(const llmrt_backend *b, float *out, const float *q,
                          const llmrt_attn_params *p, const pfm_plan &pl)
{
    switch (p->head_dim) {
    case 64: pfm_launch<T, 64>(b, out, q, p, pl); break;
    case 96: pfm_launch<T, 96>(b, out, q, p, pl); break;
    default: pfm_launch<T, 128>(b, out, q, p, pl); break;
    }
}

llmrt_status cuda_attention_prefill_mma(llmrt_backend *b, float *out, const float *q,
                                        const llmrt_attn_params *p, int skip_single,
                                        llmrt_error *err)
{
    const int group = p->n_heads / p->n_kv_heads;
    pfm_plan pl;
    memset(&pl, 0, sizeof pl);
    pl.gr = 1;
    while (pl.gr * 2 <= PFM_QR && group % (pl.gr * 2) == 0)
        pl.gr *= 2;
    const int tq = PFM_QR / pl.gr;
    const int gy = p->n_kv_heads * (group / pl.gr);
    pl.tiles = dim3((unsigned)ceil_div64(p->max_query_len, tq), (unsigned)gy, (unsigned)p->n_seqs);
    pl.skip_single = skip_single;
    /* Splits at fixed key positions (the bits); split blocks when the tiles alone would leave
     * the GPU's block slots (two per SM) empty and their partials fit PFM_SCRATCH_MAX (the
     * speed only). */
    const int split_keys = b->tune.att_pf_split > 0 ? b->tune.att_pf_split
                           : b->tune.att_pf_split < 0 ? 0 : PFM_SPLIT_KEYS;
    pl.tps = (split_keys + PFM_KT - 1) / PFM_KT;
    if (pl.tps > 0) {
        const int64_t splits = ceil_div64(ceil_div64(p->max_seq_len, PFM_KT), pl.tps);
        const int64_t blocks = (int64_t)pl.tiles.x * pl.tiles.y * pl.tiles.z;
        const int fill = b->tune.att_pf_fill != 0 ? b->tune.att_pf_fill : 2;
        const size_t bytes = (size_t)blocks * (size_t)splits * PFM_QR *
                             (size_t)(p->head_dim + 2) * sizeof(float);
        if (splits > 1 && fill > 0 && blocks < (int64_t)fill * b->sm_count &&
            bytes <= PFM_SCRATCH_MAX) {
            void *scratch = NULL;
            llmrt_error serr;
            memset(&serr, 0, sizeof serr);
            /* no memory for the partials: one block per tile, the same bits */
            if (cuda_scratch_get(b, CUDA_SCRATCH_ATTN_PREFILL, bytes, &scratch, &serr) == LLMRT_OK) {
                pl.nsp = (int)splits;
                pl.part = (float *)scratch;
                pl.part_ml = pl.part + (size_t)blocks * (size_t)splits * PFM_QR * p->head_dim;
            }
        }
    }
    if (p->kv_dtype == LLMRT_DTYPE_F16)
        pfm_launch_hd<__half>(b, out, q, p, pl);
    else
        pfm_launch_hd<__nv_bfloat16>(b, out, q, p, pl);
    return cuda_check_launch(err, "attention prefill (mma)");
}
