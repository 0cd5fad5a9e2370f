/* moe_synth.c — synthetic Qwen3-MoE checkpoints (model.h synth_preset / synthesize): the
 * presets, the tensor list as transformers' Qwen3-MoE checkpoints hold it on disk (one module
 * per expert: mlp.experts.E.{gate,up,down}_proj; the router mlp.gate; dense MLPs in
 * mlp_only_layers), and config.json / generation_config.json as the released checkpoints
 * write them. The host writes the files (llmrt/synth.h); a quant plugin, when one is given,
 * says how the attention and expert linears are stored. The router is always dense (it is
 * never handed to the quant plugin, as AutoAWQ and vLLM keep it). Fill rules are
 * qwen3-common's (std 0.02 weights; the router too, so routing is spread over the experts). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moe.h"

typedef struct preset {
    llmrt_synth_preset pub;
    int32_t vocab, hidden, inter, layers, heads, kv_heads, head_dim, max_pos;
    int32_t experts, top_k, moe_inter, sparse_step, norm_topk;
    int32_t mlp_only[4], n_mlp_only;
    double theta;
    int tie;
    int32_t bos, eos;
} preset;

static const preset presets[] = {
    /* head_dim 32 != hidden / heads = 16 on purpose (catches code that derives it); layer 1
     * dense (mlp_only_layers) between two sparse ones */
    {{"qwen3-moe-tiny", "3 layers (layer 1 dense), hidden 64, 8 experts of 32, top 2, vocab 512: "
                        "CPU tests"},
     512, 64, 128, 3, 4, 2, 32, 512, 8, 2, 32, 1, 1, {1}, 1, 1000000.0, 0, 510, 511},
    {{"qwen3-30b-a3b", "Qwen3-30B-A3B shapes (48 layers, hidden 2048, 128 experts of 768, top 8)"},
     151936, 2048, 6144, 48, 32, 4, 128, 40960, 128, 8, 768, 1, 1, {0}, 0, 1000000.0, 0, 151643,
     151645},
    {{"qwen3-235b-a22b",
      "Qwen3-235B-A22B shapes (94 layers, hidden 4096, 128 experts of 1536, top 8)"},
     151936, 4096, 12288, 94, 64, 4, 128, 40960, 128, 8, 1536, 1, 1, {0}, 0, 1000000.0, 0,
     151643, 151645},
};

const llmrt_synth_preset *moe_synth_preset(uint32_t index)
{
    return index < sizeof presets / sizeof *presets ? &presets[index].pub : NULL;
}

/* What the checkpoint will say. */
typedef struct synth_cfg {
    moe_config c;
    llmrt_dtype dtype;
    qwen3_synth_ids ids;
    char *quant_json; /* quantization_config text, or NULL */
} synth_cfg;

static llmrt_status base_config(const llmrt_synth_request *req, synth_cfg *s, llmrt_error *err)
{
    if (req->preset) {
        const preset *p = NULL;
        for (size_t i = 0; i < sizeof presets / sizeof *presets; i++)
            if (strcmp(req->preset, presets[i].pub.name) == 0)
                p = &presets[i];
        if (!p)
            return llmrt_fail(err, LLMRT_ERR_NOT_FOUND, MOE_PLUGIN ": unknown preset '%s'",
                              req->preset);
        qwen3_config *c = &s->c.base;
        c->vocab = p->vocab, c->hidden = p->hidden, c->intermediate = p->inter;
        c->n_layers = p->layers, c->n_heads = p->heads, c->n_kv_heads = p->kv_heads;
        c->head_dim = p->head_dim, c->max_position = p->max_pos;
        c->eps = 1e-6, c->rope_theta = p->theta, c->tie = p->tie;
        s->c.n_experts = p->experts, s->c.top_k = p->top_k, s->c.moe_inter = p->moe_inter;
        s->c.sparse_step = p->sparse_step, s->c.norm_topk = p->norm_topk;
        if (p->n_mlp_only) {
            s->c.mlp_only = malloc((size_t)p->n_mlp_only * sizeof *s->c.mlp_only);
            if (!s->c.mlp_only)
                return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
            memcpy(s->c.mlp_only, p->mlp_only, (size_t)p->n_mlp_only * sizeof *p->mlp_only);
            s->c.n_mlp_only = p->n_mlp_only;
        }
        s->dtype = LLMRT_DTYPE_BF16;
        s->ids.bos = p->bos;
        s->ids.eos[0] = p->eos;
        s->ids.n_eos = 1;
        return LLMRT_OK;
    }
    llmrt_status st = moe_config_parse(req->base_config_json, &s->c, err);
    if (st != LLMRT_OK)
        return st;
    json_t *root = json_loads(req->base_config_json, 0, NULL);
    if (!root)
        return llmrt_fail(err, LLMRT_ERR_FORMAT, "config.json: not JSON");
    s->dtype = LLMRT_DTYPE_BF16;
    st = qwen3_synth_parse_dtype(root, &s->dtype, err);
    if (st == LLMRT_OK)
        st = qwen3_synth_parse_ids(root, &s->ids, err);
    json_decref(root);
    return st;
}

/* ---- the linears, in transformers' order ---- */

/* Linear j of layer i (j < n_linears(i)): its prefix suffix and shape. Attention first (q, k,
 * v, o), then the dense MLP (gate, up, down) or each expert's gate, up, down. */
static int32_t n_linears(const moe_config *c, int32_t i)
{
    return 4 + (moe_layer_is_sparse(c, i) ? 3 * c->n_experts : 3);
}

static void linear_at(const moe_config *c, int32_t i, int32_t j, char *sub, size_t n, int64_t *in,
                      int64_t *out)
{
    const qwen3_config *b = &c->base;
    const int64_t h = b->hidden, q = (int64_t)b->n_heads * b->head_dim;
    const int64_t kv = (int64_t)b->n_kv_heads * b->head_dim;
    static const char *const attn[4] = {"q_proj", "k_proj", "v_proj", "o_proj"};
    static const char *const mlp[3] = {"gate_proj", "up_proj", "down_proj"};
    if (j < 4) {
        snprintf(sub, n, "self_attn.%s", attn[j]);
        *in = j == 3 ? q : h;
        *out = j == 0 ? q : j == 3 ? h : kv;
        return;
    }
    j -= 4;
    const int64_t ff = moe_layer_is_sparse(c, i) ? c->moe_inter : b->intermediate;
    if (moe_layer_is_sparse(c, i))
        snprintf(sub, n, "mlp.experts.%d.%s", (int)(j / 3), mlp[j % 3]);
    else
        snprintf(sub, n, "mlp.%s", mlp[j % 3]);
    *in = j % 3 == 2 ? ff : h;
    *out = j % 3 == 2 ? h : ff;
}

static llmrt_status add_tensors(const llmrt_synth_request *req, const synth_cfg *s,
                                const llmrt_ckpt_writer *w, int tied_head, llmrt_error *err)
{
    llmrt_status st;
    const moe_config *mc = &s->c;
    const qwen3_config *c = &mc->base;
    char name[600], pre[512], sub[96];
    if ((st = qwen3_synth_add(w, "model.embed_tokens.weight", s->dtype, c->vocab, c->hidden,
                              &qwen3_fill_dense, err)))
        return st;
    for (int32_t i = 0; i < c->n_layers; i++) {
        const int32_t nl = n_linears(mc, i);
        for (int32_t j = 0; j < nl; j++) {
            int64_t in, out;
            linear_at(mc, i, j, sub, sizeof sub, &in, &out);
            snprintf(pre, sizeof pre, "model.layers.%d.%s", (int)i, sub);
            if ((st = qwen3_synth_add_linear(req, s->quant_json, s->dtype, w, pre, in, out, err)))
                return st;
            if (j == 3) { /* after o_proj: the head norms, then the router */
                snprintf(name, sizeof name, "model.layers.%d.self_attn.q_norm.weight", (int)i);
                if ((st = qwen3_synth_add(w, name, s->dtype, c->head_dim, 0, &qwen3_fill_norm, err)))
                    return st;
                snprintf(name, sizeof name, "model.layers.%d.self_attn.k_norm.weight", (int)i);
                if ((st = qwen3_synth_add(w, name, s->dtype, c->head_dim, 0, &qwen3_fill_norm, err)))
                    return st;
                snprintf(name, sizeof name, "model.layers.%d.mlp.gate.weight", (int)i);
                if (moe_layer_is_sparse(mc, i) &&
                    (st = qwen3_synth_add(w, name, s->dtype, mc->n_experts, c->hidden,
                                          &qwen3_fill_dense, err)))
                    return st;
            }
        }
        snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", (int)i);
        if ((st = qwen3_synth_add(w, name, s->dtype, c->hidden, 0, &qwen3_fill_norm, err)))
            return st;
        snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", (int)i);
        if ((st = qwen3_synth_add(w, name, s->dtype, c->hidden, 0, &qwen3_fill_norm, err)))
            return st;
    }
    if ((st = qwen3_synth_add(w, "model.norm.weight", s->dtype, c->hidden, 0, &qwen3_fill_norm,
                              err)))
        return st;
    if (!c->tie || tied_head) {
        llmrt_fill f = qwen3_fill_dense;
        if (c->tie) /* the same values as embed_tokens */
            f.same_as = "model.embed_tokens.weight";
        if ((st = qwen3_synth_add(w, "lm_head.weight", s->dtype, c->vocab, c->hidden, &f, err)))
            return st;
    }
    return LLMRT_OK;
}

static llmrt_status quant_config(const llmrt_synth_request *req, synth_cfg *s, llmrt_error *err)
{
    const moe_config *c = &s->c;
    uint64_t n = 0;
    for (int32_t i = 0; i < c->base.n_layers; i++)
        n += (uint64_t)n_linears(c, i);
    if (n > (1u << 26))
        return llmrt_fail(err, LLMRT_ERR_LIMIT, "mkmodel: %llu linears is too many",
                          (unsigned long long)n);
    llmrt_synth_linear *l = calloc((size_t)n, sizeof *l);
    char(*names)[96] = calloc((size_t)n, sizeof *names);
    llmrt_status st = LLMRT_OK;
    if (!l || !names) {
        st = llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
        goto cleanup;
    }
    uint32_t k = 0;
    for (int32_t i = 0; i < c->base.n_layers; i++)
        for (int32_t j = 0; j < n_linears(c, i); j++, k++) {
            char sub[96];
            int64_t in, out;
            linear_at(c, i, j, sub, sizeof sub, &in, &out);
            snprintf(names[k], sizeof names[k], "model.layers.%d.%s", (int)i, sub);
            l[k] = (llmrt_synth_linear){names[k], in, out};
        }
    st = qwen3_synth_quant_config(req, l, (uint32_t)n, &s->dtype, &s->quant_json, err);
cleanup:
    free(l);
    free(names);
    return st;
}

/* ---- JSON files ---- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A copy of object j with its top-level keys in sorted order (as transformers writes them). */
static json_t *sorted(json_t *j)
{
    size_t n = json_object_size(j), k = 0;
    const char **keys = calloc(n ? n : 1, sizeof *keys);
    json_t *o = keys ? json_object() : NULL;
    if (o) {
        const char *key;
        json_t *v;
        json_object_foreach(j, key, v) keys[k++] = key;
        qsort(keys, n, sizeof *keys, cmp_str);
        for (size_t i = 0; i < n; i++)
            json_object_set(o, keys[i], json_object_get(j, keys[i]));
    }
    free(keys);
    json_decref(j);
    return o;
}

/* config.json as transformers writes a Qwen3-MoE config (the keys of the released ones). */
static json_t *config_json(const synth_cfg *s, llmrt_error *err)
{
    const moe_config *c = &s->c;
    json_t *j = json_object();
    if (qwen3_synth_config_keys(j, &c->base, MOE_ARCH, "qwen3_moe", &s->ids, s->dtype,
                                s->quant_json, err) != LLMRT_OK) {
        json_decref(j);
        return NULL;
    }
    json_t *only = json_array();
    for (int32_t i = 0; i < c->n_mlp_only; i++)
        json_array_append_new(only, json_integer(c->mlp_only[i]));
    json_object_set_new(j, "decoder_sparse_step", json_integer(c->sparse_step));
    json_object_set_new(j, "mlp_only_layers", only);
    json_object_set_new(j, "moe_intermediate_size", json_integer(c->moe_inter));
    json_object_set_new(j, "norm_topk_prob", json_boolean(c->norm_topk));
    json_object_set_new(j, "num_experts", json_integer(c->n_experts));
    json_object_set_new(j, "num_experts_per_tok", json_integer(c->top_k));
    json_object_set_new(j, "output_router_logits", json_false());
    json_object_set_new(j, "router_aux_loss_coef", json_real(0.001));
    json_t *o = sorted(j);
    if (!o)
        llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory writing config.json");
    return o;
}

llmrt_status moe_synthesize(const llmrt_host *host, const llmrt_synth_request *req,
                            const llmrt_ckpt_writer *w, llmrt_error *err)
{
    (void)host;
    llmrt_status st;
    synth_cfg s;
    memset(&s, 0, sizeof s);
    s.ids.bos = -1;
    if (req->model_opts && req->model_opts->n > 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "mkmodel: unknown " MOE_PLUGIN " option '%s' (" MOE_PLUGIN
                          " takes none)",
                          req->model_opts->keys[0]);
    if ((st = base_config(req, &s, err)))
        goto cleanup;
    if (req->tie >= 0)
        s.c.base.tie = req->tie;
    if (req->tied_lm_head && !s.c.base.tie) {
        st = llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                        "mkmodel: --tied-lm-head is for tied models (add --tie)");
        goto cleanup;
    }
    if (req->dtype != LLMRT_DTYPE_INVALID)
        s.dtype = req->dtype;
    if (s.dtype != LLMRT_DTYPE_F16 && s.dtype != LLMRT_DTYPE_BF16 && s.dtype != LLMRT_DTYPE_F32) {
        st = llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                        "mkmodel: dtype %s is not a weight dtype (f16, bf16 or f32)",
                        llmrt_dtype_name(s.dtype));
        goto cleanup;
    }
    if (req->quant) {
        /* the quant decides the dense dtype unless one was asked for */
        if (req->dtype == LLMRT_DTYPE_INVALID)
            s.dtype = LLMRT_DTYPE_INVALID;
        if ((st = quant_config(req, &s, err)))
            goto cleanup;
    }
    if ((st = add_tensors(req, &s, w, req->tied_lm_head, err)) ||
        (st = qwen3_synth_add_json(w, "generation_config.json",
                                   qwen3_synth_generation_json(&s.ids), err)))
        goto cleanup;
    json_t *cj = config_json(&s, err);
    st = cj ? qwen3_synth_add_json(w, "config.json", cj, err) : err->code;
cleanup:
    free(s.quant_json);
    moe_config_free(&s.c);
    return st;
}
