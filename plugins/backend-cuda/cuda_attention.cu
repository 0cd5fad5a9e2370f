/* cuda_attention.cu — paged attention over the KV cache (backend.h: llmrt_attn_params).
 *
 * Why two kernels: decode (one query token per sequence) is bound by reading K and V once,
 * so it is a split-K "flash-decoding" kernel: one block per (sequence, KV head, split of the
 * context), reading each K/V row once for all query heads of its GQA group, with an online
 * softmax, and a second small kernel merging the splits with log-sum-exp. Prefill (many query
 * tokens) reuses K/V across queries, so it is a tiled flash-attention kernel: a tile of query
 * rows in shared memory against tiles of keys/values, causal, online softmax, fp32 FMA.
 *
 * cuda_attention() dispatches: decode rows to the kernel here while every split of the plan
 * gets a block of its own (batch 1), else to the batch kernel that walks the same splits with
 * fewer blocks (cuda_attention_batch.cu); prefill rows of f16/bf16 caches at head_dim 64, 96,
 * 128 to the tensor-core kernel (cuda_attention_mma.cu), others to the fp32 kernel here; in a
 * step that mixes both, each row to its own kind. [backend.cuda] tune att_inv=0, att_mixed=0,
 * att_pf_mma=0 bring back the choices before those kernels.
 *
 * Grid sizes come only from host values (max_seq_len, max_query_len, counts); the actual
 * lengths are read on the device and surplus blocks exit early, so one launch shape serves
 * every step of a CUDA graph bucket. All math is fp32; caches may be F32/F16/BF16. The decode
 * kernel's exponentials are __expf (ex2.approx, a few ulp): a decode block runs one warp per
 * scheduler, so its softmax is a latency chain and the accurate expf cost ~0.5 us per layer
 * at ctx 2048 (H200: 2.46 -> 2.40 ms per decode step, with the in-block merge's weights taken
 * once per head instead of once per output element). */
#include "cuda_attention_common.cuh"

#include <math.h>

#define PF_THREADS 256       /* prefill: threads per block (16 x 16) */

/* Block (split, kv-head sub-group, sequence). GB query heads (of one KV head's group) share
 * every K/V row this block reads. When the sequence uses one split (a short context, or
 * S == 1) the block writes the final output; otherwise it writes an unnormalised partial
 * (acc, max m, sum l), and the last of the sequence's active splits to finish
 * (counters[s, blockIdx.y]) merges them all into the output:
 *   part    [n_seqs, n_heads, S, HD]
 *   part_ml [n_seqs, n_heads, S, 2] */
template <typename T, int HD, int GB>
__global__ void __launch_bounds__(ATT_WARPS * 32)
attn_decode_kernel(float *__restrict__ out, float *part, float *part_ml,
                   unsigned int *__restrict__ counters, const float *__restrict__ q, const T *__restrict__ kc, const T *__restrict__ vc,
                   const int32_t *__restrict__ query_start, const int32_t *__restrict__ seq_lens,
                   const int32_t *__restrict__ block_tables, int mbps, int bs, int n_heads,
                   int n_kv_heads, float scale, int S, int cmin, int stage_t)
{
    using G_ = att_geom<T, HD>;
    constexpr int VEC = G_::VEC, LPR = G_::LPR, EPL = G_::EPL, NV = G_::NV, RPW = G_::RPW,
                  NRG = G_::NRG, TT = G_::TT;
    __shared__ __align__(16) float sm_ml[NRG][GB][2]; /* float2 stores (att_merge_split) */
    __shared__ __align__(16) float sm_acc[NRG][GB][HD]; /* float4 stores and loads */
    __shared__ float sm_w[NRG][GB], sm_m[GB];
    __shared__ unsigned int s_done;

    const int s = blockIdx.z;
    const int group = n_heads / n_kv_heads;
    const int subs = group / GB;
    const int kvh = blockIdx.y / subs;
    const int hq0 = kvh * group + (blockIdx.y % subs) * GB;
    const int split = blockIdx.x;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int rg = warp * RPW + lane / LPR;
    const int lr = lane % LPR;

    /* Before the wait on the kernel before this one (programmatic dependent launch; see
     * the launch protocol in cuda_common.cuh): the step inputs and the cache rows of earlier steps'
     * tokens (positions < L - qlen) were written by work that completed before that kernel
     * started, so the block copies its split's first stage_t of those rows into shared memory
     * now, overlapping that kernel's run. This step's rows (the kernel before stored them) and
     * rows past the window are read from the cache after the wait. */
    const int qs0 = query_start[s];
    const int qlen = query_start[s + 1] - qs0;
    const int L = seq_lens[s];
    const int active = att_active_splits(L, S, cmin);
    const bool run = qlen > 0 && split < active;
    const int chunk = (L + active - 1) / active;
    const int t0 = split * chunk;
    const int t1 = min(L, t0 + chunk);
    const int32_t *bt = block_tables + (int64_t)s * mbps;
    const int64_t slot_stride = (int64_t)n_kv_heads * HD;
    const int64_t head_off = (int64_t)kvh * HD + lr * EPL;
    constexpr int RV = HD * (int)sizeof(T) / 16; /* 16-byte pieces per K or V row */
    extern __shared__ uint4 att_window[];        /* K rows [stage_t][RV], then V rows */
    const uint4 *ks = att_window, *vs = att_window + (size_t)stage_t * RV;
    const int w_end = run ? max(t0, min(min(t1, L - qlen), t0 + stage_t)) : t0;
    for (int i = threadIdx.x; i < (w_end - t0) * RV; i += blockDim.x) {
        const int t = t0 + i / RV, c = i % RV;
        const int64_t at = ((int64_t)bt[t / bs] * bs + t % bs) * slot_stride + (int64_t)kvh * HD;
        cp_async16(att_window + i, reinterpret_cast<const uint4 *>(kc + at) + c);
        cp_async16(att_window + (size_t)stage_t * RV + i, reinterpret_cast<const uint4 *>(vc + at) + c);
    }
    cp_async_commit();
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    if (!run)
        return;
    const int row = qs0 + qlen - 1; /* decode: the one query token, at position L - 1 */

    float qv[GB][EPL];
#pragma unroll
    for (int g = 0; g < GB; g++)
#pragma unroll
        for (int e = 0; e < EPL; e++)
            qv[g][e] = q[((int64_t)row * n_heads + hq0 + g) * HD + lr * EPL + e] * scale;
    cp_async_wait_all();
    __syncthreads();

    float m[GB], l[GB], acc[GB][EPL];
    att_state_init<GB, EPL>(m, l, acc);

    for (int base = t0; base < t1; base += NRG * TT) {
        uint4 kraw[TT][NV], vraw[TT][NV];
        bool valid[TT];
        att_load_rows<T, TT, NV, VEC>(kraw, vraw, valid, base + rg * TT, t1, t0, w_end, ks, vs,
                                      RV, lr, bt, bs, kc, vc, slot_stride, head_off);
        att_decode_step<T, TT, NV, VEC, EPL, LPR, GB>(qv, kraw, vraw, valid, m, l, acc);
    }

    /* merge the row groups of this block */
    att_merge_split<HD, GB, NRG, EPL>(
        m, l, acc, rg, lr, sm_ml, sm_acc, sm_w, sm_m, active == 1,
        out + ((int64_t)row * n_heads + hq0) * HD,
        part + (((int64_t)s * n_heads + hq0) * S + split) * HD,
        part_ml + (((int64_t)s * n_heads + hq0) * S + split) * 2, S);
    if (active == 1)
        return;

    /* publish this split; the last active split of (sequence, head group) merges */
    att_merge_partials<HD, GB>(&counters[(int64_t)s * gridDim.y + blockIdx.y], s_done,
                               (unsigned int)active, active, S, part, part_ml,
                               (int64_t)s * n_heads + hq0, out, (int64_t)row * n_heads + hq0);
}

/* ---- prefill ---- */

/* Tile shapes by head_dim: query rows QR, keys per tile KT (both multiples of 16). */
template <int HD> struct pf_shape {
    static constexpr int QR = HD <= 128 ? 64 : 32;
    static constexpr int KT = HD <= 128 ? 64 : 32;
    static constexpr int LDQ = HD + 4; /* padded shared-memory row, floats */
    static constexpr int LDP = KT + 1;
    static constexpr size_t SMEM = (size_t)((QR + KT) * LDQ + QR * LDP) * sizeof(float);
};

/* Keys [k0, k0 + KT) of one KV head into dst [KT][LDQ] as f32 (keys >= kend: zeros). */
template <typename T, int HD, int KT, int LDQ>
__device__ __forceinline__ void pf_load_tile(float *dst, const T *__restrict__ cache,
                                             const int32_t *__restrict__ bt, int bs,
                                             int64_t slot_stride, int64_t head_off, int k0, int kend)
{
    constexpr int VEC = 16 / (int)sizeof(T);
    constexpr int VPR = HD / VEC; /* vectors per row */
    for (int idx = threadIdx.x; idx < KT * VPR; idx += PF_THREADS) {
        const int key = idx / VPR, c = idx % VPR;
        const int t = k0 + key;
        float f[VEC];
        if (t < kend) {
            const int64_t slot = (int64_t)bt[t / bs] * bs + t % bs;
            vec_to_f32<T>(ldg16(cache + slot * slot_stride + head_off + c * VEC), f);
        } else {
#pragma unroll
            for (int e = 0; e < VEC; e++)
                f[e] = 0.0f;
        }
        float4 *d4 = reinterpret_cast<float4 *>(dst + key * LDQ + c * VEC);
#pragma unroll
        for (int e = 0; e < VEC; e += 4)
            d4[e / 4] = make_float4(f[e], f[e + 1], f[e + 2], f[e + 3]);
    }
}

/* Block (query tile, kv-head sub-group, sequence): QR query rows = TQ tokens x GR heads of
 * one KV head's group. Thread (ty, tx) of a 16 x 16 grid owns rows ty*MR.. for both the
 * scores (keys tx + 16 j) and the output (dims tx + 16 d). */
template <typename T, int HD>
__global__ void __launch_bounds__(PF_THREADS)
attn_prefill_kernel(float *__restrict__ out, const float *__restrict__ q, const T *__restrict__ kc,
                    const T *__restrict__ vc, const int32_t *__restrict__ query_start,
                    const int32_t *__restrict__ seq_lens, const int32_t *__restrict__ block_tables,
                    int mbps, int bs, int n_heads, int n_kv_heads, float scale, int GR,
                    int skip_single)
{
    using P = pf_shape<HD>;
    constexpr int QR = P::QR, KT = P::KT, LDQ = P::LDQ, LDP = P::LDP;
    constexpr int MR = QR / 16, MC = KT / 16, MD = HD / 16;
    extern __shared__ float4 pf_smem4[];
    float *Qs = reinterpret_cast<float *>(pf_smem4); /* [QR][LDQ] */
    float *KVs = Qs + QR * LDQ;                      /* [KT][LDQ] */
    float *Ps = KVs + KT * LDQ;                      /* [QR][LDP] */

    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const int s = blockIdx.z;
    const int group = n_heads / n_kv_heads;
    const int subs = group / GR;
    const int kvh = blockIdx.y / subs;
    const int hq0 = kvh * group + (blockIdx.y % subs) * GR;
    const int TQ = QR / GR;

    const int qs0 = query_start[s];
    const int qlen = query_start[s + 1] - qs0;
    const int tok0 = blockIdx.x * TQ;
    if (tok0 >= qlen || (skip_single && qlen == 1)) /* one-token rows: the decode kernel's */
        return;
    const int L = seq_lens[s];
    const int pos0 = L - qlen; /* position of query token 0 */
    const int last_tok = min(qlen - 1, tok0 + TQ - 1);
    const int kend = pos0 + last_tok + 1; /* keys [0, kend) */

    for (int idx = threadIdx.x; idx < QR * HD; idx += PF_THREADS) {
        const int r = idx / HD, d = idx % HD;
        const int tok = tok0 + r / GR, h = hq0 + r % GR;
        Qs[r * LDQ + d] = tok < qlen ? q[((int64_t)(qs0 + tok) * n_heads + h) * HD + d] * scale : 0.0f;
    }

    int rpos[MR]; /* position of each of my rows; -1 = padding row */
#pragma unroll
    for (int i = 0; i < MR; i++) {
        const int tok = tok0 + (ty * MR + i) / GR;
        rpos[i] = tok < qlen ? pos0 + tok : -1;
    }
    float m[MR], l[MR], o[MR][MD];
#pragma unroll
    for (int i = 0; i < MR; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
#pragma unroll
        for (int j = 0; j < MD; j++)
            o[i][j] = 0.0f;
    }

    const int32_t *bt = block_tables + (int64_t)s * mbps;
    const int64_t slot_stride = (int64_t)n_kv_heads * HD;
    const int64_t head_off = (int64_t)kvh * HD;

    for (int k0 = 0; k0 < kend; k0 += KT) {
        __syncthreads(); /* Q is loaded; the previous tile's V is no longer read */
        pf_load_tile<T, HD, KT, LDQ>(KVs, kc, bt, bs, slot_stride, head_off, k0, kend);
        __syncthreads();

        float sacc[MR][MC];
#pragma unroll
        for (int i = 0; i < MR; i++)
#pragma unroll
            for (int j = 0; j < MC; j++)
                sacc[i][j] = 0.0f;
#pragma unroll 4
        for (int d = 0; d < HD; d += 4) {
            float4 qa[MR], kb[MC];
#pragma unroll
            for (int i = 0; i < MR; i++)
                qa[i] = *reinterpret_cast<const float4 *>(Qs + (ty * MR + i) * LDQ + d);
#pragma unroll
            for (int j = 0; j < MC; j++)
                kb[j] = *reinterpret_cast<const float4 *>(KVs + (tx + 16 * j) * LDQ + d);
#pragma unroll
            for (int i = 0; i < MR; i++)
#pragma unroll
                for (int j = 0; j < MC; j++) {
                    float a = sacc[i][j];
                    a = fmaf(qa[i].x, kb[j].x, a);
                    a = fmaf(qa[i].y, kb[j].y, a);
                    a = fmaf(qa[i].z, kb[j].z, a);
                    a = fmaf(qa[i].w, kb[j].w, a);
                    sacc[i][j] = a;
                }
        }

#pragma unroll
        for (int i = 0; i < MR; i++) {
            float mx = -INFINITY;
#pragma unroll
            for (int j = 0; j < MC; j++) {
                const int key = k0 + tx + 16 * j;
                if (key > rpos[i]) /* causal (and padding rows, rpos = -1) */
                    sacc[i][j] = -INFINITY;
                mx = fmaxf(mx, sacc[i][j]);
            }
#pragma unroll
            for (int off = 8; off > 0; off >>= 1)
                mx = fmaxf(mx, __shfl_xor_sync(CUDA_FULL_MASK, mx, off));
            const float mnew = fmaxf(m[i], mx);
            const bool none = mnew == -INFINITY;
            const float corr = none ? 1.0f : expf(m[i] - mnew);
            float ps = 0.0f;
#pragma unroll
            for (int j = 0; j < MC; j++) {
                const float p = none ? 0.0f : expf(sacc[i][j] - mnew);
                Ps[(ty * MR + i) * LDP + tx + 16 * j] = p;
                ps += p;
            }
#pragma unroll
            for (int off = 8; off > 0; off >>= 1)
                ps += __shfl_xor_sync(CUDA_FULL_MASK, ps, off);
            l[i] = l[i] * corr + ps;
            m[i] = mnew;
#pragma unroll
            for (int j = 0; j < MD; j++)
                o[i][j] *= corr;
        }
        __syncthreads(); /* K no longer read; P complete */
        pf_load_tile<T, HD, KT, LDQ>(KVs, vc, bt, bs, slot_stride, head_off, k0, kend);
        __syncthreads();
#pragma unroll 4
        for (int kk = 0; kk < KT; kk++) {
            float pv[MR];
#pragma unroll
            for (int i = 0; i < MR; i++)
                pv[i] = Ps[(ty * MR + i) * LDP + kk];
#pragma unroll
            for (int j = 0; j < MD; j++) {
                const float v = KVs[kk * LDQ + tx + 16 * j];
#pragma unroll
                for (int i = 0; i < MR; i++)
                    o[i][j] = fmaf(pv[i], v, o[i][j]);
            }
        }
    }

#pragma unroll
    for (int i = 0; i < MR; i++) {
        const int r = ty * MR + i;
        const int tok = tok0 + r / GR;
        if (tok >= qlen)
            continue;
        const int h = hq0 + r % GR;
        const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
        float *orow = out + ((int64_t)(qs0 + tok) * n_heads + h) * HD;
#pragma unroll
        for (int j = 0; j < MD; j++)
            orow[tx + 16 * j] = o[i][j] * inv;
    }
}

/* ---- host side ---- */

/* Every head_dim the kernels are built for, as X(HD). */
#define ATT_FOR_EACH_HD(X) X(32) X(64) X(96) X(128) X(256)

template <typename T, int HD>
static cudaError_t set_prefill_smem(void)
{
    return cudaFuncSetAttribute(attn_prefill_kernel<T, HD>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)pf_shape<HD>::SMEM);
}

/* Allow `bytes` of dynamic shared memory to one decode kernel; *fits = 0 when that and its
 * static shared memory exceed what a block may have (`optin`). */
static cudaError_t set_dyn_smem(const void *fn, int bytes, size_t optin, int *fits)
{
    cudaFuncAttributes fa;
    cudaError_t e = cudaFuncGetAttributes(&fa, fn);
    if (e != cudaSuccess)
        return e;
    if (fa.sharedSizeBytes + (size_t)bytes > optin) {
        *fits = 0;
        return cudaSuccess;
    }
    return cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

/* The same for every head-group size built for (T, HD). */
template <typename T, int HD> static cudaError_t set_decode_smem(int bytes, size_t optin, int *fits)
{
    constexpr int M = att_geom<T, HD>::GB_MAX;
    const void *fns[4] = {(const void *)attn_decode_kernel<T, HD, 1>,
                          (const void *)attn_decode_kernel<T, HD, (M >= 2 ? 2 : 1)>,
                          (const void *)attn_decode_kernel<T, HD, (M >= 4 ? 4 : 1)>,
                          (const void *)attn_decode_kernel<T, HD, (M >= 8 ? 8 : 1)>};
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < 4 && e == cudaSuccess; i++)
        e = set_dyn_smem(fns[i], bytes, optin, fits);
    return e;
}

llmrt_status cuda_attention_init(llmrt_backend *b, llmrt_error *err)
{
    cudaError_t e = cudaSuccess;
#define PF_SET(HD)                                                                             \
    if (e == cudaSuccess && pf_shape<HD>::SMEM <= b->smem_optin) {                             \
        e = set_prefill_smem<float, HD>();                                                     \
        if (e == cudaSuccess)                                                                  \
            e = set_prefill_smem<__half, HD>();                                                \
        if (e == cudaSuccess)                                                                  \
            e = set_prefill_smem<__nv_bfloat16, HD>();                                         \
    }
    ATT_FOR_EACH_HD(PF_SET)
#undef PF_SET
    if (e != cudaSuccess)
        return cuda_fail(err, LLMRT_ERR_DEVICE, e, "cudaFuncSetAttribute(attention prefill)");
    /* decode: the staged K/V window ([backend.cuda] tune att_win = KB, -1 = none), on devices
     * where it fits next to every decode kernel's static shared memory */
    const size_t win = b->tune.att_win < 0   ? 0
                       : b->tune.att_win > 0 ? (size_t)b->tune.att_win * 1024
                                             : (size_t)ATT_WINDOW_BYTES;
    b->att_window = 0;
    int fits = 1;
    if (win > 0) {
#define DEC_SET(HD)                                                                            \
    if (e == cudaSuccess)                                                                      \
        e = set_decode_smem<float, HD>((int)win, b->smem_optin, &fits);                        \
    if (e == cudaSuccess)                                                                      \
        e = set_decode_smem<__half, HD>((int)win, b->smem_optin, &fits);                       \
    if (e == cudaSuccess)                                                                      \
        e = set_decode_smem<__nv_bfloat16, HD>((int)win, b->smem_optin, &fits);
        ATT_FOR_EACH_HD(DEC_SET)
#undef DEC_SET
        if (e != cudaSuccess)
            return cuda_fail(err, LLMRT_ERR_DEVICE, e, "cudaFuncSetAttribute(attention decode)");
    }
    if (win > 0 && fits)
        b->att_window = win;
    return cuda_attention_mma_init(b, err);
}

/* Largest power of two <= cap that divides g. */
static int pow2_divisor(int g, int cap)
{
    int d = 1;
    while (d * 2 <= cap && g % (d * 2) == 0)
        d *= 2;
    return d;
}

typedef struct att_launch {
    const llmrt_backend *b;
    float *out, *part, *part_ml;
    unsigned int *counters;
    const float *q;
    const void *kc, *vc;
    const llmrt_attn_params *p;
    int S, cmin;
    int stage_t; /* decode: tokens of the staged K/V window */
    dim3 grid;
} att_launch;

/* The decode geometry of (cache dtype, head_dim): tokens a block reads per step and the most
 * query heads one block serves. */
template <typename T> static void decode_geom(int hd, int *tpi, int *gb_max)
{
    switch (hd) {
#define GEOM(HD)                                                                               \
    case HD:                                                                                   \
        *tpi = att_geom<T, HD>::NRG * att_geom<T, HD>::TT;                                     \
        *gb_max = att_geom<T, HD>::GB_MAX;                                                     \
        break;
        ATT_FOR_EACH_HD(GEOM)
#undef GEOM
    default: *tpi = 32, *gb_max = 1; break;
    }
}

template <typename T, int HD, int GB>
static void launch_decode(const att_launch &a)
{
    const llmrt_attn_params *p = a.p;
    /* the window only where the grid still fits in one wave with it (batch decode has many
     * more blocks, which the window's shared memory would spread over several waves) */
    int stage_t = a.stage_t, per_sm = 0;
    size_t smem = (size_t)stage_t * 2 * HD * sizeof(T);
    const int64_t blocks = (int64_t)a.grid.x * a.grid.y * a.grid.z;
    if (stage_t > 0 &&
        (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, attn_decode_kernel<T, HD, GB>,
                                                       ATT_WARPS * 32, smem) != cudaSuccess ||
         (int64_t)per_sm * a.b->sm_count < blocks)) {
        cudaGetLastError();
        stage_t = 0, smem = 0;
    }
    cuda_launch(a.b, attn_decode_kernel<T, HD, GB>, a.grid, ATT_WARPS * 32, smem, a.out, a.part,
                a.part_ml, a.counters, a.q, (const T *)a.kc, (const T *)a.vc, p->query_start,
                p->seq_lens, p->block_tables, p->max_blocks_per_seq, p->block_size, p->n_heads,
                p->n_kv_heads, p->scale, a.S, a.cmin, stage_t);
}

template <typename T, int HD>
static void launch_decode_gb(const att_launch &a, int gb)
{
    /* only the head-group sizes this geometry allows are built */
    constexpr int M = att_geom<T, HD>::GB_MAX;
    if (gb >= 8 && M >= 8)
        launch_decode<T, HD, (M >= 8 ? 8 : 1)>(a);
    else if (gb >= 4 && M >= 4)
        launch_decode<T, HD, (M >= 4 ? 4 : 1)>(a);
    else if (gb >= 2 && M >= 2)
        launch_decode<T, HD, (M >= 2 ? 2 : 1)>(a);
    else
        launch_decode<T, HD, 1>(a);
}

template <typename T>
static void launch_decode_hd(const att_launch &a, int gb)
{
    switch (a.p->head_dim) {
#define DEC(HD)                                                                                \
    case HD: launch_decode_gb<T, HD>(a, gb); break;
        ATT_FOR_EACH_HD(DEC)
#undef DEC
    default: break;
    }
}

template <typename T, int HD>
static void launch_prefill(const att_launch &a, int gr, int skip_single)
{
    const llmrt_attn_params *p = a.p;
    cuda_launch(a.b, attn_prefill_kernel<T, HD>, a.grid, PF_THREADS, pf_shape<HD>::SMEM, a.out,
                a.q, (const T *)a.kc, (const T *)a.vc, p->query_start, p->seq_lens,
                p->block_tables, p->max_blocks_per_seq, p->block_size, p->n_heads, p->n_kv_heads,
                p->scale, gr, skip_single);
}

template <typename T>
static void launch_prefill_hd(const att_launch &a, int gr, int skip_single)
{
    switch (a.p->head_dim) {
#define PF(HD)                                                                                 \
    case HD: launch_prefill<T, HD>(a, gr, skip_single); break;
        ATT_FOR_EACH_HD(PF)
#undef PF
    default: break;
    }
}

static size_t prefill_smem(int hd)
{
    switch (hd) {
#define SM(HD)                                                                                 \
    case HD: return pf_shape<HD>::SMEM;
        ATT_FOR_EACH_HD(SM)
#undef SM
    default: return 0;
    }
}

llmrt_status cuda_attention(llmrt_backend *b, float *out, const float *q,
                            const llmrt_attn_params *p, llmrt_error *err)
{
    if (p->n_tokens <= 0 || p->n_seqs <= 0)
        return LLMRT_OK;
    if (p->n_kv_heads <= 0 || p->n_heads <= 0 || p->n_heads % p->n_kv_heads)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cuda attention: n_heads (%d) must be a positive multiple of n_kv_heads "
                          "(%d)", p->n_heads, p->n_kv_heads);
    if (!att_head_dim_ok(p->head_dim))
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "cuda attention: head_dim %d is not supported (32, 64, 96, 128 or 256)",
                          p->head_dim);
    if (!cuda_is_float_dtype(p->kv_dtype))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cuda attention: cache dtype %s is not supported (F32, F16, BF16)",
                          llmrt_dtype_name(p->kv_dtype));
    if (p->block_size <= 0 || p->max_blocks_per_seq <= 0 || p->max_seq_len <= 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cuda attention: block_size (%d), max_blocks_per_seq (%d) and "
                          "max_seq_len (%d) must be positive",
                          p->block_size, p->max_blocks_per_seq, p->max_seq_len);
    if ((int64_t)p->max_seq_len > (int64_t)p->max_blocks_per_seq * p->block_size)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cuda attention: max_seq_len %d exceeds what a block table holds "
                          "(%d blocks x %d tokens)",
                          p->max_seq_len, p->max_blocks_per_seq, p->block_size);
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    const int group = p->n_heads / p->n_kv_heads;
    att_launch a;
    a.b = b;
    a.out = out;
    a.q = q;
    a.kc = p->k_cache;
    a.vc = p->v_cache;
    a.p = p;
    a.part = a.part_ml = NULL;
    a.counters = NULL;
    a.cmin = 1;
    a.stage_t = 0;

    /* Decode rows. The split plan (splits of >= tpi tokens, at most att_maxs) depends on the
     * context length only; s_fill (~4 blocks per SM over the batch) only says how many blocks
     * walk it. Where one block per split fits (small batches: batch 1 and 2 for Qwen3-8B),
     * the batch-1 kernel runs as it always has; at larger batches the batch kernel walks the
     * same splits with fewer blocks (cuda_attention_batch.cu), bit for bit alike. A mixed step
     * (prefill rows too) sends its one-token sequences there and the rest to prefill. */
    const int mixed = p->max_query_len > 1 && b->tune.att_mixed >= 0;
    if (p->max_query_len <= 1 || mixed) {
        int tpi = 32, gb_max = 1;
        switch (p->kv_dtype) {
        case LLMRT_DTYPE_F32: decode_geom<float>(p->head_dim, &tpi, &gb_max); break;
        case LLMRT_DTYPE_F16: decode_geom<__half>(p->head_dim, &tpi, &gb_max); break;
        default: decode_geom<__nv_bfloat16>(p->head_dim, &tpi, &gb_max); break;
        }
        int gb = pow2_divisor(group, 8);
        if (gb > gb_max)
            gb = gb_max;
        /* At most ATT_GB_CAP query heads per block unless [tune] att_gb says otherwise: a
         * head's arithmetic is the same whatever gb, only the length of a block's chain
         * (and how often K/V rows are re-read) changes. */
        const int gb_cap = b->tune.att_gb > 0 ? b->tune.att_gb : ATT_GB_CAP;
        while (gb > gb_cap && gb > 1)
            gb /= 2;
        const int gy = p->n_kv_heads * (group / gb);
        /* Splits: enough to give the GPU ~4 blocks per SM, none shorter than one step of a
         * block (tpi tokens) unless [tune] says otherwise. Each split reads its first stage_t
         * tokens before the wait (H200, 8B, ctx 128: one 128-token split per head group was
         * slower, 2.47 vs 2.32 ms: eight blocks then do all the arithmetic after the wait). */
        const size_t row_bytes = (size_t)2 * p->head_dim * llmrt_dtype_size(p->kv_dtype);
        a.stage_t = (int)(b->att_window / row_bytes);
        a.cmin = b->tune.att_cmin > 0 ? b->tune.att_cmin : tpi;
        const int fill = b->tune.att_fill > 0 ? b->tune.att_fill : 4;
        /* the last block of a (sequence, head group) merges every split: cap their number */
        const int max_splits = b->tune.att_maxs > 0 ? b->tune.att_maxs : ATT_DEFAULT_SPLITS;
        int64_t s_len = ceil_div64(p->max_seq_len, a.cmin);
        int64_t s_fill = ceil_div64((int64_t)fill * b->sm_count, (int64_t)p->n_seqs * gy);
        int64_t S = s_len < max_splits ? s_len : max_splits; /* the plan */
        if (S > ATT_MAX_SPLITS)
            S = ATT_MAX_SPLITS;
        if (S < 1)
            S = 1;
        int64_t SB = S < s_fill ? S : s_fill; /* blocks per (sequence, head group) */
        if (b->tune.att_inv < 0 && !mixed) {
            S = SB; /* the plan before the batch kernel: capped by the batch */
        } else {
            /* the batch kernel: no more blocks than one wave of `fill` per SM holds (each
             * walks more splits; a second, partial wave would cost a whole split time) */
            int64_t one_wave = (int64_t)fill * b->sm_count / ((int64_t)p->n_seqs * gy);
            if (one_wave < 1)
                one_wave = 1;
            if (one_wave < SB)
                SB = one_wave;
        }
        const int batch_kernel = SB < S || mixed;
        a.S = (int)S;
        if (S > 1) {
            /* [counters: ATT_COUNTERS u32, only ever used as counters, so always zero between
             * launches][part][part_ml] */
            if ((int64_t)p->n_seqs * gy > ATT_COUNTERS)
                return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                                  "cuda attention: %d sequences x %d head groups exceed the %d "
                                  "split-K counters", p->n_seqs, gy, ATT_COUNTERS);
            const size_t rows = (size_t)p->n_seqs * p->n_heads * (size_t)S;
            const size_t bytes = (size_t)ATT_COUNTERS * sizeof(unsigned int) +
                                 rows * (size_t)(p->head_dim + 2) * sizeof(float);
            void *scratch = NULL;
            if ((st = cuda_scratch_get(b, CUDA_SCRATCH_ATTN, bytes, &scratch, err)) != LLMRT_OK)
                return st;
            a.counters = (unsigned int *)scratch;
            a.part = (float *)(a.counters + ATT_COUNTERS);
            a.part_ml = a.part + rows * p->head_dim;
        }
        if (batch_kernel) {
            cuda_decode_batch_args ba;
            ba.p = p;
            ba.out = out, ba.part = a.part, ba.part_ml = a.part_ml, ba.counters = a.counters;
            ba.q = q;
            ba.S = (int)S, ba.cmin = a.cmin, ba.gb = gb;
            ba.prefetch = b->tune.att_bpf >= 0;
            ba.grid = dim3((unsigned)(SB < 1 ? 1 : SB), (unsigned)gy, (unsigned)p->n_seqs);
            if ((st = cuda_attention_decode_batch(b, &ba, err)) != LLMRT_OK || !mixed)
                return st;
        } else {
            a.grid = dim3((unsigned)S, (unsigned)gy, (unsigned)p->n_seqs);
            switch (p->kv_dtype) {
            case LLMRT_DTYPE_F32: launch_decode_hd<float>(a, gb); break;
            case LLMRT_DTYPE_F16: launch_decode_hd<__half>(a, gb); break;
            default: launch_decode_hd<__nv_bfloat16>(a, gb); break;
            }
            return cuda_check_launch(err, "attention decode");
        }
    }

    /* Prefill rows: on the tensor cores where the cache is f16/bf16 (cuda_attention_mma.cu),
     * else the fp32 kernel below. */
    if (cuda_attention_mma_ok(b, p))
        return cuda_attention_prefill_mma(b, out, q, p, mixed, err);
    if (prefill_smem(p->head_dim) > b->smem_optin)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "cuda attention: prefill with head_dim %d needs %zu bytes of shared "
                          "memory per block; device %s allows %zu",
                          p->head_dim, prefill_smem(p->head_dim), b->name, b->smem_optin);
    const int qr = p->head_dim <= 128 ? 64 : 32;
    const int gr = pow2_divisor(group, qr);
    const int tq = qr / gr;
    const int gy = p->n_kv_heads * (group / gr);
    a.grid = dim3((unsigned)ceil_div64(p->max_query_len, tq), (unsigned)gy, (unsigned)p->n_seqs);
    a.S = 1;
    switch (p->kv_dtype) {
    case LLMRT_DTYPE_F32: launch_prefill_hd<float>(a, gr, mixed); break;
    case LLMRT_DTYPE_F16: launch_prefill_hd<__half>(a, gr, mixed); break;
    default: launch_prefill_hd<__nv_bfloat16>(a, gr, mixed); break;
    }
    return cuda_check_launch(err, "attention prefill");
}
