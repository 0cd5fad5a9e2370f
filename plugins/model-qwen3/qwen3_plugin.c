/* qwen3_plugin.c — the model-qwen3 plugin's descriptor and vtable: probe, create (config,
 * backend op check, the backend's extensions, weights, scratch, the greedy argmax_head),
 * destroy, info, forward, forward_argmax.
 *
 * Why check ops at create: a backend may leave ops NULL (a partial third-party backend); a
 * clear "backend 'x' lacks op 'rope'" at load time beats a crash in the first forward. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "qwen3.h"

static llmrt_status q3_probe(const char *config_json, llmrt_error *err)
{
    int is_json = 0;
    if (qwen3_config_matches(config_json, &is_json))
        return LLMRT_OK;
    return llmrt_fail(err, LLMRT_ERR_NOT_FOUND, is_json ? "architectures does not list " QWEN3_ARCH
                                                         : "config.json is not a JSON object");
}

static llmrt_status check_backend(const llmrt_backend_ref *be, llmrt_error *err)
{
    const llmrt_backend_vtable *vt = be->vt;
    const char *missing = NULL;
#define NEED(m)                                                                               \
    if (!missing && !LLMRT_VT_HAS(vt, llmrt_backend_vtable, m))                                  \
        missing = #m;
    NEED(dev_alloc) NEED(dev_free) NEED(copy) NEED(synchronize) NEED(embedding) NEED(rmsnorm)
    NEED(rope) NEED(kv_store) NEED(attention) NEED(silu_mul) NEED(add) NEED(gemm)
#undef NEED
    if (missing)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "backend '%s' does not provide the '%s' operation, which the qwen3 model "
                          "needs",
                          be->name ? be->name : "?", missing);
    return LLMRT_OK;
}

static llmrt_status check_quant(const llmrt_quant_ref *q, llmrt_error *err)
{
    const llmrt_quant_vtable *vt = q->vt;
    const char *missing = NULL;
#define NEED(m)                                                                               \
    if (!missing && !LLMRT_VT_HAS(vt, llmrt_quant_vtable, m))                                    \
        missing = #m;
    NEED(linear_load) NEED(linear_free) NEED(linear_forward)
#undef NEED
    if (missing)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "quant plugin '%s' does not provide '%s', which the qwen3 model needs",
                          q->name ? q->name : "?", missing);
    return LLMRT_OK;
}

/* [model.qwen3]: declared here, validated (and filled in with defaults) by the host. */
static const llmrt_key qwen3_keys[] = {
    {"fuse", LLMRT_KEY_ENUM, "auto", "auto|off",
     "Load q/k/v and gate/up as one linear each and use the fused small ops when the backend "
     "has them (off: separate ones, for A/B).",
     0},
    {"greedy_head", LLMRT_KEY_ENUM, "auto", "auto|off",
     "Greedy steps find their argmax through the backend's argmax_head (CUDA: an int8 copy "
     "of lm_head screens up to 8 sequences, the lm_head gemm screens larger batches, and the "
     "candidates are recomputed exactly as for one row: each row's id is the one it gets "
     "alone; vocab x hidden bytes, plus vocab x 4 bytes per sequence, more device memory). "
     "off: lm_head + argmax always.",
     0},
};
#define N_QWEN3_KEYS ((uint32_t)(sizeof qwen3_keys / sizeof qwen3_keys[0]))

/* fuse (see llmrt_model.fuse) and greedy_head (see llmrt_model.greedy_head): auto or off. A
 * caller without a host (a test) may pass NULL or a partial section: absent keys take their
 * defaults. */
static llmrt_status parse_section(const llmrt_section *cfg, int *fuse, int *greedy_head,
                                  llmrt_error *err)
{
    int *flags[] = {fuse, greedy_head};
    for (uint32_t i = 0; i < N_QWEN3_KEYS; i++) {
        const char *key = qwen3_keys[i].name;
        const char *v = llmrt_key_value(cfg, qwen3_keys, N_QWEN3_KEYS, key);
        if (strcmp(v, "auto") != 0 && strcmp(v, "off") != 0) {
            const char *where = "default";
            for (size_t j = 0; cfg && cfg->where && j < cfg->n; j++)
                if (strcmp(cfg->keys[j], key) == 0)
                    where = cfg->where[j];
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "%s: [model.qwen3] %s = '%s': expected auto (%s where the backend "
                              "has them) or off",
                              where, key, v,
                              i == 0 ? "fused ops and projections" : "the argmax_head ops");
        }
        *flags[i] = strcmp(v, "auto") == 0;
    }
    return LLMRT_OK;
}

/* The backend's "llmrt.fused" table when it has every op of it, else NULL. */
static const llmrt_fused_ops *fused_ops_of(const llmrt_backend_ref *be)
{
    const llmrt_fused_ops *f =
        llmrt_backend_extension(be->vt, be->b, LLMRT_EXT_FUSED, LLMRT_EXT_FUSED_VERSION);
    return LLMRT_VT_HAS(f, llmrt_fused_ops, add_rmsnorm) &&
                   LLMRT_VT_HAS(f, llmrt_fused_ops, qk_norm_rope_store) &&
                   LLMRT_VT_HAS(f, llmrt_fused_ops, swiglu)
               ? f
               : NULL;
}

/* The backend's "llmrt.argmax_head" table when it has every op of it, else NULL. */
static const llmrt_argmax_head_ops *argmax_head_ops_of(const llmrt_backend_ref *be)
{
    const llmrt_argmax_head_ops *h = llmrt_backend_extension(be->vt, be->b, LLMRT_EXT_ARGMAX_HEAD,
                                                             LLMRT_EXT_ARGMAX_HEAD_VERSION);
    return LLMRT_VT_HAS(h, llmrt_argmax_head_ops, create) &&
                   LLMRT_VT_HAS(h, llmrt_argmax_head_ops, forward) &&
                   LLMRT_VT_HAS(h, llmrt_argmax_head_ops, destroy)
               ? h
               : NULL;
}

/* greedy_head = auto: the backend's argmax_head over lm_head for greedy steps (of up to
 * max_seqs sequences, else of up to 8), when it offers the extension and takes this lm_head.
 * It saves time at small batches and keeps a batch's ids equal to each row's alone. When the
 * backend cannot make one (this lm_head unsupported, or its copy does not fit) the model goes
 * without: an info line, or a warning for a failure other than LLMRT_ERR_UNSUPPORTED. */
static void make_head(llmrt_model *m)
{
    const llmrt_argmax_head_ops *ops = m->greedy_head ? argmax_head_ops_of(&m->be) : NULL;
    if (!ops)
        return;
    /* every greedy step through the head (a batch's ids then equal each row's alone); a
     * backend that takes fewer rows per call serves the steps of up to 8 */
    int32_t rows = m->params.max_seqs;
    llmrt_error e = {0};
    llmrt_status st = ops->create(m->be.b, &m->lm_head, rows, &m->head, &e);
    if (st == LLMRT_ERR_UNSUPPORTED && rows > 8) {
        rows = 8;
        memset(&e, 0, sizeof e);
        st = ops->create(m->be.b, &m->lm_head, rows, &m->head, &e);
    }
    if (st) {
        m->head = NULL;
        if (m->has_host)
            m->host.log(m->host.ctx, st == LLMRT_ERR_UNSUPPORTED ? LLMRT_LOG_INFO : LLMRT_LOG_WARN,
                        "qwen3", "greedy_head: not used (%s)", e.msg);
        return;
    }
    m->head_ops = ops;
    m->head_rows = rows;
    if (m->has_host)
        m->host.log(m->host.ctx, LLMRT_LOG_INFO, "qwen3",
                    "greedy_head: greedy steps of up to %d sequences take their argmax through "
                    "the backend's argmax_head",
                    rows);
}

static size_t align_up(size_t n) { return (n + 255) & ~(size_t)255; }

static llmrt_status alloc_scratch(llmrt_model *m, llmrt_error *err)
{
    const qwen3_config *c = &m->cfg;
    const size_t T = (size_t)m->params.max_tokens, S = (size_t)m->params.max_seqs;
    const size_t H = (size_t)c->hidden, I = (size_t)c->intermediate;
    const size_t QD = (size_t)c->n_heads * (size_t)c->head_dim;
    const size_t KVD = (size_t)c->n_kv_heads * (size_t)c->head_dim;
    /* elements of each buffer, in qwen3_scratch order */
    /* buffers only the separate or only the fused projections use are sized 0 when no layer
     * needs them (gate and up alone are 200 MB at 2048 tokens for Qwen3-8B) */
    int sep_qkv = 0, fused_qkv = 0, sep_gu = 0, fused_gu = 0;
    for (int32_t l = 0; l < c->n_layers; l++) {
        sep_qkv |= !m->layers[l].fused_qkv, fused_qkv |= m->layers[l].fused_qkv;
        sep_gu |= !m->layers[l].fused_gate_up, fused_gu |= m->layers[l].fused_gate_up;
    }
    const size_t n[] = {T * H, T * H, T * QD, sep_qkv ? T * KVD : 0, sep_qkv ? T * KVD : 0,
                        T * QD, T * H, sep_gu ? T * I : 0, sep_gu ? T * I : 0, T * I, S * H,
                        fused_qkv ? T * (QD + 2 * KVD) : 0, fused_gu ? T * 2 * I : 0};
    float **dst[] = {&m->s.x, &m->s.xn, &m->s.q, &m->s.k, &m->s.v, &m->s.attn, &m->s.proj,
                     &m->s.gate, &m->s.up, &m->s.act, &m->s.rows, &m->s.qkv, &m->s.gu};
    size_t total = 0;
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++)
        total += align_up(n[i] * sizeof(float));
    llmrt_status st = m->be.vt->dev_alloc(m->be.b, total, &m->s.base, err);
    if (st) {
        char why[LLMRT_ERROR_MSG_MAX];
        snprintf(why, sizeof why, "%s", err ? err->msg : "");
        return llmrt_fail(err, st,
                          "qwen3 activations for %zu tokens (hidden_size %zu, intermediate_size "
                          "%zu, num_attention_heads * head_dim %zu; %.1f MiB): %s",
                          T, H, I, QD, (double)total / (1 << 20), why);
    }
    size_t off = 0;
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++) {
        *dst[i] = n[i] ? (float *)((char *)m->s.base + off) : NULL;
        off += align_up(n[i] * sizeof(float));
    }
    return LLMRT_OK;
}

/* On an asynchronous (GPU) backend, run layer 0's projections once at prefill sizes (the
 * model's max_tokens and 128 rows) on the scratch buffers, and wait: the one-time costs of the
 * backend's first GEMMs of each shape (loading the GEMM library's kernels, its heuristics,
 * scratch growth) then land in the load time instead of the first request's time to first
 * token. The results are discarded; every layer has the same shapes. */
static llmrt_status warm_up(llmrt_model *m, llmrt_error *err)
{
    const llmrt_backend_vtable *vt = m->be.vt;
    if (!vt->caps || !(vt->caps(m->be.b) & LLMRT_BACKEND_CAP_ASYNC) || m->cfg.n_layers < 1)
        return LLMRT_OK;
    const qwen3_layer *L = &m->layers[0];
    const int32_t T = m->params.max_tokens;
    const int32_t sizes[2] = {T < 128 ? T : 128, T};
    llmrt_status st = LLMRT_OK;
    for (int i = 0; i < 2 && st == LLMRT_OK; i++) {
        const int32_t n = sizes[i];
        if (i == 1 && n == sizes[0])
            break;
        const qwen3_linear *ls[7];
        float *ys[7];
        int k = 0;
        if (L->fused_qkv) {
            ls[k] = &L->qkv_proj, ys[k++] = m->s.qkv;
        } else {
            ls[k] = &L->q_proj, ys[k++] = m->s.q;
            ls[k] = &L->k_proj, ys[k++] = m->s.k;
            ls[k] = &L->v_proj, ys[k++] = m->s.v;
        }
        ls[k] = &L->o_proj, ys[k++] = m->s.proj;
        if (L->fused_gate_up) {
            ls[k] = &L->gate_up_proj, ys[k++] = m->s.gu;
        } else {
            ls[k] = &L->gate_proj, ys[k++] = m->s.gate;
            ls[k] = &L->up_proj, ys[k++] = m->s.up;
        }
        ls[k] = &L->down_proj, ys[k++] = m->s.proj;
        for (int j = 0; j < k && st == LLMRT_OK; j++) {
            const float *x = ls[j] == &L->o_proj ? m->s.attn : ls[j] == &L->down_proj ? m->s.act : m->s.xn;
            st = ls[j]->q ? m->quant.vt->linear_forward(m->quant.q, ls[j]->q, ys[j], x, n, err)
                          : vt->gemm(m->be.b, ys[j], x, &ls[j]->w, n, err);
        }
    }
    if (st == LLMRT_OK)
        st = vt->synchronize(m->be.b, err);
    return st;
}

/* m->glu_rows: the fewest rows the quant plugin folds SwiGLU into a layer's gate/up projection
 * for (0 when it does not, or some layer's gate/up is not one fused quantized linear). */
static int32_t glu_rows(const llmrt_model *m)
{
    const llmrt_quant_vtable *qv = m->quant.vt;
    if (!m->fuse || !m->use_gate_up || !qv ||
        !LLMRT_VT_HAS(qv, llmrt_quant_vtable, linear_forward_fused) ||
        !LLMRT_VT_HAS(qv, llmrt_quant_vtable, linear_fused_max_rows))
        return 0;
    int32_t rows = m->params.max_tokens;
    for (int32_t l = 0; l < m->cfg.n_layers && rows > 0; l++) {
        const qwen3_layer *L = &m->layers[l];
        if (!L->fused_gate_up || !L->gate_up_proj.q)
            return 0;
        const int32_t r =
            qv->linear_fused_max_rows(m->quant.q, L->gate_up_proj.q, LLMRT_FUSE_OUT_SWIGLU);
        rows = r < rows ? r : rows;
    }
    return rows > 0 ? rows : 0;
}

static void q3_destroy(llmrt_model *m)
{
    if (!m)
        return;
    if (m->head)
        m->head_ops->destroy(m->be.b, m->head);
    qwen3_weights_free(m);
    if (m->s.base)
        m->be.vt->dev_free(m->be.b, m->s.base);
    free(m->layers);
    free(m);
}

static llmrt_status q3_create(const llmrt_host *host, const llmrt_section *cfg,
                              const llmrt_checkpoint *ckpt, const llmrt_backend_ref *backend,
                              const llmrt_quant_ref *quant, const llmrt_model_params *params,
                              llmrt_model **out, llmrt_error *err)
{
    llmrt_status st;
    *out = NULL;
    if (!ckpt || !backend || !backend->vt || !params)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "qwen3 create: checkpoint, backend and params are required");
    if (params->max_tokens < 1 || params->max_seqs < 1)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "qwen3 create: max_tokens (%d) and max_seqs (%d) must be at least 1",
                          params->max_tokens, params->max_seqs);
    int fuse = 1, greedy_head = 1;
    if ((st = parse_section(cfg, &fuse, &greedy_head, err)) || (st = check_backend(backend, err)) ||
        (quant && quant->vt && (st = check_quant(quant, err))))
        return st;

    llmrt_model *m = calloc(1, sizeof *m);
    if (!m)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "qwen3 create: out of memory");
    if (host) {
        m->host = *host;
        m->has_host = host->log != NULL;
    }
    m->be = *backend;
    if (quant && quant->vt)
        m->quant = *quant;
    m->params = *params;
    /* Fused ops are a backend extension; fused projections need the op that consumes their
     * output (qk_norm_rope_store splits q|k|v, swiglu splits gate|up). */
    m->fuse = fuse;
    m->greedy_head = greedy_head;
    m->fused = fuse ? fused_ops_of(backend) : NULL;
    m->use_qkv = m->use_gate_up = m->fused != NULL;
    if ((st = qwen3_config_parse(ckpt->config_json, &m->cfg, err)) ||
        (st = qwen3_weights_check_layers(&m->cfg, ckpt, err)))
        goto fail;
    m->layers = calloc((size_t)m->cfg.n_layers, sizeof *m->layers);
    if (!m->layers) {
        st = llmrt_fail(err, LLMRT_ERR_NOMEM, "qwen3 create: out of memory");
        goto fail;
    }
    if ((st = qwen3_weights_load(m, ckpt, err)) || (st = alloc_scratch(m, err)))
        goto fail;
    make_head(m);
    if ((st = warm_up(m, err)))
        goto fail;
    m->glu_rows = glu_rows(m);
    *out = m;
    return LLMRT_OK;
fail:
    q3_destroy(m);
    return st;
}

static void q3_info(llmrt_model *m, llmrt_model_info *out)
{
    memset(out, 0, sizeof *out);
    strncpy(out->arch, QWEN3_ARCH, sizeof out->arch - 1);
    out->n_layers = m->cfg.n_layers;
    out->n_heads = m->cfg.n_heads;
    out->n_kv_heads = m->cfg.n_kv_heads;
    out->head_dim = m->cfg.head_dim;
    out->hidden = m->cfg.hidden;
    out->intermediate = m->cfg.intermediate;
    out->vocab = m->cfg.vocab;
    out->max_position = m->cfg.max_position;
    out->weight_dtype = m->embed.dtype;
    out->weight_bytes = m->weight_bytes;
}

static llmrt_status q3_forward(llmrt_model *m, const llmrt_batch *batch, const llmrt_kv_cache *kv,
                               float *logits, llmrt_error *err)
{
    return qwen3_forward(m, batch, kv, logits, err);
}

static llmrt_status q3_forward_argmax(llmrt_model *m, const llmrt_batch *batch,
                                      const llmrt_kv_cache *kv, float *logits, int32_t *out,
                                      llmrt_error *err)
{
    return qwen3_forward_argmax(m, batch, kv, logits, out, err);
}

static const llmrt_model_vtable qwen3_vtable = {
    .struct_size = sizeof(llmrt_model_vtable),
    .probe = q3_probe,
    .create = q3_create,
    .destroy = q3_destroy,
    .info = q3_info,
    .forward = q3_forward,
    .forward_argmax = q3_forward_argmax,
    .chat = &qwen3_chat_vtable,
    .synth_preset = qwen3_synth_preset,
    .synthesize = qwen3_synthesize,
};

static const llmrt_plugin_desc qwen3_desc = {
    .struct_size = sizeof(llmrt_plugin_desc),
    .abi_version = LLMRT_ABI_VERSION,
    .kind = LLMRT_PLUGIN_MODEL,
    .name = "qwen3",
    .version = "1.0.0",
    .description = "Qwen3 dense decoder (architectures: " QWEN3_ARCH "); bf16/f16/f32 weights, "
                   "quantized linears through a quant plugin",
    .license = "MIT",
    .vtable = &qwen3_vtable,
    .init = NULL,
    .keys = qwen3_keys,
    .n_keys = N_QWEN3_KEYS,
};

LLMRT_EXPORT const llmrt_plugin_desc *llmrt_plugin_get(uint32_t index)
{
    return index == 0 ? &qwen3_desc : NULL;
}
