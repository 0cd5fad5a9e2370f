/* moe_block.c — the MLP of a Qwen3-MoE layer in one forward step, as the shared decoder's
 * callback: the dense SwiGLU MLP (qwen3-common) for dense layers, else the sparse block
 * (moe.h has its math). For T tokens, K experts each, N = T·K rows:
 *   router_logits [T, E] = xn · Wrᵀ                       backend gemm
 *   topk_id, topk_w [T, K]; rows sorted by expert          the plugin's route + sort
 *   act [N, I] = silu(gate_e(xn[src])) * up_e(xn[src])     grouped: quant plugin / own GEMV
 *   rows [N, H] = down_e(act)                              grouped, the same way
 *   proj [T, H] = Σ_k topk_w[t, k] · rows[row_of[t, k]]    the plugin's combine
 * The grouped calls read each row's expert on the device (rows sorted by expert, with every
 * expert's range): a step reads only the chosen experts' weights and never waits for the
 * host. On the CPU the plugin's ops run on the host (moe_cpu.c); on CUDA its kernels
 * (moe_cuda.cu) run on the backend's stream. */
#include <string.h>

#include "moe.h"
#ifdef MOE_HAVE_CUDA
#include "moe_cuda.h"
#endif

/* On the CPU target the plugin's ops read what the backend's ops wrote: wait for them on a
 * backend that runs ops asynchronously (the CPU backend does not). */
static llmrt_status host_sync(llmrt_model *m, llmrt_error *err)
{
    const llmrt_backend_vtable *vt = m->d.rt.be.vt;
    if (vt->caps && (vt->caps(m->d.rt.be.b) & LLMRT_BACKEND_CAP_ASYNC))
        return vt->synchronize(m->d.rt.be.b, err);
    return LLMRT_OK;
}

#ifdef MOE_HAVE_CUDA
#define ON_CUDA(call) return (call)
#else
#define ON_CUDA(call)                                                                         \
    return llmrt_fail(err, LLMRT_ERR_INTERNAL, MOE_PLUGIN ": a CUDA target in a build without CUDA")
#endif

/* Rows a CUDA step leaves unsorted: the grouped kernels run a block per row up to here in
 * any case (awq_cuda_grouped.cu, moe_cuda.cu), so the sort would only cost time. */
#define MOE_UNSORTED_ROWS 8

/* Whether this step's rows stay in (token, choice) order (no expert ranges). */
static int rows_unsorted(const llmrt_model *m, int32_t T)
{
    return m->target != MOE_ON_CPU && (int64_t)T * m->cfg.top_k <= MOE_UNSORTED_ROWS;
}

/* Routing, then the rows sorted by expert unless `unsorted` (rows_unsorted: CUDA only). */
static llmrt_status route_and_sort(llmrt_model *m, int32_t T, int unsorted, llmrt_error *err)
{
    const moe_config *c = &m->cfg;
    const moe_scratch *s = &m->ms;
    if (unsorted)
        ON_CUDA(moe_cuda_route_rows(m->cuda, s->router_logits, T, c->n_experts, c->top_k,
                                    c->norm_topk, s->topk_id, s->topk_w, s->row_expert,
                                    s->row_src, s->row_of, err));
    if (m->target == MOE_ON_CPU) {
        llmrt_status st = host_sync(m, err);
        if (st)
            return st;
        moe_cpu_route(&m->d.rt.be, s->router_logits, T, c->n_experts, c->top_k, c->norm_topk,
                      s->topk_id, s->topk_w);
        moe_cpu_sort(s->topk_id, T, c->top_k, c->n_experts, s->row_expert, s->row_src,
                     s->expert_start, s->row_of, s->cursor);
        return LLMRT_OK;
    }
    ON_CUDA(moe_cuda_route_sort(m->cuda, s->router_logits, T, c->n_experts, c->top_k,
                                c->norm_topk, s->topk_id, s->topk_w, s->row_expert, s->row_src,
                                s->expert_start, s->row_of, err));
}

/* The CPU without the quant plugin's grouped linears (a plugin built before ABI 1.2): each
 * quantized expert's rows through linear_forward, gathered and scattered on the host. */
static llmrt_status quant_loop_cpu(llmrt_model *m, const moe_experts *x, float *y, const float *in,
                                   const int32_t *row_src, int glu, llmrt_error *err)
{
    const qwen3_rt *rt = &m->d.rt;
    const moe_scratch *s = &m->ms;
    const int64_t yw = glu ? x->out / 2 : x->out;
    for (int32_t e = 0; e < x->n; e++) {
        const int32_t r0 = s->expert_start[e], cnt = s->expert_start[e + 1] - r0;
        if (!x->lin[e].q || cnt <= 0)
            continue;
        const float *xe = in + (int64_t)r0 * x->in;
        if (row_src) {
            for (int32_t i = 0; i < cnt; i++)
                memcpy(s->xg + (int64_t)i * x->in, in + (int64_t)row_src[r0 + i] * x->in,
                       (size_t)x->in * sizeof(float));
            xe = s->xg;
        }
        float *ye = glu ? s->yg : y + (int64_t)r0 * yw;
        llmrt_status st = rt->quant.vt->linear_forward(rt->quant.q, x->lin[e].q, ye, xe, cnt, err);
        if (st)
            return st;
        if (glu)
            moe_cpu_swiglu(y + (int64_t)r0 * yw, s->yg, cnt, (int32_t)yw);
    }
    return LLMRT_OK;
}

/* y [N, out or out/2] for every row: the quantized experts through the quant plugin, the
 * dense ones through the plugin's own grouped linear. glu: SwiGLU folded in (only when
 * every quantized part folds it: the caller checked). starts: the experts' row ranges, NULL
 * when the rows are not sorted. */
static llmrt_status grouped(llmrt_model *m, const moe_experts *x, float *y, const float *in,
                            const int32_t *row_src, const int32_t *starts, int32_t N, int glu,
                            llmrt_error *err)
{
    const qwen3_rt *rt = &m->d.rt;
    const moe_scratch *s = &m->ms;
    llmrt_status st;
    if (x->n_quant > 0) {
        if (x->qgroup)
            st = rt->quant.vt->linear_forward_grouped(rt->quant.q, x->qgroup, y, in, s->row_expert,
                                                      row_src, starts, N,
                                                      glu ? LLMRT_FUSE_OUT_SWIGLU : 0, err);
        else
            st = quant_loop_cpu(m, x, y, in, row_src, glu, err);
        if (st)
            return st;
    }
    if (x->n_quant == x->n)
        return LLMRT_OK;
    if (m->target == MOE_ON_CPU)
        return moe_cpu_dense_grouped(&rt->be, x, y, in, row_src, s->expert_start, glu, s->xg,
                                     s->yg, err);
    ON_CUDA(moe_cuda_dense_grouped(m->cuda, x->dense_table, x->dense_dtype, x->out, x->in, y, in,
                                   s->row_expert, row_src, starts, N, x->n, glu, err));
}

static llmrt_status swiglu(llmrt_model *m, float *out, const float *gu, int32_t n, int32_t d,
                           llmrt_error *err)
{
    if (m->target == MOE_ON_CPU) {
        moe_cpu_swiglu(out, gu, n, d);
        return LLMRT_OK;
    }
    ON_CUDA(moe_cuda_swiglu(m->cuda, out, gu, n, d, err));
}

static llmrt_status combine(llmrt_model *m, float *out, int32_t T, llmrt_error *err)
{
    const moe_config *c = &m->cfg;
    const moe_scratch *s = &m->ms;
    if (m->target == MOE_ON_CPU) {
        moe_cpu_combine(&m->d.rt.be, out, s->rows, s->topk_w, s->row_of, T, c->top_k,
                        c->base.hidden);
        return LLMRT_OK;
    }
    ON_CUDA(moe_cuda_combine(m->cuda, out, s->rows, s->topk_w, s->row_of, T, c->top_k,
                             c->base.hidden, err));
}

static llmrt_status block_forward(llmrt_model *m, const moe_block *B, int32_t T, llmrt_error *err)
{
    const moe_config *c = &m->cfg;
    const moe_scratch *s = &m->ms;
    qwen3_rt *rt = &m->d.rt;
    const int32_t N = T * c->top_k, I = c->moe_inter;
    const float *xn = m->d.s.xn;
    const int unsorted = rows_unsorted(m, T);
    const int32_t *starts = unsorted ? NULL : s->expert_start;
    llmrt_status st;
    if ((st = rt->be.vt->gemm(rt->be.b, s->router_logits, xn, &B->router, T, err)) ||
        (st = route_and_sort(m, T, unsorted, err)))
        return st;
    if (B->fused_gate_up) {
        /* SwiGLU in the grouped linears unless a quantized part cannot fold it */
        const int fold = B->gate_up.n_quant == 0 || !B->gate_up.qgroup ||
                         (B->gate_up.qflags & LLMRT_FUSE_OUT_SWIGLU);
        if ((st = grouped(m, &B->gate_up, fold ? s->act : s->gu, xn, s->row_src, starts, N, fold,
                          err)) ||
            (!fold && (st = swiglu(m, s->act, s->gu, N, I, err))))
            return st;
    } else if ((st = grouped(m, &B->gate, s->gate, xn, s->row_src, starts, N, 0, err)) ||
               (st = grouped(m, &B->up, s->up, xn, s->row_src, starts, N, 0, err)) ||
               (st = rt->be.vt->silu_mul(rt->be.b, s->act, s->gate, s->up, (int64_t)N * I, err))) {
        return st;
    }
    if ((st = grouped(m, &B->down, s->rows, s->act, NULL, starts, N, 0, err)))
        return st;
    return combine(m, m->d.s.proj, T, err);
}

llmrt_status moe_mlp(void *ctx, int32_t layer, int32_t T, llmrt_error *err)
{
    llmrt_model *m = ctx;
    if (!m->sparse[layer])
        return qwen3_mlp_forward(&m->d.rt, &m->mlp[layer], &m->mlp_act, m->d.s.proj, m->d.s.xn, T,
                                 m->glu_rows, err);
    return block_forward(m, &m->moe[layer], T, err);
}
