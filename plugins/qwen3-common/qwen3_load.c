/* qwen3_load.c — a Qwen3 model instance's services: the backend's extensions and op checks,
 * the plugin section's auto|off keys, and loading a checkpoint's tensors into backend memory.
 *
 * Why copy on every backend (CPU included): the checkpoint (an mmap of the safetensors files)
 * is closed right after create, so nothing may point into it. Dense weights keep their
 * checkpoint dtype (F32/F16/BF16; the backend gemm takes all three). Decoder linears go
 * through the quant plugin when there is one; a linear it does not find (NOT_FOUND) is loaded
 * densely from prefix.weight. Every shape is checked against config.json before anything is
 * copied, and a failed allocation names the tensor, the keys that sized it and its size.
 *
 * Fused projections: linears that read the same input (q/k/v, gate/up) load as one linear
 * whose output row is [q | k | v] ([gate | up]) — one GEMV launch instead of three (two) at
 * decode. Quantized: the quant plugin's linear_load_fused; dense: the parts' rows
 * concatenated. Whatever cannot be fused loads one by one. */
#include <stdio.h>
#include <string.h>

#include "qwen3_common.h"

/* ---- the backend and quant plugin ---- */

const llmrt_fused_ops *qwen3_fused_ops_of(const llmrt_backend_ref *be)
{
    const llmrt_fused_ops *f =
        llmrt_backend_extension(be->vt, be->b, LLMRT_EXT_FUSED, LLMRT_EXT_FUSED_VERSION);
    return LLMRT_VT_HAS(f, llmrt_fused_ops, add_rmsnorm) &&
                   LLMRT_VT_HAS(f, llmrt_fused_ops, qk_norm_rope_store) &&
                   LLMRT_VT_HAS(f, llmrt_fused_ops, swiglu)
               ? f
               : NULL;
}

const llmrt_argmax_head_ops *qwen3_argmax_head_ops_of(const llmrt_backend_ref *be)
{
    const llmrt_argmax_head_ops *h = llmrt_backend_extension(be->vt, be->b, LLMRT_EXT_ARGMAX_HEAD,
                                                             LLMRT_EXT_ARGMAX_HEAD_VERSION);
    return LLMRT_VT_HAS(h, llmrt_argmax_head_ops, create) &&
                   LLMRT_VT_HAS(h, llmrt_argmax_head_ops, forward) &&
                   LLMRT_VT_HAS(h, llmrt_argmax_head_ops, destroy)
               ? h
               : NULL;
}

/* Checked at create: a backend may leave ops NULL (a partial third-party backend); a clear
 * "backend 'x' lacks op 'rope'" at load time beats a crash in the first forward. */
llmrt_status qwen3_check_backend(const llmrt_backend_ref *be, const char *who, llmrt_error *err)
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
                          "backend '%s' does not provide the '%s' operation, which the %s model "
                          "needs",
                          be->name ? be->name : "?", missing, who);
    return LLMRT_OK;
}

llmrt_status qwen3_check_quant(const llmrt_quant_ref *q, const char *who, llmrt_error *err)
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
                          "quant plugin '%s' does not provide '%s', which the %s model needs",
                          q->name ? q->name : "?", missing, who);
    return LLMRT_OK;
}

/* A caller without a host (a test) may pass NULL or a partial section: absent keys take their
 * defaults. */
llmrt_status qwen3_key_auto_off(const llmrt_section *cfg, const llmrt_key *table, uint32_t n,
                                const char *section, const char *key, const char *what_auto,
                                int *on, llmrt_error *err)
{
    const char *v = llmrt_key_value(cfg, table, n, key);
    if (!v || (strcmp(v, "auto") != 0 && strcmp(v, "off") != 0)) {
        const char *where = "default";
        for (size_t j = 0; cfg && cfg->where && j < cfg->n; j++)
            if (strcmp(cfg->keys[j], key) == 0)
                where = cfg->where[j];
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "%s: [%s] %s = '%s': expected auto (%s where the backend has them) or "
                          "off",
                          where, section, key, v ? v : "", what_auto);
    }
    *on = strcmp(v, "auto") == 0;
    return LLMRT_OK;
}

/* ---- messages ---- */

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

/* ---- the checkpoint ---- */

int qwen3_ckpt_has(const llmrt_checkpoint *ck, const char *name)
{
    if (ck->has)
        return ck->has(ck->ctx, name);
    llmrt_tensor_view v;
    llmrt_error e = {0};
    return ck->find(ck->ctx, name, &v, &e) == LLMRT_OK;
}

/* The layer tensor every checkpoint has, quantized or not (norms are always dense). */
static int has_layer(const llmrt_checkpoint *ck, int32_t i)
{
    char name[96];
    snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", i);
    return qwen3_ckpt_has(ck, name);
}

llmrt_status qwen3_check_layers(const qwen3_config *c, const llmrt_checkpoint *ck,
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

llmrt_status qwen3_find_dense(const llmrt_checkpoint *ck, const char *name, int32_t ndim,
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

llmrt_status qwen3_load_dense(qwen3_rt *rt, const llmrt_checkpoint *ck, const char *name,
                              int32_t ndim, const int64_t *shape, const char *dims,
                              llmrt_tensor *out, llmrt_error *err)
{
    llmrt_tensor_view v = {0};
    llmrt_status st = qwen3_find_dense(ck, name, ndim, shape, dims, &v, err);
    if (st)
        return st;
    llmrt_tensor t = {.dtype = v.dtype, .ndim = ndim};
    memcpy(t.shape, shape, (size_t)ndim * sizeof *shape);
    const size_t bytes = v.bytes;
    st = rt->be.vt->dev_alloc(rt->be.b, bytes, &t.data, err);
    if (st)
        return alloc_failed(st, name, dims, ndim, shape, bytes, err);
    st = rt->be.vt->copy(rt->be.b, t.data, v.data, bytes, LLMRT_COPY_H2D, err);
    if (st) {
        rt->be.vt->dev_free(rt->be.b, t.data);
        return st;
    }
    *out = t;
    rt->weight_bytes += bytes;
    return LLMRT_OK;
}

llmrt_status qwen3_load_vector(qwen3_rt *rt, const llmrt_checkpoint *ck, const char *name,
                               int64_t d, const char *dims, llmrt_tensor *out, llmrt_error *err)
{
    return qwen3_load_dense(rt, ck, name, 1, &d, dims, out, err);
}

llmrt_status qwen3_load_linear(qwen3_rt *rt, const llmrt_checkpoint *ck, const char *prefix,
                               int64_t in, int64_t out, const char *dims, qwen3_linear *l,
                               llmrt_error *err)
{
    char name[256];
    snprintf(name, sizeof name, "%s.weight", prefix);
    l->in = in;
    l->out = out;
    if (rt->quant.vt) {
        llmrt_status st = rt->quant.vt->linear_load(rt->quant.q, ck, prefix, in, out, &l->q, err);
        if (st == LLMRT_OK) {
            const llmrt_quant_vtable *qv = rt->quant.vt;
            if (LLMRT_VT_HAS(qv, llmrt_quant_vtable, linear_bytes))
                rt->weight_bytes += qv->linear_bytes(rt->quant.q, l->q);
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
                              prefix, rt->quant.name ? rt->quant.name : "", why, name);
        }
    }
    int64_t shape[2] = {out, in};
    return qwen3_load_dense(rt, ck, name, 2, shape, dims, &l->w, err);
}

/* Several dense linears of one input, concatenated along out into one [sum(out), in] tensor
 * (all parts must share a dtype). NOT_FOUND / FORMAT errors name the part's tensor. */
static llmrt_status load_dense_fused(qwen3_rt *rt, const llmrt_checkpoint *ck,
                                     const qwen3_parts *fp, int64_t in, qwen3_linear *l,
                                     llmrt_error *err)
{
    llmrt_tensor_view v[3];
    memset(v, 0, sizeof v);
    int64_t total = 0;
    for (int p = 0; p < fp->n; p++) {
        char name[256];
        snprintf(name, sizeof name, "%s.weight", fp->prefix[p]);
        int64_t shape[2] = {fp->out[p], in};
        llmrt_status st = qwen3_find_dense(ck, name, 2, shape, fp->dims[p], &v[p], err);
        if (st)
            return st;
        if (v[p].dtype != v[0].dtype)
            return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED, "%s: dtype %s differs from %s.weight's",
                              name, llmrt_dtype_name(v[p].dtype), fp->prefix[0]);
        total += fp->out[p];
    }
    llmrt_tensor t = {.dtype = v[0].dtype, .ndim = 2, .shape = {total, in}};
    llmrt_status st = rt->be.vt->dev_alloc(rt->be.b, llmrt_tensor_bytes(&t), &t.data, err);
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
        st = rt->be.vt->copy(rt->be.b, (char *)t.data + off, v[p].data, v[p].bytes,
                             LLMRT_COPY_H2D, err);
        off += v[p].bytes;
    }
    if (st) {
        rt->be.vt->dev_free(rt->be.b, t.data);
        return st;
    }
    l->w = t;
    l->q = NULL;
    l->in = in;
    l->out = total;
    rt->weight_bytes += llmrt_tensor_bytes(&t);
    return LLMRT_OK;
}

llmrt_status qwen3_load_fused(qwen3_rt *rt, const llmrt_checkpoint *ck, const qwen3_parts *fp,
                              int64_t in, qwen3_linear *l, llmrt_error *err)
{
    memset(l, 0, sizeof *l);
    if (rt->quant.vt) {
        const llmrt_quant_vtable *qv = rt->quant.vt;
        if (!LLMRT_VT_HAS(qv, llmrt_quant_vtable, linear_load_fused))
            return LLMRT_ERR_UNSUPPORTED;
        llmrt_error qerr = {0};
        llmrt_status st = qv->linear_load_fused(rt->quant.q, ck, fp->prefix, fp->n, in, fp->out,
                                                &l->q, &qerr);
        if (st == LLMRT_OK) {
            int64_t total = 0;
            for (int p = 0; p < fp->n; p++)
                total += fp->out[p];
            l->in = in;
            l->out = total;
            if (LLMRT_VT_HAS(qv, llmrt_quant_vtable, linear_bytes))
                rt->weight_bytes += qv->linear_bytes(rt->quant.q, l->q);
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
    llmrt_status st = load_dense_fused(rt, ck, fp, in, l, &derr);
    if (st == LLMRT_OK || st == LLMRT_ERR_NOMEM || st == LLMRT_ERR_DEVICE) {
        if (st && err)
            *err = derr;
        return st;
    }
    return LLMRT_ERR_UNSUPPORTED; /* shape / dtype problems: reported by the separate loads */
}

void qwen3_free_tensor(qwen3_rt *rt, llmrt_tensor *t)
{
    if (t->data)
        rt->be.vt->dev_free(rt->be.b, t->data);
    t->data = NULL;
}

void qwen3_free_linear(qwen3_rt *rt, qwen3_linear *l)
{
    if (l->q)
        rt->quant.vt->linear_free(rt->quant.q, l->q);
    l->q = NULL;
    if (l->moved) /* the memory plugin's now */
        l->w.data = NULL;
    qwen3_free_tensor(rt, &l->w);
}

static size_t align_up(size_t n) { return (n + 255) & ~(size_t)255; }

llmrt_status qwen3_alloc_block(qwen3_rt *rt, size_t n, const size_t *bytes, size_t *off,
                               void **base, size_t *total, llmrt_error *err)
{
    size_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        off[i] = sum;
        sum += align_up(bytes[i]);
    }
    *total = sum;
    *base = NULL;
    return rt->be.vt->dev_alloc(rt->be.b, sum ? sum : 256, base, err);
}

/* ---- running linears ---- */

llmrt_status qwen3_linear_forward(qwen3_rt *rt, const qwen3_linear *l, float *y, const float *x,
                                  int32_t n, llmrt_error *err)
{
    if (l->q)
        return rt->quant.vt->linear_forward(rt->quant.q, l->q, y, x, n, err);
    return rt->be.vt->gemm(rt->be.b, y, x, &l->w, n, err);
}

llmrt_status qwen3_warm_up(qwen3_rt *rt, const qwen3_linear *const *ls, float *const *ys,
                           const float *const *xs, int k, int32_t max_tokens, llmrt_error *err)
{
    const llmrt_backend_vtable *vt = rt->be.vt;
    if (!vt->caps || !(vt->caps(rt->be.b) & LLMRT_BACKEND_CAP_ASYNC) || k < 1)
        return LLMRT_OK;
    const int32_t T = max_tokens;
    const int32_t sizes[2] = {T < 128 ? T : 128, T};
    llmrt_status st = LLMRT_OK;
    for (int i = 0; i < 2 && st == LLMRT_OK; i++) {
        const int32_t n = sizes[i];
        if (i == 1 && n == sizes[0])
            break;
        for (int j = 0; j < k && st == LLMRT_OK; j++)
            st = qwen3_linear_forward(rt, ls[j], ys[j], xs[j], n, err);
    }
    if (st == LLMRT_OK)
        st = vt->synchronize(rt->be.b, err);
    return st;
}
