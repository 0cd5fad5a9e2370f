/* qwen3_weights.c — load a Qwen3 checkpoint's tensors into backend memory.
 *
 * Why copy on every backend (CPU included): the checkpoint (an mmap of the safetensors files)
 * is closed right after create, so nothing may point into it. Dense weights keep their
 * checkpoint dtype (F32/F16/BF16; the backend gemm takes all three). Decoder linears go
 * through the quant plugin when there is one; a linear it does not find (NOT_FOUND) is loaded
 * densely from prefix.weight. embed_tokens, lm_head and the norms are always dense. Every
 * shape is checked against config.json before anything is copied. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "qwen3.h"

/* "[512, 64]" */
static const char *shape_str(char *buf, size_t n, int32_t ndim, const int64_t *shape)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int32_t i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
    return buf;
}

/* Copy a dense tensor of the expected shape into backend memory.
 * `dims` names the config keys behind the shape, for the message ("[vocab_size, hidden_size]"). */
static llmrt_status load_dense(llmrt_model *m, const llmrt_checkpoint *ck, const char *name,
                               int32_t ndim, const int64_t *shape, const char *dims,
                               llmrt_tensor *out, llmrt_error *err)
{
    llmrt_tensor_view v;
    llmrt_status st = ck->find(ck->ctx, name, &v, err);
    if (st)
        return st;
    if (v.dtype != LLMRT_DTYPE_F32 && v.dtype != LLMRT_DTYPE_F16 && v.dtype != LLMRT_DTYPE_BF16)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "tensor %s (%s) has dtype %s; qwen3 dense weights must be F32, F16 or "
                          "BF16",
                          name, v.file ? v.file : ck->dir, llmrt_dtype_name(v.dtype));
    int same = v.ndim == ndim;
    for (int32_t i = 0; same && i < ndim; i++)
        same = v.shape[i] == shape[i];
    if (!same) {
        char want[96], got[96];
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "tensor %s (%s) has shape %s, expected %s = %s: does not match "
                          "config.json",
                          name, v.file ? v.file : ck->dir, shape_str(got, sizeof got, v.ndim, v.shape),
                          dims, shape_str(want, sizeof want, ndim, shape));
    }
    llmrt_tensor t = {.dtype = v.dtype, .ndim = ndim};
    memcpy(t.shape, shape, (size_t)ndim * sizeof *shape);
    size_t bytes = llmrt_tensor_bytes(&t);
    if (v.bytes != bytes)
        return llmrt_fail(err, LLMRT_ERR_FORMAT, "tensor %s (%s): %zu bytes for %zu expected", name,
                          v.file ? v.file : ck->dir, v.bytes, bytes);
    st = m->be.vt->dev_alloc(m->be.b, bytes, &t.data, err);
    if (st)
        return st;
    st = m->be.vt->copy(m->be.b, t.data, v.data, bytes, LLMRT_COPY_H2D, err);
    if (st) {
        m->be.vt->dev_free(m->be.b, t.data);
        return st;
    }
    *out = t;
    m->weight_bytes += bytes;
    return LLMRT_OK;
}

static llmrt_status load_vector(llmrt_model *m, const llmrt_checkpoint *ck, const char *name,
                                int64_t d, const char *dims, llmrt_tensor *out, llmrt_error *err)
{
    return load_dense(m, ck, name, 1, &d, dims, out, err);
}

/* A decoder linear [out, in] at `prefix`: quantized when the quant plugin finds it, else dense. */
static llmrt_status load_linear(llmrt_model *m, const llmrt_checkpoint *ck, const char *prefix,
                                int64_t in, int64_t out, const char *dims, qwen3_linear *l,
                                llmrt_error *err)
{
    char name[256];
    snprintf(name, sizeof name, "%s.weight", prefix);
    l->in = in;
    l->out = out;
    if (m->quant.vt) {
        llmrt_status st = m->quant.vt->linear_load(m->quant.q, ck, prefix, in, out, &l->q, err);
        if (st == LLMRT_OK) {
            const llmrt_quant_vtable *qv = m->quant.vt;
            if (qv->struct_size >= offsetof(llmrt_quant_vtable, linear_bytes) + sizeof qv->linear_bytes &&
                qv->linear_bytes) /* optional */
                m->weight_bytes += qv->linear_bytes(m->quant.q, l->q);
            return LLMRT_OK;
        }
        l->q = NULL;
        if (st != LLMRT_ERR_NOT_FOUND)
            return st;
        if (ck->has && !ck->has(ck->ctx, name)) {
            char why[LLMRT_ERROR_MSG_MAX];
            snprintf(why, sizeof why, "%s", err ? err->msg : "");
            return llmrt_fail(err, LLMRT_ERR_NOT_FOUND,
                              "linear %s: the %s quant plugin found no quantized tensors (%s) and "
                              "there is no dense %s either",
                              prefix, m->quant.name ? m->quant.name : "", why, name);
        }
    }
    int64_t shape[2] = {out, in};
    return load_dense(m, ck, name, 2, shape, dims, &l->w, err);
}

llmrt_status qwen3_weights_load(llmrt_model *m, const llmrt_checkpoint *ck, llmrt_error *err)
{
    const qwen3_config *c = &m->cfg;
    const int64_t H = c->hidden, I = c->intermediate, D = c->head_dim;
    const int64_t QD = (int64_t)c->n_heads * D, KVD = (int64_t)c->n_kv_heads * D;
    llmrt_status st;
    char name[256];

    int64_t emb_shape[2] = {c->vocab, H};
    if ((st = load_dense(m, ck, "model.embed_tokens.weight", 2, emb_shape,
                         "[vocab_size, hidden_size]", &m->embed, err)))
        return st;
    for (int32_t i = 0; i < c->n_layers; i++) {
        qwen3_layer *L = &m->layers[i];
        char p[128];
#define PFX(suffix) (snprintf(p, sizeof p, "model.layers.%d." suffix, i), p)
#define NAME(suffix) (snprintf(name, sizeof name, "model.layers.%d." suffix, i), name)
        if ((st = load_vector(m, ck, NAME("input_layernorm.weight"), H, "[hidden_size]",
                              &L->input_norm, err)) ||
            (st = load_linear(m, ck, PFX("self_attn.q_proj"), H, QD,
                              "[num_attention_heads * head_dim, hidden_size]", &L->q_proj, err)) ||
            (st = load_linear(m, ck, PFX("self_attn.k_proj"), H, KVD,
                              "[num_key_value_heads * head_dim, hidden_size]", &L->k_proj, err)) ||
            (st = load_linear(m, ck, PFX("self_attn.v_proj"), H, KVD,
                              "[num_key_value_heads * head_dim, hidden_size]", &L->v_proj, err)) ||
            (st = load_vector(m, ck, NAME("self_attn.q_norm.weight"), D, "[head_dim]", &L->q_norm,
                              err)) ||
            (st = load_vector(m, ck, NAME("self_attn.k_norm.weight"), D, "[head_dim]", &L->k_norm,
                              err)) ||
            (st = load_linear(m, ck, PFX("self_attn.o_proj"), QD, H,
                              "[hidden_size, num_attention_heads * head_dim]", &L->o_proj, err)) ||
            (st = load_vector(m, ck, NAME("post_attention_layernorm.weight"), H, "[hidden_size]",
                              &L->post_norm, err)) ||
            (st = load_linear(m, ck, PFX("mlp.gate_proj"), H, I,
                              "[intermediate_size, hidden_size]", &L->gate_proj, err)) ||
            (st = load_linear(m, ck, PFX("mlp.up_proj"), H, I, "[intermediate_size, hidden_size]",
                              &L->up_proj, err)) ||
            (st = load_linear(m, ck, PFX("mlp.down_proj"), I, H,
                              "[hidden_size, intermediate_size]", &L->down_proj, err)))
            return st;
#undef PFX
#undef NAME
    }
    if ((st = load_vector(m, ck, "model.norm.weight", H, "[hidden_size]", &m->final_norm, err)))
        return st;
    /* As in transformers: with tie_word_embeddings the output embedding IS the input
     * embedding, even when the checkpoint also carries an lm_head.weight. */
    if (c->tie) {
        m->lm_head = m->embed;
        m->lm_head_tied = 1;
        if (ck->has && ck->has(ck->ctx, "lm_head.weight") && m->has_host)
            m->host.log(m->host.ctx, LLMRT_LOG_DEBUG, "qwen3",
                        "tie_word_embeddings is true: lm_head.weight in %s is not used "
                        "(the output embedding is model.embed_tokens.weight)",
                        ck->dir ? ck->dir : "the checkpoint");
    } else if ((st = load_dense(m, ck, "lm_head.weight", 2, emb_shape, "[vocab_size, hidden_size]",
                                &m->lm_head, err))) {
        return st;
    }
    /* Copies may be asynchronous; the checkpoint's memory goes away after create. */
    return m->be.vt->synchronize(m->be.b, err);
}

static void free_tensor(llmrt_model *m, llmrt_tensor *t)
{
    if (t->data)
        m->be.vt->dev_free(m->be.b, t->data);
    t->data = NULL;
}

static void free_linear(llmrt_model *m, qwen3_linear *l)
{
    if (l->q)
        m->quant.vt->linear_free(m->quant.q, l->q);
    l->q = NULL;
    free_tensor(m, &l->w);
}

void qwen3_weights_free(llmrt_model *m)
{
    for (int32_t i = 0; m->layers && i < m->cfg.n_layers; i++) {
        qwen3_layer *L = &m->layers[i];
        free_tensor(m, &L->input_norm);
        free_tensor(m, &L->post_norm);
        free_tensor(m, &L->q_norm);
        free_tensor(m, &L->k_norm);
        free_linear(m, &L->q_proj);
        free_linear(m, &L->k_proj);
        free_linear(m, &L->v_proj);
        free_linear(m, &L->o_proj);
        free_linear(m, &L->gate_proj);
        free_linear(m, &L->up_proj);
        free_linear(m, &L->down_proj);
    }
    if (!m->lm_head_tied)
        free_tensor(m, &m->lm_head);
    m->lm_head.data = NULL;
    free_tensor(m, &m->embed);
    free_tensor(m, &m->final_norm);
}
