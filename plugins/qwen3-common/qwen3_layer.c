/* qwen3_layer.c — the tensors of a Qwen3 layer's attention half, and the dense SwiGLU MLP.
 *
 * Why together: both are the per-layer weights every Qwen3 decoder loads the same way
 * (model-qwen3 for all its layers; model-qwen3-moe for the attention of every layer and the
 * MLP of its dense layers), through the loaders of qwen3_load.c, fusing the projections that
 * read one input when the model runs the backend's fused ops. */
#include <stdio.h>
#include <string.h>

#include "qwen3_common.h"

llmrt_status qwen3_attn_load(qwen3_rt *rt, const llmrt_checkpoint *ck, const qwen3_config *c,
                             int32_t i, qwen3_attn *a, llmrt_error *err)
{
    const int64_t H = c->hidden, D = c->head_dim;
    const int64_t QD = (int64_t)c->n_heads * D, KVD = (int64_t)c->n_kv_heads * D;
    static const char *const QDIMS = "[num_attention_heads * head_dim, hidden_size]";
    static const char *const KVDIMS = "[num_key_value_heads * head_dim, hidden_size]";
    llmrt_status st;
    char name[160], pq[128], pk[128], pv[128], po[128];
#define NAME(suffix) (snprintf(name, sizeof name, "model.layers.%d." suffix, (int)i), name)
    snprintf(pq, sizeof pq, "model.layers.%d.self_attn.q_proj", (int)i);
    snprintf(pk, sizeof pk, "model.layers.%d.self_attn.k_proj", (int)i);
    snprintf(pv, sizeof pv, "model.layers.%d.self_attn.v_proj", (int)i);
    snprintf(po, sizeof po, "model.layers.%d.self_attn.o_proj", (int)i);
    if ((st = qwen3_load_vector(rt, ck, NAME("input_layernorm.weight"), H, "[hidden_size]",
                                &a->input_norm, err)))
        return st;
    if (rt->fuse_proj) {
        qwen3_parts fp = {3, {pq, pk, pv}, {QD, KVD, KVD}, {QDIMS, KVDIMS, KVDIMS}};
        st = qwen3_load_fused(rt, ck, &fp, H, &a->qkv_proj, err);
        if (st != LLMRT_OK && st != LLMRT_ERR_UNSUPPORTED)
            return st;
        a->fused_qkv = st == LLMRT_OK;
    }
    if (!a->fused_qkv && ((st = qwen3_load_linear(rt, ck, pq, H, QD, QDIMS, &a->q_proj, err)) ||
                          (st = qwen3_load_linear(rt, ck, pk, H, KVD, KVDIMS, &a->k_proj, err)) ||
                          (st = qwen3_load_linear(rt, ck, pv, H, KVD, KVDIMS, &a->v_proj, err))))
        return st;
    if ((st = qwen3_load_vector(rt, ck, NAME("self_attn.q_norm.weight"), D, "[head_dim]",
                                &a->q_norm, err)) ||
        (st = qwen3_load_vector(rt, ck, NAME("self_attn.k_norm.weight"), D, "[head_dim]",
                                &a->k_norm, err)) ||
        (st = qwen3_load_linear(rt, ck, po, QD, H,
                                "[hidden_size, num_attention_heads * head_dim]", &a->o_proj, err)) ||
        (st = qwen3_load_vector(rt, ck, NAME("post_attention_layernorm.weight"), H,
                                "[hidden_size]", &a->post_norm, err)))
        return st;
#undef NAME
    return LLMRT_OK;
}

void qwen3_attn_free(qwen3_rt *rt, qwen3_attn *a)
{
    if (a->offloaded) /* the memory plugin's now */
        a->input_norm.data = a->post_norm.data = a->q_norm.data = a->k_norm.data = NULL;
    qwen3_free_tensor(rt, &a->input_norm);
    qwen3_free_tensor(rt, &a->post_norm);
    qwen3_free_tensor(rt, &a->q_norm);
    qwen3_free_tensor(rt, &a->k_norm);
    qwen3_free_linear(rt, &a->q_proj);
    qwen3_free_linear(rt, &a->k_proj);
    qwen3_free_linear(rt, &a->v_proj);
    qwen3_free_linear(rt, &a->o_proj);
    qwen3_free_linear(rt, &a->qkv_proj);
}

/* ---- the dense MLP ---- */

llmrt_status qwen3_mlp_load(qwen3_rt *rt, const llmrt_checkpoint *ck, const char *prefix,
                            int64_t H, int64_t I, const char *inter_key, qwen3_mlp *m,
                            llmrt_error *err)
{
    char pg[160], pu[160], pd[160], idims[96], ddims[96];
    snprintf(pg, sizeof pg, "%s.gate_proj", prefix);
    snprintf(pu, sizeof pu, "%s.up_proj", prefix);
    snprintf(pd, sizeof pd, "%s.down_proj", prefix);
    snprintf(idims, sizeof idims, "[%s, hidden_size]", inter_key);
    snprintf(ddims, sizeof ddims, "[hidden_size, %s]", inter_key);
    llmrt_status st;
    m->inter = I;
    if (rt->fuse_proj) {
        qwen3_parts fp = {2, {pg, pu}, {I, I}, {idims, idims}};
        st = qwen3_load_fused(rt, ck, &fp, H, &m->gate_up_proj, err);
        if (st != LLMRT_OK && st != LLMRT_ERR_UNSUPPORTED)
            return st;
        m->fused_gate_up = st == LLMRT_OK;
    }
    if (!m->fused_gate_up && ((st = qwen3_load_linear(rt, ck, pg, H, I, idims, &m->gate_proj, err)) ||
                              (st = qwen3_load_linear(rt, ck, pu, H, I, idims, &m->up_proj, err))))
        return st;
    return qwen3_load_linear(rt, ck, pd, I, H, ddims, &m->down_proj, err);
}

void qwen3_mlp_free(qwen3_rt *rt, qwen3_mlp *m)
{
    qwen3_free_linear(rt, &m->gate_proj);
    qwen3_free_linear(rt, &m->up_proj);
    qwen3_free_linear(rt, &m->down_proj);
    qwen3_free_linear(rt, &m->gate_up_proj);
}

int32_t qwen3_mlp_glu_rows(const qwen3_rt *rt, const qwen3_mlp *m)
{
    const llmrt_quant_vtable *qv = rt->quant.vt;
    if (!rt->fused || !m->fused_gate_up || !m->gate_up_proj.q || !qv ||
        !LLMRT_VT_HAS(qv, llmrt_quant_vtable, linear_forward_fused) ||
        !LLMRT_VT_HAS(qv, llmrt_quant_vtable, linear_fused_max_rows))
        return 0;
    const int32_t r = qv->linear_fused_max_rows(rt->quant.q, m->gate_up_proj.q, LLMRT_FUSE_OUT_SWIGLU);
    return r > 0 ? r : 0;
}

llmrt_status qwen3_mlp_forward(qwen3_rt *rt, const qwen3_mlp *m, const qwen3_mlp_act *s,
                               float *out, const float *xn, int32_t T, int32_t glu_rows,
                               llmrt_error *err)
{
    const int32_t I = (int32_t)m->inter;
    llmrt_status st;
    /* act [T, I] = silu(xn · Wgᵀ) * (xn · Wuᵀ) */
    if (m->fused_gate_up && T <= glu_rows) { /* glu_rows > 0: a quantized gate/up with the fold */
        st = rt->quant.vt->linear_forward_fused(rt->quant.q, m->gate_up_proj.q, s->act, xn, T,
                                                LLMRT_FUSE_OUT_SWIGLU, err);
    } else if (m->fused_gate_up) {
        if ((st = qwen3_linear_forward(rt, &m->gate_up_proj, s->gu, xn, T, err)))
            return st;
        st = rt->fused->swiglu(rt->be.b, s->act, s->gu, T, I, err);
    } else {
        if ((st = qwen3_linear_forward(rt, &m->gate_proj, s->gate, xn, T, err)) ||
            (st = qwen3_linear_forward(rt, &m->up_proj, s->up, xn, T, err)))
            return st;
        st = rt->be.vt->silu_mul(rt->be.b, s->act, s->gate, s->up, (int64_t)T * I, err);
    }
    if (st)
        return st;
    return qwen3_linear_forward(rt, &m->down_proj, out, s->act, T, err);
}
