/* model_abi10.c — a model plugin written against the frozen ABI 1.0 headers
 * (tests/abi-1.0/include), to prove a 1.0 plugin still loads and runs in this host.
 *
 * The architecture is the smallest that uses the engine's whole path: "AbiTestForCausalLM",
 * logits of sequence s = embed[t] · headᵀ for t, the last token of s. Only 1.0 backend ops
 * are called, through the 1.0 vtable offsets: embedding (also as the gather of the logits
 * rows: the hidden states are a [n_tokens, hidden] table, logits_rows the ids), gemm,
 * dev_alloc / copy. It has no chat format and no synth entries (1.1 members its vtable does
 * not reach), and uses forward_argmax (1.0, optional) only when asked by the engine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llmrt/model.h>

#define ARCH "AbiTestForCausalLM"

struct llmrt_model {
    llmrt_backend_ref be;
    llmrt_tensor embed, head; /* [vocab, hidden] F32, on the backend */
    int32_t vocab, hidden, max_tokens, max_seqs;
    float *x;                 /* [max_tokens, hidden] */
    float *rows;              /* [max_seqs, hidden] */
};

static llmrt_status m_probe(const char *config_json, llmrt_error *err)
{
    return config_json && strstr(config_json, "\"" ARCH "\"")
               ? LLMRT_OK
               : llmrt_fail(err, LLMRT_ERR_NOT_FOUND, "not " ARCH);
}

/* Copy a [vocab, hidden] F32 checkpoint tensor to the backend. */
static llmrt_status load(llmrt_model *m, const llmrt_checkpoint *ck, const char *name,
                         llmrt_tensor *t, llmrt_error *err)
{
    llmrt_tensor_view v;
    llmrt_status st = ck->find(ck->ctx, name, &v, err);
    if (st)
        return st;
    if (v.dtype != LLMRT_DTYPE_F32 || v.ndim != 2)
        return llmrt_fail(err, LLMRT_ERR_FORMAT, "%s: expected a 2-D F32 tensor", name);
    if (m->vocab && (v.shape[0] != m->vocab || v.shape[1] != m->hidden))
        return llmrt_fail(err, LLMRT_ERR_FORMAT, "%s: shape differs from embed.weight", name);
    m->vocab = (int32_t)v.shape[0];
    m->hidden = (int32_t)v.shape[1];
    t->dtype = LLMRT_DTYPE_F32;
    t->ndim = 2;
    t->shape[0] = v.shape[0];
    t->shape[1] = v.shape[1];
    if ((st = m->be.vt->dev_alloc(m->be.b, v.bytes, &t->data, err)))
        return st;
    return m->be.vt->copy(m->be.b, t->data, v.data, v.bytes, LLMRT_COPY_H2D, err);
}

static void m_destroy(llmrt_model *m)
{
    if (!m)
        return;
    void *p[4] = {m->embed.data, m->head.data, m->x, m->rows};
    for (int i = 0; i < 4; i++)
        if (p[i])
            m->be.vt->dev_free(m->be.b, p[i]);
    free(m);
}

static llmrt_status m_create(const llmrt_host *host, const llmrt_section *cfg,
                             const llmrt_checkpoint *ckpt, const llmrt_backend_ref *backend,
                             const llmrt_quant_ref *quant, const llmrt_model_params *params,
                             llmrt_model **out, llmrt_error *err)
{
    (void)host, (void)cfg;
    if (quant)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED, "abi10: no quantization");
    llmrt_model *m = calloc(1, sizeof *m);
    if (!m)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
    m->be = *backend;
    m->max_tokens = params->max_tokens;
    m->max_seqs = params->max_seqs;
    llmrt_status st = load(m, ckpt, "embed.weight", &m->embed, err);
    if (!st)
        st = load(m, ckpt, "head.weight", &m->head, err);
    if (!st)
        st = backend->vt->dev_alloc(backend->b, sizeof(float) * (size_t)m->max_tokens * (size_t)m->hidden,
                                    (void **)&m->x, err);
    if (!st)
        st = backend->vt->dev_alloc(backend->b, sizeof(float) * (size_t)m->max_seqs * (size_t)m->hidden,
                                    (void **)&m->rows, err);
    if (!st)
        st = backend->vt->synchronize(backend->b, err);
    if (st) {
        m_destroy(m);
        return st;
    }
    *out = m;
    return LLMRT_OK;
}

static void m_info(llmrt_model *m, llmrt_model_info *o)
{
    memset(o, 0, sizeof *o);
    snprintf(o->arch, sizeof o->arch, ARCH);
    o->n_layers = 1, o->n_heads = 1, o->n_kv_heads = 1, o->head_dim = 2;
    o->hidden = m->hidden, o->intermediate = m->hidden, o->vocab = m->vocab;
    o->max_position = 256;
    o->weight_dtype = LLMRT_DTYPE_F32;
    o->weight_bytes = 2 * sizeof(float) * (uint64_t)m->vocab * (uint64_t)m->hidden;
}

static llmrt_status m_forward(llmrt_model *m, const llmrt_batch *b, const llmrt_kv_cache *kv,
                              float *logits, llmrt_error *err)
{
    (void)kv;
    const llmrt_backend_vtable *vt = m->be.vt;
    llmrt_status st = vt->embedding(m->be.b, m->x, &m->embed, b->token_ids, b->n_tokens, err);
    if (st)
        return st;
    if (b->all_logits)
        return vt->gemm(m->be.b, logits, m->x, &m->head, b->n_tokens, err);
    llmrt_tensor hidden = {LLMRT_DTYPE_F32, 2, {b->n_tokens, m->hidden}, m->x};
    if ((st = vt->embedding(m->be.b, m->rows, &hidden, b->logits_rows, b->n_seqs, err)))
        return st;
    return vt->gemm(m->be.b, logits, m->rows, &m->head, b->n_seqs, err);
}

static const llmrt_model_vtable vt = {
    .struct_size = sizeof(llmrt_model_vtable), /* the 1.0 size: ends at forward_argmax */
    .probe = m_probe,
    .create = m_create,
    .destroy = m_destroy,
    .info = m_info,
    .forward = m_forward,
};

static const llmrt_plugin_desc desc = {
    .struct_size = sizeof(llmrt_plugin_desc), /* the 1.0 size: ends at init */
    .abi_version = LLMRT_ABI_VERSION,         /* 1.0 */
    .kind = LLMRT_PLUGIN_MODEL,
    .name = "abi10",
    .version = "1.0.0",
    .description = "a model plugin built against the frozen ABI 1.0 headers (tests)",
    .license = "MIT",
    .vtable = &vt,
};

LLMRT_EXPORT const llmrt_plugin_desc *llmrt_plugin_get(uint32_t index)
{
    return index == 0 ? &desc : NULL;
}
