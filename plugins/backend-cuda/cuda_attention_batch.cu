/* cuda_attention_batch.cu — decode attention for batches: the split-K plan of the batch-1
 * kernel (cuda_attention.cu), walked by as few blocks as the batch needs, and the decode rows
 * of a mixed step.
 *
 * Why: the batch-1 kernel gives every (sequence, head group) one block per split of its
 * context; a graph is captured for max_model_len, so that is 32 splits, most of them idle at
 * short contexts. At batch 1 the idle ones are free; at batch 256 they would be 65536 blocks a
 * layer. The batch-1 kernel therefore capped its splits by the batch (splits x batch ~ 4
 * blocks per SM), which changed how a context was cut — and with it the rounding: a token
 * decoded in a batch differed from the same token decoded alone. Here the plan stays the one
 * of the batch-1 kernel (splits of at least one block step, at most 32, a function of the
 * context length only), and gridDim.x blocks per (sequence, head group) take splits
 * blockIdx.x, blockIdx.x + gridDim.x, ... each computed exactly as the batch-1 kernel computes
 * it (same lanes, same order, same merge), so the bits do not depend on the batch. The cost
 * follows the KV actually read: a block only walks the splits its sequence has.
 *
 * Both kernels compute a step, merge a split and merge the splits through the same helpers
 * (att_decode_step, att_merge_split, att_merge_partials in cuda_attention_common.cuh), which
 * is what makes the bits alike; this
 * file has its own loop around them (the batch-1 kernel's timing is the decode ITL), without
 * the K/V window that kernel stages before its wait (a grid of many blocks goes without the
 * window there too). A block walks its (split, step) pairs as one sequence and loads the next
 * step's K/V rows before it computes this one's, across a split's end and merge too: a split
 * is a few 16-token steps, and without that each step waited for its own block-table and K/V
 * loads. Which registers hold a row does not change any sum. With mixed = 1 only sequences
 * with one query token run (the decode rows of a step that also prefills; the prefill kernel
 * takes the others). */
#include "cuda_attention_common.cuh"

/* Blocks per SM the register budget is set for: 4 (128 registers, the host's default fill)
 * for a 16-bit cache at head_dim 64 / 128 with up to 4 query heads per block (f16: no
 * spills; bf16: 12 bytes); the compiler's choice elsewhere, where 128 would spill more. */
#define ATB_MIN_BLOCKS(T, HD, GB) (sizeof(T) == 2 && ((HD) == 64 || (HD) == 128) && (GB) <= 4 ? 4 : 1)

/* Block (block b of gridDim.x, kv-head sub-group, sequence): splits b, b + gridDim.x, ... of
 * the plan att_active_splits(L, S, cmin); partials and merge as attn_decode_kernel. */
template <typename T, int HD, int GB, bool PF>
__global__ void __launch_bounds__(ATT_WARPS * 32, ATB_MIN_BLOCKS(T, HD, GB))
attn_decode_batch_kernel(float *__restrict__ out, float *part, float *part_ml,
                         unsigned int *__restrict__ counters, const float *__restrict__ q,
                         const T *__restrict__ kc, const T *__restrict__ vc,
                         const int32_t *__restrict__ query_start,
                         const int32_t *__restrict__ seq_lens,
                         const int32_t *__restrict__ block_tables, int mbps, int bs, int n_heads,
                         int n_kv_heads, float scale, int S, int cmin)
{
    using G_ = att_geom<T, HD>;
    constexpr int VEC = G_::VEC, LPR = G_::LPR, EPL = G_::EPL, NV = G_::NV, RPW = G_::RPW,
                  NRG = G_::NRG, TT = G_::TT;
    __shared__ __align__(16) float sm_ml[NRG][GB][2]; /* float2 stores (att_merge_split) */
    __shared__ __align__(16) float sm_acc[NRG][GB][HD]; /* float4 stores and loads */
    __shared__ float sm_w[NRG][GB], sm_m[GB];
    __shared__ unsigned int s_done;

    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int s = blockIdx.z;
    const int group = n_heads / n_kv_heads;
    const int subs = group / GB;
    const int kvh = blockIdx.y / subs;
    const int hq0 = kvh * group + (blockIdx.y % subs) * GB;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int rg = warp * RPW + lane / LPR;
    const int lr = lane % LPR;

    const int qs0 = query_start[s];
    const int qlen = query_start[s + 1] - qs0;
    const int L = seq_lens[s];
    const int active = att_active_splits(L, S, cmin);
    if (qlen != 1 || (int)blockIdx.x >= active) /* a mixed step's prefill rows: not ours */
        return;
    const int row = qs0; /* the one query token, at position L - 1 */
    const int chunk = (L + active - 1) / active;
    const int32_t *bt = block_tables + (int64_t)s * mbps;
    const int64_t slot_stride = (int64_t)n_kv_heads * HD;
    const int64_t head_off = (int64_t)kvh * HD + lr * EPL;
    constexpr int RV = HD * (int)sizeof(T) / 16;

    float qv[GB][EPL];
#pragma unroll
    for (int g = 0; g < GB; g++)
#pragma unroll
        for (int e = 0; e < EPL; e++)
            qv[g][e] = q[((int64_t)row * n_heads + hq0 + g) * HD + lr * EPL + e] * scale;

    /* The block's (split, 16-token step) pairs in order, each step's K/V rows loaded one step
     * ahead (PF; across a split's end too, so the merge hides the next split's first loads).
     * A split whose range is empty (t0 >= t1: the last splits of a short context under the S
     * cap) takes one step of invalid rows, which changes nothing, and then its merge. */
    constexpr int STEP = NRG * TT;
    int split = blockIdx.x;
    int t0 = split * chunk, t1 = min(L, t0 + chunk), base = t0;
    uint4 kraw[TT][NV], vraw[TT][NV];
    bool valid[TT];
    if (PF && split < active)
        att_load_rows<T, TT, NV, VEC>(kraw, vraw, valid, base + rg * TT, t1, t0, t0, NULL, NULL,
                                      RV, lr, bt, bs, kc, vc, slot_stride, head_off);
    float m[GB], l[GB], acc[GB][EPL];
    att_state_init<GB, EPL>(m, l, acc);
    while (split < active) {
        const bool last = base + STEP >= t1; /* this step ends its split */
        const int nsplit = last ? split + (int)gridDim.x : split;
        const int nt0 = last ? nsplit * chunk : t0;
        const int nt1 = last ? min(L, nt0 + chunk) : t1;
        const int nbase = last ? nt0 : base + STEP;
        uint4 kcur[TT][NV], vcur[TT][NV];
        bool vok[TT];
        if (PF) {
#pragma unroll
            for (int u = 0; u < TT; u++) {
                vok[u] = valid[u];
#pragma unroll
                for (int v = 0; v < NV; v++)
                    kcur[u][v] = kraw[u][v], vcur[u][v] = vraw[u][v];
            }
            if (nsplit < active) /* the next step's rows, in flight during this one */
                att_load_rows<T, TT, NV, VEC>(kraw, vraw, valid, nbase + rg * TT, nt1, nt0, nt0,
                                              NULL, NULL, RV, lr, bt, bs, kc, vc, slot_stride,
                                              head_off);
        } else {
            /* w_end = t0: no staged window, every row from the cache */
            att_load_rows<T, TT, NV, VEC>(kcur, vcur, vok, base + rg * TT, t1, t0, t0, NULL, NULL,
                                          RV, lr, bt, bs, kc, vc, slot_stride, head_off);
        }
        att_decode_step<T, TT, NV, VEC, EPL, LPR, GB>(qv, kcur, vcur, vok, m, l, acc);

        if (last) { /* the split's row groups merged, its partial (or the output) written */
            __syncthreads(); /* the previous split's merge no longer reads the shared arrays */
            att_merge_split<HD, GB, NRG, EPL>(
                m, l, acc, rg, lr, sm_ml, sm_acc, sm_w, sm_m, active == 1,
                out + ((int64_t)row * n_heads + hq0) * HD,
                part + (((int64_t)s * n_heads + hq0) * S + split) * HD,
                part_ml + (((int64_t)s * n_heads + hq0) * S + split) * 2, S);
            att_state_init<GB, EPL>(m, l, acc); /* the next split starts empty */
        }
        split = nsplit, t0 = nt0, t1 = nt1, base = nbase;
    }
    if (active == 1)
        return;

    /* the last of the participating blocks merges every split, in split order */
    att_merge_partials<HD, GB>(&counters[(int64_t)s * gridDim.y + blockIdx.y], s_done,
                               (unsigned int)min((int)gridDim.x, active), active, S, part,
                               part_ml, (int64_t)s * n_heads + hq0, out,
                               (int64_t)row * n_heads + hq0);
}

/* ---- host side ---- */

#define ATB_FOR_EACH_HD(X) X(32) X(64) X(96) X(128) X(256)

template <typename T, int HD, int GB>
static void atb_launch(const llmrt_backend *b, const cuda_decode_batch_args *a)
{
    const llmrt_attn_params *p = a->p;
    cuda_launch(b, a->prefetch ? attn_decode_batch_kernel<T, HD, GB, true>
                               : attn_decode_batch_kernel<T, HD, GB, false>,
                a->grid, ATT_WARPS * 32, 0, a->out,
                a->part, a->part_ml, a->counters, a->q, (const T *)p->k_cache,
                (const T *)p->v_cache, p->query_start, p->seq_lens, p->block_tables,
                p->max_blocks_per_seq, p->block_size, p->n_heads, p->n_kv_heads, p->scale, a->S,
                a->cmin);
}

template <typename T, int HD>
static void atb_launch_gb(const llmrt_backend *b, const cuda_decode_batch_args *a)
{
    constexpr int M = att_geom<T, HD>::GB_MAX;
    if (a->gb >= 8 && M >= 8)
        atb_launch<T, HD, (M >= 8 ? 8 : 1)>(b, a);
    else if (a->gb >= 4 && M >= 4)
        atb_launch<T, HD, (M >= 4 ? 4 : 1)>(b, a);
    else if (a->gb >= 2 && M >= 2)
        atb_launch<T, HD, (M >= 2 ? 2 : 1)>(b, a);
    else
        atb_launch<T, HD, 1>(b, a);
}

template <typename T>
static void atb_launch_hd(const llmrt_backend *b, const cuda_decode_batch_args *a)
{
    switch (a->p->head_dim) {
#define ATB(HD)                                                                                \
    case HD: atb_launch_gb<T, HD>(b, a); break;
        ATB_FOR_EACH_HD(ATB)
#undef ATB
    default: break;
    }
}

llmrt_status cuda_attention_decode_batch(llmrt_backend *b, const cuda_decode_batch_args *a,
                                         llmrt_error *err)
{
    switch (a->p->kv_dtype) {
    case LLMRT_DTYPE_F32: atb_launch_hd<float>(b, a); break;
    case LLMRT_DTYPE_F16: atb_launch_hd<__half>(b, a); break;
    default: atb_launch_hd<__nv_bfloat16>(b, a); break;
    }
    return cuda_check_launch(err, "attention decode (batch)");
}
