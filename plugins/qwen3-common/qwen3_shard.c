/* qwen3_shard.c — tensor parallelism for the Qwen3 decoders: which rank this instance is,
 * the per-rank config, a checkpoint view that hands the loaders this rank's slice of each
 * tensor, and the all-reduce that joins the shards.
 *
 * Why a checkpoint view: Megatron-style sharding only cuts each linear's tensors along one
 * dimension, and every loader (dense, AWQ, FP8; fused q/k/v and gate/up; MoE experts) already
 * loads a linear of whatever [out, in] the config gives. So the model divides the config
 * (heads, KV heads, MLP widths) per rank, and the view slices each tensor the loaders find:
 *   column-parallel (q/k/v_proj, gate/up_proj; each expert's too): rows of the output
 *   row-parallel (o_proj, down_proj): columns of the input, partial sums all-reduced after
 * Where a format stores a linear transposed or packed (AWQ qweight/qzeros/scales are
 * [in(/group), out(/8)]) the cut falls on the other dimension; FP8's weight_scale_inv
 * [out/128, in/128] is cut on whole 128-blocks. A cut that does not land on an element,
 * pack, group or block boundary is refused naming the tensor. GQA with fewer KV heads than
 * ranks replicates each KV head on the ranks whose query heads use it.
 *
 * Everything else (embeddings, norms, the router, lm_head) is whole on every rank: the
 * embedding replicated (no collective before the first layer), lm_head loaded by rank 0 only,
 * which alone computes logits and samples. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llmrt/ext/collective.h>

#include "qwen3_common.h"

llmrt_status qwen3_tp_init(qwen3_rt *rt, qwen3_config *c, int32_t *const *widths,
                           const char *const *width_keys, int n_widths, llmrt_error *err)
{
    qwen3_tp *tp = &rt->tp;
    tp->rank = 0, tp->size = 1;
    const llmrt_collective_ops *ops =
        llmrt_backend_extension(rt->be.vt, rt->be.b, LLMRT_EXT_COLLECTIVE,
                                LLMRT_EXT_COLLECTIVE_VERSION);
    if (!ops || !LLMRT_VT_HAS(ops, llmrt_collective_ops, rank) ||
        !LLMRT_VT_HAS(ops, llmrt_collective_ops, all_reduce_sum))
        return LLMRT_OK;
    int32_t rank = 0, size = 1;
    ops->rank(rt->be.b, &rank, &size);
    if (size <= 1)
        return LLMRT_OK;
    const int32_t H = c->n_heads, KV = c->n_kv_heads;
    if (H % size)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "%s: runtime.tensor_parallel = %d does not divide config.json's "
                          "num_attention_heads = %d (use a tensor_parallel that divides it)",
                          rt->who, (int)size, (int)H);
    if (KV >= size ? KV % size != 0 : size % KV != 0)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "%s: runtime.tensor_parallel = %d and config.json's "
                          "num_key_value_heads = %d: one must divide the other (KV heads are "
                          "split across ranks, or replicated when there are fewer)",
                          rt->who, (int)size, (int)KV);
    for (int i = 0; i < n_widths; i++)
        if (*widths[i] % size)
            return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                              "%s: runtime.tensor_parallel = %d does not divide config.json's "
                              "%s = %d",
                              rt->who, (int)size, width_keys[i], (int)*widths[i]);
    tp->ops = ops;
    tp->rank = rank, tp->size = size;
    tp->kv_parts = KV >= size ? size : KV;
    c->n_heads = H / size;
    c->n_kv_heads = KV >= size ? KV / size : 1;
    for (int i = 0; i < n_widths; i++)
        *widths[i] /= size;
    if (rt->has_host)
        rt->host.log(rt->host.ctx, LLMRT_LOG_INFO, rt->who,
                     "tensor parallel rank %d of %d: %d of %d attention heads, %d KV head%s%s",
                     (int)rank, (int)size, (int)c->n_heads, (int)H, (int)c->n_kv_heads,
                     c->n_kv_heads == 1 ? "" : "s", KV < size ? " (replicated)" : "");
    return LLMRT_OK;
}

/* How tensor `name` is cut: *parts slices along the output (col = 1) or input (col = 0) of
 * its linear, this rank's is *pick. 0: not cut (whole on every rank). */
static int cut_of(const qwen3_tp *tp, const char *name, int *col, int32_t *parts, int32_t *pick)
{
    static const char *const cols[] = {".q_proj.", ".gate_proj.", ".up_proj."};
    static const char *const rows[] = {".o_proj.", ".down_proj."};
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++)
        if (strstr(name, cols[i]))
            return *col = 1, *parts = tp->size, *pick = tp->rank, 1;
    if (strstr(name, ".k_proj.") || strstr(name, ".v_proj.")) {
        *col = 1, *parts = tp->kv_parts;
        *pick = tp->rank / (tp->size / tp->kv_parts); /* the KV head of this rank's q heads */
        return 1;
    }
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (strstr(name, rows[i]))
            return *col = 0, *parts = tp->size, *pick = tp->rank, 1;
    return 0;
}

static void shape_text(const llmrt_tensor_view *v, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int32_t i = 0; i < v->ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)v->shape[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
}

static llmrt_status keep(qwen3_tp *tp, void *p, llmrt_error *err)
{
    if (tp->n_bufs == tp->cap_bufs) {
        size_t cap = tp->cap_bufs ? 2 * tp->cap_bufs : 64;
        void **nb = realloc(tp->bufs, cap * sizeof *nb);
        if (!nb)
            return llmrt_fail(err, LLMRT_ERR_NOMEM, "tensor parallel: out of memory");
        tp->bufs = nb, tp->cap_bufs = cap;
    }
    tp->bufs[tp->n_bufs++] = p;
    return LLMRT_OK;
}

static llmrt_status view_find(void *ctx, const char *name, llmrt_tensor_view *out,
                              llmrt_error *err)
{
    qwen3_tp *tp = ctx;
    const llmrt_checkpoint *ck = tp->base;
    llmrt_status st = ck->find(ck->ctx, name, out, err);
    int col = 0;
    int32_t parts = 1, pick = 0;
    if (st || !cut_of(tp, name, &col, &parts, &pick) || parts == 1)
        return st;
    const char *suffix = strrchr(name, '.');
    suffix = suffix ? suffix + 1 : name;
    /* the dimension of the linear's out and in in each of the formats' tensors */
    int dim_out, dim_in, blocks = 0;
    if (!strcmp(suffix, "weight") || !strcmp(suffix, "bias"))
        dim_out = 0, dim_in = 1; /* dense and FP8 [out, in]; a bias [out] */
    else if (!strcmp(suffix, "weight_scale_inv"))
        dim_out = 0, dim_in = 1, blocks = 1; /* FP8 [out/block, in/block] */
    else if (!strcmp(suffix, "qweight") || !strcmp(suffix, "qzeros") || !strcmp(suffix, "scales"))
        dim_out = 1, dim_in = 0; /* AWQ [in(/group), out(/8)] */
    else
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "%s: tensor parallel does not know how to split %s (a tensor of "
                          "a %s-parallel linear that is not weight, bias, weight_scale_inv, "
                          "qweight, qzeros or scales)",
                          ck->dir ? ck->dir : "checkpoint", name, col ? "column" : "row");
    const int d = col ? dim_out : dim_in;
    char shp[96];
    shape_text(out, shp, sizeof shp);
    if (!col && !strcmp(suffix, "bias"))
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "%s: %s: a bias of a row-parallel linear is not supported with "
                          "tensor parallel",
                          ck->dir ? ck->dir : "checkpoint", name);
    if (out->ndim <= d || out->shape[d] % parts)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "%s: %s %s does not split into %d parts along its %s dimension "
                          "(runtime.tensor_parallel = %d); use a tensor_parallel that divides it",
                          ck->dir ? ck->dir : "checkpoint", name, shp, (int)parts,
                          col ? "output" : "input", (int)tp->size);
    if (blocks) { /* the cut must fall on whole blocks of the weight it scales */
        char wname[256];
        size_t stem = (size_t)(suffix - name);
        snprintf(wname, sizeof wname, "%.*sweight", (int)stem, name);
        llmrt_tensor_view w;
        if ((st = ck->find(ck->ctx, wname, &w, err)))
            return st;
        int64_t wd = w.ndim > d ? w.shape[d] : 0;
        int64_t blk = out->shape[d] > 0 ? (wd + out->shape[d] - 1) / out->shape[d] : 0;
        if (blk <= 0 || wd % (parts * blk))
            return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                              "%s: %s %s (blocks of %lld of %s's %lld %s features) does not "
                              "split into %d parts on block boundaries (runtime.tensor_parallel "
                              "= %d needs a multiple of %lld)",
                              ck->dir ? ck->dir : "checkpoint", name, shp, (long long)blk,
                              wname, (long long)wd, col ? "output" : "input", (int)parts,
                              (int)tp->size, (long long)(parts * blk));
    }
    const size_t es = llmrt_dtype_size(out->dtype);
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < d; i++)
        outer *= out->shape[i];
    for (int i = d + 1; i < out->ndim; i++)
        inner *= out->shape[i];
    const int64_t chunk = out->shape[d] / parts;
    const size_t piece = (size_t)(chunk * inner) * es, stride = (size_t)(out->shape[d] * inner) * es;
    const char *src = (const char *)out->data + (size_t)pick * piece;
    out->shape[d] = chunk;
    out->bytes = piece * (size_t)outer;
    if (outer == 1) { /* a cut of the outermost dimension is a contiguous range */
        out->data = src;
        return LLMRT_OK;
    }
    char *dst = malloc(out->bytes ? out->bytes : 1);
    if (!dst)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "tensor parallel: out of memory slicing %s",
                          name);
    for (int64_t o = 0; o < outer; o++)
        memcpy(dst + (size_t)o * piece, src + (size_t)o * stride, piece);
    if ((st = keep(tp, dst, err))) {
        free(dst);
        return st;
    }
    out->data = dst;
    return LLMRT_OK;
}

static int view_has(void *ctx, const char *name)
{
    const qwen3_tp *tp = ctx;
    return qwen3_ckpt_has(tp->base, name);
}

const llmrt_checkpoint *qwen3_tp_checkpoint(qwen3_rt *rt, const llmrt_checkpoint *ck)
{
    qwen3_tp *tp = &rt->tp;
    if (tp->size <= 1)
        return ck;
    tp->base = ck;
    tp->view = *ck;
    tp->view.ctx = tp;
    tp->view.find = view_find;
    tp->view.has = view_has;
    return &tp->view;
}

void qwen3_tp_release(qwen3_rt *rt)
{
    qwen3_tp *tp = &rt->tp;
    for (size_t i = 0; i < tp->n_bufs; i++)
        free(tp->bufs[i]);
    free(tp->bufs);
    tp->bufs = NULL, tp->n_bufs = tp->cap_bufs = 0;
}

llmrt_status qwen3_tp_reduce(qwen3_rt *rt, float *x, int64_t n, llmrt_error *err)
{
    if (rt->tp.size <= 1)
        return LLMRT_OK;
    return rt->tp.ops->all_reduce_sum(rt->be.b, x, n, err);
}
