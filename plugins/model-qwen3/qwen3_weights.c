/* qwen3_weights.c — load a Qwen3 checkpoint's tensors into backend memory.
 *
 * Why copy on every backend (CPU included): the checkpoint (an mmap of the safetensors files)
 * is closed right after create, so nothing may point into it. Dense weights keep their
 * checkpoint dtype (F32/F16/BF16; the backend gemm takes all three). Decoder linears go
 * through the quant plugin when there is one; a linear it does not find (NOT_FOUND) is loaded
 * densely from prefix.weight. embed_tokens, lm_head and the norms are always dense. Every
 * shape is checked against config.json before anything is copied.
 *
 * Fused projections: q/k/v (and gate/up) read the same input, so when the model uses fused
 * ops they load as one linear whose output row is [q | k | v] ([gate | up]) — one GEMV
 * launch instead of three (two) at decode. Quantized: the quant plugin's linear_load_fused;
 * dense: the parts' rows concatenated. Whatever cannot be fused loads one by one. */
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

/* "64.0 GiB" */
static const char *bytes_str(char *buf, size_t n, uint64_t bytes)
{
    if (bytes >= (1ull << 30))
        snprintf(buf, n, "%.1f GiB", (double)bytes / (double)(1ull << 30));
    else if (bytes >= (1ull << 20))
        snprintf(buf, n, "%.1f MiB", (double)bytes / (double)(1ull << 20));
    else
        snprintf(buf, n, "%llu bytes", (unsigned long long)bytes);
    return buf;
}

/* A backend allocation for a tensor whose size config.json implies failed: say which tensor,
 * which keys sized it and how large it is, then the backend's reason. */
static llmrt_status alloc_failed(llmrt_status st, const char *name, const char *dims,
                                 int32_t ndim, const int64_t *shape, uint64_t bytes,
                                 llmrt_error *err)
{
    char why[LLMRT_ERROR_MSG_MAX], sh[96], sz[32];
    snprintf(why, sizeof why, "%s", err ? err->msg : "");
    return llmrt_fail(err, st, "tensor %s (%s = %s, %s): %s", name, dims,
                      shape_str(sh, sizeof sh, ndim, shape), bytes_str(sz, sizeof sz, bytes), why);
}

/* The layer tensor every checkpoint has, quantized or not (norms are always dense). */
static int has_layer(const llmrt_checkpoint *ck, int32_t i)
{
    char name[96];
    snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", i);
    if (ck->has)
        return ck->has(ck->ctx, name);
    llmrt_tensor_view v;
    llmrt_error e = {0};
    return ck->find(ck->ctx, name, &v, &e) == LLMRT_OK;
}

llmrt_status qwen3_weights_check_layers(const qwen3_config *c, const llmrt_checkpoint *ck,
                                        llmrt_error *err)
{
    if (has_layer(ck, c->n_layers - 1))
        return LLMRT_OK;
    int32_t held = 0; /* layers 0, 1, ... present; stops at the first missing one */
    while (held < c->n_layers - 1 && has_layer(ck, held))
        held++;
    char holds[64];
    if (held)
        snprintf(holds, sizeof holds, "it holds layers 0 to %d", held - 1);
    else
        snprintf(holds, sizeof holds, "it holds no layer");
    return llmrt_fail(err, LLMRT_ERR_FORMAT,
                      "config.json: num_hidden_layers is %d, but the checkpoint %s has no "
                      "model.layers.%d.input_layernorm.weight (%s)",
                      c->n_layers, ck->dir ? ck->dir : "", c->n_layers - 1, holds);
}

/* Find a dense tensor and check it has the expected shape and a float dtype.
 * `dims` names the config keys behind the shape, for the message ("[vocab_size, hidden_size]"). */
static llmrt_status find_dense(const llmrt_checkpoint *ck, const char *name, int32_t ndim,
                               const int64_t *shape, const char *dims, llmrt_tensor_view *out,
                               llmrt_error *err)
{
    llmrt_tensor_view v = {0};
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
    *out = v;
    return LLMRT_OK;
}

/* Copy a dense tensor of the expected shape into backend memory. */
static llmrt_status load_dense(llmrt_model *m, const llmrt_checkpoint *ck, const char *name,
                               int32_t ndim, const int64_t *shape, const char *dims,
                               llmrt_tensor *out, llmrt_error *err)
{
    llmrt_tensor_view v = {0};
    llmrt_status st = find_dense(ck, name, ndim, shape, dims, &v, err);
    if (st)
        return st;
    llmrt_tensor t = {.dtype = v.dtype, .ndim = ndim};
    memcpy(t.shape, shape, (size_t)ndim * sizeof *shape);
    const size_t bytes = v.bytes;
    st = m->be.vt->dev_alloc(m->be.b, bytes, &t.data, err);
    if (st)
        return alloc_failed(st, name, dims, ndim, shape, bytes, err);
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
            if (LLMRT_VT_HAS(qv, llmrt_quant_vtable, linear_bytes))
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

/* Parts of a fused projection: prefixes, out_features and the config keys behind each. */
typedef struct fused_parts {
    int n;
    const char *prefix[3];
    int64_t out[3];
    const char *dims[3];
} fused_parts;

/* Several dense linears of one input, concatenated along out into one [sum(out), in] tensor
 * (all parts must share a dtype). NOT_FOUND / FORMAT errors name the part's tensor. */
static llmrt_status load_dense_fused(llmrt_model *m, const llmrt_checkpoint *ck,
                                     const fused_parts *fp, int64_t in, qwen3_linear *l,
                                     llmrt_error *err)
{
    llmrt_tensor_view v[3];
    memset(v, 0, sizeof v);
    int64_t total = 0;
    for (int p = 0; p < fp->n; p++) {
        char name[256];
        snprintf(name, sizeof name, "%s.weight", fp->prefix[p]);
        int64_t shape[2] = {fp->out[p], in};
        llmrt_status st = find_dense(ck, name, 2, shape, fp->dims[p], &v[p], err);
        if (st)
            return st;
        if (v[p].dtype != v[0].dtype)
            return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED, "%s: dtype %s differs from %s.weight's",
                              name, llmrt_dtype_name(v[p].dtype), fp->prefix[0]);
        total += fp->out[p];
    }
    llmrt_tensor t = {.dtype = v[0].dtype, .ndim = 2, .shape = {total, in}};
    llmrt_status st = m->be.vt->dev_alloc(m->be.b, llmrt_tensor_bytes(&t), &t.data, err);
    if (st) {
        /* "model.layers.0.mlp.gate_proj.weight + up_proj", "[intermediate_size, ...] + [...]" */
        char name[256], dims[400];
        size_t kn = (size_t)snprintf(name, sizeof name, "%s.weight", fp->prefix[0]);
        size_t kd = (size_t)snprintf(dims, sizeof dims, "%s", fp->dims[0]);
        for (int p = 1; p < fp->n; p++) {
            const char *dot = strrchr(fp->prefix[p], '.');
            if (kn < sizeof name)
                kn += (size_t)snprintf(name + kn, sizeof name - kn, " + %s",
                                       dot ? dot + 1 : fp->prefix[p]);
            if (kd < sizeof dims)
                kd += (size_t)snprintf(dims + kd, sizeof dims - kd, " + %s", fp->dims[p]);
        }
        return alloc_failed(st, name, dims, 2, t.shape, llmrt_tensor_bytes(&t), err);
    }
    size_t off = 0;
    for (int p = 0; p < fp->n && st == LLMRT_OK; p++) {
        st = m->be.vt->copy(m->be.b, (char *)t.data + off, v[p].data, v[p].bytes, LLMRT_COPY_H2D,
                            err);
        off += v[p].bytes;
    }
    if (st) {
        m->be.vt->dev_free(m->be.b, t.data);
        return st;
    }
    l->w = t;
    l->q = NULL;
    l->in = in;
    l->out = total;
    m->weight_bytes += llmrt_tensor_bytes(&t);
    return LLMRT_OK;
}

/* Load the parts as one linear: through the quant plugin's linear_load_fused when the
 * checkpoint is quantized, else densely. LLMRT_ERR_UNSUPPORTED (nothing loaded) when they
 * cannot be fused: the caller then loads them one by one. */
static llmrt_status load_fused(llmrt_model *m, const llmrt_checkpoint *ck, const fused_parts *fp,
                               int64_t in, qwen3_linear *l, llmrt_error *err)
{
    memset(l, 0, sizeof *l);
    if (m->quant.vt) {
        const llmrt_quant_vtable *qv = m->quant.vt;
        if (!LLMRT_VT_HAS(qv, llmrt_quant_vtable, linear_load_fused))
            return LLMRT_ERR_UNSUPPORTED;
        llmrt_error qerr = {0};
        llmrt_status st = qv->linear_load_fused(m->quant.q, ck, fp->prefix, fp->n, in, fp->out,
                                                &l->q, &qerr);
        if (st == LLMRT_OK) {
            int64_t total = 0;
            for (int p = 0; p < fp->n; p++)
                total += fp->out[p];
            l->in = in;
            l->out = total;
            if (LLMRT_VT_HAS(qv, llmrt_quant_vtable, linear_bytes))
                m->weight_bytes += qv->linear_bytes(m->quant.q, l->q);
            return LLMRT_OK;
        }
        l->q = NULL;
        /* NOT_FOUND: some part is dense; UNSUPPORTED: cannot fuse. Either way the parts load
         * one by one, where any real error is reported with its tensor's name. */
        if (st == LLMRT_ERR_NOT_FOUND || st == LLMRT_ERR_UNSUPPORTED)
            return LLMRT_ERR_UNSUPPORTED;
        if (err)
            *err = qerr;
        return st;
    }
    llmrt_error derr = {0};
    llmrt_status st = load_dense_fused(m, ck, fp, in, l, &derr);
    if (st == LLMRT_OK || st == LLMRT_ERR_NOMEM || st == LLMRT_ERR_DEVICE) {
        if (st && err)
            *err = derr;
        return st;
    }
    return LLMRT_ERR_UNSUPPORTED; /* shape / dtype problems: reported by the separate loads */
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
        char pq[128], pk[128], pv[128], pg[128], pu[128];
        snprintf(pq, sizeof pq, "model.layers.%d.self_attn.q_proj", i);
        snprintf(pk, sizeof pk, "model.layers.%d.self_attn.k_proj", i);
        snprintf(pv, sizeof pv, "model.layers.%d.self_attn.v_proj", i);
        snprintf(pg, sizeof pg, "model.layers.%d.mlp.gate_proj", i);
        snprintf(pu, sizeof pu, "model.layers.%d.mlp.up_proj", i);
        static const char *const QDIMS = "[num_attention_heads * head_dim, hidden_size]";
        static const char *const KVDIMS = "[num_key_value_heads * head_dim, hidden_size]";
        static const char *const IDIMS = "[intermediate_size, hidden_size]";
        if ((st = load_vector(m, ck, NAME("input_layernorm.weight"), H, "[hidden_size]",
                              &L->input_norm, err)))
            return st;
        if (m->use_qkv) {
            fused_parts fp = {3, {pq, pk, pv}, {QD, KVD, KVD}, {QDIMS, KVDIMS, KVDIMS}};
            st = load_fused(m, ck, &fp, H, &L->qkv_proj, err);
            if (st != LLMRT_OK && st != LLMRT_ERR_UNSUPPORTED)
                return st;
            L->fused_qkv = st == LLMRT_OK;
        }
        if (!L->fused_qkv &&
            ((st = load_linear(m, ck, pq, H, QD, QDIMS, &L->q_proj, err)) ||
             (st = load_linear(m, ck, pk, H, KVD, KVDIMS, &L->k_proj, err)) ||
             (st = load_linear(m, ck, pv, H, KVD, KVDIMS, &L->v_proj, err))))
            return st;
        if (m->use_gate_up) {
            fused_parts fp = {2, {pg, pu}, {I, I}, {IDIMS, IDIMS}};
            st = load_fused(m, ck, &fp, H, &L->gate_up_proj, err);
            if (st != LLMRT_OK && st != LLMRT_ERR_UNSUPPORTED)
                return st;
            L->fused_gate_up = st == LLMRT_OK;
        }
        if (!L->fused_gate_up &&
            ((st = load_linear(m, ck, pg, H, I, IDIMS, &L->gate_proj, err)) ||
             (st = load_linear(m, ck, pu, H, I, IDIMS, &L->up_proj, err))))
            return st;
        if ((st = load_vector(m, ck, NAME("self_attn.q_norm.weight"), D, "[head_dim]", &L->q_norm,
                              err)) ||
            (st = load_vector(m, ck, NAME("self_attn.k_norm.weight"), D, "[head_dim]", &L->k_norm,
                              err)) ||
            (st = load_linear(m, ck, PFX("self_attn.o_proj"), QD, H,
                              "[hidden_size, num_attention_heads * head_dim]", &L->o_proj, err)) ||
            (st = load_vector(m, ck, NAME("post_attention_layernorm.weight"), H, "[hidden_size]",
                              &L->post_norm, err)) ||
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
        free_linear(m, &L->qkv_proj);
        free_linear(m, &L->gate_up_proj);
    }
    if (!m->lm_head_tied)
        free_tensor(m, &m->lm_head);
    m->lm_head.data = NULL;
    free_tensor(m, &m->embed);
    free_tensor(m, &m->final_norm);
}
