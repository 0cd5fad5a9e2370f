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
 * then the final norm and lm_head on the logits rows (or on every row with all_logits). */
#include <math.h>

#include "qwen3.h"

static llmrt_status linear(llmrt_model *m, const qwen3_linear *l, float *y, const float *x,
                           int32_t n, llmrt_error *err)
{
    if (l->q)
        return m->quant.vt->linear_forward(m->quant.q, l->q, y, x, n, err);
    return m->be.vt->gemm(m->be.b, y, x, &l->w, n, err);
}

llmrt_status qwen3_forward(llmrt_model *m, const llmrt_batch *batch, const llmrt_kv_cache *kv,
                           float *logits, llmrt_error *err)
{
    const qwen3_config *c = &m->cfg;
    const llmrt_backend_vtable *be = m->be.vt;
    llmrt_backend *b = m->be.b;
    const qwen3_scratch *s = &m->s;
    const int32_t T = batch ? batch->n_tokens : 0;
    const int32_t H = c->hidden, I = c->intermediate, D = c->head_dim;
    const float eps = (float)c->eps, theta = (float)c->rope_theta;
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
    for (int32_t l = 0; l < c->n_layers; l++) {
        const qwen3_layer *L = &m->layers[l];
        ap.k_cache = kv->k[l];
        ap.v_cache = kv->v[l];
        if ((st = be->rmsnorm(b, s->xn, s->x, &L->input_norm, T, H, eps, err)) ||
            (st = linear(m, &L->q_proj, s->q, s->xn, T, err)) ||
            (st = linear(m, &L->k_proj, s->k, s->xn, T, err)) ||
            (st = linear(m, &L->v_proj, s->v, s->xn, T, err)) ||
            (st = be->rmsnorm(b, s->q, s->q, &L->q_norm, T * c->n_heads, D, eps, err)) ||
            (st = be->rmsnorm(b, s->k, s->k, &L->k_norm, T * c->n_kv_heads, D, eps, err)) ||
            (st = be->rope(b, s->q, batch->positions, T, c->n_heads, D, theta, err)) ||
            (st = be->rope(b, s->k, batch->positions, T, c->n_kv_heads, D, theta, err)) ||
            (st = be->kv_store(b, kv->k[l], kv->v[l], kv->dtype, s->k, s->v, batch->slot_mapping,
                               T, c->n_kv_heads, D, err)) ||
            (st = be->attention(b, s->attn, s->q, &ap, err)) ||
            (st = linear(m, &L->o_proj, s->proj, s->attn, T, err)) ||
            (st = be->add(b, s->x, s->x, s->proj, (int64_t)T * H, err)) ||
            (st = be->rmsnorm(b, s->xn, s->x, &L->post_norm, T, H, eps, err)) ||
            (st = linear(m, &L->gate_proj, s->gate, s->xn, T, err)) ||
            (st = linear(m, &L->up_proj, s->up, s->xn, T, err)) ||
            (st = be->silu_mul(b, s->act, s->gate, s->up, (int64_t)T * I, err)) ||
            (st = linear(m, &L->down_proj, s->proj, s->act, T, err)) ||
            (st = be->add(b, s->x, s->x, s->proj, (int64_t)T * H, err)))
            return st;
    }

    if (batch->all_logits) {
        if ((st = be->rmsnorm(b, s->xn, s->x, &m->final_norm, T, H, eps, err)))
            return st;
        return be->gemm(b, logits, s->xn, &m->lm_head, T, err);
    }
    /* Gather the logits rows on the device: the embedding op over an f32 view of the hidden
     * states is a row gather that stays inside a captured graph. Norm after the gather:
     * RMSNorm is per row, so only n_seqs rows need it. */
    llmrt_tensor hidden_rows = {.dtype = LLMRT_DTYPE_F32, .ndim = 2, .shape = {T, H}, .data = s->x};
    const int32_t S = batch->n_seqs;
    if ((st = be->embedding(b, s->rows, &hidden_rows, batch->logits_rows, S, err)) ||
        (st = be->rmsnorm(b, s->rows, s->rows, &m->final_norm, S, H, eps, err)))
        return st;
    return be->gemm(b, logits, s->rows, &m->lm_head, S, err);
}
