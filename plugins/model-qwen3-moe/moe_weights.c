/* moe_weights.c — load a Qwen3-MoE checkpoint's tensors into backend memory.
 *
 * Per layer: the attention half (plugins/qwen3-common), then either the dense MLP (mlp.gate_proj
 * / up_proj / down_proj, intermediate_size) or the sparse block: the router mlp.gate.weight
 * [num_experts, hidden_size] (always dense: never asked of the quant plugin) and the experts as
 * they lie on disk, one module per expert: mlp.experts.E.{gate,up,down}_proj [moe_intermediate,
 * hidden] / [hidden, moe_intermediate]. Each expert's linear is quantized when the quant plugin
 * finds it (AWQ: E.gate_proj.qweight ...), else dense (modules_to_not_convert, or a dense
 * checkpoint). gate and up load as one [gate; up] linear per expert unless fuse = off or the
 * quant plugin cannot fuse them.
 *
 * Then the groups the forward runs: the quant plugin's linear_group_create over the quantized
 * experts of each projection (NULL for the dense ones), asking it to fold SwiGLU into gate|up;
 * on CUDA a device table of the dense experts' weight pointers for the plugin's own kernel.
 *
 * Malformed checkpoints fail naming what is wrong: a layer whose MLP kind disagrees with
 * mlp_only_layers / decoder_sparse_step, or an expert index past num_experts, before anything
 * of the layer is loaded; a router of the wrong shape names the tensor and [num_experts,
 * hidden_size] before any expert is loaded; a missing or misshapen expert names the expert,
 * its layer and the tensor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moe.h"

/* Whether layer l's checkpoint holds `sub` ("mlp.gate_proj"): dense (.weight) or AWQ (.qweight). */
static int has_module(const llmrt_checkpoint *ck, int32_t l, const char *sub)
{
    char name[192];
    snprintf(name, sizeof name, "model.layers.%d.%s.weight", (int)l, sub);
    if (qwen3_ckpt_has(ck, name))
        return 1;
    snprintf(name, sizeof name, "model.layers.%d.%s.qweight", (int)l, sub);
    return qwen3_ckpt_has(ck, name);
}

/* "(decoder_sparse_step 1, mlp_only_layers [0, 3])" */
static void layer_rule(const moe_config *c, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "decoder_sparse_step %d, num_experts %d, mlp_only_layers [",
                                c->sparse_step, c->n_experts);
    for (int32_t i = 0; i < c->n_mlp_only && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, i ? ", %d" : "%d", c->mlp_only[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
}

/* Before a layer's MLP is loaded: the checkpoint's layer must be of the kind config.json says
 * (the router mlp.gate.weight, always dense, marks a sparse block), and a sparse one must not
 * hold an expert past num_experts (looked for under the names of dense and AWQ linears). The
 * router's shape, checked first when the block loads, bounds num_experts by a real tensor;
 * a missing expert is named by its load. */
static llmrt_status check_layer_kind(const llmrt_model *m, const llmrt_checkpoint *ck, int32_t l,
                                     llmrt_error *err)
{
    const moe_config *c = &m->cfg;
    char rule[256], router[96], sub[96];
    layer_rule(c, rule, sizeof rule);
    snprintf(router, sizeof router, "model.layers.%d.mlp.gate.weight", (int)l);
    const int sparse = m->sparse[l], has_router = qwen3_ckpt_has(ck, router);
    if (sparse && !has_router && has_module(ck, l, "mlp.gate_proj"))
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "layer %d of %s holds a dense MLP (model.layers.%d.mlp.gate_proj), but "
                          "config.json makes it a sparse MoE block (%s): no %s",
                          l, ck->dir ? ck->dir : "the checkpoint", l, rule, router);
    if (!sparse && has_router)
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "layer %d of %s holds a sparse MoE block (its router %s), but "
                          "config.json makes it a dense MLP (%s)",
                          l, ck->dir ? ck->dir : "the checkpoint", router, rule);
    if (!sparse)
        return LLMRT_OK;
    snprintf(sub, sizeof sub, "mlp.experts.%d.down_proj", (int)c->n_experts);
    if (has_module(ck, l, sub))
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "config.json: num_experts is %d, but %s holds model.layers.%d.%s (an "
                          "expert index past num_experts - 1)",
                          c->n_experts, ck->dir ? ck->dir : "the checkpoint", l, sub);
    return LLMRT_OK;
}

/* An expert's load failed: say which expert of which layer, then why. */
static llmrt_status expert_failed(llmrt_status st, int32_t e, int32_t l, int32_t E,
                                  llmrt_error *err)
{
    char why[LLMRT_ERROR_MSG_MAX];
    snprintf(why, sizeof why, "%s", err ? err->msg : "");
    return llmrt_fail(err, st, "expert %d of layer %d (num_experts = %d): %s", e, l, E, why);
}

static llmrt_status experts_alloc(moe_experts *x, int32_t n, int64_t in, int64_t out,
                                  llmrt_error *err)
{
    x->n = n;
    x->in = in;
    x->out = out;
    x->lin = calloc((size_t)n, sizeof *x->lin);
    return x->lin ? LLMRT_OK : llmrt_fail(err, LLMRT_ERR_NOMEM, MOE_PLUGIN ": out of memory");
}

static void experts_free(llmrt_model *m, moe_experts *x)
{
    qwen3_rt *rt = &m->d.rt;
    if (x->qgroup)
        rt->quant.vt->linear_group_destroy(rt->quant.q, x->qgroup);
    x->qgroup = NULL;
    if (x->dense_table)
        rt->be.vt->dev_free(rt->be.b, (void *)x->dense_table);
    x->dense_table = NULL;
    for (int32_t e = 0; x->lin && e < x->n; e++)
        qwen3_free_linear(rt, &x->lin[e]);
    free(x->lin);
    x->lin = NULL;
}

static int has_groups(const llmrt_quant_vtable *qv)
{
    return LLMRT_VT_HAS(qv, llmrt_quant_vtable, linear_group_create) &&
           LLMRT_VT_HAS(qv, llmrt_quant_vtable, linear_forward_grouped) &&
           LLMRT_VT_HAS(qv, llmrt_quant_vtable, linear_group_destroy);
}

/* After the experts of a projection loaded: the quant plugin's group over the quantized ones
 * (with the SwiGLU fold when glu and it can), and on CUDA the dense ones' pointer table. */
static llmrt_status experts_finish(llmrt_model *m, moe_experts *x, int glu, const char *what,
                                   int32_t layer, llmrt_error *err)
{
    qwen3_rt *rt = &m->d.rt;
    const int32_t max_rows = m->d.params.max_tokens * m->cfg.top_k;
    llmrt_status st = LLMRT_OK;
    x->n_quant = 0;
    for (int32_t e = 0; e < x->n; e++)
        x->n_quant += x->lin[e].q != NULL;
    if (x->n_quant > 0) {
        const llmrt_quant_vtable *qv = rt->quant.vt;
        if (!has_groups(qv)) {
            if (m->target == MOE_ON_CPU) /* the CPU loops over the experts (moe_block.c) */
                goto dense;
            return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                              "quant plugin '%s' has no grouped linears (linear_group_create, "
                              "since ABI 1.2), which the " MOE_PLUGIN " model needs to run "
                              "quantized experts on backend '%s' without synchronising",
                              rt->quant.name ? rt->quant.name : "?", rt->be.name ? rt->be.name : "?");
        }
        const llmrt_qlinear **ql = calloc((size_t)x->n, sizeof *ql);
        if (!ql)
            return llmrt_fail(err, LLMRT_ERR_NOMEM, MOE_PLUGIN ": out of memory");
        for (int32_t e = 0; e < x->n; e++)
            ql[e] = x->lin[e].q;
        x->qflags = glu ? LLMRT_FUSE_OUT_SWIGLU : 0;
        llmrt_error gerr = {0};
        st = qv->linear_group_create(rt->quant.q, ql, x->n, max_rows, x->qflags, &x->qgroup, &gerr);
        if (st == LLMRT_ERR_UNSUPPORTED && x->qflags) { /* without the fold: SwiGLU apart */
            x->qflags = 0;
            st = qv->linear_group_create(rt->quant.q, ql, x->n, max_rows, 0, &x->qgroup, &gerr);
        }
        free(ql);
        if (st) {
            x->qgroup = NULL;
            return llmrt_fail(err, st, "layer %d, the experts' %s: quant plugin '%s': %s", layer,
                              what, rt->quant.name ? rt->quant.name : "?", gerr.msg);
        }
    }
dense:
    if (x->n_quant == x->n || m->target != MOE_ON_CUDA)
        return LLMRT_OK;
    /* the dense experts' weights for the plugin's CUDA kernel: one dtype, a pointer table */
    const void **table = calloc((size_t)x->n, sizeof *table);
    if (!table)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, MOE_PLUGIN ": out of memory");
    x->dense_dtype = LLMRT_DTYPE_INVALID;
    for (int32_t e = 0; e < x->n && st == LLMRT_OK; e++) {
        const qwen3_linear *l = &x->lin[e];
        if (l->q)
            continue;
        if (x->dense_dtype == LLMRT_DTYPE_INVALID)
            x->dense_dtype = l->w.dtype;
        if (l->w.dtype != x->dense_dtype)
            st = llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                            "layer %d, expert %d's %s is %s, other experts' %s: the dense experts "
                            "of a layer must share a dtype",
                            layer, e, what, llmrt_dtype_name(l->w.dtype),
                            llmrt_dtype_name(x->dense_dtype));
        table[e] = l->w.data;
    }
    void *dev = NULL;
    const size_t bytes = (size_t)x->n * sizeof *table;
    if (st == LLMRT_OK && (st = rt->be.vt->dev_alloc(rt->be.b, bytes, &dev, err)) == LLMRT_OK &&
        (st = rt->be.vt->copy(rt->be.b, dev, table, bytes, LLMRT_COPY_H2D, err)) == LLMRT_OK &&
        (st = rt->be.vt->synchronize(rt->be.b, err)) == LLMRT_OK) {
        x->dense_table = dev;
        dev = NULL;
    }
    if (dev)
        rt->be.vt->dev_free(rt->be.b, dev);
    free(table);
    return st;
}

/* Layer l's experts: [gate; up] per expert when fusing (all of them, or none), else gate and
 * up apart; down. */
static llmrt_status load_experts(llmrt_model *m, const llmrt_checkpoint *ck, int32_t l,
                                 moe_block *B, llmrt_error *err)
{
    qwen3_rt *rt = &m->d.rt;
    const int32_t E = m->cfg.n_experts;
    const int64_t H = m->cfg.base.hidden, I = m->cfg.moe_inter;
    static const char *const IDIMS = "[moe_intermediate_size, hidden_size]";
    static const char *const DDIMS = "[hidden_size, moe_intermediate_size]";
    char pg[160], pu[160], pd[160];
    llmrt_status st;
#define PREFIXES(e)                                                                           \
    (snprintf(pg, sizeof pg, "model.layers.%d.mlp.experts.%d.gate_proj", (int)l, (int)(e)),   \
     snprintf(pu, sizeof pu, "model.layers.%d.mlp.experts.%d.up_proj", (int)l, (int)(e)),     \
     snprintf(pd, sizeof pd, "model.layers.%d.mlp.experts.%d.down_proj", (int)l, (int)(e)))
    B->fused_gate_up = 0;
    if (m->fuse) {
        if ((st = experts_alloc(&B->gate_up, E, H, 2 * I, err)))
            return st;
        B->fused_gate_up = 1;
        for (int32_t e = 0; e < E && B->fused_gate_up; e++) {
            PREFIXES(e);
            qwen3_parts fp = {2, {pg, pu}, {I, I}, {IDIMS, IDIMS}};
            st = qwen3_load_fused(rt, ck, &fp, H, &B->gate_up.lin[e], err);
            if (st == LLMRT_ERR_UNSUPPORTED)
                B->fused_gate_up = 0;
            else if (st)
                return expert_failed(st, e, l, E, err);
        }
        if (!B->fused_gate_up) /* some expert cannot fuse: none does */
            experts_free(m, &B->gate_up);
    }
    if (!B->fused_gate_up) {
        if ((st = experts_alloc(&B->gate, E, H, I, err)) || (st = experts_alloc(&B->up, E, H, I, err)))
            return st;
        for (int32_t e = 0; e < E; e++) {
            PREFIXES(e);
            if ((st = qwen3_load_linear(rt, ck, pg, H, I, IDIMS, &B->gate.lin[e], err)) ||
                (st = qwen3_load_linear(rt, ck, pu, H, I, IDIMS, &B->up.lin[e], err)))
                return expert_failed(st, e, l, E, err);
        }
    }
    if ((st = experts_alloc(&B->down, E, I, H, err)))
        return st;
    for (int32_t e = 0; e < E; e++) {
        PREFIXES(e);
        if ((st = qwen3_load_linear(rt, ck, pd, I, H, DDIMS, &B->down.lin[e], err)))
            return expert_failed(st, e, l, E, err);
    }
#undef PREFIXES
    if (B->fused_gate_up)
        return (st = experts_finish(m, &B->gate_up, 1, "gate_proj + up_proj", l, err)) ? st
               : experts_finish(m, &B->down, 0, "down_proj", l, err);
    if ((st = experts_finish(m, &B->gate, 0, "gate_proj", l, err)) ||
        (st = experts_finish(m, &B->up, 0, "up_proj", l, err)))
        return st;
    return experts_finish(m, &B->down, 0, "down_proj", l, err);
}

static llmrt_status load_block(llmrt_model *m, const llmrt_checkpoint *ck, int32_t l,
                               moe_block *B, llmrt_error *err)
{
    char name[128];
    snprintf(name, sizeof name, "model.layers.%d.mlp.gate.weight", (int)l);
    int64_t shape[2] = {m->cfg.n_experts, m->cfg.base.hidden};
    llmrt_status st = qwen3_load_dense(&m->d.rt, ck, name, 2, shape, "[num_experts, hidden_size]",
                                       &B->router, err);
    return st ? st : load_experts(m, ck, l, B, err);
}

llmrt_status moe_weights_load(llmrt_model *m, const llmrt_checkpoint *ck, llmrt_error *err)
{
    qwen3_decoder *d = &m->d;
    const qwen3_config *c = &d->cfg;
    llmrt_status st;
    if ((st = qwen3_decoder_load_embed(d, ck, err)))
        return st;
    for (int32_t i = 0; i < c->n_layers; i++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "model.layers.%d.mlp", (int)i);
        if ((st = qwen3_attn_load(&d->rt, ck, c, i, &d->attn[i], err)) ||
            (st = check_layer_kind(m, ck, i, err)))
            return st;
        st = m->sparse[i] ? load_block(m, ck, i, &m->moe[i], err)
                          : qwen3_mlp_load(&d->rt, ck, prefix, c->hidden, c->intermediate,
                                           "intermediate_size", &m->mlp[i], err);
        if (st)
            return st;
    }
    return qwen3_decoder_load_head(d, ck, err);
}

void moe_weights_free(llmrt_model *m)
{
    for (int32_t i = 0; i < m->d.cfg.n_layers; i++) {
        if (m->mlp)
            qwen3_mlp_free(&m->d.rt, &m->mlp[i]);
        if (m->moe) {
            moe_block *B = &m->moe[i];
            qwen3_free_tensor(&m->d.rt, &B->router);
            experts_free(m, &B->gate_up);
            experts_free(m, &B->gate);
            experts_free(m, &B->up);
            experts_free(m, &B->down);
        }
    }
    qwen3_decoder_free(&m->d);
}
