/* qwen3_offload.c — CPU weight offload of a Qwen3 decoder's layers (memory.cpu_offload_gb).
 *
 * Why here: the model knows which buffers make up a layer (its dense tensors, and through the
 * quant plugin's linear_move the quantized linears' buffers); the memory plugin decides where
 * they live and how they come back (memory.h offload_*). Each layer is loaded on the device
 * as usual, then — when it is one of the offloaded ones — moved buffer by buffer into host
 * memory: the peak device footprint is the resident layers plus one. Layer 0's bytes (measured
 * after it loads, with a mover that leaves the buffers where they are) size the plan
 * (llmrt_offload_first_layer: the last layers) and the staging slots; a later offloaded layer
 * larger than that is refused. In every forward, fetch(-1) at the start and fetch(k) before
 * offloaded layer k's kernels. */
#include <stdio.h>

#include "qwen3_common.h"

typedef struct mover_ctx {
    qwen3_rt *rt;
    int measure;    /* 1: count bytes, leave every buffer where it is */
    int32_t layer;  /* for messages */
    int32_t k;      /* offloaded index of the layer */
    size_t off;     /* next free offset of the layer's bytes (256-aligned) */
    size_t limit;   /* the layer bytes the memory plugin holds */
} mover_ctx;

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

static llmrt_status move_fn(void *ctx, void *dev, size_t bytes, void **now, llmrt_error *err)
{
    mover_ctx *c = ctx;
    qwen3_rt *rt = c->rt;
    if (c->measure) {
        c->off += align256(bytes);
        *now = dev;
        return LLMRT_OK;
    }
    if (c->off + bytes > c->limit)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "memory.cpu_offload_gb: layer %d's weights need more than the %zu "
                          "bytes of layer 0 that sized the offload buffers: CPU offload takes "
                          "layers of one size",
                          c->layer, c->limit);
    const llmrt_weight_offload *o = rt->offload;
    llmrt_status st = o->vt->offload_place(o->m, c->k, c->off, dev, bytes, now, err);
    if (st) {
        char why[LLMRT_ERROR_MSG_MAX / 2];
        snprintf(why, sizeof why, "%s", err ? err->msg : "");
        return llmrt_fail(err, st, "offloading layer %d's weights: %s", c->layer, why);
    }
    rt->be.vt->dev_free(rt->be.b, dev);
    c->off += align256(bytes);
    return LLMRT_OK;
}

static llmrt_status move_tensor(mover_ctx *c, llmrt_tensor *t, llmrt_error *err)
{
    if (!t->data)
        return LLMRT_OK;
    void *now = NULL;
    llmrt_status st = move_fn(c, t->data, llmrt_tensor_bytes(t), &now, err);
    if (st == LLMRT_OK)
        t->data = now;
    return st;
}

static llmrt_status move_linear(mover_ctx *c, qwen3_linear *l, llmrt_error *err)
{
    qwen3_rt *rt = c->rt;
    if (l->q) {
        const llmrt_quant_vtable *qv = rt->quant.vt;
        if (!LLMRT_VT_HAS(qv, llmrt_quant_vtable, linear_move))
            return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                              "memory.cpu_offload_gb: the %s quant plugin cannot move its "
                              "weights into host memory (it has no linear_move); set "
                              "memory.cpu_offload_gb = 0",
                              rt->quant.name ? rt->quant.name : "?");
        llmrt_buffer_mover mv = {.ctx = c, .fn = move_fn};
        return qv->linear_move(rt->quant.q, l->q, &mv, err);
    }
    if (!l->w.data)
        return LLMRT_OK;
    llmrt_status st = move_tensor(c, &l->w, err);
    if (st == LLMRT_OK && !c->measure)
        l->moved = 1;
    return st;
}

/* Every buffer of layer `layer` (attention half a, dense MLP m) through the mover. */
static llmrt_status walk(mover_ctx *c, qwen3_attn *a, qwen3_mlp *m, llmrt_error *err)
{
    llmrt_tensor *norms[] = {&a->input_norm, &a->post_norm, &a->q_norm, &a->k_norm};
    qwen3_linear *lins[] = {&a->q_proj,     &a->k_proj,       &a->v_proj,    &a->o_proj,
                            &a->qkv_proj,   &m->gate_proj,    &m->up_proj,   &m->down_proj,
                            &m->gate_up_proj};
    llmrt_status st = LLMRT_OK;
    for (size_t i = 0; i < sizeof norms / sizeof *norms && st == LLMRT_OK; i++)
        st = move_tensor(c, norms[i], err);
    if (st == LLMRT_OK && !c->measure)
        a->offloaded = 1; /* its norms are no longer the model's to free */
    for (size_t i = 0; i < sizeof lins / sizeof *lins && st == LLMRT_OK; i++)
        st = move_linear(c, lins[i], err);
    return st;
}

llmrt_status qwen3_offload_layer(qwen3_rt *rt, int32_t n_layers, int32_t layer, qwen3_attn *a,
                                 qwen3_mlp *m, llmrt_error *err)
{
    const llmrt_weight_offload *o = rt->offload;
    if (!o)
        return LLMRT_OK;
    llmrt_status st;
    if (layer == 0) {
        mover_ctx mc = {.rt = rt, .measure = 1, .layer = 0};
        if ((st = walk(&mc, a, m, err)))
            return st;
        rt->offload_first = llmrt_offload_first_layer(n_layers, mc.off, o->bytes);
        rt->offload_layer_bytes = mc.off;
        const int32_t n_off = n_layers - rt->offload_first;
        if (n_off > 0 && (st = o->vt->offload_init(o->m, n_off, mc.off, err)))
            return st;
        if (rt->has_host)
            rt->host.log(rt->host.ctx, LLMRT_LOG_INFO, rt->who,
                         "CPU weight offload: layers %d to %d (%d of %d, %.2f GB) stay in host "
                         "memory (memory.cpu_offload_gb = %.2f)",
                         rt->offload_first, n_layers - 1, n_off, n_layers,
                         (double)mc.off * n_off / 1e9, (double)o->bytes / 1e9);
    }
    if (layer < rt->offload_first)
        return LLMRT_OK;
    mover_ctx mc = {.rt = rt,
                    .layer = layer,
                    .k = layer - rt->offload_first,
                    .limit = rt->offload_layer_bytes};
    if ((st = walk(&mc, a, m, err)))
        return st;
    rt->offloaded_bytes += mc.off;
    return LLMRT_OK;
}

llmrt_status qwen3_offload_fetch(qwen3_rt *rt, int32_t n_layers, int32_t layer,
                                 llmrt_error *err)
{
    const llmrt_weight_offload *o = rt->offload;
    if (!o || rt->offload_first >= n_layers)
        return LLMRT_OK;
    if (layer >= 0 && layer < rt->offload_first)
        return LLMRT_OK;
    const int32_t k = layer < 0 ? -1 : layer - rt->offload_first;
    return o->vt->offload_fetch(o->m, k, err);
}
