/* qwen3_decoder.c — the Qwen3 decoder around its MLPs: set-up, the embedding and output
 * tensors, the attention side's activations, the greedy argmax head, and one forward pass as
 * a sequence of backend ops.
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
 *   x += mlp(xn)                       (the plugin's: dense SwiGLU, or a sparse MoE block)
 * then the final norm and lm_head on the logits rows (or on every row with all_logits).
 *
 * With the backend's fused ops (rt.fused) the same math takes fewer launches: each residual
 * add is deferred into the next norm (add_rmsnorm: x += r, then xn = rmsnorm(x)); q/k/v come
 * from one fused projection whose per-head norms, RoPE and cache store are one op
 * (qk_norm_rope_store). A decode step of pure one-token sequences needs no logits-row gather
 * (row s is sequence s). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qwen3_common.h"

/* ---- set-up ---- */

llmrt_status qwen3_decoder_init(qwen3_decoder *d, const llmrt_host *host, const char *who,
                                const llmrt_backend_ref *be, const llmrt_quant_ref *quant,
                                const llmrt_model_params *params, int fuse, int greedy_head,
                                llmrt_error *err)
{
    llmrt_status st;
    if ((st = qwen3_check_backend(be, who, err)) ||
        (quant && quant->vt && (st = qwen3_check_quant(quant, who, err))))
        return st;
    d->rt.who = who;
    if (host) {
        d->rt.host = *host;
        d->rt.has_host = host->log != NULL;
    }
    d->rt.be = *be;
    if (quant && quant->vt)
        d->rt.quant = *quant;
    d->params = *params;
    d->rt.offload_first = INT32_MAX; /* planned when layer 0 has loaded */
    if (params->offload) {
        const llmrt_weight_offload *o = params->offload;
        const llmrt_memory_vtable *mv = o->vt;
        if (o->struct_size < sizeof *o || !mv ||
            !LLMRT_VT_HAS(mv, llmrt_memory_vtable, offload_init) ||
            !LLMRT_VT_HAS(mv, llmrt_memory_vtable, offload_place) ||
            !LLMRT_VT_HAS(mv, llmrt_memory_vtable, offload_fetch))
            return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                              "memory.cpu_offload_gb: the memory plugin cannot place weights in "
                              "host memory (it has no offload_init/place/fetch)");
        d->rt.offload = o;
    }
    /* Fused ops are a backend extension; fused projections need the op that consumes their
     * output (qk_norm_rope_store splits q|k|v, swiglu splits gate|up). */
    d->rt.fused = fuse ? qwen3_fused_ops_of(be) : NULL;
    d->rt.fuse_proj = d->rt.fused != NULL;
    d->greedy_head = greedy_head;
    return LLMRT_OK;
}

llmrt_status qwen3_decoder_alloc_layers(qwen3_decoder *d, llmrt_error *err)
{
    d->attn = calloc((size_t)d->cfg.n_layers, sizeof *d->attn);
    if (!d->attn)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "%s create: out of memory", d->rt.who);
    return LLMRT_OK;
}

llmrt_status qwen3_decoder_load_embed(qwen3_decoder *d, const llmrt_checkpoint *ck,
                                      llmrt_error *err)
{
    int64_t shape[2] = {d->cfg.vocab, d->cfg.hidden};
    return qwen3_load_dense(&d->rt, ck, "model.embed_tokens.weight", 2, shape,
                            "[vocab_size, hidden_size]", &d->embed, err);
}

llmrt_status qwen3_decoder_load_head(qwen3_decoder *d, const llmrt_checkpoint *ck,
                                     llmrt_error *err)
{
    const qwen3_config *c = &d->cfg;
    llmrt_status st;
    int64_t shape[2] = {c->vocab, c->hidden};
    if ((st = qwen3_load_vector(&d->rt, ck, "model.norm.weight", c->hidden, "[hidden_size]",
                                &d->final_norm, err)))
        return st;
    /* As in transformers: with tie_word_embeddings the output embedding IS the input
     * embedding, even when the checkpoint also carries an lm_head.weight. */
    if (c->tie) {
        d->lm_head = d->embed;
        d->lm_head_tied = 1;
        if (ck->has && ck->has(ck->ctx, "lm_head.weight") && d->rt.has_host)
            d->rt.host.log(d->rt.host.ctx, LLMRT_LOG_DEBUG, d->rt.who,
                           "tie_word_embeddings is true: lm_head.weight in %s is not used "
                           "(the output embedding is model.embed_tokens.weight)",
                           ck->dir ? ck->dir : "the checkpoint");
    } else if (d->rt.tp.rank == 0 &&
               (st = qwen3_load_dense(&d->rt, ck, "lm_head.weight", 2, shape,
                                      "[vocab_size, hidden_size]", &d->lm_head, err))) {
        return st; /* (tensor parallel: only rank 0 computes logits) */
    }
    /* Copies may be asynchronous; the checkpoint's memory goes away after create (and so do
     * the tensor-parallel slices). */
    st = d->rt.be.vt->synchronize(d->rt.be.b, err);
    qwen3_tp_release(&d->rt);
    return st;
}

llmrt_status qwen3_decoder_alloc_act(qwen3_decoder *d, llmrt_error *err)
{
    const qwen3_config *c = &d->cfg;
    const size_t T = (size_t)d->params.max_tokens, S = (size_t)d->params.max_seqs;
    const size_t H = (size_t)c->hidden;
    const size_t QD = (size_t)c->n_heads * (size_t)c->head_dim;
    const size_t KVD = (size_t)c->n_kv_heads * (size_t)c->head_dim;
    /* buffers only the separate or only the fused projections use are sized 0 when no layer
     * needs them */
    int sep_qkv = 0, fused_qkv = 0;
    for (int32_t l = 0; l < c->n_layers; l++)
        sep_qkv |= !d->attn[l].fused_qkv, fused_qkv |= d->attn[l].fused_qkv;
    const size_t n[] = {T * H, T * H, T * QD, sep_qkv ? T * KVD : 0, sep_qkv ? T * KVD : 0,
                        T * QD, T * H, S * H, fused_qkv ? T * (QD + 2 * KVD) : 0};
    float **dst[] = {&d->s.x, &d->s.xn, &d->s.q, &d->s.k, &d->s.v, &d->s.attn, &d->s.proj,
                     &d->s.rows, &d->s.qkv};
    enum { NB = sizeof n / sizeof n[0] };
    size_t bytes[NB], off[NB], total = 0;
    for (size_t i = 0; i < NB; i++)
        bytes[i] = n[i] * sizeof(float);
    llmrt_status st = qwen3_alloc_block(&d->rt, NB, bytes, off, &d->s.base, &total, err);
    if (st) {
        d->s.base = NULL;
        char why[LLMRT_ERROR_MSG_MAX];
        snprintf(why, sizeof why, "%s", err ? err->msg : "");
        return llmrt_fail(err, st,
                          "%s activations for %zu tokens (hidden_size %zu, num_attention_heads * "
                          "head_dim %zu; %.1f MiB): %s",
                          d->rt.who, T, H, QD, (double)total / (1 << 20), why);
    }
    for (size_t i = 0; i < NB; i++)
        *dst[i] = n[i] ? (float *)((char *)d->s.base + off[i]) : NULL;
    return LLMRT_OK;
}

/* greedy_head = auto: the backend's argmax_head over lm_head for greedy steps (of up to
 * max_seqs sequences, else of up to 8), when it offers the extension and takes this lm_head.
 * It saves time at small batches and keeps a batch's ids equal to each row's alone. When the
 * backend cannot make one (this lm_head unsupported, or its copy does not fit) the model goes
 * without: an info line, or a warning for a failure other than LLMRT_ERR_UNSUPPORTED. */
void qwen3_decoder_make_head(qwen3_decoder *d)
{
    const llmrt_argmax_head_ops *ops = d->greedy_head && d->rt.tp.rank == 0
                                           ? qwen3_argmax_head_ops_of(&d->rt.be)
                                           : NULL;
    if (!ops)
        return;
    /* every greedy step through the head (a batch's ids then equal each row's alone); a
     * backend that takes fewer rows per call serves the steps of up to 8 */
    int32_t rows = d->params.max_seqs;
    llmrt_error e = {0};
    llmrt_status st = ops->create(d->rt.be.b, &d->lm_head, rows, &d->head, &e);
    if (st == LLMRT_ERR_UNSUPPORTED && rows > 8) {
        rows = 8;
        memset(&e, 0, sizeof e);
        st = ops->create(d->rt.be.b, &d->lm_head, rows, &d->head, &e);
    }
    if (st) {
        d->head = NULL;
        if (d->rt.has_host)
            d->rt.host.log(d->rt.host.ctx,
                           st == LLMRT_ERR_UNSUPPORTED ? LLMRT_LOG_INFO : LLMRT_LOG_WARN,
                           d->rt.who, "greedy_head: not used (%s)", e.msg);
        return;
    }
    d->head_ops = ops;
    d->head_rows = rows;
    if (d->rt.has_host)
        d->rt.host.log(d->rt.host.ctx, LLMRT_LOG_INFO, d->rt.who,
                       "greedy_head: greedy steps of up to %d sequences take their argmax "
                       "through the backend's argmax_head",
                       rows);
}

void qwen3_decoder_free(qwen3_decoder *d)
{
    if (d->head)
        d->head_ops->destroy(d->rt.be.b, d->head);
    d->head = NULL;
    for (int32_t i = 0; d->attn && i < d->cfg.n_layers; i++)
        qwen3_attn_free(&d->rt, &d->attn[i]);
    free(d->attn);
    d->attn = NULL;
    if (!d->lm_head_tied)
        qwen3_free_tensor(&d->rt, &d->lm_head);
    d->lm_head.data = NULL;
    qwen3_free_tensor(&d->rt, &d->embed);
    qwen3_free_tensor(&d->rt, &d->final_norm);
    qwen3_tp_release(&d->rt);
    if (d->s.base)
        d->rt.be.vt->dev_free(d->rt.be.b, d->s.base);
    d->s.base = NULL;
}

void qwen3_decoder_info(const qwen3_decoder *d, const char *arch, int32_t intermediate,
                        llmrt_model_info *out)
{
    memset(out, 0, sizeof *out);
    strncpy(out->arch, arch, sizeof out->arch - 1);
    out->n_layers = d->cfg.n_layers;
    out->n_heads = d->cfg.n_heads;
    out->n_kv_heads = d->cfg.n_kv_heads;
    out->head_dim = d->cfg.head_dim;
    out->hidden = d->cfg.hidden;
    out->intermediate = intermediate;
    out->vocab = d->cfg.vocab;
    out->max_position = d->cfg.max_position;
    out->weight_dtype = d->embed.dtype;
    out->weight_bytes = d->rt.weight_bytes;
    out->tp_size = d->rt.tp.size;
}

/* ---- forward ---- */

/* x [rows, H] += res (when not NULL), then out = rmsnorm(x) * w: one op when the backend has
 * the fused ops, else add and rmsnorm. */
static llmrt_status add_norm(qwen3_decoder *d, float *out, float *x, const float *res,
                             const llmrt_tensor *w, int32_t rows, llmrt_error *err)
{
    const llmrt_backend_vtable *be = d->rt.be.vt;
    const int32_t H = d->cfg.hidden;
    const float eps = (float)d->cfg.eps;
    llmrt_status st;
    if (d->rt.fused)
        return d->rt.fused->add_rmsnorm(d->rt.be.b, out, x, res, w, rows, H, eps, err);
    if (res && (st = be->add(d->rt.be.b, x, x, res, (int64_t)rows * H, err)))
        return st;
    return be->rmsnorm(d->rt.be.b, out, x, w, rows, H, eps, err);
}

/* The attention block of layer A on xn: q [T, n_heads, D] ready for attention, k and v in
 * the layer's cache. */
static llmrt_status attn_prologue(qwen3_decoder *d, const qwen3_attn *A, const llmrt_batch *batch,
                                  const llmrt_kv_cache *kv, int32_t l, llmrt_error *err)
{
    const qwen3_config *c = &d->cfg;
    qwen3_rt *rt = &d->rt;
    const llmrt_backend_vtable *be = rt->be.vt;
    llmrt_backend *b = rt->be.b;
    const qwen3_act *s = &d->s;
    const int32_t T = batch->n_tokens, D = c->head_dim;
    const float eps = (float)c->eps, theta = (float)c->rope_theta;
    llmrt_status st;
    if (A->fused_qkv) {
        if ((st = qwen3_linear_forward(rt, &A->qkv_proj, s->qkv, s->xn, T, err)))
            return st;
        return rt->fused->qk_norm_rope_store(b, s->q, s->qkv, &A->q_norm, &A->k_norm,
                                             batch->positions, batch->slot_mapping, T,
                                             c->n_heads, c->n_kv_heads, D, eps, theta, kv->k[l],
                                             kv->v[l], kv->dtype, err);
    }
    if ((st = qwen3_linear_forward(rt, &A->q_proj, s->q, s->xn, T, err)) ||
        (st = qwen3_linear_forward(rt, &A->k_proj, s->k, s->xn, T, err)) ||
        (st = qwen3_linear_forward(rt, &A->v_proj, s->v, s->xn, T, err)) ||
        (st = be->rmsnorm(b, s->q, s->q, &A->q_norm, T * c->n_heads, D, eps, err)) ||
        (st = be->rmsnorm(b, s->k, s->k, &A->k_norm, T * c->n_kv_heads, D, eps, err)) ||
        (st = be->rope(b, s->q, batch->positions, T, c->n_heads, D, theta, err)) ||
        (st = be->rope(b, s->k, batch->positions, T, c->n_kv_heads, D, theta, err)))
        return st;
    return be->kv_store(b, kv->k[l], kv->v[l], kv->dtype, s->k, s->v, batch->slot_mapping, T,
                        c->n_kv_heads, D, err);
}

/* Everything before the lm_head: *rows = the final-normed hidden states whose logits the
 * batch asks for, *n of them (every token row with all_logits, else one per sequence). */
static llmrt_status forward_hidden(qwen3_decoder *d, const llmrt_batch *batch,
                                   const llmrt_kv_cache *kv, const float *logits,
                                   const float **rows, int32_t *n, llmrt_error *err)
{
    const qwen3_config *c = &d->cfg;
    const llmrt_backend_vtable *be = d->rt.be.vt;
    llmrt_backend *b = d->rt.be.b;
    const qwen3_act *s = &d->s;
    const char *who = d->rt.who;
    const int32_t T = batch ? batch->n_tokens : 0;
    const int32_t H = c->hidden, D = c->head_dim;
    llmrt_status st;

    const int head_rank = d->rt.tp.rank == 0; /* tensor parallel: the rank that has logits */
    if (!batch || !kv || (head_rank && !logits))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "%s forward: batch, kv and logits are required", who);
    if (T < 1 || T > d->params.max_tokens)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "%s forward: batch has %d token rows; the model was created for 1..%d "
                          "(max_tokens)",
                          who, T, d->params.max_tokens);
    if (batch->n_seqs < 1 || batch->n_seqs > d->params.max_seqs)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "%s forward: batch has %d sequences; the model was created for 1..%d "
                          "(max_seqs)",
                          who, batch->n_seqs, d->params.max_seqs);
    if (kv->n_layers != c->n_layers || kv->n_kv_heads != c->n_kv_heads || kv->head_dim != D ||
        !kv->k || !kv->v || kv->block_size < 1)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "%s forward: KV cache geometry (layers %d, kv heads %d, head dim %d, "
                          "block size %d) does not match the model (layers %d, kv heads %d, head "
                          "dim %d)",
                          who, kv->n_layers, kv->n_kv_heads, kv->head_dim, kv->block_size,
                          c->n_layers, c->n_kv_heads, D);
    if (!batch->all_logits && !batch->logits_rows)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "%s forward: logits_rows is required unless all_logits is set", who);

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

    if ((st = qwen3_offload_fetch(&d->rt, c->n_layers, -1, err)) ||
        (st = be->embedding(b, s->x, &d->embed, batch->token_ids, T, err)))
        return st;
    const float *pending = NULL; /* the MLP output not yet added to x */
    for (int32_t l = 0; l < c->n_layers; l++) {
        const qwen3_attn *A = &d->attn[l];
        ap.k_cache = kv->k[l];
        ap.v_cache = kv->v[l];
        if ((st = qwen3_offload_fetch(&d->rt, c->n_layers, l, err)) ||
            (st = add_norm(d, s->xn, s->x, pending, &A->input_norm, T, err)) ||
            (st = attn_prologue(d, A, batch, kv, l, err)) ||
            (st = be->attention(b, s->attn, s->q, &ap, err)) ||
            (st = qwen3_linear_forward(&d->rt, &A->o_proj, s->proj, s->attn, T, err)) ||
            (st = qwen3_tp_reduce(&d->rt, s->proj, (int64_t)T * H, err)) ||
            (st = add_norm(d, s->xn, s->x, s->proj, &A->post_norm, T, err)) ||
            (st = d->mlp(d->mlp_ctx, l, T, err)) ||
            (st = qwen3_tp_reduce(&d->rt, s->proj, (int64_t)T * H, err)))
            return st;
        pending = s->proj;
    }
    if (!head_rank) { /* tensor parallel: the other ranks stop at the last all-reduce */
        *rows = NULL;
        *n = 0;
        return LLMRT_OK;
    }

    /* One-token sequences (a pure decode step): token row s is sequence s, so the logits
     * rows are all rows in order; otherwise gather them (after the norm: it is per row). */
    const int identity = batch->all_logits || (T == batch->n_seqs && batch->max_query_len == 1);
    if ((st = add_norm(d, s->xn, s->x, pending, &d->final_norm, T, err)))
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

llmrt_status qwen3_decoder_forward(qwen3_decoder *d, const llmrt_batch *batch,
                                   const llmrt_kv_cache *kv, float *logits, llmrt_error *err)
{
    const float *rows = NULL;
    int32_t n = 0;
    llmrt_status st = forward_hidden(d, batch, kv, logits, &rows, &n, err);
    if (st || !rows)
        return st;
    return d->rt.be.vt->gemm(d->rt.be.b, logits, rows, &d->lm_head, n, err);
}

llmrt_status qwen3_decoder_forward_argmax(qwen3_decoder *d, const llmrt_batch *batch,
                                          const llmrt_kv_cache *kv, float *logits, int32_t *out,
                                          llmrt_error *err)
{
    if (!out || (batch && batch->all_logits))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "%s forward_argmax: an output buffer is required, and all_logits "
                          "is not supported",
                          d->rt.who);
    const float *rows = NULL;
    int32_t n = 0;
    llmrt_status st = forward_hidden(d, batch, kv, logits, &rows, &n, err);
    if (st || !rows)
        return st;
    const llmrt_backend_vtable *be = d->rt.be.vt;
    if (d->head && n <= d->head_rows)
        return d->head_ops->forward(d->rt.be.b, d->head, out, rows, n, err);
    if ((st = be->gemm(d->rt.be.b, logits, rows, &d->lm_head, n, err)))
        return st;
    return be->argmax(d->rt.be.b, out, logits, n, d->cfg.vocab, err);
}
