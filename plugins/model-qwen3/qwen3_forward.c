/* qwen3_forward.c — one forward pass of Qwen3 over a batch, as a sequence of backend ops.
 *
 * Why this shape: the engine captures decode steps in CUDA graphs, so forward only enqueues
 * backend ops and quant linear_forward calls on pre-allocated scratch: no allocation, no
 * synchronisation, no host reads of device data. Host-side checks use only host values.
 *
 * Per layer (T = batch->n_tokens rows, H = hidden, D = head_dim):
 *   xn = rmsnorm(x) · input_layernorm
 *   q [T, n_heads, D], k, v [T, n_kv_heads, D] = xn · Wq/Wk/Wvᵀ
 *   q, k = rmsnorm per head (q_norm, k_norm), then neox RoPE at positions
 *   kv_store(k, v) at slot_mapping; attn = paged causal attention (scale D^-0.5)
 *   x += attn · Woᵀ
 *   xn = rmsnorm(x) · post_attention_layernorm
 *   x += (silu(xn · Wgᵀ) * (xn · Wuᵀ)) · Wdᵀ
 * then the final norm and lm_head on the logits rows (or on every row with all_logits).
 *
 * With the backend's fused ops (m->fused, see qwen3_plugin.c) the same math takes fewer
 * launches: each residual add is deferred into the next norm (add_rmsnorm: x += r, then
 * xn = rmsnorm(x)); q/k/v come from one fused projection whose per-head norms, RoPE and
 * cache store are one op (qk_norm_rope_store); gate/up come from one projection and
 * swiglu — or, at decode sizes where the quant plugin folds it (m->glu_rows), the gate/up
 * projection writes silu(gate) * up itself. A decode step of pure one-token sequences needs
 * no logits-row gather (row s is sequence s). */
#include <math.h>

#include "qwen3.h"

static llmrt_status linear(llmrt_model *m, const qwen3_linear *l, float *y, const float *x,
                           int32_t n, llmrt_error *err)
{
    if (l->q)
        return m->quant.vt->linear_forward(m->quant.q, l->q, y, x, n, err);
    return m->be.vt->gemm(m->be.b, y, x, &l->w, n, err);
}

/* x [rows, H] += res (when not NULL), then out = rmsnorm(x) * w: one op when the backend has
 * the fused ops, else add and rmsnorm. */
static llmrt_status add_norm(llmrt_model *m, float *out, float *x, const float *res,
                             const llmrt_tensor *w, int32_t rows, llmrt_error *err)
{
    const llmrt_backend_vtable *be = m->be.vt;
    const int32_t H = m->cfg.hidden;
    const float eps = (float)m->cfg.eps;
    llmrt_status st;
    if (m->fused)
        return m->fused->add_rmsnorm(m->be.b, out, x, res, w, rows, H, eps, err);
    if (res && (st = be->add(m->be.b, x, x, res, (int64_t)rows * H, err)))
        return st;
    return be->rmsnorm(m->be.b, out, x, w, rows, H, eps, err);
}

/* The attention block of layer L on xn: q [T, n_heads, D] ready for attention, k and v in
 * the layer's cache. */
static llmrt_status attn_prologue(llmrt_model *m, const qwen3_layer *L, const llmrt_batch *batch,
                                  const llmrt_kv_cache *kv, int32_t l, llmrt_error *err)
{
    const qwen3_config *c = &m->cfg;
    const llmrt_backend_vtable *be = m->be.vt;
    llmrt_backend *b = m->be.b;
    const qwen3_scratch *s = &m->s;
    const int32_t T = batch->n_tokens, D = c->head_dim;
    const float eps = (float)c->eps, theta = (float)c->rope_theta;
    llmrt_status st;
    if (L->fused_qkv) {
        if ((st = linear(m, &L->qkv_proj, s->qkv, s->xn, T, err)))
            return st;
        return m->fused->qk_norm_rope_store(b, s->q, s->qkv, &L->q_norm, &L->k_norm,
                                            batch->positions, batch->slot_mapping, T, c->n_heads,
                                            c->n_kv_heads, D, eps, theta, kv->k[l], kv->v[l],
                                            kv->dtype, err);
    }
    if ((st = linear(m, &L->q_proj, s->q, s->xn, T, err)) ||
        (st = linear(m, &L->k_proj, s->k, s->xn, T, err)) ||
        (st = linear(m, &L->v_proj, s->v, s->xn, T, err)) ||
        (st = be->rmsnorm(b, s->q, s->q, &L->q_norm, T * c->n_heads, D, eps, err)) ||
        (st = be->rmsnorm(b, s->k, s->k, &L->k_norm, T * c->n_kv_heads, D, eps, err)) ||
        (st = be->rope(b, s->q, batch->positions, T, c->n_heads, D, theta, err)) ||
        (st = be->rope(b, s->k, batch->positions, T, c->n_kv_heads, D, theta, err)))
        return st;
    return be->kv_store(b, kv->k[l], kv->v[l], kv->dtype, s->k, s->v, batch->slot_mapping, T,
                        c->n_kv_heads, D, err);
}

/* act [T, I] = silu(xn · Wgᵀ) * (xn · Wuᵀ) */
static llmrt_status mlp_up(llmrt_model *m, const qwen3_layer *L, int32_t T, llmrt_error *err)
{
    const llmrt_backend_vtable *be = m->be.vt;
    const qwen3_scratch *s = &m->s;
    const int32_t I = m->cfg.intermediate;
    llmrt_status st;
    if (L->fused_gate_up) {
        if (T <= m->glu_rows) /* glu_rows > 0: every gate/up is quantized */
            return m->quant.vt->linear_forward_fused(m->quant.q, L->gate_up_proj.q, s->act, s->xn,
                                                     T, LLMRT_FUSE_OUT_SWIGLU, err);
        if ((st = linear(m, &L->gate_up_proj, s->gu, s->xn, T, err)))
            return st;
        return m->fused->swiglu(m->be.b, s->act, s->gu, T, I, err);
    }
    if ((st = linear(m, &L->gate_proj, s->gate, s->xn, T, err)) ||
        (st = linear(m, &L->up_proj, s->up, s->xn, T, err)))
        return st;
    return be->silu_mul(m->be.b, s->act, s->gate, s->up, (int64_t)T * I, err);
}

/* Everything before the lm_head: *rows = the final-normed hidden states whose logits the
 * batch asks for, *n of them (every token row with all_logits, else one per sequence). */
static llmrt_status forward_hidden(llmrt_model *m, const llmrt_batch *batch,
                                   const llmrt_kv_cache *kv, const float *logits,
                                   const float **rows, int32_t *n, llmrt_error *err)
{
    const qwen3_config *c = &m->cfg;
    const llmrt_backend_vtable *be = m->be.vt;
    llmrt_backend *b = m->be.b;
    const qwen3_scratch *s = &m->s;
    const int32_t T = batch ? batch->n_tokens : 0;
    const int32_t H = c->hidden, D = c->head_dim;
    llmrt_status st;

    if (!batch || !kv || !logits)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "qwen3 forward: batch, kv and logits are required");
    if (T < 1 || T > m->params.max_tokens)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "qwen3 forward: batch has %d token rows; the model was created for 1..%d "
                          "(max_tokens)",
                          T, m->params.max_tokens);
    if (batch->n_seqs < 1 || batch->n_seqs > m->params.max_seqs)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "qwen3 forward: batch has %d sequences; the model was created for 1..%d "
                          "(max_seqs)",
                          batch->n_seqs, m->params.max_seqs);
    if (kv->n_layers != c->n_layers || kv->n_kv_heads != c->n_kv_heads || kv->head_dim != D ||
        !kv->k || !kv->v || kv->block_size < 1)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "qwen3 forward: KV cache geometry (layers %d, kv heads %d, head dim %d, "
                          "block size %d) does not match the model (layers %d, kv heads %d, head "
                          "dim %d)",
                          kv->n_layers, kv->n_kv_heads, kv->head_dim, kv->block_size, c->n_layers,
                          c->n_kv_heads, D);
    if (!batch->all_logits && !batch->logits_rows)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "qwen3 forward: logits_rows is required unless all_logits is set");

    llmrt_attn_params ap = {
        .n_tokens = T,
        .n_seqs = batch->n_seqs,
        .n_heads = c->n_heads,
        .n_kv_heads = c->n_kv_heads,
        .head_dim = D,
        .scale = 1.0f / sqrtf((float)D),
        .query_start = batch->query_start,
        .seq_lens = batch->seq_lens,
        .block_tables = batch->block_tables,
        .max_blocks_per_seq = batch->max_blocks_per_seq,
        .block_size = kv->block_size,
        .max_seq_len = batch->max_seq_len,
        .max_query_len = batch->max_query_len,
        .kv_dtype = kv->dtype,
    };

    if ((st = be->embedding(b, s->x, &m->embed, batch->token_ids, T, err)))
        return st;
    const float *pending = NULL; /* the MLP output not yet added to x */
    for (int32_t l = 0; l < c->n_layers; l++) {
        const qwen3_layer *L = &m->layers[l];
        ap.k_cache = kv->k[l];
        ap.v_cache = kv->v[l];
        if ((st = add_norm(m, s->xn, s->x, pending, &L->input_norm, T, err)) ||
            (st = attn_prologue(m, L, batch, kv, l, err)) ||
            (st = be->attention(b, s->attn, s->q, &ap, err)) ||
            (st = linear(m, &L->o_proj, s->proj, s->attn, T, err)) ||
            (st = add_norm(m, s->xn, s->x, s->proj, &L->post_norm, T, err)) ||
            (st = mlp_up(m, L, T, err)) ||
            (st = linear(m, &L->down_proj, s->proj, s->act, T, err)))
            return st;
        pending = s->proj;
    }

    /* One-token sequences (a pure decode step): token row s is sequence s, so the logits
     * rows are all rows in order; otherwise gather them (after the norm: it is per row). */
    const int identity = batch->all_logits ||
                         (T == batch->n_seqs && batch->max_query_len == 1);
    if ((st = add_norm(m, s->xn, s->x, pending, &m->final_norm, T, err)))
        return st;
    if (identity) {
        *rows = s->xn;
        *n = batch->all_logits ? T : batch->n_seqs;
        return LLMRT_OK;
    }
    /* the embedding op over an f32 view of the normed states is a row gather that stays
     * inside a captured graph */
    llmrt_tensor hs = {.dtype = LLMRT_DTYPE_F32, .ndim = 2, .shape = {T, H}, .data = s->xn};
    const int32_t S = batch->n_seqs;
    if ((st = be->embedding(b, s->rows, &hs, batch->logits_rows, S, err)))
        return st;
    *rows = s->rows;
    *n = S;
    return LLMRT_OK;
}

llmrt_status qwen3_forward(llmrt_model *m, const llmrt_batch *batch, const llmrt_kv_cache *kv,
                           float *logits, llmrt_error *err)
{
    const float *rows = NULL;
    int32_t n = 0;
    llmrt_status st = forward_hidden(m, batch, kv, logits, &rows, &n, err);
    if (st)
        return st;
    return m->be.vt->gemm(m->be.b, logits, rows, &m->lm_head, n, err);
}

llmrt_status qwen3_forward_argmax(llmrt_model *m, const llmrt_batch *batch,
                                  const llmrt_kv_cache *kv, float *logits, int32_t *out,
                                  llmrt_error *err)
{
    if (!out || (batch && batch->all_logits))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "qwen3 forward_argmax: an output buffer is required, and all_logits "
                          "is not supported");
    const float *rows = NULL;
    int32_t n = 0;
    llmrt_status st = forward_hidden(m, batch, kv, logits, &rows, &n, err);
    if (st)
        return st;
    const llmrt_backend_vtable *be = m->be.vt;
    if (m->head && n <= m->head_rows)
        return m->head_ops->forward(m->be.b, m->head, out, rows, n, err);
    if ((st = be->gemm(m->be.b, logits, rows, &m->lm_head, n, err)))
        return st;
    return be->argmax(m->be.b, out, logits, n, m->cfg.vocab, err);
}
