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
 * With the backend's fused ops (m->use_*, see qwen3_plugin.c) the same math takes fewer
 * launches: each residual add is deferred into the next norm (add_rmsnorm: x += r, then
 * xn = rmsnorm(x)); q/k/v come from one fused projection whose per-head norms, RoPE and
 * cache store are one op (qk_norm_rope_store); gate/up come from one projection and
 * swiglu. A decode step of pure one-token sequences needs no logits-row gather (row s is
 * sequence s).
 *
 * Folds (the decode path, quant linear_forward_fused, each where the quant plugin takes it for
 * T tokens — m->fold): o_proj and down_proj add their output straight into x and write x's
 * chunk sums of squares (add); q/k/v and gate/up read x itself and apply the norm while they
 * stage it, its scale from those sums (norm); gate/up write silu(gate) * up (glu). With all
 * three a layer is 6 launches (q/k/v, qk_norm_rope_store, attention, o, gate/up, down). */
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
 * add_rmsnorm, else add and rmsnorm. */
static llmrt_status add_norm(llmrt_model *m, float *out, float *x, const float *res,
                             const llmrt_tensor *w, int32_t rows, llmrt_error *err)
{
    const llmrt_backend_vtable *be = m->be.vt;
    const int32_t H = m->cfg.hidden;
    const float eps = (float)m->cfg.eps;
    llmrt_status st;
    if (m->use_add_rmsnorm)
        return be->add_rmsnorm(m->be.b, out, x, res, w, rows, H, eps, err);
    if (res && (st = be->add(m->be.b, x, x, res, (int64_t)rows * H, err)))
        return st;
    return be->rmsnorm(m->be.b, out, x, w, rows, H, eps, err);
}

static llmrt_status linear_fold(llmrt_model *m, const qwen3_linear *l, float *y, const float *x,
                               int32_t n, uint32_t flags, const llmrt_tensor *norm_w,
                               llmrt_error *err);

/* The attention block of layer L: q [T, n_heads, D] ready for attention, k and v in the
 * layer's cache. Its input is xn, or with fold_norm x itself (normed as the projection
 * stages it). */
static llmrt_status attn_prologue(llmrt_model *m, const qwen3_layer *L, const llmrt_batch *batch,
                                  const llmrt_kv_cache *kv, int32_t l, int fold_norm,
                                  llmrt_error *err)
{
    const qwen3_config *c = &m->cfg;
    const llmrt_backend_vtable *be = m->be.vt;
    llmrt_backend *b = m->be.b;
    const qwen3_scratch *s = &m->s;
    const int32_t T = batch->n_tokens, D = c->head_dim;
    const float eps = (float)c->eps, theta = (float)c->rope_theta;
    llmrt_status st;
    if (L->fused_qkv) {
        if ((st = fold_norm ? linear_fold(m, &L->qkv_proj, s->qkv, s->x, T, LLMRT_FUSE_IN_RMSNORM,
                                          &L->input_norm, err)
                            : linear(m, &L->qkv_proj, s->qkv, s->xn, T, err)))
            return st;
        return be->qk_norm_rope_store(b, s->q, s->qkv, &L->q_norm, &L->k_norm, batch->positions,
                                      batch->slot_mapping, T, c->n_heads, c->n_kv_heads, D, eps,
                                      theta, kv->k[l], kv->v[l], kv->dtype, err);
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

/* act [T, I] = silu(xn · Wgᵀ) * (xn · Wuᵀ); with fold_norm from x itself, with fold_glu the
 * projection writes act. */
static llmrt_status mlp_up(llmrt_model *m, const qwen3_layer *L, int32_t T, int fold_norm,
                           int fold_glu, llmrt_error *err)
{
    const llmrt_backend_vtable *be = m->be.vt;
    const qwen3_scratch *s = &m->s;
    const int32_t I = m->cfg.intermediate;
    llmrt_status st;
    if (L->fused_gate_up) {
        if (fold_norm || fold_glu) {
            const uint32_t flags = (fold_norm ? LLMRT_FUSE_IN_RMSNORM : 0) |
                                   (fold_glu ? LLMRT_FUSE_OUT_SWIGLU : 0);
            if ((st = linear_fold(m, &L->gate_up_proj, fold_glu ? s->act : s->gu,
                                  fold_norm ? s->x : s->xn, T, flags, &L->post_norm, err)))
                return st;
            if (fold_glu)
                return LLMRT_OK;
        } else if ((st = linear(m, &L->gate_up_proj, s->gu, s->xn, T, err))) {
            return st;
        }
        return be->swiglu(m->be.b, s->act, s->gu, T, I, err);
    }
    if ((st = linear(m, &L->gate_proj, s->gate, s->xn, T, err)) ||
        (st = linear(m, &L->up_proj, s->up, s->xn, T, err)))
        return st;
    return be->silu_mul(m->be.b, s->act, s->gate, s->up, (int64_t)T * I, err);
}

static llmrt_status linear_fold(llmrt_model *m, const qwen3_linear *l, float *y, const float *x,
                               int32_t n, uint32_t flags, const llmrt_tensor *norm_w,
                               llmrt_error *err)
{
    const llmrt_linear_fuse f = {
        .flags = flags,
        .norm_w = norm_w,
        .in_sumsq = m->s.sumsq,
        .eps = (float)m->cfg.eps,
        .out_sumsq = m->s.sumsq,
    };
    return m->quant.vt->linear_forward_fused(m->quant.q, l->q, y, x, n, &f, err);
}

/* o_proj / down_proj: with fold_add the projection adds into x (and writes x's chunk sums for
 * the next norm); else its output waits in proj for the next add_norm. */
static llmrt_status residual_out(llmrt_model *m, const qwen3_linear *l, const float *in, int32_t T,
                                 int fold_add, const float **pending, llmrt_error *err)
{
    if (fold_add) {
        *pending = NULL;
        return linear_fold(m, l, m->s.x, in, T, LLMRT_FUSE_OUT_ADD | LLMRT_FUSE_OUT_SUMSQ, NULL,
                           err);
    }
    *pending = m->s.proj;
    return linear(m, l, m->s.proj, in, T, err);
}

llmrt_status qwen3_forward(llmrt_model *m, const llmrt_batch *batch, const llmrt_kv_cache *kv,
                           float *logits, llmrt_error *err)
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
    const float *pending = NULL; /* the last projection's output not yet added to x */
    /* the folds this forward uses (qwen3_plugin.c fold_limits; the sums exist from layer 0's
     * o_proj on) */
    const int f_add = T <= m->fold.add, f_norm = T <= m->fold.norm, f_glu = T <= m->fold.glu;
    for (int32_t l = 0; l < c->n_layers; l++) {
        const qwen3_layer *L = &m->layers[l];
        const int norm_in = f_norm && l > 0;
        ap.k_cache = kv->k[l];
        ap.v_cache = kv->v[l];
        if ((!norm_in && (st = add_norm(m, s->xn, s->x, pending, &L->input_norm, T, err))) ||
            (st = attn_prologue(m, L, batch, kv, l, norm_in, err)) ||
            (st = be->attention(b, s->attn, s->q, &ap, err)) ||
            (st = residual_out(m, &L->o_proj, s->attn, T, f_add, &pending, err)) ||
            (!f_norm && (st = add_norm(m, s->xn, s->x, pending, &L->post_norm, T, err))) ||
            (st = mlp_up(m, L, T, f_norm, f_glu, err)) ||
            (st = residual_out(m, &L->down_proj, s->act, T, f_add, &pending, err)))
            return st;
    }

    /* One-token sequences (a pure decode step): token row s is sequence s, so the logits
     * rows are all rows in order; otherwise gather them (after the norm: it is per row). */
    const int identity = batch->all_logits ||
                         (T == batch->n_seqs && batch->max_query_len == 1);
    if ((st = add_norm(m, s->xn, s->x, pending, &m->final_norm, T, err)))
        return st;
    if (identity)
        return be->gemm(b, logits, s->xn, &m->lm_head, batch->all_logits ? T : batch->n_seqs, err);
    /* the embedding op over an f32 view of the normed states is a row gather that stays
     * inside a captured graph */
    llmrt_tensor rows = {.dtype = LLMRT_DTYPE_F32, .ndim = 2, .shape = {T, H}, .data = s->xn};
    const int32_t S = batch->n_seqs;
    if ((st = be->embedding(b, s->rows, &rows, batch->logits_rows, S, err)))
        return st;
    return be->gemm(b, logits, s->rows, &m->lm_head, S, err);
}
